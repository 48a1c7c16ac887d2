"""The report's file stores each fact once (records/stored_once.py), and reading it gives the report back.

The config components every layer's lookups share sit once in the file; each
recompile reason sits in its event only; a duration sits in its record only; a
file read back, or merged from workers' or shards' reports, gives every lookup its
whole set of components again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, components, lookup, recompile_events_record, warm_start_record

from pytest_cudagraph.records.report import (
    build_report,
    dumps_report,
    expand_cache_components,
    full_components,
    load_report,
    write_report,
)
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


# ----------------------------------------------------------------------------
# within a record: lookups, component pairs, compile times, the passes' counters, call sites
# ----------------------------------------------------------------------------

METADATA = "TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 32]), stride=(32, 1), device=device(type='cpu'))"


def frame(compile_id: str, total_s: float, dynamo_s: float, inductor_s: float) -> dict[str, Any]:
    phases = {
        "dynamo_s": dynamo_s,
        "aot_autograd_s": round(total_s - dynamo_s - inductor_s, 6),
        "inductor_s": inductor_s,
    }
    return {"compile_id": compile_id, "function": "forward (m.py:12)", "total_s": total_s, "phases": phases}


def compile_time(*frames: dict[str, Any]) -> dict[str, Any]:
    """A compile time as the watch writes it: its totals are its frames' sums."""
    phases = {name: round(sum(f["phases"][name] for f in frames), 6) for name in frames[0]["phases"]}
    return {"total_s": round(sum(f["total_s"] for f in frames), 6), "phases": phases, "frames": list(frames)}


def warm_start_with_keys() -> dict[str, Any]:
    """A compile_cache test as the plugin records it: lookups per pass, compile times per pass and for the test."""
    record = warm_start_record(mode="inprocess")
    cold_time = compile_time(frame("0/0", 3.885468, 0.173584, 3.27472))
    warm_time = compile_time(frame("0/0", 0.13326, 0.086003, 0.0))
    record["extra"]["compile_cache"]["cold"]["compile_time"] = cold_time
    record["extra"]["compile_cache"]["warm"]["compile_time"] = warm_time
    whole = compile_time(frame("0/0", 3.111111, 0.5, 2.0), frame("1/0", 0.907617, 0.2, 0.5))
    whole["passes"] = [
        {
            "label": "@pytest.mark.compile_cache(mode='inprocess')",
            "cold_s": 3.885468,
            "warm_s": 0.13326,
            "warm_cold_ratio": 0.0343,
        }
    ]
    record["compile_time"] = whole
    fx = components(gm="graph 1", **{"example_inputs[0]": METADATA}, **CONFIG)
    fx["example_inputs[1]"] = list(fx["example_inputs[0]"])  # torch hashes the value: one pair, two names
    # a second graph, whose inputs differ: the first one's are not shared by every lookup of the run
    other = components(gm="graph 2", **{"example_inputs[0]": "TensorMetadata(shape=[8])"}, **CONFIG)
    record["cache_keys"] = {
        "lookups": [
            {**lookup("fxgraph", "miss", fx), "pass": "cold", "graph": 1},
            {**lookup("fxgraph", "miss", other), "pass": "cold", "graph": 2},
            {**lookup("fxgraph", "hit", fx), "pass": "warm", "graph": 1},
        ]
    }
    return record


def test_a_warm_start_stores_each_fact_of_its_passes_once(tmp_path):
    record = warm_start_with_keys()
    report = build_report(ENV_2_13, {"a::warm": record}, durations={"a::warm": 15.55})
    path = write_report(tmp_path / "r.json", report)
    text = path.read_text()
    # the warm lookup's components are the cold one's; two inputs of one shape share their [hash, value]
    assert text.count(METADATA) == 1
    # a pass's totals are its frame's; the test's passes are the passes' totals
    for seconds in ("3.885468", "0.13326", "3.27472", "0.173584"):
        assert text.count(seconds) == 1, seconds
    stored = json.loads(text)["tests"]["a::warm"]
    # cache_passes is each pass's stats, which extra holds; caches is the two added up
    assert "cache_passes" not in stored
    assert stored["caches"] == {"sum_of_passes": True}
    assert stored["cache_keys"]["lookups"][2]["components_of"] == 0
    assert stored["compile_time"]["sums_of_frames"] == ["total_s", "phases"]
    assert "passes" not in stored["compile_time"]
    loaded = load_report(path)
    assert loaded == json.loads(json.dumps(report))
    assert loaded["tests"]["a::warm"]["cache_passes"]["cold"]["fxgraph"]["miss"] == 1
    assert loaded["tests"]["a::warm"]["compile_time"] == record["compile_time"]


def test_facts_the_passes_do_not_give_are_kept_as_they_are():
    record = warm_start_with_keys()
    record["caches"]["fxgraph"]["hit"] = 7  # the test compiled outside its passes too
    record["compile_time"]["total_s"] = 9.0  # not its frames' sum
    del record["compile_time"]["passes"]  # a watch of the test's own: no passes listed
    report = json.loads(json.dumps(build_report(ENV_2_13, {"a::t": record})))
    report["tests"]["a::t"].pop("cache_passes")  # a report built without them
    stored = report_as_stored(report)["tests"]["a::t"]
    assert stored["caches"] == record["caches"]
    assert stored["compile_time"]["total_s"] == 9.0 and "sums_of_frames" not in stored["compile_time"]
    assert stored["compile_time"]["passes"] is None and stored["cache_passes"] is None  # absent, not derived
    assert report_as_read(json.loads(json.dumps(report_as_stored(report)))) == report


def test_events_at_one_call_site_store_it_once(tmp_path):
    record = recompile_events_record()
    site = {"file": "/src/model/very/long/path/to/the/module.py", "line": 41, "code": "out = model(x)  # a loop"}
    for event in record["recompiles"]["events"]:
        event["call_site"] = dict(site)
    report = build_report(ENV_2_13, {"a::t": record})
    path = write_report(tmp_path / "r.json", report)
    assert path.read_text().count(site["file"]) == 1
    assert load_report(path) == json.loads(json.dumps(report))


REAL = Path(__file__).resolve().parent.parent / "docs" / "reports" / "examples-cpu-ci-native.json"


def repeated_within(record: Any, least: int = 200) -> set[tuple[str, ...]]:
    """The places of each sub-object of ``record`` longer than ``least`` bytes as JSON that appears more than once."""
    places: dict[str, list[str]] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, (dict, list)):
            text = json.dumps(value, sort_keys=True)
            if len(text) > least:
                places.setdefault(text, []).append(path)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                walk(item, f"{path}.{key}" if path else str(key))

    walk(record, "")
    return {tuple(paths) for paths in places.values() if len(paths) > 1}


def test_a_real_runs_records_hold_no_section_twice_in_the_file():
    """The main job's records (docs/examples on a CPU): before, each warm start repeated its lookups and counters."""
    report = load_report(REAL)
    stored = json.loads(dumps_report(report))
    repeated = {nodeid: repeated_within(record) for nodeid, record in stored["tests"].items()}
    # left: a warm start in a fresh interpreter compiles in the test's process only in its cold pass
    fresh = "docs/examples/test_compile_cache_cases.py::test_warm_start_in_a_fresh_interpreter"
    assert {nodeid: paths for nodeid, paths in repeated.items() if paths} == {
        fresh: {
            ("compile_time", "extra.compile_cache.cold.compile_time"),
            ("compile_time.frames", "extra.compile_cache.cold.compile_time.frames"),
            ("compile_time.frames.0", "extra.compile_cache.cold.compile_time.frames.0"),
        }
    }
    assert report_as_read(stored) == json.loads(json.dumps(report))


numbers = st.one_of(st.floats(0, 100, allow_nan=False).map(lambda x: round(x, 6)), st.integers(0, 5))
frames = st.lists(
    st.fixed_dictionaries(
        {
            "compile_id": st.sampled_from(["0/0", "1/0"]),
            "total_s": numbers,
            "phases": st.fixed_dictionaries({"dynamo_s": numbers, "inductor_s": numbers}),
        }
    ),
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(
    cold=frames,
    warm=frames,
    test_frames=frames,
    summed=st.booleans(),
    caches_summed=st.booleans(),
    drop=st.sets(st.sampled_from(["passes", "cache_passes", "caches"])),
    alike=st.lists(st.integers(0, 2), min_size=1, max_size=5),
)
def test_any_record_with_passes_reads_back_as_it_was_built(cold, warm, test_frames, summed, caches_summed, drop, alike):
    """Compile times whose totals are or are not their frames' sums, counters that are or are not the passes' sum,
    sections present or absent, lookups and component pairs alike or not: the file reads back as built."""
    record = warm_start_record(mode="inprocess")
    for name, got in (("cold", cold), ("warm", warm)):
        if got:
            record["extra"]["compile_cache"][name]["compile_time"] = (
                compile_time(*got) if summed else {"total_s": 1.5, "phases": {}, "frames": got}
            )
    if test_frames:
        record["compile_time"] = compile_time(*test_frames)
    if not caches_summed:
        record["caches"]["fxgraph"]["hit"] = 9
    report = json.loads(json.dumps(build_report(ENV_2_13, {"a::t": record})))
    built = report["tests"]["a::t"]
    if "compile_time" in built and "passes" not in built["compile_time"]:
        built["compile_time"]["passes"] = []  # a compile time that lists none of the passes
    for name in drop:
        (built.get("compile_time", {}) if name == "passes" else built).pop(name, None)
    pairs = [[f"h{i}", f"v{i}"] for i in range(3)]
    built["cache_keys"] = {
        "lookups": [
            {
                "layer": "fxgraph",
                "outcome": "miss",
                "components": {f"in[{j}]": list(pairs[k]) for j, k in enumerate(alike)},
            },
            {
                "layer": "fxgraph",
                "outcome": "hit",
                "components": {f"in[{j}]": list(pairs[k]) for j, k in enumerate(alike[::-1])},
            },
        ]
    }
    assert report_as_read(json.loads(json.dumps(report_as_stored(report)))) == report


def test_a_real_runs_shards_merge_into_its_records(tmp_path):
    """The warm starts' records, written by two shards and merged, read back as the run recorded them."""
    real = load_report(REAL)
    # each lookup with its whole components, as the plugin holds its records before it writes them
    records = {nodeid: record for nodeid, record in expand_cache_components(real).items() if "cache_keys" in record}
    halves = (dict(list(records.items())[::2]), dict(list(records.items())[1::2]))
    shards = []
    for group, half in enumerate(halves, start=1):
        shard = {"group": group, "splits": 2, "algorithm": "least_duration", "selected": len(half)}
        report = build_report(ENV_2_13, half, run={"complete": True, "shard": shard})
        shards.append((f"shard-{group}.json", load_report(write_report(tmp_path / f"shard-{group}.json", report))))
    merged = load_report(write_report(tmp_path / "all.json", merge_shard_reports(shards)))
    assert merged["tests"] == json.loads(json.dumps(build_report(ENV_2_13, records)))["tests"]
    original = whole_lookups(real)
    assert whole_lookups(merged) == {nodeid: original[nodeid] for nodeid in records}
