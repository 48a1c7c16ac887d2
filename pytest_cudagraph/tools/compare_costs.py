"""``compare``'s cost rules: time (noise-aware, on startup runs), compile instructions and graph memory.

- ``compile-time``, ``capture-time``, ``startup-time``: a cold or warm median of
  ``pytest-cudagraph startup --runs N`` grew past the noise (``noisy_growth``);
- ``compile-instructions``: a median of callgrind's compile count grew past its threshold;
- ``graph-memory``: a graph memory figure other than the pool grew past its
  threshold and floor.

Each rule flags a test through ``flag`` (``compare_rules.Flag``); the notes say why
a selected rule checked nothing.  Plain data: no torch, no pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UnsetType

from ..records.json_values import number
from ..records.loaded import filled, given, section_or_empty
from ..records.report import OUTSIDE_DEVICE_FIGURES, as_int
from ..records.schema import (
    CaptureCost,
    CompileTime,
    Graphs,
    Piecewise,
    Startup,
    StartupPass,
    StartupStats,
    TestRecord,
)
from ..records.startup import NOISE_MADS, median_absolute_deviation, outlying_runs
from ..render.plain_text import count_noun, format_bytes
from .compare_noise import CAPTURE_PAGES_BYTES, ORDER_DEPENDENT_FIGURES
from .compare_noise import mapping_of as _mapping
from .compare_results import TestComparison
from .compare_rules import TIME_RULES, Flag, Limits

__all__ = [
    "COMPILE_TIME_OFF",
    "NoisyGrowth",
    "compile_time_off_notes",
    "instruction_rule",
    "instruction_rule_notes",
    "memory_rule",
    "memory_rule_notes",
    "noisy_growth",
    "time_rule_notes",
    "time_rules",
]

# rule -> (the figure of a startup pass, its words, where one run's figure lives in a plain record)
_TIME_FIGURES: dict[str, tuple[str, str, tuple[Callable[[TestRecord], Any], ...]]] = {
    "compile-time": ("compile_s", "compile time", (lambda r: section_or_empty(r.compile_time, CompileTime).total_s,)),
    "capture-time": (
        "capture_s",
        "capture time",
        (
            lambda r: section_or_empty(r.graphs, Graphs).capture_s,
            lambda r: section_or_empty(r.piecewise, Piecewise).capture_s,
        ),
    ),
    "startup-time": ("wall_s", "startup wall time", ()),
}
_STARTUP_PASSES = ("cold", "warm")


def _startup_pass(record: TestRecord, kind: str) -> StartupPass:
    """The record's cold or warm startup runs; an empty pass where it has none."""
    startup = section_or_empty(record.startup, Startup)
    return section_or_empty(startup.cold if kind == "cold" else startup.warm, StartupPass)


def _figure(runs: StartupPass, figure: str) -> StartupStats | None:
    """A startup pass's statistics of one figure (``compile_s``, ...); None where it has none, or they are empty."""
    stats: StartupStats | UnsetType = getattr(runs, figure)
    return filled(stats)


def _stats(value: StartupStats | Mapping[str, Any]) -> StartupStats:
    import msgspec

    return value if isinstance(value, StartupStats) else msgspec.convert(value, StartupStats)


@dataclass(frozen=True)
class NoisyGrowth:
    """``noisy_growth``'s verdict on one figure: its growth, what the noise allows, and whether it regressed."""

    growth: float
    allowed: float
    regressed: bool


def noisy_growth(
    base: StartupStats | Mapping[str, Any], new: StartupStats | Mapping[str, Any], threshold: float, floor: float
) -> NoisyGrowth | None:
    """Whether a median grew past the noise: ``{"median", "mad", "n"}`` of two runs; None if either has no spread.

    Regressed when ``new.median - base.median > max(threshold * base.median, floor,
    NOISE_MADS * (base.mad + new.mad))``: the growth is larger than both runs' noise
    together, each ``NOISE_MADS`` median absolute deviations, which fewer than half
    the runs cannot widen (two slow runs of five cannot hide a tripled median), and
    than the relative threshold and the absolute floor.  A report without ``mad`` is
    read by its ``trimmed_spread``, else its ``spread``.  Fewer than two runs on
    either side give no spread: None (not checked).
    """
    base, new = _stats(base), _stats(new)
    b, n = number(base.median, finite=True), number(new.median, finite=True)
    if b is None or n is None or as_int(base.n) < 2 or as_int(new.n) < 2:
        return None
    noise = _noise(base) + _noise(new)
    allowed = max(threshold * b, floor, noise)
    return NoisyGrowth(n - b, allowed, n - b > allowed)


def instruction_rule(
    base: TestRecord, new: TestRecord, limits: Limits, flag: Flag, checks: dict[str, str]
) -> list[tuple[str, Any, Any]]:
    """compile-instructions: a cold or warm median of callgrind's compile count grew past the threshold.

    Instructions are deterministic enough that one run per kind is a measurement:
    no spread is needed, only a margin (PyTorch keeps 1.5-2.5 % for its own).
    """
    rows: list[tuple[str, Any, Any]] = []
    for kind in _STARTUP_PASSES:
        base_counted = _figure(_startup_pass(base, kind), "compile_instructions")
        new_counted = _figure(_startup_pass(new, kind), "compile_instructions")
        b = number(base_counted.median, finite=True) if base_counted is not None else None
        n = number(new_counted.median, finite=True) if new_counted is not None else None
        if b is None or n is None:
            continue
        checks["compile-instructions"] = "checked"
        metric = f"startup.{kind}.compile_instructions.median"
        rows.append((metric, b, n))
        if b > 0 and (n - b) / b > limits.instructions_threshold:
            flag(
                "compile-instructions",
                f"{kind} compile {b:,.0f} -> {n:,.0f} instructions ({(n - b) / b:+.2%}, threshold "
                f"{limits.instructions_threshold:.1%})",
                metric,
            )
    return rows


def instruction_rule_notes(selected: tuple[str, ...], tests: Iterable[TestComparison]) -> tuple[str, ...]:
    """Why compile-instructions checked nothing, where it is selected."""
    if "compile-instructions" not in selected or any(t.time_checks.get("compile-instructions") for t in tests):
        return ()
    return (
        "compile-instructions: not checked, no test in both reports has instruction counts; measure with "
        "pytest-cudagraph startup --instructions",
    )


def _noise(stats: StartupStats) -> float:
    """``NOISE_MADS`` median absolute deviations; without ``mad``, the spread without the outlier, else the range."""
    mad = number(stats.mad, finite=True)
    if mad is not None:
        return NOISE_MADS * mad
    trimmed = number(stats.trimmed_spread, finite=True)
    return trimmed if trimmed is not None else number(stats.spread, finite=True) or 0.0


def _runs(runs: StartupPass, figure: str) -> list[tuple[int, float]]:
    """(index, value) of the pass's runs that measured ``figure``, as the statistics took them (no failed run)."""
    out = []
    for position, sample in enumerate(given(runs.samples) or (), 1):
        value = number(getattr(sample, figure), finite=True)
        if value is not None and given(sample.error) is None:
            out.append((as_int(sample.index) or position, value))
    return out


def _with_mad(stats: StartupStats, runs: list[tuple[int, float]]) -> StartupStats:
    """``stats`` with its median absolute deviation, worked out from its runs where the report lacks it."""
    median = number(stats.median, finite=True)
    if given(stats.mad) is not None or median is None or len(runs) < 2:
        return stats
    return msgspec.structs.replace(stats, mad=median_absolute_deviation([v for _, v in runs], median))


def _set_aside(label: str, stats: StartupStats, runs: list[tuple[int, float]]) -> str | None:
    """``base runs 4, 5 (40.000 s, 40.000 s)``: the runs farther than the noise from the median; None if none."""
    median, mad = number(stats.median, finite=True), number(stats.mad, finite=True)
    if median is None or mad is None:
        return None
    far = outlying_runs(runs, median, mad)
    if not far:
        return None
    indices = ", ".join(str(index) for index, _ in far)
    values = ", ".join(f"{value:.3f} s" for _, value in far)
    return f"{label} run{'s' if len(far) > 1 else ''} {indices} ({values})"


def time_rules(
    base: TestRecord, new: TestRecord, rules: tuple[str, ...], limits: Limits, flag: Flag
) -> tuple[list[tuple[str, Any, Any]], dict[str, str]]:
    """compile-time, capture-time, startup-time: (table rows of the medians, how each selected rule went)."""
    rows: list[tuple[str, Any, Any]] = []
    checks: dict[str, str] = {}
    for rule, (figure, words, single_run) in _TIME_FIGURES.items():
        if rule not in rules:
            continue
        for kind in _STARTUP_PASSES:
            b = _figure(_startup_pass(base, kind), figure)
            n = _figure(_startup_pass(new, kind), figure)
            if b is None or n is None:
                continue
            b_runs, n_runs = _runs(_startup_pass(base, kind), figure), _runs(_startup_pass(new, kind), figure)
            # a report written before ``mad``: worked out from its runs, never the range two slow runs widen
            b, n = _with_mad(b, b_runs), _with_mad(n, n_runs)
            verdict = noisy_growth(b, n, limits.time_threshold, limits.time_floor)
            if verdict is None:
                checks.setdefault(rule, "single")
                continue
            checks[rule] = "checked"
            metric = f"startup.{kind}.{figure}.median"
            rows.append((metric, given(b.median), given(n.median)))
            if verdict.regressed:
                aside = [_set_aside("base", b, b_runs), _set_aside("new", n, n_runs)]
                flag(rule, _time_message(kind, words, b, n, verdict, limits, [a for a in aside if a]), metric)
        if rule not in checks:
            for one_run in single_run:
                if number(one_run(base)) is not None and number(one_run(new)) is not None:
                    checks[rule] = "single"
    return rows, checks


def _time_message(
    kind: str,
    words: str,
    base: StartupStats,
    new: StartupStats,
    verdict: NoisyGrowth,
    limits: Limits,
    set_aside: list[str],
) -> str:
    b, n = float(base.median), float(new.median)  # type: ignore[arg-type]  # noisy_growth read both as numbers
    relative = f", {verdict.growth / b:+.0%}" if b > 0 else ""
    by_mad = given(base.mad) is not None and given(new.mad) is not None
    noise = f"{NOISE_MADS:g} median absolute deviations" if by_mad else "spreads without their outlier"
    aside = f"; set aside as outliers: {', '.join(set_aside)}" if set_aside else ""
    return (
        f"{kind} {words} median {b:.3f} s -> {n:.3f} s (+{verdict.growth:.3f} s{relative}; "
        f"{as_int(base.n)} and {as_int(new.n)} runs, noise ({noise}) {_noise(base):.3f} s and {_noise(new):.3f} s"
        f"{aside}); allowed +{verdict.allowed:.3f} s, the largest of {limits.time_threshold:.0%} of the base, the "
        f"{limits.time_floor:g} s floor and the two noises"
    )


def time_rule_notes(selected: tuple[str, ...], tests: Iterable[TestComparison]) -> tuple[str, ...]:
    """Why a selected time rule checked no test, or left some out."""
    tests = list(tests)
    notes = []
    for rule in TIME_RULES:
        if rule not in selected:
            continue
        statuses = [t.time_checks.get(rule) for t in tests]
        checked, single = statuses.count("checked"), statuses.count("single")
        how = "measure with pytest-cudagraph startup --runs N"
        if single and not checked:
            notes.append(f"{rule}: not checked, the reports hold single runs with no spread; {how}")
        elif single:
            notes.append(
                f"{rule}: not checked for {count_noun(single, 'test')}, their records hold single runs with no spread; {how}"
            )
        elif not checked:
            notes.append(
                f"{rule}: not checked, no test in both reports has startup runs with a {_TIME_FIGURES[rule][1]}; {how}"
            )
    return tuple(notes)


# what the note says first, whichever runs the reports hold
COMPILE_TIME_OFF = "compile-time: compile times not compared (the compile-time rule is off by default)."


def compile_time_off_notes(
    selected: tuple[str, ...],
    base_tests: Mapping[str, TestRecord],
    new_tests: Mapping[str, TestRecord],
    both: Iterable[str],
) -> tuple[str, ...]:
    """One line where compile-time is off and tests of both reports have compile times: that they went unjudged, why.

    Off by default: one run's compile time has no spread, so no change of it can be
    told from noise; ``--fail-on compile-time`` judges the medians of startup runs of
    several samples (``noisy_growth``) and says "not checked" of single runs.
    """
    if "compile-time" in selected:
        return ()
    figure, _, single_run = _TIME_FIGURES["compile-time"]
    timed = several = False
    for nodeid in both:
        base, new = base_tests[nodeid], new_tests[nodeid]
        for kind in _STARTUP_PASSES:
            pair = [_figure(_startup_pass(r, kind), figure) for r in (base, new)]
            if all(pair):
                timed = True
                several = several or all(as_int(stats.n) >= 2 for stats in pair if stats is not None)
        timed = timed or any(all(number(one_run(r)) is not None for r in (base, new)) for one_run in single_run)
    # one note, which the text wraps: the rule is off, so this is a pointer, not a finding
    if several:
        return (COMPILE_TIME_OFF + " These reports hold startup medians: add --fail-on compile-time to compare them.",)
    if timed:
        return (
            COMPILE_TIME_OFF + " One run's compile time has no spread to tell a change from noise."
            " To compare compile times, run pytest-cudagraph startup NODEID --runs N on each build and compare"
            " those two reports with --fail-on compile-time.",
        )
    return ()


def memory_rule_notes(
    selected: tuple[str, ...],
    base_tests: Mapping[str, TestRecord],
    new_tests: Mapping[str, TestRecord],
    both: list[str],
) -> tuple[str, ...]:
    """graph-memory: a note naming the tests whose memory outside the pool it could not vouch for."""
    if "graph-memory" not in selected:
        return ()
    shared = [
        nodeid
        for nodeid in both
        if any(
            given(section_or_empty(section, CaptureCost).outside_unreliable)
            for tests in (base_tests, new_tests)
            for section in (tests[nodeid].graphs, tests[nodeid].piecewise)
        )
    ]
    if not shared:
        return ()
    return (
        f"graph-memory: memory outside the pool not checked for {count_noun(len(shared), 'test')} (first: {shared[0]}): "
        f"other processes shared the GPU, and the device-wide figures count them; run with one process per GPU",
    )


def memory_rule(base: Mapping[str, Any], new: Mapping[str, Any], limits: Limits, flag: Flag) -> None:
    """graph-memory: every ``*_bytes`` figure of graphs, piecewise, reduce_overhead and observed_graphs but the
    pool_bytes of graphs and observed_graphs (the pool rule's).

    Memory is deterministic enough for one run: a relative threshold and a floor, no spread.
    ``base`` and ``new`` are the records as the report holds them (``RecordRead.data``):
    a ``*_bytes`` figure a newer plugin writes is judged too.
    """
    for section in ("graphs", "piecewise", "reduce_overhead", "observed_graphs"):
        base_section, new_section = _mapping(base.get(section)), _mapping(new.get(section))
        # cudaMemGetInfo counted other processes on a shared GPU: those figures are nobody's
        shared = bool(base_section.get("outside_unreliable") or new_section.get("outside_unreliable"))
        for key in new_section:
            if not key.endswith("_bytes") or (section in ("graphs", "observed_graphs") and key == "pool_bytes"):
                continue
            if (shared and key in OUTSIDE_DEVICE_FIGURES) or key in ORDER_DEPENDENT_FIGURES:
                continue
            floor = limits.memory_floor
            released = all(one.get("held_behind_allocator_bytes") is not None for one in (base_section, new_section))
            if key == "behind_allocator_bytes" and released:
                # what the graphs held is compared on its own (held_behind_allocator_bytes); the captures'
                # figure still counts past the driver pages the first graphs of a process take
                floor = max(floor, CAPTURE_PAGES_BYTES)
            before, after = number(base_section.get(key), finite=True), number(new_section.get(key), finite=True)
            if before is None or after is None:
                continue
            growth = after - before
            # a figure below zero (memory given back) grows from nothing
            if growth > max(before, 0) * limits.memory_threshold and growth > floor:
                relative = f"+{growth / before:.1%}, " if before > 0 else ""
                flag(
                    "graph-memory",
                    f"{section}.{key} {format_bytes(before)} -> {format_bytes(after)} ({relative}threshold "
                    f"{limits.memory_threshold:.0%} and {format_bytes(floor)})",
                    f"{section}.{key}",
                )
