"""Issue 27: the terminal section in 120 columns, counters that cannot read as durations, compare on compile time."""

from __future__ import annotations

import io
import json
import re

import pytest
from sample_reports import ENV_2_13, graph_record, modified, sample_report, warm_start_record

from pytest_cudagraph.records.cold_warm import pass_pairs
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.counter_text import counts_text, letters_in
from pytest_cudagraph.render.plain_text import fit_table, format_table, wrap_words
from pytest_cudagraph.render.summary import HEADER, legend_lines, summary_row, terminal_summary_lines
from pytest_cudagraph.tools.cli import main
from pytest_cudagraph.tools.compare import compare_reports

WIDTH = 120
DECODE = "tests/test_model.py::test_decode_graphs"
# a count followed by a letter reads as a duration: 1h, 1m 1s, 16s
DURATION_LIKE = re.compile(r"\b\d+[hms]\b")
CACHE_COLUMNS = ("fxgraph", "aot", "triton")


# ----------------------------------------------------------------------------
# counters that cannot be read as time
# ----------------------------------------------------------------------------


def _cache_cells(record: dict) -> list[str]:
    cells = dict(zip(HEADER, summary_row("t.py::test", record)))
    return [cells[name] for name in CACHE_COLUMNS]


def test_cache_counts_never_read_as_durations():
    warm = warm_start_record()
    several = warm_start_record()
    several["extra"]["cold_warm"] = [several["extra"].pop("compile_cache")] * 2
    bypassed = graph_record()
    bypassed["caches"]["fxgraph"]["bypass"] = 1
    cells = [cell for record in (warm, several, graph_record(), bypassed) for cell in _cache_cells(record)]
    assert cells == [
        "m=1 s=1 -> h=1",
        "m=1 s=1 -> h=1",
        "c=2 -> l=2",
        "m=2 s=2 -> h=2",
        "m=2 s=2 -> h=2",
        "c=4 -> l=4",
        "h=1",
        "h=1",
        "l=3",
        "h=1 b=1",
        "h=1",
        "l=3",
    ]
    assert not [cell for cell in cells if DURATION_LIKE.search(cell)]


def test_a_pass_shows_its_nonzero_counters_letter_first():
    assert counts_text("fxgraph", {"hit": 0, "miss": 10, "saved": 1, "bypass": 0}) == "m=10 s=1"
    assert counts_text("triton", {"compiled": 0, "loaded": 0}) == "0"
    assert counts_text("fxgraph", None) == "-"
    assert letters_in("m=10 s=1 -> h=1") == {"m", "s", "h"}
    # letters of words are no counters: "off", "passed" and "1.43x" name none
    assert letters_in("off") == letters_in("passed 1.43x") == set()


def test_the_legend_names_every_counter_the_cells_use_and_how_to_read_them():
    records = {"t.py::warm": warm_start_record(), "t.py::g": graph_record()}
    rows = [summary_row(nodeid, record) for nodeid, record in records.items()]
    used = set().union(*(letters_in(cell) for row in rows for cell in row[-3:]))
    legend = next(line for line in legend_lines(rows) if line.startswith("fxgraph, aot, triton:"))
    assert legend.startswith("fxgraph, aot, triton: h hits, m misses, s saves, c Triton kernels compiled, ")
    assert "(h=2: 2 hits)" in legend
    for letter in used:
        assert re.search(rf"\b{letter} \w", legend), (letter, legend)
    assert pass_pairs(records["t.py::warm"])  # the warm test's cells are cold -> warm


# ----------------------------------------------------------------------------
# the table in 120 columns
# ----------------------------------------------------------------------------


def test_fit_table_puts_an_id_too_long_for_the_room_on_a_line_of_its_own():
    long_id = "t.py::test_" + 20 * "b"
    rows = [["test", "outcome"], ["t.py::test_a", "passed"], [long_id, "failed"]]
    assert fit_table(rows, 21) == ["test          outcome", "t.py::test_a  passed", long_id, "              failed"]
    # where most ids do not fit, every row gets its own line: the table reads alike
    rows.append([long_id + "c", "passed"])
    lines = fit_table(rows, 21)
    assert lines[0] == "test  outcome" and lines[1:3] == ["t.py::test_a", "      passed"]
    # a table that fits is format_table's, unchanged
    assert fit_table(rows[:2], 40) == format_table(rows[:2])


def test_fit_table_wraps_a_wide_cell_at_its_spaces():
    pool = "76.0M / 42.0M (+32.0M cuBLAS)  1.05x (set 1 of 3), 4.0M outside"
    lines = fit_table([["test", "pool", "n"], ["t.py::a", pool, "0"]], 60, wrap={1: 30})
    assert max(map(len, lines)) <= 60
    assert lines[1].split("  ")[0] == "t.py::a" and lines[1].rstrip().endswith("0")
    assert " ".join(line[9:].split("  ")[0].strip() for line in lines[1:]) == " ".join(pool.split())
    assert wrap_words("a  b", 10) == ["a  b"] and wrap_words("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]


def test_a_gpu_row_with_a_wide_pool_fits_120_columns_on_one_line():
    record = graph_record()
    record["graphs"].update(cublas_workspace_bytes=32 << 20, pool_bytes=76 << 20, behind_allocator_bytes=4 << 20)
    record["graphs"]["sets"] = [dict(record["graphs"]) for _ in range(3)]
    records = {"tests/test_mlp.py::test_mlp": record, "tests/test_mlp.py::test_warm": warm_start_record()}
    lines = terminal_summary_lines(records, None)
    assert max(map(len, lines)) <= WIDTH, "\n".join(lines)
    # the test's name under its file, every cell on its one line: the pool cell in its compact form; every
    # row passed, so no outcome column (the totals line says so)
    assert lines[0].split()[:2] == ["test", "graphs"] and lines[1] == "tests/test_mlp.py"
    assert lines[2].split() == "test_mlp 4 (1-8) 76.0M/42.0M 1.05x [1/3] +4.0M out 0 h=1 h=1 l=3".split()
    assert lines[3].split()[:2] == ["test_warm", "-"] and lines[4].startswith("2 tests recorded: 2 passed")
    # the legend says what the compact cell's notations are
    legend = " ".join(lines[5:])
    assert "[i/n]: the figures of set i" in legend and "+4.0M out, outside: device memory" in legend


def test_columns_empty_in_every_row_are_left_out_of_the_terminal_table():
    lines = terminal_summary_lines(sample_report()["tests"], None, max_rows=None)
    assert lines[0].split() == ["test", "graphs", "pool", "/", "largest", "recompiles"] + [
        "fxgraph",
        "aot",
        "triton",
    ]  # no compile column: the sample report has no compile time; no outcome column: every row listed passed
    # the HTML overview keeps every column (it reads summary_row, which is unchanged in shape)
    assert len(summary_row(DECODE, sample_report()["tests"][DECODE])) == len(HEADER)


LONG_ROWS = """
import pytest
import torch


def step(x):
    return torch.nn.functional.silu(x) + 1


@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("shape", ["a_batch_of_sixteen_sequences_of_two_thousand_and_forty_eight_tokens"])
def test_a_compiled_step_with_a_long_parametrize_id_compiles_once(shape):
    torch.compile(step, backend="eager")(torch.ones(4))


@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("n", [1, 2])
def test_an_eager_step_whose_name_alone_is_longer_than_the_room_the_other_columns_leave_it(n):
    step(torch.ones(n))


@pytest.mark.max_recompiles(0)
def test_short():
    pass
"""


def _section(output: str) -> list[str]:
    section = output.split("= cudagraph =")[1].splitlines()[1:]
    return section[: next(i for i, line in enumerate(section) if line.startswith("report written to")) + 1]


def _columns(section: list[str]) -> dict[str, list[str]]:
    """The table's cells per column, read at the header's column starts (rows whose id has a line of its own too)."""
    header = section[0]
    starts = [match.start() for match in re.finditer(r"(?:^|(?<=  ))\S", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
    end = next(i for i, line in enumerate(section) if " recorded: " in line)
    cells: dict[str, list[str]] = {name: [] for name in names}
    for line in section[1:end]:
        if line[starts[1] - 2 : starts[1]] != "  " or not line[starts[1] :].strip():
            continue  # a file's line
        for name, a, b in zip(names, starts, [*starts[1:], None]):
            cells[name].append(line[a:b].strip())
    return cells


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_the_terminal_section_fits_120_columns_and_shows_no_empty_column(pytester, monkeypatch):
    # a 120-column terminal: the section fits the terminal's width (80 columns where the child sees none)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    pytester.makepyfile(test_long_rows=LONG_ROWS)
    report = pytester.path / "run.json"
    result = pytester.runpytest_subprocess(f"--cudagraph-report={report}", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    section = _section(result.stdout.str())
    # these rows were 150 columns and more before
    too_wide = [line for line in section[:-1] if len(line) > WIDTH]  # the last line is the report's path
    assert not too_wide, "\n".join(section)
    columns = _columns(section)
    # every test passed: no outcome column (the totals line says "4 passed")
    assert list(columns) == ["test", "recompiles", "compile"]
    assert all(any(cell not in ("-", "") for cell in cells) for name, cells in columns.items() if name != "test")
    assert "4 tests recorded: 4 passed; 0 recompiles; 0 graphs captured" in section
    # one line per test, under its file's line: its name whole, or clipped in the middle where the row has no room
    records = json.loads(report.read_text())["tests"]
    assert section[1] == "test_long_rows.py"
    names = [line.split("  ")[1] for line in section[2 : 2 + len(records)]]
    assert all(line.startswith("  ") for line in section[2 : 2 + len(records)])
    for nodeid in records:
        name = nodeid.partition("::")[2]
        assert name in names or any("..." in shown and name.endswith(shown[-10:]) for shown in names), (name, names)


# ----------------------------------------------------------------------------
# compare says that compile time was not compared, and why
# ----------------------------------------------------------------------------

# a rule that is off: which rule, why it is off, and what to run instead
OFF_NOTE = (
    "compile-time: compile times not compared (the compile-time rule is off by default). One run's compile time "
    "has no spread to tell a change from noise. To compare compile times, run pytest-cudagraph startup NODEID "
    "--runs N on each build and compare those two reports with --fail-on compile-time."
)


def _note_in(text: str, note: str) -> bool:
    """Whether ``note`` is in ``text`` once, as the text wraps it (at spaces, the lines after the first indented)."""
    return " ".join(text.split()).count(note) == 1 and all(len(line) <= WIDTH for line in text.splitlines())


def _timed_reports() -> tuple[dict, dict]:
    base = modified(sample_report(), DECODE, "compile_time", {"total_s": 4.0})
    return base, modified(base, DECODE, "compile_time", {"total_s": 9.0})


def test_compare_says_in_one_line_that_compile_time_is_off_and_why():
    base, new = _timed_reports()
    comparison = compare_reports(base, new)
    assert not comparison.regressed
    assert comparison.notes() == [OFF_NOTE]
    assert _note_in(comparison.format_text(), OFF_NOTE)
    assert comparison.to_json()["notes"] == [OFF_NOTE]
    # it says which rule is off, why, and what to run
    assert "compile-time rule is off" in OFF_NOTE and "no spread" in OFF_NOTE
    assert "pytest-cudagraph startup NODEID --runs N" in OFF_NOTE and "--fail-on compile-time" in OFF_NOTE
    # selected, the rule speaks for itself, and this line is gone
    selected = compare_reports(base, new, rules=["default", "compile-time"])
    assert not [note for note in selected.notes() if note.startswith("compile-time: compile times not compared")]
    assert any(note.startswith("compile-time: not checked") for note in selected.notes())


def test_the_compile_time_line_names_startup_runs_where_the_reports_have_them():
    from test_compare import SAME_BUILD, startup_report

    (cold, warm), (new_cold, new_warm) = SAME_BUILD
    notes = compare_reports(startup_report(cold, warm), startup_report(new_cold, new_warm)).notes()
    assert [note for note in notes if note.startswith("compile-time")] == [
        "compile-time: compile times not compared (the compile-time rule is off by default). "
        "These reports hold startup medians: add --fail-on compile-time to compare them."
    ]


def test_reports_without_compile_times_get_no_compile_time_line():
    assert not [n for n in compare_reports(sample_report(), sample_report()).notes() if "compile" in n]
    plain = build_report(ENV_2_13, {"t.py::a": {"outcome": "passed"}})
    assert not [n for n in compare_reports(plain, plain).notes() if "compile" in n]


def test_the_compile_time_line_changes_no_exit_status(tmp_path):
    base, new = _timed_reports()
    paths = []
    for name, report in (("a.json", base), ("b.json", new)):
        (tmp_path / name).write_text(json.dumps(report))
        paths.append(str(tmp_path / name))
    stdout = io.StringIO()
    assert main(["compare", *paths], stdout=stdout, stderr=io.StringIO()) == 0
    assert _note_in(stdout.getvalue(), OFF_NOTE)
    bigger = modified(new, DECODE, "graphs.pool_bytes", 90 << 20)
    (tmp_path / "c.json").write_text(json.dumps(bigger))
    stdout = io.StringIO()
    assert main(["compare", paths[0], str(tmp_path / "c.json")], stdout=stdout, stderr=io.StringIO()) == 1
    assert _note_in(stdout.getvalue(), OFF_NOTE)


def test_the_legends_ratio_example_is_one_the_table_shows():
    lines = terminal_summary_lines({"t.py::test_mlp": graph_record()}, None)
    ratio = re.search(r"\d+\.\d+x", next(line for line in lines if "test_mlp" in line))
    assert ratio is not None
    assert f"alone, {ratio[0]} = (pool - cuBLAS) / largest" in "\n".join(lines)
    row = ["t", "passed", "4 (1-8)", "76.0M/42.0M 1.05x", "0", "-", "-", "-", "-"]
    assert "alone, 1.05x = (pool - cuBLAS) / largest" in legend_lines([row])[1]
