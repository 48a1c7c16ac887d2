"""compare_reports: the environment diff, the per-test table, and each regression rule."""

from __future__ import annotations

import copy
import io
import json

import pytest
from cache_key_samples import DYNAMIC as KEY_DYNAMIC
from cache_key_samples import WARM, key_report_pair, without_cache_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, MiB, graph_record, modified, recompile_record, sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.tools.compare import compare_reports
from pytest_cudagraph.tools.compare_rules import ALL_RULES, DEFAULT_RULES, parse_rules

DECODE = "tests/test_model.py::test_decode_graphs"
DYNAMIC = "tests/test_model.py::test_dynamic_batch"
SPLIT = "tests/test_model.py::test_attention_split"

# (rule, test, dotted path, new value): one injected regression of each kind
INJECTED = [
    ("outcome", DECODE, "outcome", "failed"),
    ("skipped", DECODE, "outcome", "skipped"),
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
    if rule == "cache-miss" and not path.endswith("aot_autograd"):
        # misses and Triton compiles are counted between caches that both started empty (a bypass anywhere)
        base = modified(base, nodeid, "caches.start", "empty")
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
    base = modified(sample_report(), DECODE, "caches.start", "empty")
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


def test_the_graphs_and_pool_rules_name_both_runs_figures():
    new = modified(sample_report(), DECODE, "graphs.captured", 5)
    new = modified(new, DECODE, "graphs.pool_bytes", 90 * MiB)
    new = modified(new, SPLIT, "piecewise.graphs_captured", 24)
    messages = {(r.nodeid, r.rule, r.message) for r in compare_reports(sample_report(), new).regressions}
    assert messages == {
        (SPLIT, "graphs", "piecewise captured 24 CUDA graphs, 12 before"),
        (DECODE, "graphs", "captured 5 CUDA graphs, 4 before"),
        (
            DECODE,
            "pool",
            "graph pool 60.0 MiB -> 90.0 MiB (+50.0%, threshold 10%); largest graph 42.0 MiB -> 42.0 MiB",
        ),
    }


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
    # a replay error within the numerics tolerance is noise: listed with --verbose only
    changed = [] if path == "graphs.max_abs_err" else [nodeid]
    assert [t.nodeid for t in comparison.tests if t.changed] == changed
    assert [t.nodeid for t in comparison.tests if t.changed or t.noise] == [nodeid]


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
    new = build_report(ENV_2_13, {"a::t": recompile_record(4), "b::t": {"outcome": "passed"}})
    comparison = compare_reports(base, new)
    assert not comparison.regressed  # nothing to compare a section against
    changed = {t.nodeid: {c.metric for c in t.changes} for t in comparison.tests}
    assert "recompiles.count" in changed["a::t"]
    assert "graphs.pool_bytes" in changed["b::t"]


def test_a_report_in_memory_that_breaks_its_types_is_one_sentence_naming_the_field():
    base = build_report(ENV_2_13, {"b::t": graph_record()})
    new = build_report(ENV_2_13, {"b::t": {"outcome": "passed", "graphs": "garbled"}})
    with pytest.raises(ReportError) as caught:
        compare_reports(base, new, labels=("old.json", "the run"))
    assert str(caught.value) == (
        "report the run has tests['b::t'].graphs = 'garbled', which is not a mapping; "
        "write it again with --cudagraph-report, or correct that field"
    )


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
    with pytest.raises(
        ValueError, match="unknown rule 'recompile' for --fail-on; choose from outcome, skipped, recomp"
    ):
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

    from pytest_cudagraph.records.record import merge_graph_sets
    from pytest_cudagraph.records.report import load_report, write_report

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
    # a cache the other torch filled cannot hit: on a shared cache that is no regression
    decode = lines[lines.index(f"{DECODE}  changed") :]
    assert "    fxgraph graph 1: hit -> miss; only the run-wide components above differ" in decode
    dynamic = lines[lines.index(f"{KEY_DYNAMIC}  REGRESSED (recompiles, cache-miss)") :]
    assert (
        "    fxgraph graph 1: hit -> miss; example_inputs[0]: ...shape=torch.Size([4, 64])... -> "
        "...shape=torch.Size([8, 64])..." in dynamic
    )
    assert "    only in torch-2.14.json: fxgraph graph 2 miss" in dynamic


def test_on_a_shared_cache_a_miss_counts_only_where_the_lookups_own_key_changed():
    """The pair's caches are the ones the runs share: the counters tell what the cache held, the keys what changed."""
    base, new = key_report_pair()
    with_keys = compare_reports(base, new)
    assert {(r.nodeid, r.rule) for r in with_keys.regressions} == {
        (KEY_DYNAMIC, "recompiles"),
        (KEY_DYNAMIC, "cache-miss"),
        (WARM, "cache-miss"),
    }
    assert next(r.message for r in with_keys.regressions if r.nodeid == WARM) == (
        "1 fxgraph lookup hit in the base and missed here, the key changed in inductor_config[max_autotune] "
        "(first: fxgraph graph 1 (warm))"
    )
    # without the keys nothing says why a shared cache missed: only a note, the counters judge nothing
    without = compare_reports(without_cache_keys(base), without_cache_keys(new))
    assert [(r.nodeid, r.rule) for r in without.regressions] == [(KEY_DYNAMIC, "recompiles")]
    assert [[c.metric for c in t.changes] for t in with_keys.tests] == [
        [c.metric for c in t.changes] for t in without.tests
    ]
    assert any(note.startswith("cache-miss: 3 tests missed more") for note in without.notes())
    assert "cache keys" in with_keys.format_text() and "cache keys" not in without.format_text()
    assert "cache_keys" in with_keys.to_json() and "cache_keys" not in without.to_json()


def _warmer_base(flip: str) -> tuple[dict, dict]:
    """One build twice on a shared cache: every lookup of DECODE hit in the base, ``flip`` in the new run, same keys."""
    from cache_key_samples import key_report

    base, new = key_report("2.13.0+cu128"), key_report("2.13.0+cu128")
    record = new["tests"][DECODE]
    for lookup in record["cache_keys"]["lookups"]:
        lookup["outcome"] = flip
    for layer in ("fxgraph", "aot_autograd"):
        record["caches"][layer].update(hit=0, miss=1)
    record["caches"]["triton"].update(compiled=2, loaded=0)
    return base, new


@pytest.mark.parametrize("start", ["shared", None], ids=["start-recorded", "older-report"])
def test_one_build_on_a_shared_cache_warmer_for_the_base_is_no_regression(start):
    """A second run on a runner (hits) against a fresh runner (misses): the same keys, so no cache-miss."""
    base, new = _warmer_base("miss")
    for report in (base, new):
        if start is not None:
            report["tests"][DECODE]["caches"]["start"] = start
    for pair in ((base, new), (without_cache_keys(base), without_cache_keys(new))):
        comparison = compare_reports(*pair, rules=["all"])
        assert not comparison.regressed, comparison.format_text()
        note = next(note for note in comparison.notes() if note.startswith("cache-miss:"))
        assert note.startswith(
            f"cache-miss: 1 test missed more (or compiled more Triton kernels) on the caches the run "
            f"shares (torch's own location or --cudagraph-cache-dir; first: {DECODE}), and no lookup"
        )
    # between caches that both started empty (the compile_cache passes), the same counters are a regression
    for report in (base, new):
        report["tests"][DECODE]["caches"]["start"] = "empty"
    comparison = compare_reports(base, new)
    assert {r.message for r in comparison.regressions} == {
        "fxgraph cache misses 0 -> 1 (hits 1 -> 0)",
        "aot_autograd cache misses 0 -> 1 (hits 1 -> 0)",
        "Triton compiled 2 kernels, 0 before",
    }
    # an older report's compile_cache passes (extra.compile_cache) started empty too
    for report in (base, new):
        del report["tests"][DECODE]["caches"]["start"]
        report["tests"][DECODE]["extra"] = {"compile_cache": {"mode": "inprocess"}}
    assert compare_reports(base, new).regressed


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
            record.pop(name, None)
            if name in base["tests"][nodeid]:
                record[name] = copy.deepcopy(base["tests"][nodeid][name])
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
        "base": base["cache_components"]["torch_version"],
        "new": new["cache_components"]["torch_version"],
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


# ----------------------------------------------------------------------------
# the costs: noise-aware time rules on startup reports, graph memory
# ----------------------------------------------------------------------------

STARTUP = "tests/test_model.py::test_decode_startup"
COST_RULES = ["compile-time", "capture-time", "startup-time", "graph-memory"]
# compile seconds of 5 cold and 5 warm runs, as two startup runs of one build measure them on 2 CPU cores:
# their medians differ by a few percent, each run's range by up to a tenth of its median
SAME_BUILD = (
    ([9.8, 10.4, 10.1, 9.6, 10.9], [1.21, 1.35, 1.18, 1.29, 1.24]),
    ([10.2, 9.7, 10.8, 10.0, 10.5], [1.30, 1.19, 1.26, 1.41, 1.22]),
)


def startup_report(cold: list[float], warm: list[float], *, wall_extra: float = 6.0) -> dict:
    """A ``pytest-cudagraph startup`` report of one test: its runs' compile seconds; wall = compile + ``wall_extra``."""
    from pytest_cudagraph.records.startup import NodeStartup, RunSample, StartupResult

    samples = tuple(
        RunSample(kind, index, 0, compile_s + wall_extra, "passed", compile_s + 0.5, compile_s, compile_s / 20)
        for kind, values in (("cold", cold), ("warm", warm))
        for index, compile_s in enumerate(values, 1)
    )
    node = NodeStartup(STARTUP, len(cold), samples, command=("python", "-m", "pytest", STARTUP))
    return json.loads(json.dumps(StartupResult((node,), ENV_2_13).to_report()))


def test_two_startup_reports_of_one_build_do_not_regress():
    (base_cold, base_warm), (new_cold, new_warm) = SAME_BUILD
    comparison = compare_reports(
        startup_report(base_cold, base_warm), startup_report(new_cold, new_warm), rules=["all"]
    )
    assert not comparison.regressed
    assert not any(note.startswith(("compile-time", "capture-time", "startup-time")) for note in comparison.notes())
    assert comparison.tests[0].time_checks == {
        "compile-time": "checked",
        "capture-time": "checked",
        "startup-time": "checked",
    }
    assert comparison.format_text().splitlines()[-1].startswith("no regression: 1 test in both reports")


def test_a_doubled_compile_time_is_caught_with_its_numbers():
    (cold, warm), _ = SAME_BUILD
    base = startup_report(cold, warm)
    new = startup_report([2 * c for c in cold], warm, wall_extra=6.0 - max(cold))  # wall barely moves
    comparison = compare_reports(base, new, rules=["compile-time", "startup-time"])
    assert [(r.nodeid, r.rule) for r in comparison.regressions] == [(STARTUP, "compile-time")]
    assert comparison.regressions[0].message == (
        "cold compile time median 10.100 s -> 20.200 s (+10.100 s, +100%; 5 and 5 runs, noise (3 median absolute "
        "deviations) 0.900 s and 1.800 s); allowed +2.700 s, the largest of 20% of the base, the 1 s floor and the "
        "two noises"
    )
    text = comparison.format_text()
    row = next(line for line in text.splitlines() if line.strip().startswith("startup.cold.compile_s.median"))
    assert row.split() == ["startup.cold.compile_s.median", "10.1", "20.2", "+10.1", "<-", "compile-time"]
    assert f"{STARTUP}  REGRESSED (compile-time)" in text
    # the same figures are no regression where the rule is not selected (it is off by default)
    assert not compare_reports(base, new).regressed


def test_a_growth_within_the_runs_own_spread_is_noise_and_past_it_a_regression():
    from pytest_cudagraph.tools.compare_costs import noisy_growth

    noisy_base = {"median": 10.0, "spread": 4.0, "n": 5}
    noisy_new = {"median": 12.6, "spread": 4.5, "n": 5}  # +26 %: past 20 % and 1 s, within 4.0 + 4.5
    verdict = noisy_growth(noisy_base, noisy_new, threshold=0.20, floor=1.0)
    assert verdict.growth == pytest.approx(2.6) and verdict.allowed == pytest.approx(8.5) and not verdict.regressed
    tight = noisy_growth({**noisy_base, "spread": 0.4}, {**noisy_new, "spread": 0.5}, threshold=0.20, floor=1.0)
    assert tight.allowed == pytest.approx(2.0) and tight.regressed
    # the floor: +0.8 s of a 2 s warm start is +40 % past tight spreads, and still below 1 s
    warm = noisy_growth({"median": 2.0, "spread": 0.1, "n": 5}, {"median": 2.8, "spread": 0.1, "n": 5}, 0.20, 1.0)
    assert not warm.regressed
    # one run has no spread: not checked
    assert noisy_growth({"median": 2.0, "spread": 0.0, "n": 1}, {"median": 9.0, "spread": 0.0, "n": 5}, 0.2, 1) is None


def test_one_slow_base_run_does_not_hide_a_tripled_median():
    """A single slow cold run in the base widens its range to 14.7 s; the trimmed spread leaves it out."""
    from pytest_cudagraph.records.startup import Stats
    from pytest_cudagraph.tools.compare_costs import noisy_growth

    base = Stats.of([22.2, 7.5, 7.6, 7.4, 7.5]).to_json()
    tripled = Stats.of([22.2, 22.3, 22.1, 22.4, 22.2]).to_json()
    verdict = noisy_growth(base, tripled, threshold=0.20, floor=1.0)
    assert verdict.regressed and verdict.growth == pytest.approx(14.7)
    # two runs of one build, with their ordinary jitter (and each its own slow first run), do not trip it
    again = Stats.of([21.0, 7.6, 7.4, 7.7, 7.5]).to_json()
    assert not noisy_growth(base, again, threshold=0.20, floor=1.0).regressed
    # an older report without mad or trimmed_spread is read by its range, as before
    older = {k: v for k, v in base.items() if k not in ("trimmed_spread", "mad")}
    assert not noisy_growth(older, {k: v for k, v in tripled.items() if k != "mad"}, 0.2, 1.0).regressed


def _without_mad(report: dict) -> dict:
    """The report as the plugin wrote it before ``mad``: every startup figure without it."""
    for record in report["tests"].values():
        for kind in ("cold", "warm"):
            for stats in record["startup"][kind].values():
                if isinstance(stats, dict):
                    stats.pop("mad", None)
                    for phase in stats.values():
                        if isinstance(phase, dict):
                            phase.pop("mad", None)
    return report


@pytest.mark.parametrize("written", ["with mad", "before mad"])
def test_two_slow_base_runs_of_five_do_not_hide_a_tripled_median(written):
    """Base 10, 10, 10, 40, 40 s against 30 s in every new run: the trimmed range (30 s) hid it, the MAD does not."""
    base = startup_report([10.0, 10.0, 10.0, 40.0, 40.0], [1.0] * 5)
    new = startup_report([30.0] * 5, [1.0] * 5)
    if written == "before mad":
        base, new = _without_mad(base), _without_mad(new)
    comparison = compare_reports(base, new, rules=["compile-time"])
    assert [(r.nodeid, r.rule) for r in comparison.regressions] == [(STARTUP, "compile-time")]
    assert comparison.regressions[0].message == (
        "cold compile time median 10.000 s -> 30.000 s (+20.000 s, +200%; 5 and 5 runs, noise (3 median absolute "
        "deviations) 0.000 s and 0.000 s; set aside as outliers: base runs 4, 5 (40.000 s, 40.000 s)); allowed "
        "+2.000 s, the largest of 20% of the base, the 1 s floor and the two noises"
    )
    # two runs of one build, each with two slow runs of five, stay within the noise
    again = startup_report([10.4, 9.7, 41.0, 10.1, 38.5], [1.0] * 5)
    assert not compare_reports(base, again, rules=["compile-time"]).regressed


def test_time_rules_are_off_for_single_run_reports_and_say_why():
    base = modified(sample_report(), DECODE, "compile_time", {"total_s": 4.0, "phases": {"inductor_s": 3.0}})
    new = modified(base, DECODE, "compile_time", {"total_s": 9.0, "phases": {"inductor_s": 8.0}})
    new = modified(new, DECODE, "graphs.capture_s", 8.0)
    comparison = compare_reports(base, new, rules=["default", "compile-time", "capture-time", "startup-time"])
    assert not comparison.regressed
    notes = [n for n in comparison.notes() if n.split(":")[0] in ("compile-time", "capture-time", "startup-time")]
    how = "measure with pytest-cudagraph startup --runs N"
    assert notes == [
        f"compile-time: not checked, the reports hold single runs with no spread; {how}",
        f"capture-time: not checked, the reports hold single runs with no spread; {how}",
        f"startup-time: not checked, no test in both reports has startup runs with a startup wall time; {how}",
    ]
    assert f"compile-time: not checked, the reports hold single runs with no spread; {how}" in comparison.format_text()
    assert comparison.to_json()["notes"][-3:] == notes
    # nothing is said about rules nobody selected
    assert not [n for n in compare_reports(base, new).notes() if "not checked" in n]


def test_a_startup_report_of_one_run_per_kind_has_no_spread_either():
    one = startup_report([10.0], [1.0])
    slower = startup_report([30.0], [3.0])
    comparison = compare_reports(one, slower, rules=["compile-time"])
    assert not comparison.regressed
    assert comparison.notes()[-1].startswith("compile-time: not checked, the reports hold single runs with no spread")


def test_graph_memory_flags_the_largest_graph_and_memory_beyond_the_pool():
    base = sample_report()
    bigger = modified(base, DECODE, "graphs.largest_graph_bytes", 60 * MiB)
    comparison = compare_reports(base, bigger, rules=["graph-memory"])
    assert [r.rule for r in comparison.regressions] == ["graph-memory"]
    assert comparison.regressions[0].message == (
        "graphs.largest_graph_bytes 42.0 MiB -> 60.0 MiB (+42.9%, threshold 10% and 2.0 MiB)"
    )
    # within the floor (one allocator segment) or the threshold: rounding, not a regression
    slightly = modified(base, DECODE, "graphs.largest_graph_bytes", 43 * MiB)
    assert not compare_reports(base, slightly, rules=COST_RULES).regressed
    assert not compare_reports(
        base, bigger, rules=["graph-memory"], memory_threshold=0.5, memory_floor=2 * MiB
    ).regressed
    # a new field of memory outside the pool is checked as it appears in both
    outside = modified(base, DECODE, "graphs.behind_allocator_bytes", 1 * MiB)
    grown = modified(outside, DECODE, "graphs.behind_allocator_bytes", 33 * MiB)
    assert [r.message.split(" ")[0] for r in compare_reports(outside, grown, rules=COST_RULES).regressions] == [
        "graphs.behind_allocator_bytes"
    ]
    # the pool itself is the pool rule's, not counted twice
    pool = modified(base, DECODE, "graphs.pool_bytes", 90 * MiB)
    assert [r.rule for r in compare_reports(base, pool, rules=["pool", "graph-memory"]).regressions] == ["pool"]


def test_graph_memory_compares_what_the_graphs_hold_not_what_the_process_paid_first():
    """A reordered run of one build moves first use (kernels loaded, handles) to another test; that is no change.

    Seen on an H200: the first GPU test of a run carries about 156 MiB behind the
    allocator from its warm-ups, and its captures a few 2 MiB driver pages that the
    release does not give back; a later test carries neither.
    """
    base = sample_report()
    first = base
    for key, value in (
        ("graphs.first_use_bytes", 156 * MiB),
        ("graphs.outside_pool_bytes", 200 * MiB),
        ("graphs.allocator_outside_pool_bytes", 40 * MiB),
        ("graphs.behind_allocator_bytes", 8 * MiB),
        ("graphs.held_behind_allocator_bytes", 0),
    ):
        first = modified(first, DECODE, key, value)
    later = first
    for key, value in (
        ("graphs.first_use_bytes", 0),
        ("graphs.outside_pool_bytes", 2 * MiB),
        ("graphs.allocator_outside_pool_bytes", 2 * MiB),
        ("graphs.behind_allocator_bytes", 0),
        ("graphs.held_behind_allocator_bytes", 0),
    ):
        later = modified(later, DECODE, key, value)
    assert not compare_reports(later, first, rules=["graph-memory"]).regressed
    assert not compare_reports(first, later, rules=["graph-memory"]).regressed
    # what the graphs hold, read at release, still counts
    holds_more = modified(later, DECODE, "graphs.held_behind_allocator_bytes", 64 * MiB)
    holds_more = modified(holds_more, DECODE, "graphs.behind_allocator_bytes", 64 * MiB)
    comparison = compare_reports(later, holds_more, rules=["graph-memory"])
    assert sorted(r.message.split(" ")[0] for r in comparison.regressions) == [
        "graphs.behind_allocator_bytes",
        "graphs.held_behind_allocator_bytes",
    ]
    # each flagged row shows the figures its message names
    text = comparison.format_text()
    held_row = next(line for line in text.splitlines() if line.strip().startswith("graphs.held_behind"))
    assert held_row.split()[1:5] == ["0", "B", "64.0", "MiB"] and held_row.endswith("<- graph-memory")
    # the captures' own figure moving by a few driver pages with the order is noise, past 16 MiB a regression
    pages = modified(later, DECODE, "graphs.behind_allocator_bytes", 8 * MiB)
    assert not compare_reports(later, pages, rules=["graph-memory"]).regressed
    assert not any(t.changed for t in compare_reports(later, pages, rules=["graph-memory"]).tests)
    # a side that never read its release is compared by the captures' figure on both sides
    unreleased = copy.deepcopy(holds_more)
    del unreleased["tests"][DECODE]["graphs"]["held_behind_allocator_bytes"]
    unreleased = modified(unreleased, DECODE, "graphs.behind_allocator_bytes", 0)
    assert not compare_reports(first, unreleased, rules=["graph-memory"]).regressed
    # first use that moves far more than a process's own (a library's buffer set up elsewhere) is a change
    library = modified(later, DECODE, "graphs.first_use_bytes", 2000 * MiB)
    assert [t.nodeid for t in compare_reports(later, library, rules=["graph-memory"]).tests if t.changed] == [DECODE]


def test_the_cost_rules_are_opt_in_and_named_like_the_others():
    assert not set(COST_RULES) & set(DEFAULT_RULES)
    assert set(COST_RULES) <= set(ALL_RULES)
    assert parse_rules(["default,compile-time"]) == (*DEFAULT_RULES, "compile-time")
    settings = compare_reports(sample_report(), sample_report()).to_json()["settings"]
    assert settings["time_threshold"] == 0.2 and settings["time_floor_s"] == 1.0
    assert settings["memory_threshold"] == 0.1 and settings["memory_floor_bytes"] == 2 * MiB


def test_compare_on_the_command_line_reads_startup_reports_and_their_limits(tmp_path):
    import io

    from pytest_cudagraph.records.report import write_report
    from pytest_cudagraph.tools.cli import main

    (cold, warm), _ = SAME_BUILD
    base = write_report(tmp_path / "torch-2.8.json", startup_report(cold, warm))
    new = write_report(tmp_path / "torch-2.9.json", startup_report([c * 1.36 for c in cold], warm))

    def run(*args: str) -> tuple[int, str]:
        out = io.StringIO()
        return main(["compare", str(base), str(new), *args], stdout=out, stderr=io.StringIO()), out.getvalue()

    code, out = run("--fail-on", "compile-time")
    assert code == 1 and "cold compile time median 10.100 s -> 13.736 s (+3.636 s, +36%" in out
    assert run("--fail-on", "compile-time", "--time-threshold", "40")[0] == 0
    assert run("--fail-on", "compile-time", "--time-floor", "5s")[0] == 0
    assert run("--fail-on", "default")[0] == 0


# (test, dotted path, new value): differences two runs of one build show, none worth a reader's look
NOISE = [
    (SPLIT, "piecewise.max_abs_err", 8.345e-07),  # other random inputs: within the numerics tolerance
    (DECODE, "graphs.max_abs_err", 1.1e-06),
    (DECODE, "extra.compile_cache.compile_time_ratio", 7.545),  # a ratio of two timings
    (DECODE, "graphs.first_use_bytes", 158 * MiB),  # the process's first use moved to this test
    (DECODE, "graphs.behind_allocator_bytes", 2 * MiB),  # one driver page
]


@pytest.mark.parametrize("nodeid, path, value", NOISE, ids=[p for _, p, _ in NOISE])
def test_two_runs_of_one_build_differ_only_within_noise_and_say_so_in_one_line(nodeid, path, value):
    base = sample_report()
    base = modified(base, SPLIT, "piecewise.max_abs_err", 4.768e-07)
    base = modified(base, DECODE, "graphs.max_abs_err", 5e-07)
    base = modified(base, DECODE, "extra.compile_cache.compile_time_ratio", 8.147)
    base = modified(base, DECODE, "graphs.first_use_bytes", 0)
    base = modified(base, DECODE, "graphs.behind_allocator_bytes", 0)
    new = modified(base, nodeid, path, value)
    comparison = compare_reports(base, new, rules=ALL_RULES)
    assert not comparison.regressed
    assert not any(t.changed for t in comparison.tests)
    text = comparison.format_text()
    assert path not in text
    assert text.splitlines()[-1].startswith("no regression: 5 tests in both reports: 0 changed, 0 regressed")
    # past 120 columns, the count of tests within noise goes on the line above the verdict
    assert "1 more differ only within noise (--verbose lists them)" in "\n".join(text.splitlines()[-4:])
    verbose = comparison.format_text(verbose=True)
    assert f"{nodeid}  within noise" in verbose
    row = next(line for line in verbose.splitlines() if line.strip().startswith(path))
    assert row.endswith("(within noise)")
    assert comparison.to_json()["within_noise"] == 1
    assert comparison.to_json()["tests"][nodeid]["status"] == "same"


def test_a_difference_past_the_noise_is_still_a_change():
    base = modified(sample_report(), SPLIT, "piecewise.max_abs_err", 4.768e-07)
    worse = modified(base, SPLIT, "piecewise.max_abs_err", 3e-06)  # past doubled + 1e-6: the rule's
    comparison = compare_reports(base, worse, rules=["numerics"])
    assert comparison.regressed
    # off by default rules: still listed as a change, not hidden as noise
    unselected = compare_reports(base, worse, rules=["outcome"])
    assert [t.nodeid for t in unselected.tests if t.changed] == [SPLIT]
    bigger = modified(base, DECODE, "graphs.behind_allocator_bytes", 24 * MiB)
    assert [t.nodeid for t in compare_reports(base, bigger, rules=["outcome"]).tests if t.changed] == [DECODE]


def _two_sets(small_largest=4 * MiB, small_pool=24 * MiB, small_sizes=(1, 2, 4, 8)):
    from sample_reports import graph_set_record

    big = graph_set_record([64, 128, 256, 512], [10 * MiB, 20 * MiB, 30 * MiB, 40 * MiB], 72 * MiB, 32 * MiB)
    small = graph_set_record(list(small_sizes), [small_largest // 4] * 3 + [small_largest], small_pool, 32 * MiB)
    sets = [big, small]
    return {
        "sizes": sorted({s for one in sets for s in one["sizes"]}),
        "captured": sum(one["captured"] for one in sets),
        "pool_bytes": max(one["pool_bytes"] for one in sets),
        "largest_graph_bytes": max(one["largest_graph_bytes"] for one in sets),
        "max_abs_err": 1.2e-7,
        "capture_s": 0.8,
        "sets": sets,
    }


def test_each_of_several_graph_sets_is_compared_with_its_partner():
    """The smaller set's largest graph grows 10x and its pool 45 %; the test's maxima (the big set's) do not move."""
    base = modified(sample_report(), DECODE, "graphs", _two_sets())
    new = modified(base, DECODE, "graphs", _two_sets(small_largest=40 * MiB, small_pool=int(24 * MiB * 1.45)))
    comparison = compare_reports(base, new, rules=ALL_RULES)
    assert comparison.regressed
    messages = sorted((r.rule, r.message) for r in comparison.regressions)
    key = "set[8,4,2,1 largest_first]"
    assert [rule for rule, _ in messages] == ["graph-memory", "pool"]
    assert all(message.startswith(f"{key}: ") for _, message in messages)
    text = comparison.format_text()
    assert f"graphs.{key}.pool_bytes" in text and f"graphs.{key}.largest_graph_bytes" in text
    # the same sets in the other order are the same sets
    swapped = copy.deepcopy(base)
    swapped["tests"][DECODE]["graphs"]["sets"].reverse()
    assert not compare_reports(base, swapped, rules=ALL_RULES).regressed
    assert not any(t.changed for t in compare_reports(base, swapped, rules=ALL_RULES).tests)


def test_graph_sets_that_do_not_pair_up_are_said_so_and_the_overall_figures_compared():
    base = modified(sample_report(), DECODE, "graphs", _two_sets())
    other = modified(base, DECODE, "graphs", _two_sets(small_sizes=(1, 2, 3, 8)))
    comparison = compare_reports(base, other, rules=ALL_RULES)
    test = next(t for t in comparison.tests if t.nodeid == DECODE)
    assert test.changed and not test.regressions
    (note,) = test.notes
    assert note.startswith("graph sets pair up by capture sizes and order, and these do not: ")
    assert "set[8,4,2,1 largest_first] of the base has no partner" in note
    assert "set[8,3,2,1 largest_first] of the new run has no partner" in note
    assert "note: graph sets pair up" in comparison.format_text()
    # the overall figures still catch the largest set's growth
    grown = copy.deepcopy(other)
    grown["tests"][DECODE]["graphs"]["pool_bytes"] = 200 * MiB
    assert [r.rule for r in compare_reports(base, grown, rules=["pool"]).regressions] == ["pool"]


def test_a_test_that_passed_and_now_skips_is_a_regression_naming_its_skip_reason():
    """The upgrade that pulled a CPU-only wheel: the project's H200 examples against its CPU examples."""
    import io
    from pathlib import Path

    from pytest_cudagraph.tools.cli import main

    reports = Path(__file__).parent.parent / "docs" / "reports"
    base, new = str(reports / "examples-torch2.11-h200.json"), str(reports / "examples-torch213-cpu.json")
    for rules in ([], ["--fail-on", "all"]):
        out = io.StringIO()
        assert main(["compare", base, new, *rules], stdout=out, stderr=io.StringIO()) == 1
        text = out.getvalue()
        assert "docs/examples/test_decode_step_graphs.py::test_compiled_decode_step_graphs  REGRESSED (skipped)" in text
        assert (
            "  skipped: outcome passed -> skipped (no CUDA device (torch 2.13.0+cpu reports "
            "torch.cuda.is_available() == False)):" in text.splitlines()
        )
        assert text.splitlines()[-1].startswith("REGRESSION:") and "(by rule: skipped 5)" in text
    # accepted: every other default rule
    accepted = [r for r in DEFAULT_RULES if r != "skipped"]
    assert main(["compare", base, new, "--fail-on", ",".join(accepted)], stdout=io.StringIO()) == 0
    # the other way round, skipped -> passed, is no regression
    assert main(["compare", new, base], stdout=io.StringIO()) == 0
    # the skip reason is named where the report has it
    skipping = modified(sample_report(), DECODE, "outcome", "skipped")
    reason = "no CUDA device (torch 2.13.0+cpu reports torch.cuda.is_available() == False)"
    skipping = modified(skipping, DECODE, "skip_reason", reason)
    assert compare_reports(sample_report(), skipping).regressions[0].message == (
        f"outcome passed -> skipped ({reason}): it validated nothing in the new run; accept that with "
        "--fail-on outcome,recompiles,recompile-limit,cache-miss,graphs,pool,numerics"
    )
    # a report of an older plugin version records no skip reason
    unexplained = modified(sample_report(), DECODE, "outcome", "skipped")
    assert (
        compare_reports(sample_report(), unexplained)
        .regressions[0]
        .message.startswith("outcome passed -> skipped (no skip reason recorded): it validated nothing in the new run")
    )


def test_a_field_an_older_report_lacks_is_not_a_change(tmp_path):
    """A ``pytest-cudagraph/1`` report from before ``cache_passes`` against a new one of the same test: unchanged."""
    from sample_reports import warm_start_record

    from pytest_cudagraph.records.report import build_report, write_report
    from pytest_cudagraph.tools.cli import main

    nodeid = "tests/test_model.py::test_warm_start"
    older = {"schema": "pytest-cudagraph/1", "env": dict(ENV_2_13), "tests": {nodeid: warm_start_record()}}
    (tmp_path / "older.json").write_text(json.dumps(older))
    write_report(tmp_path / "new.json", build_report(dict(ENV_2_13), {nodeid: warm_start_record()}, exitstatus=0))
    assert "cache_passes" in json.dumps(build_report(dict(ENV_2_13), {nodeid: warm_start_record()}, exitstatus=0))
    for base, new in (("older.json", "new.json"), ("new.json", "older.json")):
        out = io.StringIO()
        assert main(["compare", str(tmp_path / base), str(tmp_path / new)], stdout=out, stderr=io.StringIO()) == 0
        printed = out.getvalue()
        assert "cache_passes" not in printed, printed
        assert "1 test in both reports: 0 changed" in printed, printed
