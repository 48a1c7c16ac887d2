"""The report file: schema, summary, atomic writing, loading errors and the xdist merge."""

from __future__ import annotations

import gc
import json
import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, MiB, graph_record, recompile_record, sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import (
    RUN_FIELDS,
    SCHEMA,
    build_report,
    dumps_report,
    encode_worker_records,
    load_report,
    merge_worker_records,
    summarize,
    write_report,
)


def _strict_loads(text: str):
    def reject(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in the report")

    return json.loads(text, parse_constant=reject)


def test_build_report_has_schema_env_sorted_tests_and_summary():
    report = build_report(ENV_2_13, {"b::t": recompile_record(2), "a::t": graph_record()}, exitstatus=1)
    assert report["schema"] == SCHEMA == "pytest-cudagraph/3"
    assert report["env"] == ENV_2_13
    assert list(report["tests"]) == ["a::t", "b::t"]
    assert report["summary"] == {
        "tests": 2,
        "outcomes": {"passed": 2},
        "recompiles": 2,
        "recompile_limit_hits": 0,
        "graph_breaks": 0,
        "graphs_captured": 4,
        "caches": {
            "aot_autograd": {"hit": 1, "miss": 0, "bypass": 0, "saved": 0},
            "fxgraph": {"hit": 1, "miss": 0, "bypass": 0},
            "triton": {"compiled": 0, "loaded": 3},
        },
        "exitstatus": 1,
    }
    assert report["created"].endswith("+00:00")


def test_summary_accepts_missing_sections_unknown_keys_and_counted_limit_hits():
    tests = {
        "a": {"outcome": "failed"},
        "b": {"outcome": "passed", "recompiles": {"count": 3, "limit_hits": ["f (m.py:1) hit limit 8"]}},
        "c": {"outcome": "passed", "recompiles": {"count": "2", "limit_hits": 2}, "future_section": {"x": 1}},
        "d": {"outcome": "error", "caches": {"fxgraph": {"hit": 2, "miss": 1, "note": "text"}, "odd": 5}},
        "e": {"outcome": "passed", "graphs": None, "recompiles": "garbled"},
    }
    summary = summarize(tests)
    assert summary["outcomes"] == {"error": 1, "failed": 1, "passed": 3}
    assert summary["recompiles"] == 5
    assert summary["recompile_limit_hits"] == 3
    assert summary["caches"] == {"fxgraph": {"hit": 2, "miss": 1}}


def test_summary_caches_add_up_counters_only_not_the_disabled_and_bypass_words():
    caches = {
        "fxgraph": {"hit": 1, "miss": 0},
        "disabled": {"aot_autograd": "off by your choice (TORCHINDUCTOR_AUTOGRAD_CACHE=0)"},
        "bypass_reasons": {"fxgraph": ["a custom pass without a uuid"]},
    }
    summary = summarize({"t": {"outcome": "passed", "caches": caches}})
    assert summary["caches"] == {"fxgraph": {"hit": 1, "miss": 0}}


def test_write_report_writes_strict_json_and_keeps_nan_as_text(tmp_path):
    report = sample_report()
    report["tests"]["tests/test_model.py::test_decode_graphs"]["graphs"]["max_abs_err"] = float("nan")
    report["tests"]["tests/test_model.py::test_decode_graphs"]["extra"] = {"shape": (2, 3), "where": tmp_path}
    path = write_report(tmp_path / "run.json", report)
    data = _strict_loads(path.read_text())
    graphs = data["tests"]["tests/test_model.py::test_decode_graphs"]["graphs"]
    assert graphs["max_abs_err"] == "nan"
    assert data["tests"]["tests/test_model.py::test_decode_graphs"]["extra"] == {
        "shape": [2, 3],
        "where": str(tmp_path),
    }
    assert load_report(path)["schema"] == SCHEMA


def test_write_report_honours_the_umask_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_report(tmp_path / "run.json", sample_report())
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_failed_write_leaves_old_report_intact_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    write_report(path, sample_report())
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    changed = sample_report(env={**ENV_2_13, "torch": "2.14.1"})
    with pytest.raises(OSError, match="No space left"):
        write_report(path, changed)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_unserialisable_report_fails_before_touching_the_file(tmp_path):
    path = tmp_path / "run.json"
    write_report(path, sample_report())
    before = path.read_bytes()
    looped: dict = {}
    looped["self"] = looped
    report = sample_report()
    report["tests"]["tests/test_model.py::test_gpu_only"]["extra"] = looped
    with pytest.raises((ValueError, RecursionError)):
        write_report(path, report)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "does not exist"),
        ("", "is empty"),
        (
            '{"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a": {"outc',
            "is not valid JSON (Unterminated string starting at: line 1 column 61 (char 60)); it may be truncated",
        ),
        ("<html>not json</html>", "not valid JSON"),
        ('{"schema": "pytest-cudagraph/4", "env": {}, "tests": {}}', "has schema 'pytest-cudagraph/4'"),
        ('{"env": {}, "tests": {}}', "no 'schema' field"),
        ("[1, 2, 3]", "no 'schema' field"),
        ('{"schema": "pytest-cudagraph/1", "env": {}}', "no 'tests' mapping"),
        ('{"schema": "pytest-cudagraph/1", "env": [], "tests": {}}', "'env' that is not a mapping"),
        ('{"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a::t": {"recompiles": {}}}}', "no 'outcome'"),
        ('{"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a::t": 3}}', "malformed record for 'a::t'"),
    ],
)
def test_load_report_errors_are_one_sentence_naming_the_file(tmp_path, content, fragment):
    path = tmp_path / "base.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ReportError) as info:
        load_report(path)
    message = str(info.value)
    assert fragment in message
    assert str(path) in message
    assert "\n" not in message


def test_load_report_of_a_directory_and_of_binary_garbage(tmp_path):
    with pytest.raises(ReportError, match="is a directory"):
        load_report(tmp_path)
    garbage = tmp_path / "core"
    garbage.write_bytes(b"\x80\xff\xfe\x00" * 8)
    with pytest.raises(ReportError, match="cannot be read"):
        load_report(garbage)


def test_load_report_keeps_unknown_sections_and_keys(tmp_path):
    report = sample_report()
    report["tests"]["tests/test_gpu_only"] = {"outcome": "passed", "reduce_overhead": {"cudagraph_trees": 2}, "new": 1}
    report["future_top_level"] = {"anything": True}
    loaded = load_report(write_report(tmp_path / "r.json", report))
    assert loaded["tests"]["tests/test_gpu_only"]["reduce_overhead"] == {"cudagraph_trees": 2}
    assert loaded["future_top_level"] == {"anything": True}


@pytest.mark.parametrize("collecting", [True, False])
@pytest.mark.parametrize("content", [None, '{"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a": 1}}', "{"])
def test_load_report_leaves_the_garbage_collector_as_it_found_it(tmp_path, collecting, content):
    """Parsing and checking run with the cyclic collector paused; a loaded or refused report gives it back."""
    path = tmp_path / "r.json"
    path.write_text(dumps_report(sample_report()) if content is None else content)
    (gc.enable if collecting else gc.disable)()
    try:
        try:
            load_report(path)
        except ReportError:
            assert content is not None
        assert gc.isenabled() is collecting
    finally:
        gc.enable()


records_strategy = st.dictionaries(
    st.text(alphabet="abcdefgh/_:.[]-", min_size=1, max_size=30),
    st.fixed_dictionaries(
        {"outcome": st.sampled_from(["passed", "failed", "skipped", "error"])},
        optional={
            "recompiles": st.fixed_dictionaries({"count": st.integers(0, 50)}),
            "graphs": st.fixed_dictionaries(
                {"captured": st.integers(0, 51), "max_abs_err": st.floats(allow_nan=True, allow_infinity=True)}
            ),
        },
    ),
    max_size=8,
)


@settings(deadline=None, max_examples=40)
@given(workers=st.lists(records_strategy, min_size=1, max_size=4))
def test_worker_records_round_trip_into_the_controller(workers):
    controller: dict = {}
    for records in workers:
        merge_worker_records(controller, encode_worker_records(records))
    expected = {}
    for records in workers:
        expected.update(records)
    assert set(controller) == set(expected)
    for nodeid, record in expected.items():
        assert controller[nodeid]["outcome"] == record["outcome"]
        if "recompiles" in record:
            assert controller[nodeid]["recompiles"]["count"] == record["recompiles"]["count"]
    # the controller's merged records are valid report records
    assert summarize(controller)["tests"] == len(expected)


def test_merge_ignores_a_worker_that_sent_nothing():
    into = {"a": {"outcome": "passed"}}
    assert merge_worker_records(into, None) == 0
    assert merge_worker_records(into, "") == 0
    assert into == {"a": {"outcome": "passed"}}


def test_pool_figures_survive_the_round_trip_exactly(tmp_path):
    report = build_report(ENV_2_13, {"a::t": graph_record()})
    loaded = load_report(write_report(tmp_path / "r.json", report))
    assert loaded["tests"]["a::t"]["graphs"]["pool_bytes"] == 60 * MiB
    assert loaded["tests"]["a::t"]["graphs"]["graph_bytes"]["8"] == 42 * MiB


def test_durations_are_every_tests_seconds_sorted_to_the_millisecond():
    report = build_report(ENV_2_13, {}, durations={"b::t": 0.12345, "a::t": 2, "c::plain": 0.0004})
    assert report["durations"] == {"a::t": 2.0, "b::t": 0.123, "c::plain": 0.0}
    assert list(report["durations"]) == ["a::t", "b::t", "c::plain"]
    assert "durations" not in build_report(ENV_2_13, {})  # a caller that has none writes none
    for bad in (float("nan"), "slow", None, True):
        with pytest.raises(TypeError, match="durations"):
            build_report(ENV_2_13, {}, durations={"a::t": bad})


SHARD = {
    "group": 2,
    "splits": 3,
    "algorithm": "duration_based_chunks",
    "durations_path": ".test_durations",
    "selected": 41,
    "deselected": 82,
}


def test_the_shard_is_a_run_field_of_the_summary_and_is_type_checked():
    assert "shard" in RUN_FIELDS
    summary = build_report(ENV_2_13, {}, run={"complete": True, "shard": SHARD})["summary"]
    assert summary["shard"] == SHARD
    merged = {"splits": 3, "merged": (1, 2, 3), "sources": ({"group": 1, "file": "shard-1.json"},)}
    assert build_report(ENV_2_13, {}, run={"shard": merged})["summary"]["shard"] == {
        "splits": 3,
        "merged": [1, 2, 3],
        "sources": [{"group": 1, "file": "shard-1.json"}],
    }
    with pytest.raises(TypeError, match=r"run\.shard\.group = '2'"):
        build_report(ENV_2_13, {}, run={"shard": {**SHARD, "group": "2"}})


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("shard", {**SHARD, "selected": "41"}, "summary.shard.selected = '41', which is not an integer"),
        ("shard", {"splits": 3, "merged": ["1"]}, "summary.shard.merged = ['1'], which is not a list of integers"),
        ("shard", {"splits": 3, "sources": [{"file": 3}]}, "summary.shard.sources[0].file = 3, which is not a string"),
        ("durations", {"a::t": "slow"}, "durations['a::t'] = 'slow', which is not a number of seconds"),
        ("durations", [1.0], "durations = [1.0], which is not a mapping"),
    ],
)
def test_load_report_checks_the_shard_and_the_durations(tmp_path, field, value, fragment):
    report = build_report(ENV_2_13, {"a::t": graph_record()}, durations={"a::t": 1.0})
    if field == "shard":
        report["summary"]["shard"] = value
    else:
        report["durations"] = value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ReportError) as info:
        load_report(path)
    assert fragment in str(info.value)


# ----------------------------------------------------------------------------
# cache keys: factored into the run's table, whole again with full_components
# ----------------------------------------------------------------------------


def test_cache_key_components_every_lookup_shares_are_kept_once_per_run(tmp_path):
    from sample_reports import cache_key_report_pair, cache_keys_record, fx_components

    from pytest_cudagraph.records.cache_components import full_components

    base, new = cache_key_report_pair()
    for report in (base, new):
        path = tmp_path / "r.json"
        write_report(path, report)
        # the file is the report: reading it gives the report that was written
        assert load_report(path) == json.loads(path.read_text()) == json.loads(json.dumps(report))
    # shared by every lookup of the run, of either layer: once at the top, in no lookup
    assert set(base["cache_components"]) == {"gm", "torch_version", "inductor_config[max_autotune]"}
    assert base["cache_components"]["inductor_config[max_autotune]"][1] == "False"
    shared = new["cache_components"]
    lookups = new["tests"]["tests/test_model.py::test_decode_graphs"]["cache_keys"]["lookups"]
    fx, bypassed = lookups
    assert "inductor_config[epilogue_fusion]" in fx["components"]  # the FX-graph layer's own: not every lookup's
    assert {"torch_version", "inductor_config[max_autotune]"} <= set(fx["components"])
    assert not set(fx["components"]) & set(shared)
    assert bypassed["components"] is None and full_components(new, bypassed) is None
    assert full_components(new, fx) == fx_components(max_autotune="True", torch_version="2.14.1+cu130")
    # what the plugin handed in is left as it was
    record = cache_keys_record()
    build_report(ENV_2_13, {"t": record})
    assert record == cache_keys_record()


def test_a_run_of_many_tests_stores_the_config_of_its_lookups_once(tmp_path):
    from sample_reports import fx_components, lookup

    from pytest_cudagraph.records.cache_components import expand_cache_components, full_components

    config = {f"inductor_config[entry_{i}]": "False" for i in range(600)}
    tests = {
        f"t::test_{n}": {
            "outcome": "passed",
            "cache_keys": {"lookups": [lookup("fxgraph", "miss", fx_components(gm=f"graph {n}", **config))]},
        }
        for n in range(20)
    }
    report = build_report(ENV_2_13, tests)
    text = dumps_report(report)
    unfactored = json.dumps(tests)
    assert len(text) < len(unfactored) / 10
    assert len(report["cache_components"]) == 609  # all but the graph code
    for nodeid, record in tests.items():
        [stored] = report["tests"][nodeid]["cache_keys"]["lookups"]
        assert list(stored["components"]) == ["gm"]
        assert full_components(report, stored) == record["cache_keys"]["lookups"][0]["components"]
    # a report made again from this one (merging shards) factors the whole components again
    again = build_report(ENV_2_13, expand_cache_components(report))
    assert again["cache_components"] == report["cache_components"] and again["tests"] == report["tests"]


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("cache_keys", "lookups", 0, "graph"), "2", "graph"),
        (("cache_keys", "lookups", 0, "components"), "x", "components"),
        (("cache_keys", "lookups", 0, "components", "gm"), [3, None], "gm"),
        (("cache_keys", "lookups", 0, "explained"), "a -> b", "explained"),
    ],
)
def test_load_report_checks_the_cache_keys(tmp_path, path, value, fragment):
    from sample_reports import cache_keys_record

    record = cache_keys_record()
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    report = json.loads(dumps_report(build_report(ENV_2_13, {"t::x": record})))
    file = tmp_path / "r.json"
    file.write_text(json.dumps(report))
    with pytest.raises(ReportError, match=fragment):
        load_report(file)


def test_the_cold_and_warm_passes_are_counted_apart_in_the_record_and_the_summary(tmp_path):
    """``caches`` adds both passes of a warm start ("hit 1, miss 1, saved 1" for a perfect one): each is beside it."""
    from sample_reports import warm_start_record

    records = {"t.py::warm": warm_start_record(), "t.py::other": graph_record()}
    report = build_report(ENV_2_13, records)
    record = report["tests"]["t.py::warm"]
    assert record["caches"]["fxgraph"]["hit"] == record["caches"]["fxgraph"]["miss"] == 1  # their sum, as before
    assert record["cache_passes"]["cold"]["fxgraph"] == {"hit": 0, "miss": 1, "bypass": 0, "saved": 1}
    assert record["cache_passes"]["warm"]["fxgraph"] == {"hit": 1, "miss": 0, "bypass": 0, "saved": 0}
    assert "cache_passes" not in report["tests"]["t.py::other"]  # no passes, nothing to part
    passes = report["summary"]["cache_passes"]
    assert passes["tests"] == 1
    assert (
        passes["cold"]["fxgraph"]["miss"] == 1
        and passes["warm"]["fxgraph"] == record["cache_passes"]["warm"]["fxgraph"]
    )
    # the types know the field: the report loads, strictly checked
    path = write_report(tmp_path / "r.json", report)
    assert load_report(path)["summary"]["cache_passes"] == passes
    assert "cache_passes" not in build_report(ENV_2_13, {"t.py::other": graph_record()})["summary"]
