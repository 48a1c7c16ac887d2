"""``show`` and ``compare`` in 120 columns, whatever the node ids and reasons; the words of their notes."""

from __future__ import annotations

import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_reports import (
    ENV_2_13,
    MiB,
    cache_keys_record,
    graph_record,
    modified,
    piecewise_uncaptured_record,
    sample_report,
    where_and_why_report,
)

from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.record_text import detail_lines
from pytest_cudagraph.tools.cli import main
from pytest_cudagraph.tools.compare import compare_reports

WIDTH = 120

# a parametrize id: no spaces, any length (ids of thousands of characters happen)
param_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=0, max_size=300)
# a reason, a message, an env value: words of up to 20 letters, as many as a long message holds
reasons = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz'():,", min_size=1, max_size=20), max_size=40).map(
    " ".join
)


def _long_ids(report: dict[str, Any], param: str) -> tuple[dict[str, Any], list[str]]:
    """``report`` with every test's id given ``[param]`` (and a long path where ``param`` is long)."""
    out = copy.deepcopy(report)
    renamed = {}
    for nodeid, record in out["tests"].items():
        if param:
            file, _, name = nodeid.partition("::")
            nodeid = f"{file.replace('tests/', 'tests/' + 'deeply/nested/' * (len(param) // 40))}::{name}[{param}]"
        renamed[nodeid] = record
    out["tests"] = renamed
    return out, list(renamed)


def _long_reasons(report: dict[str, Any], reason: str) -> dict[str, Any]:
    """``report`` with its guards, call sites, graph breaks, ranks' errors and lookups' reasons all saying ``reason``."""
    out = copy.deepcopy(report)
    for record in out["tests"].values():
        for event in record.get("recompiles", {}).get("events", []):
            for guard in event.get("guards", []):
                guard["guard"] = f"{guard['guard']} {reason}"
                guard["expected"] = f"{guard['expected']} {reason}"
            if event.get("call_site"):
                event["call_site"]["code"] = f"model(x) {reason}"
            if event.get("limit_hit"):
                event["limit_hit"] += f" {reason}"
        for site in record.get("recompiles", {}).get("graph_breaks", {}).get("sites", []):
            site["reason"] += f" {reason}"
        for piece in record.get("piecewise", {}).get("uncaptured", []):
            piece["reason"] += f" {reason}"
        for rank in record.get("ranks", {}).get("per_rank", []):
            if rank.get("waiting_at"):
                rank["waiting_at"] += f" {reason}"
        for lookup in record.get("cache_keys", {}).get("lookups", []):
            if lookup.get("outcome") == "bypass" or reason:
                lookup["bypass_reason"] = reason or None
    return out


def _too_wide(text: str, nodeids: list[str]) -> list[str]:
    """The lines past WIDTH, but for a node id alone on its line (whole: it is what one looks up)."""
    return [line for line in text.splitlines() if len(line) > WIDTH and line.strip() not in nodeids]


def _run(argv: list[str]) -> str:
    stdout = io.StringIO()
    main(argv, stdout=stdout, stderr=io.StringIO())
    return stdout.getvalue()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(param=param_ids, reason=reasons)
def test_show_fits_120_columns_whatever_the_ids_and_reasons(param, reason):
    base = where_and_why_report()
    base["tests"]["tests/test_x.py::test_keys"] = cache_keys_record()
    report, nodeids = _long_ids(_long_reasons(base, reason), param)
    report["env"]["platform"] = f"Linux {reason}"
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "run.json")
        path.write_text(json.dumps(report))
        text = _run(["show", str(path)])
    assert "where and why" in text and "cache lookups" in text
    assert not _too_wide(text, nodeids), text
    # nothing is clipped away to fit: each reason is there whole, its words in order
    if reason:
        assert " ".join(reason.split()) in " ".join(text.split())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(param=param_ids, reason=reasons, verbose=st.booleans())
def test_compare_fits_120_columns_whatever_the_ids_and_reasons(param, reason, verbose):
    base, nodeids = _long_ids(sample_report(), param)
    decode = next(n for n in nodeids if "test_decode_graphs" in n)
    new = modified(base, decode, "graphs.pool_bytes", 90 * MiB)
    new = modified(new, decode, "outcome", "failed")
    new = modified(new, decode, "failure", {"message": reason or "failed"})
    new["env"] = {**new["env"], "torch": f"2.14.0 {reason}", "platform": f"Linux {reason}"}
    new["tests"][nodeids[-1] + "-new"] = graph_record()
    nodeids.append(nodeids[-1] + "-new")
    text = compare_reports(base, new).format_text(verbose=verbose)
    assert not _too_wide(text, nodeids), text
    # the verdict is whole on the last line
    assert text.splitlines()[-1].startswith("REGRESSION: ")
    assert len(text.splitlines()[-1]) <= WIDTH


def test_show_of_the_examples_run_has_no_line_past_120_columns(tmp_path):
    """The recompile line of ``show`` was 161 characters: its call site now goes on under it."""
    record = where_and_why_report()["tests"]["tests/test_x.py::test_dynamic_batch"]
    record["recompiles"]["events"][0]["call_site"] = {
        "file": "docs/examples/test_recompile_cases.py",
        "line": 28,
        "code": "step(torch.randn(batch, 16), w)",
    }
    record["recompiles"]["events"][0]["function"] = "mlp_step (docs/examples/test_recompile_cases.py:10)"
    report = build_report(dict(ENV_2_13), {"docs/examples/test_recompile_cases.py::test_one": record})
    lines = detail_lines(report)
    assert max(map(len, lines)) <= WIDTH
    assert "    recompile 1 of 2: mlp_step (docs/examples/test_recompile_cases.py:10), called from" in lines
    assert "      docs/examples/test_recompile_cases.py:28 `step(torch.randn(batch, 16), w)`" in lines


# ----------------------------------------------------------------------------
# compare --verbose lists the tests within noise, and says so
# ----------------------------------------------------------------------------


def test_compare_verbose_says_the_tests_within_noise_are_listed_above_not_to_use_verbose():
    base = sample_report()
    new = modified(base, "tests/test_model.py::test_decode_graphs", "graphs.max_abs_err", 2e-7)
    comparison = compare_reports(base, new)
    plain, verbose = comparison.format_text(), comparison.format_text(verbose=True)
    assert "1 more differ only within noise (--verbose lists them)" in plain
    assert "--verbose" not in verbose
    assert "1 more differ only within noise, listed above" in verbose
    assert "tests/test_model.py::test_decode_graphs  within noise" in verbose


# ----------------------------------------------------------------------------
# piecewise: pieces in the split's order; a run without graphs says that its pieces ran eagerly
# ----------------------------------------------------------------------------

SPLIT_REASON = "splitting op toy::attention: runs eagerly between the graphs"
NO_GPU = "no CUDA device: the split pieces run without graphs"


def _cpu_pieces_report() -> dict[str, Any]:
    """A CPU run's piecewise record as the split writes it: the splitting ops' pieces first, then the others."""
    record = piecewise_uncaptured_record()
    record["piecewise"]["graphs_captured"] = 0
    record["piecewise"]["uncaptured"] = [
        *({"piece": f"submod_{i}", "reason": SPLIT_REASON} for i in (1, 3, 5)),
        *({"piece": f"submod_{i}", "reason": NO_GPU} for i in (0, 2, 4, 6, 10)),
    ]
    return build_report(dict(ENV_2_13), {"t.py::test_split": record})


def test_show_lists_the_pieces_by_index_and_a_run_without_graphs_says_they_ran_eagerly():
    lines = detail_lines(_cpu_pieces_report())
    start = lines.index("  piecewise: 8 pieces ran eagerly, no graphs captured:")
    pieces = lines[start + 1 : start + 9]
    assert [line.split(":")[0].strip() for line in pieces] == [f"- submod_{i}" for i in (0, 1, 2, 3, 4, 5, 6, 10)]
    assert "    - submod_1: splitting op toy::attention" in pieces
    assert "    - submod_0: no CUDA device: the split pieces run without graphs" in pieces
    assert not [line for line in lines if "between the graphs" in line]


def test_a_run_with_graphs_keeps_the_pieces_between_the_graphs():
    report = _cpu_pieces_report()
    report["tests"]["t.py::test_split"]["piecewise"]["graphs_captured"] = 12
    lines = detail_lines(report)
    assert "  piecewise: 8 pieces ran without a graph:" in lines
    assert f"    - submod_1: {SPLIT_REASON}" in lines


def test_the_html_page_lists_the_pieces_as_show_does():
    from pytest_cudagraph.render.show import render_html

    page = render_html(_cpu_pieces_report())
    assert "8 pieces ran eagerly, no graphs captured:" in page
    assert page.index("<td>submod_0</td>") < page.index("<td>submod_1</td>") < page.index("<td>submod_10</td>")
    assert "between the graphs" not in page
