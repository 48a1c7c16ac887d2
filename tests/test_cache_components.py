"""The run's one table of cache-key components, and the file holding the report as it is.

Torch's config, which the lookups of both layers hold, sits once in the report's
``cache_components``; each lookup keeps the rest.  Everything else in the file is
the report as built: a recompile's reasons in the section, in ``by_function`` and
in its event, every finished test's seconds in ``durations``.  Reports merged from
workers or shards give every lookup its whole set of components again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, components, lookup, recompile_events_record

from pytest_cudagraph.records.cache_components import expand_cache_components, full_components
from pytest_cudagraph.records.report import build_report, load_report, write_report
from pytest_cudagraph.records.worker_records import encode_worker_records, merge_worker_records
from pytest_cudagraph.tools.merge import merge_shard_reports

# torch's config as both layers' keys hold it (some 600 entries in a real run)
CONFIG = {f"inductor_config[option_{i:02d}]": f"value {i}" for i in range(40)}
REAL = Path(__file__).resolve().parent.parent / "docs" / "reports" / "examples-failing-cpu.json"


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


def test_the_config_components_every_lookup_shares_are_in_the_run_table_once(tmp_path):
    records = {f"t.py::test_{i}": cache_record(f"graph {i}") for i in range(3)}
    report = build_report(ENV_2_13, records, durations={nodeid: 1.25 for nodeid in records})
    path = write_report(tmp_path / "r.json", report)
    text = path.read_text()
    for name in CONFIG:
        assert text.count(json.dumps(name)) == 1, name
    written = json.loads(text)
    assert written["schema"] == "pytest-cudagraph/3"
    assert set(written["cache_components"]) == set(CONFIG)
    # what one layer's lookups hold alike is in each of them: the table is the run's, not a layer's
    for one in lookups_in(written):
        assert set(one["components"]) == {"gm", "fx_kwargs[cudagraphs]" if one["layer"] == "fxgraph" else "aot_config"}
    assert load_report(path) == written == json.loads(json.dumps(report))
    assert whole_lookups(written) == {nodeid: record["cache_keys"]["lookups"] for nodeid, record in records.items()}


def lookups_in(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [one for record in report["tests"].values() for one in record.get("cache_keys", {}).get("lookups", [])]


def test_the_file_holds_each_recompile_reason_and_duration_where_the_reference_says(tmp_path):
    record = recompile_events_record()
    report = build_report(ENV_2_13, {"a::t": record}, durations={"a::t": 0.41, "b::plain": 0.5})
    written = json.loads(write_report(tmp_path / "r.json", report).read_text())
    assert written["tests"]["a::t"]["recompiles"] == record["recompiles"]
    assert written["durations"] == {"a::t": 0.41, "b::plain": 0.5}


def test_a_test_with_a_record_that_did_not_finish_has_no_duration(tmp_path):
    records = {"a::crashed": {"outcome": "crashed", "duration_s": 0.0}, "a::ran": {"outcome": "passed"}}
    report = build_report(ENV_2_13, records, durations={"a::ran": 2.0, "a::slowest": 3.0})
    written = json.loads(write_report(tmp_path / "r.json", report).read_text())
    assert written["durations"] == {"a::ran": 2.0, "a::slowest": 3.0}


def test_a_run_where_every_test_finished_writes_each_duration(tmp_path):
    records = {"a::one": {"outcome": "passed", "duration_s": 1.0}, "a::two": {"outcome": "passed", "duration_s": 2.0}}
    report = build_report(ENV_2_13, records, durations={"a::one": 1.0, "a::two": 2.0})
    assert json.loads(write_report(tmp_path / "r.json", report).read_text())["durations"] == {
        "a::one": 1.0,
        "a::two": 2.0,
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
