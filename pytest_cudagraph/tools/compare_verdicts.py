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
from typing import Any

from ..records.report import as_int, limit_hit_count
from ..text import clip, count_noun, format_bytes, number
from .compare_costs import instruction_rule, memory_rule, time_rules
from .compare_noise import both_released, unpaired_set_notes, within_noise
from .compare_noise import mapping_of as _mapping
from .compare_pairing import paired_sets, table_changes
from .compare_results import Change, Regression, RunCompleteness, TestComparison
from .compare_rules import FAILING, INCOMPLETE_RULE, PASSING, POOL_MIN_GROWTH_BYTES, Flag, Limits

__all__ = ["compare_test", "run_regressions"]


def compare_test(
    nodeid: str,
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    rules: tuple[str, ...],
    limits: Limits,
    include_timings: bool,
) -> TestComparison:
    regressions: list[tuple[Regression, tuple[str, ...]]] = []

    def flag(rule: str, message: str, *metrics: str) -> None:
        if rule in rules:
            regressions.append((Regression(nodeid, rule, message), metrics))

    base_outcome, new_outcome = base.get("outcome"), new.get("outcome")
    if base_outcome in PASSING and new_outcome in FAILING:
        flag("outcome", f"outcome {base_outcome} -> {new_outcome}", "outcome")
    _recompile_rules(_mapping(base.get("recompiles")), _mapping(new.get("recompiles")), flag)
    _cache_rules(_mapping(base.get("caches")), _mapping(new.get("caches")), flag)
    if not _graph_set_rules(base, new, limits, flag):  # one set, or sets that do not all pair up: overall figures
        _graph_rules(base, new, limits, flag)
        memory_rule(base, new, limits, flag)
    else:  # every set compared with its partner; piecewise and the rest as usual
        _graph_rules({**base, "graphs": {}}, {**new, "graphs": {}}, limits, flag)
        memory_rule({**base, "graphs": {}}, {**new, "graphs": {}}, limits, flag)
    rows, time_checks = time_rules(base, new, rules, limits, flag)
    rows += instruction_rule(base, new, limits, flag, time_checks)
    rule_of: dict[str, str] = {}
    for regression, metrics in regressions:
        for metric in metrics:
            rule_of.setdefault(metric, regression.rule)
    every_change = table_changes(base, new, rule_of, include_timings)
    released = {
        section: both_released(_mapping(base.get(section)), _mapping(new.get(section)))
        for section in ("graphs", "piecewise")
    }
    changes = tuple(
        c for c in every_change if c.rule or not _within_noise(c, limits, released.get(c.metric.split(".")[0], False))
    )
    noise = tuple(c for c in every_change if c not in changes)
    # a time regression's medians are rows even where the table leaves timings out
    shown = {change.metric for change in changes}
    changes += tuple(
        Change(metric, b, n, rule_of[metric]) for metric, b, n in rows if metric in rule_of and metric not in shown
    )
    notes = tuple(unpaired_set_notes(base, new))
    return TestComparison(
        nodeid, changes, tuple(r for r, _ in regressions), time_checks=time_checks, noise=noise, notes=notes
    )


def _recompile_rules(base_rec: Mapping[str, Any], new_rec: Mapping[str, Any], flag: Flag) -> None:
    """recompiles, recompile-limit, graph-breaks."""
    if not base_rec or not new_rec:
        return
    before, after = as_int(base_rec.get("count")), as_int(new_rec.get("count"))
    if after > before:
        flag(
            "recompiles",
            f"Dynamo recompiled {count_noun(after, 'time')}, {before} before" + _new_reasons(base_rec, new_rec),
            "recompiles.count",
        )
    before, after = limit_hit_count(base_rec), limit_hit_count(new_rec)
    if after > before:
        hits = new_rec.get("limit_hits")
        first = f": {clip(hits[0])}" if isinstance(hits, list) and hits else ""
        flag(
            "recompile-limit",
            f"hit the recompile limit {count_noun(after, 'time')}, {before} before; Dynamo ran those frames eagerly{first}",
            "recompiles.limit_hits",
        )
    base_breaks = as_int(_mapping(base_rec.get("graph_breaks")).get("count"))
    new_breaks = as_int(_mapping(new_rec.get("graph_breaks")).get("count"))
    if new_breaks > base_breaks:
        flag("graph-breaks", f"{new_breaks} graph breaks, {base_breaks} before", "recompiles.graph_breaks.count")


def _cache_rules(base_caches: Mapping[str, Any], new_caches: Mapping[str, Any], flag: Flag) -> None:
    """cache-miss: more FX-graph or AOTAutograd misses or bypasses, more Triton compiles."""
    for layer in ("fxgraph", "aot_autograd"):
        b, n = _mapping(base_caches.get(layer)), _mapping(new_caches.get(layer))
        if not b or not n:
            continue
        for key, word in (("miss", "misses"), ("bypass", "bypasses")):
            before, after = as_int(b.get(key)), as_int(n.get(key))
            if after > before:
                hit_before, hit_after = as_int(b.get("hit")), as_int(n.get("hit"))
                flag(
                    "cache-miss",
                    f"{layer} cache {word} {before} -> {after} (hits {hit_before} -> {hit_after})",
                    f"caches.{layer}.{key}",
                )
    b, n = _mapping(base_caches.get("triton")), _mapping(new_caches.get("triton"))
    if "compiled" in b and "compiled" in n and as_int(n.get("compiled")) > as_int(b.get("compiled")):
        flag(
            "cache-miss",
            f"Triton compiled {as_int(n.get('compiled'))} kernels, {as_int(b.get('compiled'))} before",
            "caches.triton.compiled",
        )


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


def _graph_set_rules(base: Mapping[str, Any], new: Mapping[str, Any], limits: Limits, flag: Flag) -> bool:
    """graphs, pool, numerics and graph-memory for each of several graph sets, against its partner.

    Sets pair up by capture sizes and order (``graph_set_key``).  False, so that the
    test's overall figures are compared instead, when either run has one set or
    fewer, or when some set has no partner (``unpaired_set_notes`` says which).
    """
    pairs = paired_sets(base, new)
    if pairs is None:
        return False
    for key, (base_set, new_set) in pairs.items():

        def set_flag(rule: str, message: str, *metrics: str, key: str = key) -> None:
            flag(rule, f"{key}: {message}", *(metric.replace("graphs.", f"graphs.{key}.", 1) for metric in metrics))

        pair_base, pair_new = {"graphs": base_set}, {"graphs": new_set}
        _graph_rules(pair_base, pair_new, limits, set_flag)
        memory_rule(pair_base, pair_new, limits, set_flag)
    return True


def _graph_rules(base: Mapping[str, Any], new: Mapping[str, Any], limits: Limits, flag: Flag) -> None:
    """graphs, pool, numerics (CUDA graphs and piecewise)."""
    base_graphs, new_graphs = _mapping(base.get("graphs")), _mapping(new.get("graphs"))
    if base_graphs and new_graphs:
        before, after = as_int(base_graphs.get("captured")), as_int(new_graphs.get("captured"))
        if after > before:
            flag("graphs", f"captured {after} CUDA graphs, {before} before", "graphs.captured")
        pool_before, pool_after = number(base_graphs.get("pool_bytes")), number(new_graphs.get("pool_bytes"))
        if pool_before and pool_after is not None:
            growth = pool_after - pool_before
            if growth > pool_before * limits.pool_threshold and growth > POOL_MIN_GROWTH_BYTES:
                flag(
                    "pool",
                    f"graph pool {format_bytes(pool_before)} -> {format_bytes(pool_after)} "
                    f"(+{growth / pool_before:.1%}, threshold {limits.pool_threshold:.0%}); largest graph "
                    f"{format_bytes(base_graphs.get('largest_graph_bytes'))} -> "
                    f"{format_bytes(new_graphs.get('largest_graph_bytes'))}",
                    "graphs.pool_bytes",
                )
    base_pw, new_pw = _mapping(base.get("piecewise")), _mapping(new.get("piecewise"))
    for section, base_section, new_section in (("graphs", base_graphs, new_graphs), ("piecewise", base_pw, new_pw)):
        err_before, err_after = number(base_section.get("max_abs_err")), number(new_section.get("max_abs_err"))
        if err_before is not None and err_after is not None and not math.isnan(err_before):
            allowed = err_before * (1 + limits.numerics_growth) + limits.numerics_floor
            if math.isnan(err_after) or err_after > allowed:
                flag(
                    "numerics",
                    f"{'piecewise ' if section == 'piecewise' else ''}replay-vs-eager max abs error "
                    f"{err_before:.3g} -> {err_after:.3g} (allowed up to {allowed:.3g})",
                    f"{section}.max_abs_err",
                )
    if base_pw and new_pw:
        before, after = as_int(base_pw.get("graphs_captured")), as_int(new_pw.get("graphs_captured"))
        if after > before:
            flag("graphs", f"piecewise captured {after} CUDA graphs, {before} before", "piecewise.graphs_captured")


def _new_reasons(base_rec: Mapping[str, Any], new_rec: Mapping[str, Any]) -> str:
    before = set(map(str, base_rec.get("reasons") or []))
    fresh = [str(r) for r in new_rec.get("reasons") or [] if str(r) not in before]
    if not fresh:
        return ""
    more = f" (and {len(fresh) - 1} more)" if len(fresh) > 1 else ""
    return f"; new guard failure: {clip(fresh[0])}{more}"


def run_regressions(
    selected: tuple[str, ...], vanished: tuple[str, ...], new_run: RunCompleteness
) -> tuple[Regression, ...]:
    """The regressions of the run rather than of a test: ``vanished`` (where selected) and ``incomplete`` (always)."""
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
