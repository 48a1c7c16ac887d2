"""The terminal table in 120 columns for any name and any GPU figures: a compact pool cell, names shortened path first."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import graph_record

from pytest_cudagraph.render.summary import (
    HEADER,
    WIDTH,
    fit_path,
    fit_test_name,
    summary_row,
    table_lines,
    terminal_summary_lines,
)

MIB = 1 << 20
NAME_CHARS = st.characters(min_codepoint=ord("a"), max_codepoint=ord("z"))
names = st.text(NAME_CHARS, min_size=1, max_size=90)
figures = st.integers(min_value=0, max_value=1 << 43)  # up to 8 TiB: "8388608.0M"


def gpu_record(pool: int, largest: int, workspace: int, outside: int | None, sets: int, observed: bool) -> dict:
    """A passing GPU test: a graph set's figures (several sets, their figures alike), or graphs it only observed."""
    record: dict[str, Any] = graph_record()
    if observed:
        del record["graphs"]
        record["observed_graphs"] = {"captured": 12, "sizes": [1, 512], "pool_bytes": pool, "pools": sets}
        return record
    record["graphs"].update(pool_bytes=pool, largest_graph_bytes=largest, cublas_workspace_bytes=workspace)
    if outside is not None:
        record["graphs"]["behind_allocator_bytes"] = outside
    if sets > 1:
        record["graphs"]["sets"] = [dict(record["graphs"]) for _ in range(sets)]
    return record


@settings(max_examples=150, deadline=None)
@given(
    directory=st.lists(names, min_size=0, max_size=4),
    functions=st.lists(names, min_size=1, max_size=4),
    param=st.one_of(st.just(""), names.map(lambda text: f"[{text}]")),
    pool=figures,
    largest=figures,
    workspace=figures,
    outside=st.one_of(st.none(), figures),
    sets=st.integers(min_value=1, max_value=12),
    observed=st.booleans(),
)
def test_no_line_of_the_table_is_wider_than_120_columns(
    directory, functions, param, pool, largest, workspace, outside, sets, observed
):
    path = "/".join([*directory, "test_model.py"])
    records = {
        f"{path}::test_{function}{param}": gpu_record(pool, largest, workspace, outside, sets, observed)
        for function in functions
    }
    lines = terminal_summary_lines(records, None)
    assert max(map(len, lines)) <= WIDTH, "\n".join(lines)


@settings(max_examples=150, deadline=None)
@given(
    function=st.text(NAME_CHARS, min_size=1, max_size=22),
    param=st.text(NAME_CHARS, min_size=0, max_size=80),
    directory=st.lists(names, min_size=0, max_size=5),
    pool=st.integers(min_value=MIB, max_value=64 << 30),
    largest=st.integers(min_value=MIB, max_value=64 << 30),
    outside=st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 30)),
    sets=st.integers(min_value=1, max_value=9),
)
def test_a_gpu_row_is_one_line_with_its_function_name_whole(function, param, directory, pool, largest, outside, sets):
    """GPU figures up to 64 GiB and functions' names up to 27 characters beside every cache column: one line per test,
    the function's name whole."""
    name = f"test_{function}" + (f"[{param}]" if param else "")
    path = "/".join([*directory, "test_model.py"])
    records = {f"{path}::{name}": gpu_record(pool, largest, min(32 * MIB, pool), outside, sets, observed=False)}
    lines = terminal_summary_lines(records, None)
    assert max(map(len, lines)) <= WIDTH, "\n".join(lines)
    header, file_line, row, totals = lines[:4]
    assert totals.startswith("1 test recorded"), "\n".join(lines)  # the row took one line
    assert file_line.endswith("test_model.py") and file_line == fit_path(path, WIDTH)
    assert row.split()[0].startswith(f"test_{function}")
    # the pool cell as it is where the row fits, its compact form where not
    full, compact = (
        dict(zip(HEADER, summary_row(f"{path}::{name}", records[f"{path}::{name}"], compact_pool=flag)))
        for flag in (False, True)
    )
    assert full["pool / largest"] in row or compact["pool / largest"] in row


def test_the_function_name_stays_whole_and_the_parametrize_id_and_class_shorten_first():
    name = "TestDecoderFamily::test_decode_with_graphs[bf16-batch_of_sixteen-bs512]"
    assert fit_test_name(name, len(name)) == name
    assert fit_test_name(name, 60) == "TestDecoderFamily::test_decode_with_graphs[bf1...teen-bs512]"
    assert fit_test_name(name, 45) == "Tes...ly::test_decode_with_graphs[b...-bs512]"
    assert fit_test_name(name, 30) == "test_decode_with_graphs[...12]"
    assert fit_test_name("test_decode_with_graphs", 10) == "test...phs"  # only a function wider than the room
    for width in range(5, len(name) + 1):
        fitted = fit_test_name(name, width)
        assert len(fitted) <= width
        if width >= len("test_decode_with_graphs[...]"):  # room for the function and a trace of its id
            assert "test_decode_with_graphs" in fitted and fitted.endswith("]")


def test_a_file_line_shortens_its_directory_and_keeps_the_file_name():
    path = "tests/models/decoder/attention/kernels/fused/test_decode_graphs.py"
    assert fit_path(path, 200) == path
    assert len(fit_path(path, 50)) == 50 and fit_path(path, 50).endswith("/test_decode_graphs.py")
    assert fit_path(path, 50).startswith("tests/")


def test_a_table_that_fits_keeps_its_full_pool_cells():
    record = gpu_record(76 * MIB, 42 * MIB, 32 * MIB, None, 1, observed=False)
    row = summary_row("t.py::test_a", record)
    assert row[3] == "76.0M / 42.0M (+32.0M cuBLAS)  1.05x"
    lines = terminal_summary_lines({"t.py::test_a": record}, None)
    assert row[3] in lines[2]  # the row fits with its full cell: the output is as it was
    assert table_lines([row], ["t.py::test_a"])[1:] == lines[1:3]
