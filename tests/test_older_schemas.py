"""Reports of older plugins (``pytest-cudagraph/1`` and ``/2``) read as the current, documented form (``/3``).

``data/report_schema_2.json`` is the main job's report (``pytest docs/examples
--cudagraph``, CPU, torch 2.13) as the last ``/2`` plugin wrote it: each fact stored
once, with back-references its reader expanded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_cudagraph.records.cache_components import full_components
from pytest_cudagraph.records.report import dumps_report, load_report

SCHEMA_2_REPORT = Path(__file__).parent / "data" / "report_schema_2.json"
# the /2 file's own names: none is in a report as read
BACK_REFERENCES = {"components_of", "sums_of_frames", "sum_of_passes", "call_site_of", "cache_components_all_layers"}


def keys_anywhere(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(keys_anywhere(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(keys_anywhere(item) for item in value))
    return set()


def lookups(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [one for record in report["tests"].values() for one in record.get("cache_keys", {}).get("lookups", [])]


def test_a_real_schema_2_file_reads_as_the_documented_report(tmp_path):
    stored = json.loads(SCHEMA_2_REPORT.read_text())
    assert stored["schema"] == "pytest-cudagraph/2" and stored["durations"] == {}
    assert BACK_REFERENCES & keys_anywhere(stored) == BACK_REFERENCES - {"call_site_of"}
    report = load_report(SCHEMA_2_REPORT)
    assert report["schema"] == "pytest-cudagraph/3"
    assert not BACK_REFERENCES & keys_anywhere(report)
    # one run-wide table: torch's config, which both layers' lookups share
    assert len(report["cache_components"]) > 500 and "torch_version" in report["cache_components"]
    with_components = [one for one in lookups(report) if one["components"] is not None]
    assert {one["layer"] for one in with_components} == {"fxgraph", "aot_autograd"}
    for one in with_components:
        assert all(isinstance(pair, list) and len(pair) == 2 for pair in one["components"].values())
        # the layer's own components are back in each lookup (aot_config is AOTAutograd's alone)
        assert ("aot_config" in one["components"]) == (one["layer"] == "aot_autograd")
        assert "inductor_config[max_autotune]" in full_components(report, one)
    # every test that finished has its seconds in durations, as its record's duration_s
    assert report["durations"] == {n: round(r["duration_s"], 3) for n, r in report["tests"].items()}
    for record in report["tests"].values():
        times = record.get("compile_time")
        if times and times.get("frames"):
            assert times["total_s"] == round(sum(f["total_s"] for f in times["frames"]), 6)
        if "extra" in record and "compile_cache" in record["extra"]:
            passes = record["extra"]["compile_cache"]
            assert set(record["cache_passes"]) == {"cold", "warm"}
            assert record["caches"]["fxgraph"]["miss"] == sum(
                passes[name]["stats"]["fxgraph"]["miss"] for name in ("cold", "warm")
            )
    # written again, it is the same report, and the file is that report as it is
    again = tmp_path / "again.json"
    again.write_text(dumps_report(report))
    assert json.loads(again.read_text()) == load_report(again) == report


def schema_2_file(tmp_path: Path) -> Path:
    """A /2 file holding each stored-once form the real run above did not need: call_site_of, a named pair, nulls."""
    site = {"file": "t.py", "line": 5, "code": "f(x)", "function": "test_t"}
    events = [
        {"function": "f (t.py:1)", "call_site": site, "reasons": ["0/0: n == 2"], "guards": [], "limit_hit": None},
        {"function": "f (t.py:1)", "call_site_of": 0, "reasons": ["0/1: n == 3"], "guards": [], "limit_hit": None},
    ]
    metadata = ["2kenspq4woqk", "TensorMetadata(shape=[8])"]
    record = {
        "outcome": "passed",
        "duration_s": 1.2344,
        "recompiles": {"count": 2, "events": events},
        "cache_keys": {
            "lookups": [
                {
                    "layer": "fxgraph",
                    "outcome": "miss",
                    "key": "f" + "a" * 51,
                    "pass": None,
                    "graph": 1,
                    "components": {"example_inputs[0]": metadata, "example_inputs[1]": "example_inputs[0]"},
                }
            ]
        },
    }
    data = {
        "schema": "pytest-cudagraph/2",
        "env": {},
        "tests": {"t.py::test_t": record, "t.py::test_cut": {"outcome": "failed", "duration_s": 0.5}},
        "cache_components": {"fxgraph": {"fx_kwargs[cudagraphs]": ["ccccdddd0000", "False"]}},
        "cache_components_all_layers": {"torch_version": ["aaaabbbb1111", "2.13.0"]},
        "durations": {"t.py::test_cut": None, "t.py::test_plain": 0.01},
    }
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    return path


def test_each_stored_once_form_of_schema_2_is_spelled_out(tmp_path):
    report = load_report(schema_2_file(tmp_path))
    recompiles = report["tests"]["t.py::test_t"]["recompiles"]
    assert recompiles["reasons"] == ["0/0: n == 2", "0/1: n == 3"] and recompiles["limit_hits"] == []
    assert recompiles["by_function"] == {
        "f (t.py:1)": {"count": 2, "reasons": ["0/0: n == 2", "0/1: n == 3"], "limit_hits": []}
    }
    first, second = recompiles["events"]
    assert second["call_site"] == first["call_site"] and "call_site_of" not in second
    assert [event["verbatim"] for event in recompiles["events"]] == [["0/0: n == 2"], ["0/1: n == 3"]]
    [lookup] = report["tests"]["t.py::test_t"]["cache_keys"]["lookups"]
    # one lookup in the run: every component is the run's; its own are none
    assert lookup["components"] == {}
    assert report["cache_components"] == {
        "example_inputs[0]": ["2kenspq4woqk", "TensorMetadata(shape=[8])"],
        "example_inputs[1]": ["2kenspq4woqk", "TensorMetadata(shape=[8])"],
        "fx_kwargs[cudagraphs]": ["ccccdddd0000", "False"],
        "torch_version": ["aaaabbbb1111", "2.13.0"],
    }
    # a record's test that did not finish has no duration; one without a record keeps its own
    assert report["durations"] == {"t.py::test_plain": 0.01, "t.py::test_t": 1.234}


def test_a_schema_1_file_is_read_with_the_kernel_compile_phase_under_its_name(tmp_path):
    phases = {"inductor_s": 1.0, "triton_s": 0.5}
    record = {"outcome": "passed", "compile_time": {"total_s": 1.0, "phases": phases, "unavailable": ["triton_s"]}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a::t": record}}))
    loaded = load_report(path)
    assert loaded["schema"] == "pytest-cudagraph/3"
    assert loaded["tests"]["a::t"]["compile_time"] == {
        "total_s": 1.0,
        "phases": {"inductor_s": 1.0, "kernel_compile_s": 0.5},
        "unavailable": ["kernel_compile_s"],
    }


def test_per_layer_tables_of_an_older_file_become_the_run_table_and_each_lookups_own(tmp_path):
    fx = {"layer": "fxgraph", "outcome": "miss", "key": None, "components": {"gm": ["g1", None]}}
    aot = {"layer": "aot_autograd", "outcome": "miss", "key": None, "components": {"gm": ["g1", None]}}
    bypass = {"layer": "aot_autograd", "outcome": "bypass", "key": None, "components": None}
    data = {
        "schema": "pytest-cudagraph/1",
        "tests": {"a::t": {"outcome": "passed", "cache_keys": {"lookups": [fx, aot, bypass]}}},
        "cache_components": {
            "fxgraph": {"torch_version": ["t1", "2.13"], "fx_kwargs[x]": ["f1", "1"]},
            "aot_autograd": {"torch_version": ["t1", "2.13"], "aot_config": ["a1", "(0,)"]},
        },
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    report = load_report(path)
    assert report["cache_components"] == {"gm": ["g1", None], "torch_version": ["t1", "2.13"]}
    assert [one["components"] for one in lookups(report)] == [
        {"fx_kwargs[x]": ["f1", "1"]},
        {"aot_config": ["a1", "(0,)"]},
        None,
    ]
