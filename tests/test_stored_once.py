"""The report's file stores each fact once (records/stored_once.py), and reading it gives the report back.

The config components every layer's lookups share sit once in the file; each
recompile reason sits in its event only; a duration sits in its record only; a
file read back, or merged from workers' or shards' reports, gives every lookup its
whole set of components again.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, components, lookup, recompile_events_record

from pytest_cudagraph.records.report import build_report, full_components, load_report, write_report
from pytest_cudagraph.records.stored_once import report_as_read, report_as_stored
from pytest_cudagraph.records.worker_records import encode_worker_records, merge_worker_records
from pytest_cudagraph.tools.merge import merge_shard_reports

# torch's config as both layers' keys hold it (some 600 entries in a real run)
CONFIG = {f"inductor_config[option_{i:02d}]": f"value {i}" for i in range(40)}


def cache_record(graph: str, config: dict[str, str] | None = None) -> dict[str, Any]:
    """A test that compiled ``graph``: one FX-graph and one AOTAutograd lookup, both keyed on the config."""
    config = CONFIG if config is None else config
    fx = components(gm=graph, **{"fx_kwargs[cudagraphs]": "False"}, **config)
    aot = components(gm=graph, aot_config="(0, True)", **config)
    return {
        "outcome": "passed",
        "duration_s": 1.25,
        "cache_keys": {"lookups": [lookup("fxgraph", "miss", fx), lookup("aot_autograd", "miss", aot)]},
    }


def whole_lookups(report: dict[str, Any]) -> dict[str, list[Any]]:
    """Per test, each lookup with its whole set of components."""
    return {
        nodeid: [
            {**one, "components": full_components(report, one)}
            for one in record.get("cache_keys", {}).get("lookups", [])
        ]
        for nodeid, record in report["tests"].items()
    }


def test_the_config_components_every_layer_shares_are_stored_once_per_run(tmp_path):
    records = {f"t.py::test_{i}": cache_record(f"graph {i}") for i in range(3)}
    report = build_report(ENV_2_13, records, durations={nodeid: 1.25 for nodeid in records})
    path = write_report(tmp_path / "r.json", report)
    text = path.read_text()
    for name in CONFIG:
        assert text.count(json.dumps(name)) == 1, name
    stored = json.loads(text)
    assert stored["schema"] == "pytest-cudagraph/2"
    assert set(stored["cache_components_all_layers"]) == set(CONFIG)
    assert {layer: set(table) for layer, table in stored["cache_components"].items()} == {
        "fxgraph": {"fx_kwargs[cudagraphs]"},
        "aot_autograd": {"aot_config"},
    }
    loaded = load_report(path)
    assert loaded == json.loads(json.dumps(report))
    assert whole_lookups(loaded) == {nodeid: record["cache_keys"]["lookups"] for nodeid, record in records.items()}


def test_each_recompile_reason_and_duration_is_stored_once(tmp_path):
    record = recompile_events_record()
    # as the watch writes it: the section's lists are what its events give
    record["recompiles"].update(reasons=[r for e in record["recompiles"]["events"] for r in e["reasons"]])
    record["recompiles"]["by_function"] = {
        name: {**entry, "reasons": record["recompiles"]["reasons"]}
        for name, entry in record["recompiles"]["by_function"].items()
    }
    report = build_report(ENV_2_13, {"a::t": record}, durations={"a::t": 0.41, "b::plain": 0.5})
    path = write_report(tmp_path / "r.json", report)
    text = path.read_text()
    for reason in record["recompiles"]["reasons"]:
        assert text.count(json.dumps(reason)) == 1, reason
    stored = json.loads(text)
    assert stored["durations"] == {"b::plain": 0.5}  # a::t's is its record's duration_s
    assert load_report(path) == json.loads(json.dumps(report))


def test_a_section_its_events_do_not_give_keeps_its_lists():
    record = recompile_events_record()  # by_function holds a reason no event has: it stays
    report = json.loads(json.dumps(build_report(ENV_2_13, {"a::t": record})))
    stored = report_as_stored(report)
    assert stored["tests"]["a::t"]["recompiles"]["by_function"] == record["recompiles"]["by_function"]
    assert report_as_read(json.loads(json.dumps(stored))) == report


def test_a_test_with_a_record_that_did_not_finish_has_no_duration_after_reading(tmp_path):
    records = {
        "a::crashed": {"outcome": "crashed", "duration_s": 0.0},
        "a::ran": {"outcome": "passed", "duration_s": 2.0},
    }
    report = build_report(ENV_2_13, records, durations={"a::ran": 2.0, "a::slowest": 3.0})
    path = write_report(tmp_path / "r.json", report)
    assert json.loads(path.read_text())["durations"] == {"a::crashed": None, "a::slowest": 3.0}
    assert load_report(path)["durations"] == {"a::ran": 2.0, "a::slowest": 3.0}


def test_a_schema_1_file_is_read_with_the_kernel_compile_phase_under_its_name(tmp_path):
    phases = {"inductor_s": 1.0, "triton_s": 0.5}
    record = {"outcome": "passed", "compile_time": {"total_s": 1.0, "phases": phases, "unavailable": ["triton_s"]}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a::t": record}}))
    loaded = load_report(path)
    assert loaded["schema"] == "pytest-cudagraph/2"
    assert loaded["tests"]["a::t"]["compile_time"] == {
        "total_s": 1.0,
        "phases": {"inductor_s": 1.0, "kernel_compile_s": 0.5},
        "unavailable": ["kernel_compile_s"],
    }


configs = st.dictionaries(st.sampled_from(sorted(CONFIG)), st.sampled_from(["A", "B"]), max_size=4)


@settings(max_examples=25, deadline=None)
@given(first=configs, second=configs, split=st.integers(0, 4))
def test_merging_two_workers_or_two_shards_gives_every_lookup_its_whole_components(
    tmp_path_factory, first, second, split
):
    """Two workers (or shards) whose tests ran under configs that differ in some entries."""
    tmp_path = tmp_path_factory.mktemp("merge")
    tests = {
        f"t.py::test_{i}": cache_record(f"graph {i}", {**CONFIG, **(first if i < split else second)}) for i in range(4)
    }
    worker_a = {nodeid: record for nodeid, record in tests.items() if nodeid < f"t.py::test_{split}"}
    worker_b = {nodeid: record for nodeid, record in tests.items() if nodeid not in worker_a}
    # xdist: the controller gathers each worker's records and writes one report
    gathered: dict[str, dict[str, Any]] = {}
    for worker in (worker_a, worker_b):
        merge_worker_records(gathered, encode_worker_records(worker))
    path = write_report(tmp_path / "run.json", build_report(ENV_2_13, gathered))
    assert whole_lookups(load_report(path)) == {nodeid: r["cache_keys"]["lookups"] for nodeid, r in tests.items()}
    # pytest-cudagraph merge: each shard's file read, the run's file written and read again
    shards = []
    for group, worker in enumerate((worker_a, worker_b), start=1):
        shard = {"group": group, "splits": 2, "algorithm": "least_duration", "selected": len(worker)}
        report = build_report(
            ENV_2_13, worker, run={"complete": True, "shard": shard}, durations={n: 1.25 for n in worker}
        )
        shards.append((f"shard-{group}.json", load_report(write_report(tmp_path / f"shard-{group}.json", report))))
    merged = load_report(write_report(tmp_path / "all.json", merge_shard_reports(shards)))
    assert whole_lookups(merged) == {nodeid: r["cache_keys"]["lookups"] for nodeid, r in tests.items()}
