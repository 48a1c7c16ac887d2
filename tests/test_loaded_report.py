"""The typed view readers take (``records.loaded``): attributes for the fields the types name, every other field kept."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from sample_reports import ENV_2_13, graph_record, sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.loaded import read_report, typed_report
from pytest_cudagraph.records.report import build_report, dumps_report
from pytest_cudagraph.tools.compare import compare_reports
from pytest_cudagraph.tools.merge import merge_shard_reports

DECODE = "tests/test_model.py::test_decode_graphs"
REPORT_BEFORE_TYPES = Path(__file__).parent / "data" / "report_before_types.json"


def _with_a_newer_plugins_fields(report: dict) -> dict:
    """``report`` with a section no type names, and a field no type names inside a named section."""
    out = copy.deepcopy(report)
    out["tests"][DECODE]["future_section"] = {"queue_depth": 3, "nested": {"x": [1, 2]}}
    out["tests"][DECODE]["graphs"]["future_figure"] = 7
    return out


def test_a_read_report_gives_attributes_and_keeps_the_fields_no_type_names(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(dumps_report(_with_a_newer_plugins_fields(sample_report())))
    loaded = read_report(path)
    record = loaded.tests[DECODE]
    assert record.graphs.captured == graph_record()["graphs"]["captured"]
    assert record.graphs.sizes == graph_record()["graphs"]["sizes"]
    assert loaded.unknown(record) == {"future_section": {"queue_depth": 3, "nested": {"x": [1, 2]}}}
    assert loaded.unknown(record.graphs) == {"future_figure": 7}
    assert list(loaded.data_of(record.graphs)) == list(json.loads(path.read_text())["tests"][DECODE]["graphs"])


def test_fields_no_type_names_are_compared_and_merged():
    base = sample_report()
    new = _with_a_newer_plugins_fields(base)
    new["tests"][DECODE]["graphs"]["future_figure"] = 9
    (test,) = [t for t in compare_reports(_with_a_newer_plugins_fields(base), new).tests if t.nodeid == DECODE]
    assert ("graphs.future_figure", 7, 9) in {(c.metric, c.base, c.new) for c in test.changes}
    # a section only the new run has is a row too
    (test,) = [t for t in compare_reports(base, new).tests if t.nodeid == DECODE]
    assert ("future_section.queue_depth", None, 3) in [(c.metric, c.base, c.new) for c in test.changes]


def test_merging_shards_keeps_every_field_of_their_records():
    def shard(group: int, record: dict) -> dict:
        run = {"complete": True, "shard": {"group": group, "splits": 2, "selected": 1, "deselected": 1}}
        return build_report(ENV_2_13, {f"t.py::t{group}": record}, exitstatus=0, run=run)

    odd = _with_a_newer_plugins_fields({"tests": {DECODE: graph_record()}})["tests"][DECODE]
    merged = merge_shard_reports([("a.json", shard(1, odd)), ("b.json", shard(2, graph_record()))])
    assert merged["tests"]["t.py::t1"]["future_section"] == {"queue_depth": 3, "nested": {"x": [1, 2]}}
    assert merged["tests"]["t.py::t1"]["graphs"]["future_figure"] == 7


def test_a_typed_reader_refuses_a_malformed_report_in_one_sentence(tmp_path):
    report = sample_report()
    report["tests"][DECODE]["graphs"]["sizes"] = 5
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ReportError) as caught:
        read_report(path)
    assert str(caught.value) == (
        f"report {path} has tests[{DECODE!r}].graphs.sizes = 5, which is not a list of integers; "
        "write it again with --cudagraph-report, or correct that field"
    )


def test_startup_instruction_counts_are_typed():
    report = sample_report()
    report["tests"][DECODE]["startup"] = {"cold": {"compile_instructions": {"median": 5, "n": 1}}}
    stats = typed_report(report).tests[DECODE].startup.cold.compile_instructions
    assert (stats.median, stats.n) == (5, 1)
    report["tests"][DECODE]["startup"]["cold"]["compile_instructions"] = {"median": "many"}
    with pytest.raises(ReportError, match=r"startup\.cold\.compile_instructions\.median = 'many'"):
        typed_report(report)


def test_a_live_run_compares_with_its_own_file_value_for_value():
    live = sample_report()
    live["tests"][DECODE]["graphs"]["max_abs_err"] = math.nan  # a live record holds the float
    live["tests"][DECODE]["graphs"]["sizes"] = tuple(live["tests"][DECODE]["graphs"]["sizes"])
    from_file = json.loads(dumps_report(live))  # the file holds "nan" and a list
    comparison = compare_reports(from_file, live)
    assert not any(t.changes for t in comparison.tests), [t.changes for t in comparison.tests if t.changes]


def test_a_report_written_before_the_types_reads_and_compares_typed():
    loaded = read_report(REPORT_BEFORE_TYPES)
    assert loaded.tests and all(record.outcome for record in loaded.tests.values())
    comparison = compare_reports(loaded, read_report(REPORT_BEFORE_TYPES))
    assert not comparison.regressed and not any(t.changed for t in comparison.tests)
