"""``compare``'s verdicts on one test: which rules fire, on which figures, and the changes its table shows.

``compare_test`` runs every rule on a test of both reports: ``outcome``,
``recompiles``, ``recompile-limit``, ``graph-breaks``, ``cache-miss``, and per graph
set (or over the test's overall figures) ``graphs``, ``pool``, ``numerics``; the
cost rules are ``compare_costs``'.  A rule not selected never fires.  The run's own
regressions (``vanished``, ``incomplete``) are ``run_regressions``'.  Plain data:
no torch, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from msgspec import UNSET, UnsetType

from ..records.json_values import number
from ..records.key_diff import TestKeyDiff
from ..records.loaded import RecordRead, filled, given, section_or_empty
from ..records.record import CACHE_START_EMPTY, CACHE_START_SHARED
from ..records.report import as_int
from ..records.schema import CacheLayer, Caches, GraphBreaks, TestRecord
from ..render.plain_text import clip, count_noun, format_bytes
from .compare_bundles import bundle_rules
from .compare_costs import instruction_rule, memory_rule, time_rules
from .compare_noise import both_released, keyed_set_data, unpaired_set_notes, within_noise
from .compare_pairing import paired_sets, table_changes
from .compare_results import Change, Regression, RunCompleteness, TestComparison
from .compare_rules import FAILING, INCOMPLETE_RULE, NOTHING_COMPARED_RULE, PASSING, POOL_MIN_GROWTH_BYTES, Flag, Limits

if TYPE_CHECKING:
    from ..records.schema import GraphSet, ObservedGraphs, PiecewiseSet, Recompiles

__all__ = ["cache_start", "compare_test", "run_regressions", "shared_cache_notes"]


def compare_test(
    nodeid: str,
    base: RecordRead,
    new: RecordRead,
    rules: tuple[str, ...],
    limits: Limits,
    include_timings: bool,
    keys: TestKeyDiff | None = None,
) -> TestComparison:
    regressions: list[tuple[Regression, tuple[str, ...]]] = []

    def flag(rule: str, message: str, *metrics: str) -> None:
        if rule in rules:
            regressions.append((Regression(nodeid, rule, message), metrics))

    b, n = base.typed, new.typed
    if b.outcome in PASSING and n.outcome in FAILING:
        flag("outcome", f"{b.outcome} -> {n.outcome}", "outcome")  # printed after the rule: "outcome: passed -> failed"
    if b.outcome in PASSING and n.outcome == "skipped":
        flag("skipped", _skipped_message(b.outcome, given(n.skip_reason), rules), "outcome")
    _recompile_rules(filled(b.recompiles), filled(n.recompiles), flag)
    _cache_rules(b, n, keys, flag)
    bundle_rules(b, n, flag)
    if not _graph_set_rules(base, new, limits, flag):  # one set, or sets that do not all pair up: overall figures
        _graph_rules(b.graphs, n.graphs, b.piecewise, n.piecewise, limits, flag)
        memory_rule(base.data, new.data, limits, flag)
    else:  # every set compared with its partner; piecewise and the rest as usual
        _graph_rules(UNSET, UNSET, b.piecewise, n.piecewise, limits, flag)
        memory_rule({**base.data, "graphs": {}}, {**new.data, "graphs": {}}, limits, flag)
    _observed_rules(filled(b.observed_graphs), filled(n.observed_graphs), limits, flag)
    rows, time_checks = time_rules(b, n, rules, limits, flag)
    rows += instruction_rule(b, n, limits, flag, time_checks)
    rule_of: dict[str, str] = {}
    for regression, metrics in regressions:
        for metric in metrics:
            rule_of.setdefault(metric, regression.rule)
    every_change = table_changes(base, new, rule_of, include_timings)
    released = {
        "graphs": both_released(given(b.graphs), given(n.graphs)),
        "piecewise": both_released(given(b.piecewise), given(n.piecewise)),
    }
    changes = tuple(
        c for c in every_change if c.rule or not _within_noise(c, limits, released.get(c.metric.split(".")[0], False))
    )
    noise = tuple(c for c in every_change if c not in changes)
    # a time regression's medians are rows even where the table leaves timings out
    shown = {change.metric for change in changes}
    changes += tuple(
        Change(metric, b_value, n_value, rule_of[metric])
        for metric, b_value, n_value in rows
        if metric in rule_of and metric not in shown
    )
    notes = tuple(unpaired_set_notes(b, n))
    return TestComparison(
        nodeid, changes, tuple(r for r, _ in regressions), time_checks=time_checks, noise=noise, notes=notes
    )


def _skipped_message(before: str, reason: str | None, rules: tuple[str, ...]) -> str:
    """A test that passed and now skips validated nothing (a CPU-only wheel skips every GPU test): why, and how to
    accept it."""
    accept = ",".join(rule for rule in rules if rule != "skipped") or "none"
    return (
        f"outcome {before} -> skipped ({clip(reason) if reason else 'no skip reason recorded'}): it validated nothing "
        f"in the new run; accept that with --fail-on {accept}"
    )


def _recompile_rules(base_rec: Recompiles | None, new_rec: Recompiles | None, flag: Flag) -> None:
    """recompiles, recompile-limit, graph-breaks."""
    if base_rec is None or new_rec is None:
        return
    before, after = as_int(base_rec.count), as_int(new_rec.count)
    if after > before:
        flag(
            "recompiles",
            f"Dynamo recompiled {count_noun(after, 'time')}, {before} before" + _new_reasons(base_rec, new_rec),
            "recompiles.count",
        )
    before, after = _limit_hits(base_rec), _limit_hits(new_rec)
    if after > before:
        hits = new_rec.limit_hits
        first = f": {clip(hits[0])}" if isinstance(hits, list) and hits else ""
        flag(
            "recompile-limit",
            f"hit the recompile limit {count_noun(after, 'time')}, {before} before; Dynamo ran those frames eagerly{first}",
            "recompiles.limit_hits",
        )
    base_breaks = as_int(section_or_empty(base_rec.graph_breaks, GraphBreaks).count)
    new_breaks = as_int(section_or_empty(new_rec.graph_breaks, GraphBreaks).count)
    if new_breaks > base_breaks:
        flag("graph-breaks", f"{new_breaks} graph breaks, {base_breaks} before", "recompiles.graph_breaks.count")


def _limit_hits(recompiles: Recompiles) -> int:
    """How many recompile-limit hits the section records (a list of them, or an older plugin's count)."""
    hits = recompiles.limit_hits
    return len(hits) if isinstance(hits, list) else as_int(hits)


def cache_start(record: TestRecord) -> str:
    """How a record's compile caches started (``caches.start``); an older report's is told from its ``extra``.

    ``empty`` where the compile_cache marker or ``cold_warm()`` ran its passes (in
    directories the plugin made empty), ``shared`` otherwise.
    """
    start = given(section_or_empty(record.caches, Caches).start)
    if start is not None:
        return start
    extra = given(record.extra)
    probed = isinstance(extra, dict) and ("compile_cache" in extra or "cold_warm" in extra)
    return CACHE_START_EMPTY if probed else CACHE_START_SHARED


def _cache_rules(base: TestRecord, new: TestRecord, keys: TestKeyDiff | None, flag: Flag) -> None:
    """cache-miss: more bypasses; more misses and Triton compiles between caches that both started empty.

    A bypass does not depend on what a cache holds, so it is judged wherever both
    runs count it.  A miss does: on the caches a run shares (torch's own location,
    ``--cudagraph-cache-dir``) it says what the cache held when the test started
    (an earlier run, the tests before it), so there a miss counts only as a lookup
    that hit in the base and misses in the new run with a key changed in a
    component of its own (``_changed_key_misses``).
    """
    base_caches, new_caches = section_or_empty(base.caches, Caches), section_or_empty(new.caches, Caches)
    both_empty = cache_start(base) == cache_start(new) == CACHE_START_EMPTY
    for layer, b, n in (
        ("fxgraph", filled(base_caches.fxgraph), filled(new_caches.fxgraph)),
        ("aot_autograd", filled(base_caches.aot_autograd), filled(new_caches.aot_autograd)),
    ):
        if b is None or n is None:
            continue
        for key, word, before, after in (
            ("miss", "misses", as_int(b.miss), as_int(n.miss)),
            ("bypass", "bypasses", as_int(b.bypass), as_int(n.bypass)),
        ):
            if after > before and (both_empty or key == "bypass"):
                flag(
                    "cache-miss",
                    f"{layer} cache {word} {before} -> {after} (hits {as_int(b.hit)} -> {as_int(n.hit)})",
                    f"caches.{layer}.{key}",
                )
    if not both_empty:
        _changed_key_misses(keys, flag)
        return
    b_triton, n_triton = (
        section_or_empty(base_caches.triton, CacheLayer),
        section_or_empty(new_caches.triton, CacheLayer),
    )
    compiled_before, compiled_after = given(b_triton.compiled), given(n_triton.compiled)
    if compiled_before is not None and compiled_after is not None and compiled_after > compiled_before:
        flag(
            "cache-miss",
            f"Triton compiled {compiled_after} kernels, {compiled_before} before",
            "caches.triton.compiled",
        )


def _changed_key_misses(keys: TestKeyDiff | None, flag: Flag) -> None:
    """cache-miss on a shared cache: lookups that hit in the base and miss in the new run, their keys changed.

    Only a change in the lookup's own components counts: one in the run-wide ones
    (``torch_version``, ``system_info``) means the other build filled the cache, which
    cannot hit after an upgrade.
    """
    for layer in ("fxgraph", "aot_autograd"):
        turned = [
            pair
            for pair in (keys.pairs if keys is not None else ())
            if pair.new.layer == layer and pair.base.outcome == "hit" and pair.new.outcome == "miss"
            if pair.key_changed and pair.changes
        ]
        if turned:
            names = list(dict.fromkeys(change.name for pair in turned for change in pair.changes or ()))
            shown = ", ".join(clip(name, 80) for name in names[:3]) + (
                f" and {len(names) - 3} more" if len(names) > 3 else ""
            )
            flag(
                "cache-miss",
                f"{count_noun(len(turned), f'{layer} lookup')} hit in the base and missed here, the key changed "
                f"in {shown} (first: {turned[0].label})",
                f"caches.{layer}.miss",
            )


def shared_cache_notes(
    selected: tuple[str, ...],
    base_tests: Mapping[str, TestRecord],
    new_tests: Mapping[str, TestRecord],
    tests: tuple[TestComparison, ...],
) -> tuple[str, ...]:
    """One line where tests missed more on the caches a run shares and no lookup's own key explains it: why that
    was not a regression."""
    if "cache-miss" not in selected:
        return ()
    flagged = {t.nodeid for t in tests for r in t.regressions if r.rule == "cache-miss"}
    grew = [
        t.nodeid for t in tests if t.nodeid not in flagged and _shared_growth(base_tests[t.nodeid], new_tests[t.nodeid])
    ]
    if not grew:
        return ()
    return (
        f"cache-miss: {count_noun(len(grew), 'test')} missed more (or compiled more Triton kernels) on the caches "
        f"the run shares (torch's own location or --cudagraph-cache-dir; first: {grew[0]}), and no lookup of "
        f"theirs that hit missed with a key of its own changed: what such a cache holds when a test starts depends "
        f"on earlier runs and on the tests before it, so that is no regression. Counters are compared where both "
        f"runs' caches started empty (@pytest.mark.compile_cache, the compile_cache fixture)",
    )


def _shared_growth(base: TestRecord, new: TestRecord) -> bool:
    if cache_start(base) == cache_start(new) == CACHE_START_EMPTY:
        return False
    base_caches, new_caches = section_or_empty(base.caches, Caches), section_or_empty(new.caches, Caches)
    for layer in ("fxgraph", "aot_autograd", "triton"):
        b = section_or_empty(getattr(base_caches, layer), CacheLayer)
        n = section_or_empty(getattr(new_caches, layer), CacheLayer)
        key = "compiled" if layer == "triton" else "miss"
        before, after = given(getattr(b, key)), given(getattr(n, key))
        if before is not None and after is not None and after > before:
            return True
    return False


def _within_noise(change: Change, limits: Limits, released: bool) -> bool:
    return within_noise(
        change.metric,
        change.base,
        change.new,
        numerics_growth=limits.numerics_growth,
        numerics_floor=limits.numerics_floor,
        memory_floor=limits.memory_floor,
        released=released,
    )


def _graph_set_rules(base: RecordRead, new: RecordRead, limits: Limits, flag: Flag) -> bool:
    """graphs, pool, numerics and graph-memory for each of several graph sets, against its partner.

    Sets pair up by capture sizes and order (``graph_set_key``).  False, so that the
    test's overall figures are compared instead, when either run has one set or
    fewer, or when some set has no partner (``unpaired_set_notes`` says which).
    """
    pairs = paired_sets(base.typed, new.typed)
    if pairs is None:
        return False
    # graph-memory reads every figure a set holds, those no type names included
    base_data, new_data = keyed_set_data(base), keyed_set_data(new)
    for key, (base_set, new_set) in pairs.items():

        def set_flag(rule: str, message: str, *metrics: str, key: str = key) -> None:
            flag(rule, f"{key}: {message}", *(metric.replace("graphs.", f"graphs.{key}.", 1) for metric in metrics))

        _graph_rules(base_set, new_set, UNSET, UNSET, limits, set_flag)
        memory_rule({"graphs": base_data[key]}, {"graphs": new_data[key]}, limits, set_flag)
    return True


def _graph_rules(
    base_graphs: GraphSet | UnsetType,
    new_graphs: GraphSet | UnsetType,
    base_pw: PiecewiseSet | UnsetType,
    new_pw: PiecewiseSet | UnsetType,
    limits: Limits,
    flag: Flag,
) -> None:
    """graphs, pool, numerics (CUDA graphs and piecewise)."""
    b_graphs, n_graphs = filled(base_graphs), filled(new_graphs)
    if b_graphs is not None and n_graphs is not None:
        more = _more_graphs(b_graphs.captured, n_graphs.captured)
        if more is not None:
            flag("graphs", f"captured {more}", "graphs.captured")
        grown = _pool_growth(b_graphs.pool_bytes, n_graphs.pool_bytes, limits)
        if grown is not None:
            flag(
                "pool",
                f"graph pool {grown}; largest graph {format_bytes(given(b_graphs.largest_graph_bytes))} -> "
                f"{format_bytes(given(n_graphs.largest_graph_bytes))}",
                "graphs.pool_bytes",
            )
    for section, b_section, n_section in (
        ("graphs", given(base_graphs), given(new_graphs)),
        ("piecewise", given(base_pw), given(new_pw)),
    ):
        err_before = number(b_section.max_abs_err) if b_section is not None else None
        err_after = number(n_section.max_abs_err) if n_section is not None else None
        if err_before is not None and err_after is not None and not math.isnan(err_before):
            allowed = err_before * (1 + limits.numerics_growth) + limits.numerics_floor
            if math.isnan(err_after) or err_after > allowed:
                flag(
                    "numerics",
                    f"{'piecewise ' if section == 'piecewise' else ''}replay-vs-eager max abs error "
                    f"{err_before:.3g} -> {err_after:.3g} (allowed up to {allowed:.3g})",
                    f"{section}.max_abs_err",
                )
    b_pw, n_pw = filled(base_pw), filled(new_pw)
    if b_pw is not None and n_pw is not None:
        more = _more_graphs(b_pw.graphs_captured, n_pw.graphs_captured)
        if more is not None:
            flag("graphs", f"piecewise captured {more}", "piecewise.graphs_captured")


def _observed_rules(base: ObservedGraphs | None, new: ObservedGraphs | None, limits: Limits, flag: Flag) -> None:
    """graphs and pool for the graphs the test body captured itself (``observed_graphs``)."""
    if base is None or new is None:
        return
    more = _more_graphs(base.captured, new.captured)
    if more is not None:
        flag("graphs", f"the test body captured {more}", "observed_graphs.captured")
    grown = _pool_growth(base.pool_bytes, new.pool_bytes, limits)
    if grown is not None:
        flag(
            "pool",
            f"observed graphs' pools {grown}; pools {as_int(base.pools)} -> {as_int(new.pools)}",
            "observed_graphs.pool_bytes",
        )


def _more_graphs(base_captured: object, new_captured: object) -> str | None:
    """The graphs rule's figures, ``"3 CUDA graphs, 2 before"``, when the new run captured more; else None."""
    before, after = as_int(base_captured), as_int(new_captured)
    return f"{after} CUDA graphs, {before} before" if after > before else None


def _pool_growth(base_bytes: object, new_bytes: object, limits: Limits) -> str | None:
    """The pool rule's figures, ``"1.0 MiB -> 2.0 MiB (+100.0%, threshold 10%)"``, when the pool grew past both
    ``limits.pool_threshold`` and ``POOL_MIN_GROWTH_BYTES``; else None."""
    pool_before, pool_after = number(base_bytes), number(new_bytes)
    if not pool_before or pool_after is None:
        return None
    growth = pool_after - pool_before
    if growth > pool_before * limits.pool_threshold and growth > POOL_MIN_GROWTH_BYTES:
        return (
            f"{format_bytes(pool_before)} -> {format_bytes(pool_after)} "
            f"(+{growth / pool_before:.1%}, threshold {limits.pool_threshold:.0%})"
        )
    return None


def _new_reasons(base_rec: Recompiles, new_rec: Recompiles) -> str:
    before = set(given(base_rec.reasons) or [])
    fresh = [r for r in given(new_rec.reasons) or [] if r not in before]
    if not fresh:
        return ""
    more = f" (and {len(fresh) - 1} more)" if len(fresh) > 1 else ""
    return f"; new guard failure: {clip(fresh[0])}{more}"


def run_regressions(
    selected: tuple[str, ...],
    vanished: tuple[str, ...],
    new_run: RunCompleteness,
    compared: int,
    new: tuple[str, ...],
) -> tuple[Regression, ...]:
    """The regressions of the run rather than of a test: ``vanished`` (where selected), ``incomplete`` and
    ``nothing-compared`` (always).

    ``compared``: how many tests are in both reports; ``new``: the new report's tests missing from the base.
    """
    found: list[Regression] = []
    if "vanished" in selected and vanished:
        found.append(
            Regression(
                "",
                "vanished",
                f"{count_noun(len(vanished), 'test')} of the base report did not run (first: {vanished[0]}); "
                f"run the same selection, or drop 'vanished' from --fail-on",
            )
        )
    if not new_run.complete:
        found.append(_incomplete_regression(new_run, vanished))
    elif not compared and vanished:
        # an incomplete run already says why its tests are missing; a complete one that shares no test with
        # the base is another suite or a wrong path, and "no regression" would vouch for a comparison never made
        found.append(
            Regression(
                "",
                NOTHING_COMPARED_RULE,
                f"no test is in both reports ({len(vanished)} vanished, {len(new)} new); check the paths, "
                "or compare reports of one suite",
            )
        )
    return tuple(found)


def _incomplete_regression(run: RunCompleteness, vanished: tuple[str, ...]) -> Regression:
    missing = []
    if run.not_run_count:
        missing.append(
            f"{run.not_run_count} selected tests never finished (first: {run.not_run[0] if run.not_run else '?'})"
        )
    if vanished:
        missing.append(f"{count_noun(len(vanished), 'test')} of the base report are absent")
    return Regression(
        "",
        INCOMPLETE_RULE,
        f"the new run did not run to its end ({'; '.join(run.reasons)})"
        + (f": {', '.join(missing)}" if missing else "")
        + "; run it to its end before trusting the comparison",
    )
