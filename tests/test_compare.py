"""compare_reports: the environment diff, the per-test table, and each regression rule."""

from __future__ import annotations

import copy
import json

import pytest
from cache_key_samples import DYNAMIC as KEY_DYNAMIC
from cache_key_samples import WARM, key_report_pair, without_cache_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, MiB, graph_record, modified, recompile_record, sample_report

from pytest_cudagraph.compare import ALL_RULES, DEFAULT_RULES, compare_reports, parse_rules
from pytest_cudagraph.report import build_report

DECODE = "tests/test_model.py::test_decode_graphs"
DYNAMIC = "tests/test_model.py::test_dynamic_batch"
SPLIT = "tests/test_model.py::test_attention_split"

# (rule, test, dotted path, new value): one injected regression of each kind
INJECTED = [
    ("outcome", DECODE, "outcome", "failed"),
    ("recompiles", DYNAMIC, "recompiles.count", 3),
    ("recompile-limit", DYNAMIC, "recompiles.limit_hits", ["forward (model.py:12) hit recompile_limit (8)"]),
    ("cache-miss", DECODE, "caches.fxgraph", {"hit": 0, "miss": 1, "bypass": 0}),
    ("cache-miss", DECODE, "caches.aot_autograd", {"hit": 1, "miss": 0, "bypass": 1, "saved": 0}),
    ("cache-miss", DECODE, "caches.triton", {"compiled": 3, "loaded": 0}),
    ("graphs", DECODE, "graphs.captured", 5),
    ("graphs", SPLIT, "piecewise.graphs_captured", 24),
    ("pool", DECODE, "graphs.pool_bytes", 90 * MiB),
    ("numerics", DECODE, "graphs.max_abs_err", 1.5e-3),
    ("numerics", DECODE, "graphs.max_abs_err", "nan"),
    ("numerics", SPLIT, "piecewise.max_abs_err", 0.5),
]


def test_identical_reports_have_no_change_and_no_regression():
    report = sample_report()
    comparison = compare_reports(report, copy.deepcopy(report))
    assert not comparison.regressed
    assert not any(t.changed for t in comparison.tests)
    assert len(comparison.tests) == 5
    text = comparison.format_text()
    assert "environment: unchanged" in text
    assert text.splitlines()[-1].startswith("no regression: 5 tests in both reports: 0 changed, 0 regressed")


@pytest.mark.parametrize("rule, nodeid, path, value", INJECTED, ids=[f"{r}-{p}" for r, _, p, _ in INJECTED])
def test_each_injected_regression_fires_its_rule_only(rule, nodeid, path, value):
    base = sample_report()
    new = modified(base, nodeid, path, value)
    comparison = compare_reports(base, new)
    assert comparison.regressed
    assert {(r.nodeid, r.rule) for r in comparison.regressions} == {(nodeid, rule)}
    text = comparison.format_text()
    assert f"{nodeid}  REGRESSED ({rule})" in text
    assert text.splitlines()[-1].startswith("REGRESSION: 5 tests in both reports: 1 changed, 1 regressed")
    assert f"by rule: {rule} 1" in text
    # the same change is not a regression when its rule is not selected
    others = [r for r in ALL_RULES if r != rule]
    assert not compare_reports(base, new, rules=others).regressed


def test_the_table_shows_base_new_and_change_side_by_side():
    base = sample_report()
    new = modified(base, DECODE, "graphs.pool_bytes", 90 * MiB)
    new = modified(new, DECODE, "caches.fxgraph", {"hit": 0, "miss": 1, "bypass": 0})
    lines = compare_reports(base, new, labels=("torch-2.13.json", "torch-2.14.json")).format_text().splitlines()
    header = next(line for line in lines if line.strip().startswith("metric"))
    assert header.split() == ["metric", "torch-2.13.json", "torch-2.14.json", "change"]
    pool = next(line for line in lines if line.strip().startswith("graphs.pool_bytes"))
    assert pool.split() == ["graphs.pool_bytes", "60.0", "MiB", "90.0", "MiB", "+50.0%", "<-", "pool"]
    hit = next(line for line in lines if line.strip().startswith("caches.fxgraph.hit"))
    assert hit.split() == ["caches.fxgraph.hit", "1", "0", "-1"]  # changed, flagged by no rule
    miss = next(line for line in lines if line.strip().startswith("caches.fxgraph.miss"))
    assert miss.split() == ["caches.fxgraph.miss", "0", "1", "+1", "<-", "cache-miss"]
    assert any("graph pool 60.0 MiB -> 90.0 MiB (+50.0%, threshold 10%)" in line for line in lines)


def test_environment_diff_heads_the_text():
    base = sample_report()
    new = sample_report(env={**ENV_2_13, "torch": "2.14.1+cu128", "triton": "3.6.0", "vllm": "0.9.0"})
    lines = compare_reports(base, new).format_text().splitlines()
    assert lines[0] == "environment:"
    assert lines[1].split() == ["torch", "2.13.0+cu128", "→", "2.14.1+cu128"]
    assert lines[2].split() == ["triton", "3.5.0", "→", "3.6.0"]
    assert lines[3].split() == ["vllm", "-", "→", "0.9.0"]
    assert lines[4].startswith("  same: cuda 12.8, gpu NVIDIA H200, python 3.11.9")
    assert "->" in compare_reports(base, new).format_text(arrow="->").splitlines()[1]


def test_new_and_vanished_tests_are_listed_and_vanished_is_an_opt_in_rule():
    base = sample_report()
    new = copy.deepcopy(base)
    del new["tests"][SPLIT]
    new["tests"]["tests/test_model.py::test_brand_new"] = {"outcome": "failed"}
    comparison = compare_reports(base, new)
    assert comparison.new_tests == ("tests/test_model.py::test_brand_new",)
    assert comparison.vanished_tests == (SPLIT,)
    assert not comparison.regressed  # a new failing test has nothing to regress from
    text = comparison.format_text()
    assert "new tests (1):\n  tests/test_model.py::test_brand_new" in text
    assert f"vanished tests (1):\n  {SPLIT}" in text
    strict = compare_reports(base, new, rules=["default", "vanished"])
    assert strict.regressed and [r.rule for r in strict.regressions] == ["vanished"]


@pytest.mark.parametrize(
    "path, value",
    [
        ("graphs.pool_bytes", 65 * MiB),  # +8 %: under the 10 % threshold
        ("graphs.pool_bytes", 40 * MiB),  # shrank
        ("graphs.max_abs_err", 4.0e-7),  # well within doubled-plus-floor
        ("graphs.captured", 3),
        ("outcome", "skipped"),
        ("caches.fxgraph", {"hit": 2, "miss": 0, "bypass": 0}),
        ("recompiles.count", 0),
    ],
)
def test_improvements_and_small_changes_are_not_regressions(path, value):
    base = sample_report()
    nodeid = DYNAMIC if path.startswith("recompiles") else DECODE
    new = modified(base, nodeid, path, value)
    comparison = compare_reports(base, new)
    assert not comparison.regressed
    assert [t.nodeid for t in comparison.tests if t.changed] == [nodeid]


def test_pool_growth_within_one_allocator_segment_is_rounding():
    small = graph_record()
    small["graphs"].update(pool_bytes=4 * MiB, largest_graph_bytes=4 * MiB)
    grown = copy.deepcopy(small)
    grown["graphs"]["pool_bytes"] = 6 * MiB  # +50 %, but one 2 MiB segment
    base, new = build_report(ENV_2_13, {"a::t": small}), build_report(ENV_2_13, {"a::t": grown})
    assert not compare_reports(base, new).regressed
    grown["graphs"]["pool_bytes"] = 6 * MiB + 1
    assert compare_reports(base, build_report(ENV_2_13, {"a::t": grown})).regressed


def test_pool_threshold_is_adjustable():
    base = sample_report()
    new = modified(base, DECODE, "graphs.pool_bytes", 72 * MiB)  # +20 %
    assert compare_reports(base, new).regressed
    assert not compare_reports(base, new, pool_threshold=0.25).regressed


def test_missing_sections_on_either_side_are_compared_as_absent():
    base = build_report(ENV_2_13, {"a::t": {"outcome": "passed"}, "b::t": graph_record()})
    new = build_report(
        ENV_2_13,
        {"a::t": recompile_record(4), "b::t": {"outcome": "passed", "graphs": "garbled", "caches": None}},
    )
    comparison = compare_reports(base, new)
    assert not comparison.regressed  # nothing to compare a section against
    changed = {t.nodeid: {c.metric for c in t.changes} for t in comparison.tests}
    assert "recompiles.count" in changed["a::t"]
    assert "graphs.pool_bytes" in changed["b::t"]


def test_unknown_sections_and_keys_appear_in_the_table():
    base = build_report(ENV_2_13, {"a::t": {"outcome": "passed", "reduce_overhead": {"trees": 1}, "extra": {"k": 1}}})
    new = build_report(
        ENV_2_13,
        {"a::t": {"outcome": "passed", "reduce_overhead": {"trees": 2}, "extra": {"k": 1}, "future": {"x": "y"}}},
    )
    (test,) = compare_reports(base, new).tests
    assert {(c.metric, c.base, c.new) for c in test.changes} == {
        ("reduce_overhead.trees", 1, 2),
        ("future.x", None, "y"),
    }


def test_timings_are_left_out_unless_asked_for():
    base = sample_report()
    new = modified(base, DECODE, "duration_s", 99.0)
    new = modified(new, DECODE, "graphs.capture_s", 50.0)
    assert not any(t.changed for t in compare_reports(base, new).tests)
    (test,) = [t for t in compare_reports(base, new, include_timings=True).tests if t.changed]
    assert {c.metric for c in test.changes} == {"duration_s", "graphs.capture_s"}


def test_recompile_regression_message_quotes_the_new_guard_failure():
    base = build_report(ENV_2_13, {"a::t": recompile_record(1)})
    new = build_report(ENV_2_13, {"a::t": recompile_record(3)})
    (regression,) = compare_reports(base, new).regressions
    assert regression.message == (
        "Dynamo recompiled 3 times, 1 before; new guard failure: "
        "tensor 'x' size mismatch at index 0. expected 2, actual 4 (and 1 more)"
    )


def test_json_form_is_plain_data_with_the_regressions():
    base = sample_report()
    new = modified(base, DECODE, "graphs.captured", 8)
    data = json.loads(json.dumps(compare_reports(base, new).to_json()))
    assert data["schema"] == "pytest-cudagraph-compare/1"
    assert data["regressed"] is True
    assert data["rule_counts"] == {"graphs": 1}
    assert data["tests"][DECODE]["status"] == "regressed"
    assert {"metric": "graphs.captured", "base": 4, "new": 8, "rule": "graphs"} in data["tests"][DECODE]["changes"]
    assert data["unchanged"] == 4


def test_parse_rules():
    assert parse_rules(None) == DEFAULT_RULES
    assert parse_rules(["recompiles,pool", "pool"]) == ("recompiles", "pool")
    assert parse_rules(["all"]) == ALL_RULES
    assert parse_rules(["none"]) == ()
    with pytest.raises(ValueError, match="unknown rule 'recompile' for --fail-on; choose from outcome, recompiles"):
        parse_rules(["recompile"])


counts = st.integers(min_value=0, max_value=10_000)
records = st.fixed_dictionaries(
    {"outcome": st.sampled_from(["passed", "failed", "skipped", "error", "xfailed"])},
    optional={
        "recompiles": st.fixed_dictionaries(
            {
                "count": counts,
                "reasons": st.lists(st.text(max_size=20), max_size=3),
                "limit_hits": st.lists(st.text(max_size=20), max_size=2),
            }
        ),
        "caches": st.fixed_dictionaries(
            {"fxgraph": st.fixed_dictionaries({"hit": counts, "miss": counts, "bypass": counts})}
        ),
        "graphs": st.fixed_dictionaries(
            {
                "captured": counts,
                "pool_bytes": st.integers(0, 2**40),
                "max_abs_err": st.floats(min_value=0, max_value=1e3),
            }
        ),
    },
)


@settings(deadline=None, max_examples=60)
@given(tests=st.dictionaries(st.text(min_size=1, max_size=20), records, max_size=6))
def test_a_report_never_regresses_against_itself(tests):
    report = build_report(ENV_2_13, tests)
    comparison = compare_reports(report, copy.deepcopy(report), rules=["all"])
    assert not comparison.regressed
    assert not any(t.changed for t in comparison.tests)


@settings(deadline=None, max_examples=40)
@given(record=records, extra=st.integers(min_value=1, max_value=100))
def test_more_recompiles_always_regress(record, extra):
    record = {**record, "recompiles": {"count": (record.get("recompiles") or {}).get("count", 0), "reasons": []}}
    worse = copy.deepcopy(record)
    worse["recompiles"]["count"] += extra
    comparison = compare_reports(build_report(ENV_2_13, {"t": record}), build_report(ENV_2_13, {"t": worse}))
    assert [r.rule for r in comparison.regressions] == ["recompiles"]


def test_a_field_added_empty_by_a_newer_plugin_is_not_a_change():
    older = {"outcome": "passed", "recompiles": {"count": 1}}
    newer = {"outcome": "passed", "recompiles": {"count": 1, "limit_hits": [], "graph_breaks": {"count": 0}}}
    comparison = compare_reports(build_report(ENV_2_13, {"a::t": older}), build_report(ENV_2_13, {"a::t": newer}))
    assert not comparison.tests[0].changed
    newer["recompiles"]["graph_breaks"]["count"] = 2
    comparison = compare_reports(build_report(ENV_2_13, {"a::t": older}), build_report(ENV_2_13, {"a::t": newer}))
    assert [(c.metric, c.base, c.new) for c in comparison.tests[0].changes] == [
        ("recompiles.graph_breaks.count", None, 2)
    ]


def test_a_nan_replay_error_written_by_the_plugin_regresses(tmp_path):
    """End to end: a NaN from check_replay survives the record merge and the writer, and compare flags it."""
    import math

    from pytest_cudagraph.record import merge_graph_sets
    from pytest_cudagraph.report import load_report, write_report

    base = sample_report()
    merged = merge_graph_sets(
        [dict(base["tests"][DECODE]["graphs"]), dict(base["tests"][DECODE]["graphs"], max_abs_err=math.nan)]
    )
    assert math.isnan(merged["max_abs_err"])
    new = modified(base, DECODE, "graphs", merged)
    write_report(tmp_path / "new.json", new)
    comparison = compare_reports(base, load_report(tmp_path / "new.json"))
    # two sets of the same sizes also double "captured": the graphs rule fires beside numerics
    assert {(r.nodeid, r.rule) for r in comparison.regressions} == {(DECODE, "numerics"), (DECODE, "graphs")}


def test_a_reworded_failure_message_or_skip_reason_is_not_a_change():
    base = build_report(
        ENV_2_13,
        {
            "t.py::failed": recompile_record(outcome="failed", failure={"when": "call", "message": "old words"}),
            "t.py::skipped": {"outcome": "skipped", "duration_s": 0.0},
        },
    )
    new = build_report(
        ENV_2_13,
        {
            "t.py::failed": recompile_record(outcome="failed", failure={"when": "call", "message": "new words"}),
            "t.py::skipped": {"outcome": "skipped", "duration_s": 0.0, "skip_reason": "needs --cudagraph"},
        },
    )
    comparison = compare_reports(base, new)
    assert not comparison.regressed
    assert not any(test.changed for test in comparison.tests), comparison.format_text()


# ----------------------------------------------------------------------------
# cache keys: why a lookup that hit now misses
# ----------------------------------------------------------------------------


def test_a_test_whose_cache_behaviour_changed_names_the_components_its_keys_differ_in():
    base, new = key_report_pair()
    text = compare_reports(base, new, labels=("torch-2.13.json", "torch-2.14.json")).format_text()
    lines = text.splitlines()
    start = lines.index("cache keys: every fxgraph and aot_autograd lookup's key differs between the runs in:")
    assert lines[start + 1] == "  torch_version: 2.13.0+cu128 -> 2.14.1+cu128"
    assert lines[start + 6] == "  ... and 2 more components: pytest-cudagraph explain torch-2.13.json torch-2.14.json"
    warm = lines[lines.index(f"{WARM}  REGRESSED (cache-miss)") :]
    keys = warm[warm.index("  cache keys:") :]
    assert keys[1:3] == [
        "    fxgraph graph 1 (warm): hit -> miss; inductor_config[max_autotune]: False -> True",
        "    aot_autograd graph 1 (warm): hit -> miss; no components recorded in torch-2.14.json",
    ]
    decode = lines[lines.index(f"{DECODE}  REGRESSED (cache-miss)") :]
    assert "    fxgraph graph 1: hit -> miss; only the run-wide components above differ" in decode
    dynamic = lines[lines.index(f"{KEY_DYNAMIC}  REGRESSED (recompiles, cache-miss)") :]
    assert (
        "    fxgraph graph 1: hit -> miss; example_inputs[0]: ...shape=torch.Size([4, 64])... -> "
        "...shape=torch.Size([8, 64])..." in dynamic
    )
    assert "    only in torch-2.14.json: fxgraph graph 2 miss" in dynamic


def test_key_differences_change_no_verdict():
    base, new = key_report_pair()
    with_keys = compare_reports(base, new)
    without = compare_reports(without_cache_keys(base), without_cache_keys(new))
    assert with_keys.regressions == without.regressions
    assert [t.changes for t in with_keys.tests] == [t.changes for t in without.tests]
    assert "cache keys" in with_keys.format_text() and "cache keys" not in without.format_text()
    assert "cache_keys" in with_keys.to_json() and "cache_keys" not in without.to_json()


def test_a_report_without_cache_keys_compares_as_before_against_one_with_them():
    base, new = key_report_pair()
    for older, newer in ((without_cache_keys(base), new), (base, without_cache_keys(new))):
        comparison = compare_reports(older, newer)
        before = compare_reports(without_cache_keys(older), without_cache_keys(newer))
        assert comparison.format_text() == before.format_text()
        assert comparison.to_json() == before.to_json()


def test_a_lookup_that_flipped_without_moving_a_counter_shows_as_a_change_and_no_regression():
    base, _ = key_report_pair()
    new = copy.deepcopy(base)
    lookups = new["tests"][WARM]["cache_keys"]["lookups"]
    lookups[0]["outcome"], lookups[2]["outcome"] = "hit", "miss"  # cold hit, warm miss: the same counts
    comparison = compare_reports(base, new)
    assert not comparison.regressed
    (changed,) = [t for t in comparison.tests if t.changed]
    assert changed.nodeid == WARM and changed.changes == ()
    text = comparison.format_text()
    assert f"{WARM}  changed\n  cache keys:\n    fxgraph graph 1 (cold): miss -> hit; same key" in text
    assert text.splitlines()[-1].startswith("no regression: 4 tests in both reports: 1 changed, 0 regressed")


def test_keys_that_differ_while_every_lookup_behaves_the_same_are_no_change():
    base, new = key_report_pair()
    same = copy.deepcopy(new)
    for nodeid, record in same["tests"].items():
        for name in ("caches", "recompiles"):
            record[name] = copy.deepcopy(base["tests"][nodeid].get(name))
        if "cache_keys" in record:
            before = base["tests"][nodeid]["cache_keys"]["lookups"]
            record["cache_keys"]["lookups"] = record["cache_keys"]["lookups"][: len(before)]
            for lookup, earlier in zip(record["cache_keys"]["lookups"], before):
                lookup["outcome"] = earlier["outcome"]
    comparison = compare_reports(base, same)
    assert not any(t.changed for t in comparison.tests)
    # every key still differs in torch_version and the rest: said once, above the tests
    assert "  torch_version: 2.13.0+cu128 -> 2.14.1+cu128" in comparison.format_text().splitlines()


def test_the_json_form_carries_the_pairs_and_the_run_wide_components():
    base, new = key_report_pair()
    data = json.loads(json.dumps(compare_reports(base, new).to_json()))
    assert data["cache_keys"]["run_wide"][0] == {
        "name": "torch_version",
        "base": base["cache_components"]["fxgraph"]["torch_version"],
        "new": new["cache_components"]["fxgraph"]["torch_version"],
        "layers": ["fxgraph", "aot_autograd"],
    }
    warm = data["tests"][WARM]["cache_keys"]
    assert warm["behaviour_changed"] is True
    pair = next(p for p in warm["pairs"] if p["new"]["pass"] == "warm" and p["new"]["layer"] == "fxgraph")
    assert pair["base"]["outcome"] == "hit" and pair["new"]["outcome"] == "miss"
    assert pair["new"]["explained"] == ["inductor_config[max_autotune]: False -> True"]
    assert [c["name"] for c in pair["components"]] == ["inductor_config[max_autotune]"]
    assert pair["run_wide"] == 6 and pair["paired_by"] == "pass and graph"
    assert data["tests"][KEY_DYNAMIC]["cache_keys"]["unpaired"]["new"][0]["graph"] == 2


def test_the_explain_command_names_the_paths_as_given():
    base, new = key_report_pair()
    text = compare_reports(base, new, labels=("a.json", "b.json"), sources=("runs/a.json", "runs/b.json")).format_text()
    assert "pytest-cudagraph explain runs/a.json runs/b.json" in text
