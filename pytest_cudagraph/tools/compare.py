"""Compare two run reports: what changed per test, and which changes are regressions.

This is the offline half of "upgrading PyTorch": run the same suite under two
torch versions with ``--cudagraph-report``, then::

    pytest-cudagraph compare torch-2.13.json torch-2.14.json

or, at the end of a run, ``--cudagraph-baseline=torch-2.13.json``.  It reads only
JSON and never imports torch, so it runs anywhere.

A regression is a change that a rule flags (``--fail-on`` selects the rules):

==================  =========================================================================
rule                regressed when, for a test in both reports
==================  =========================================================================
``outcome``         it passed (or xfailed) and now fails or errors
``recompiles``      Dynamo recompiled more often (``recompiles.count`` went up)
``recompile-limit`` it hit the recompile limit more often (Dynamo then silently runs eager)
``cache-miss``      an FX-graph or AOTAutograd cache layer misses or bypasses more (a layer
                    that hit now misses), or Triton compiles more kernels
``graphs``          more CUDA graphs were captured (``graphs.captured``, piecewise too)
``pool``            the graph pool grew by more than ``pool_threshold`` (default 10 %) and by
                    more than one 2 MiB allocator segment
``numerics``        the replay error grew past ``base * (1 + numerics_growth) + numerics_floor``
                    (defaults: doubled plus 1e-6), or became NaN
``graph-breaks``    more graph breaks (off by default)
``vanished``        a test of the base report is missing from the new one (off by default;
                    vanished tests are always listed)
``compile-time``    the median compile time of its cold or warm startup runs grew by more
                    than the noise allows (see below; off by default)
``capture-time``    the same for the CUDA graph capture time (off by default)
``startup-time``    the same for the wall time of the whole run (off by default)
``graph-memory``    a graph memory figure other than the pool (``graphs.largest_graph_bytes``,
                    the cuBLAS workspace, what the graphs hold behind the allocator, the
                    piecewise and reduce-overhead pools) grew by more than
                    ``memory_threshold`` (default 10 %) and by more than ``memory_floor``
                    (default 2 MiB) (off by default).  First use and the allocator's
                    growth outside the pool are not compared: they depend on what ran
                    before in the process
==================  =========================================================================

The time rules read the ``startup`` section that ``pytest-cudagraph startup --runs N``
writes: per kind of run (cold, warm), the median of N runs and their spread (max -
min).  A figure regressed when::

    new.median - base.median > max(time_threshold * base.median, time_floor,
                                   base.trimmed_spread + new.trimmed_spread)

(defaults: 20 % and 1 s; ``noisy_growth``).  ``trimmed_spread`` is the range of
the runs without the one farthest from the median (3 runs or more), so one slow
run, like the first cold run on a fresh machine, cannot widen it by as much as it
was slow; a report without it is read by its ``spread``.  A growth within the two
runs' own ranges is noise, however large; a growth past them but below the relative
threshold or the floor is too small to act on.  A report of single runs
(``compile_time.total_s``, ``capture_s`` of one run, or a startup section of one
run per kind) has no spread, so the rule is not checked there and a note says
why; so is a rule no test of both reports gives figures for.

Where both reports record cache lookups (``cache_keys``), each test whose cache
behaviour changed (counters, a lookup's outcome, a lookup without a partner) also
gets the components in which its lookups' keys differ, a few per test
(``key_diff``), and a line names the components every lookup's key differs in
(``torch_version``, ``system_info[...]``).  No rule reads them: a key that differs
is why a counter moved, and the counter's rule decides.

Whatever ``--fail-on`` selects, a new report whose run did not run to its end
(``summary.complete`` false; for an older report without it, exit status 2, 3 or 4)
is a regression, ``incomplete``: ``compare`` never says "no regression" about tests
it has no record of.  An incomplete base is a warning.  ``crashed`` (a test whose
xdist worker died under it) counts as failing.

Example::

    comparison = compare_reports(load_report("old.json"), load_report("new.json"))
    print(comparison.format_text())
    sys.exit(1 if comparison.regressed else 0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..records.key_diff import ReportKeyDiff, TestKeyDiff, diff_reports, records_cache_keys
from ..records.report import INCOMPLETE_EXIT_STATUSES, OUTSIDE_DEVICE_FIGURES, as_int, limit_hit_count
from ..render.key_text import compare_lines, explain_command, run_wide_lines
from ..text import MIB, clip, count_noun, format_bytes, format_table, number
from .compare_noise import (
    CAPTURE_PAGES_BYTES,
    ORDER_DEPENDENT_FIGURES,
    both_released,
    keyed_sets,
    unpaired_set_notes,
    within_noise,
)
from .instructions import DEFAULT_INSTRUCTIONS_THRESHOLD

COMPARISON_SCHEMA = "pytest-cudagraph-compare/1"

DEFAULT_RULES = ("outcome", "recompiles", "recompile-limit", "cache-miss", "graphs", "pool", "numerics")
# the costs: noise-aware time rules on startup reports, and graph memory beyond the pool
TIME_RULES = ("compile-time", "capture-time", "startup-time")
COST_RULES = (*TIME_RULES, "graph-memory", "compile-instructions")
OPTIONAL_RULES = ("graph-breaks", "vanished", *COST_RULES)
ALL_RULES = DEFAULT_RULES + OPTIONAL_RULES

DEFAULT_POOL_THRESHOLD = 0.10
# The allocator hands out small-pool segments of 2 MiB: a smaller growth is rounding, not a regression.
POOL_MIN_GROWTH_BYTES = 2 * MIB
DEFAULT_NUMERICS_GROWTH = 1.0
DEFAULT_NUMERICS_FLOOR = 1e-6
# Two startup runs of one build on one machine differ by up to ~10 % in their medians
# (CPU frequency, page cache, other jobs); 20 % and 1 s keep them apart from a change
# worth acting on (torch 2.8 -> 2.9 took vLLM's cold start from 118 s to 160 s, +36 %).
DEFAULT_TIME_THRESHOLD = 0.20
DEFAULT_TIME_FLOOR_S = 1.0
DEFAULT_MEMORY_THRESHOLD = 0.10
# one small allocator segment, as for the pool rule
DEFAULT_MEMORY_FLOOR_BYTES = 2 * MIB

PASSING = ("passed", "xfailed")
FAILING = ("failed", "error", "crashed")
# Not a --fail-on rule: always on (see the module docstring).
INCOMPLETE_RULE = "incomplete"

# Sections whose scalar leaves appear in the side-by-side table.
_TABLE_SECTIONS = ("recompiles", "caches", "graphs", "piecewise", "reduce_overhead", "extra")
# Per-size or per-set detail: summarised elsewhere, too long for a table row each.
_TABLE_SKIP_KEYS = frozenset(
    {
        # counted instructions: the compile-instructions rule's rows, its medians where it fires
        "compile_instructions",
        "sets",
        "graph_bytes",
        "reasons",
        "limit_hits",
        "by_function",
        # differ on every run by construction (temporary directories, process ids)
        "cache_dir",
        # every startup run's figures: their medians and spreads are the rows
        "samples",
        "process",
    }
)


def parse_rules(values: Iterable[str] | None) -> tuple[str, ...]:
    """``--fail-on`` values (comma-separated, repeatable; ``all``, ``default``, ``none``) -> rule names.

    Raises ValueError naming the unknown rule and listing the known ones.
    """
    if values is None:
        return DEFAULT_RULES
    chosen: list[str] = []
    for value in values:
        for name in (part.strip() for part in str(value).split(",")):
            if not name:
                continue
            if name == "all":
                expanded: tuple[str, ...] = ALL_RULES
            elif name == "default":
                expanded = DEFAULT_RULES
            elif name == "none":
                expanded = ()
            elif name in ALL_RULES:
                expanded = (name,)
            else:
                raise ValueError(
                    f"unknown rule {name!r} for --fail-on; choose from {', '.join(ALL_RULES)}, all, default or none"
                )
            chosen.extend(r for r in expanded if r not in chosen)
    return tuple(chosen)


# ----------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One metric of one test that differs between the reports."""

    metric: str
    base: Any
    new: Any
    rule: str | None = None  # the rule that flags this change as a regression, if any

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "base": self.base, "new": self.new, "rule": self.rule}


@dataclass(frozen=True)
class Regression:
    """A rule that fired for a test, with the sentence that explains it."""

    nodeid: str
    rule: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "rule": self.rule, "message": self.message}


@dataclass(frozen=True)
class RunCompleteness:
    """Whether a report's run ran to its end, and what it left out (``run_completeness``)."""

    complete: bool
    # the report says so itself (summary.complete); False: judged from summary.exitstatus
    recorded: bool
    reasons: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()  # the first ids the report lists (at most 100)
    not_run_count: int = 0
    exitstatus: int | None = None
    deselected: int | None = None
    selection: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "recorded": self.recorded,
            "reasons": list(self.reasons),
            "not_run": list(self.not_run),
            "not_run_count": self.not_run_count,
            "exitstatus": self.exitstatus,
            "deselected": self.deselected,
            "selection": dict(self.selection),
        }


def run_completeness(report: Mapping[str, Any]) -> RunCompleteness:
    """What a report's ``summary`` says about its run; an older report is judged by its exit status.

    ``summary.complete`` decides when present.  Without it, exit status 2
    (interrupted), 3 (internal error) or 4 (usage error) means incomplete, and
    anything else complete, with ``recorded`` False so that readers can say so.
    """
    summary = _mapping(report.get("summary"))
    exitstatus = summary.get("exitstatus")
    exitstatus = exitstatus if isinstance(exitstatus, int) and not isinstance(exitstatus, bool) else None
    not_run = tuple(str(n) for n in _list(summary.get("not_run")))
    deselected = summary.get("deselected")
    facts = {
        "not_run": not_run,
        "not_run_count": max(as_int(summary.get("not_run_count")), len(not_run)),
        "exitstatus": exitstatus,
        "deselected": as_int(deselected) if deselected is not None else None,
        "selection": {str(k): str(v) for k, v in _mapping(summary.get("selection")).items()},
    }
    complete = summary.get("complete")
    if isinstance(complete, bool):
        reasons = tuple(str(r) for r in _list(summary.get("incomplete_reasons")))
        if not complete and not reasons:
            reasons = ("the report says so, without a reason",)
        return RunCompleteness(complete, True, () if complete else reasons, **facts)
    if exitstatus in INCOMPLETE_EXIT_STATUSES:
        reason = f"pytest exited with status {exitstatus} ({INCOMPLETE_EXIT_STATUSES[exitstatus]})"
        return RunCompleteness(False, False, (reason,), **facts)
    return RunCompleteness(True, False, **facts)


@dataclass(frozen=True)
class TestComparison:
    """One test present in both reports."""

    __test__ = False  # not a pytest test class

    nodeid: str
    changes: tuple[Change, ...]
    regressions: tuple[Regression, ...]
    # its cache lookups in both runs, when either records them (``cache_keys``)
    cache_keys: TestKeyDiff | None = None
    # per selected time rule: "checked", or "single" (one run, no spread: not checked)
    time_checks: Mapping[str, str] = field(default_factory=dict)
    # differences no reader should act on (``within_noise``): listed only when asked
    noise: tuple[Change, ...] = ()
    # what could not be compared, one sentence each (graph sets without a partner)
    notes: tuple[str, ...] = ()

    @property
    def cache_behaviour_changed(self) -> bool:
        return self.cache_keys is not None and self.cache_keys.behaviour_changed

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.regressions or self.cache_behaviour_changed or self.notes)

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": "regressed" if self.regressions else "changed" if self.changed else "same",
            "changes": [c.to_json() for c in self.changes],
            "regressions": [r.to_json() for r in self.regressions],
        }
        if self.noise:
            out["within_noise"] = [c.to_json() for c in self.noise]
        if self.notes:
            out["notes"] = list(self.notes)
        if self.cache_keys is not None and self.cache_keys.behaviour_changed:
            out["cache_keys"] = self.cache_keys.to_json()
        return out


@dataclass(frozen=True)
class Comparison:
    """The result of ``compare_reports``: env diff, per-test changes, new and vanished tests."""

    env_changes: tuple[tuple[str, Any, Any], ...]
    env_same: tuple[tuple[str, Any], ...]
    tests: tuple[TestComparison, ...]
    new_tests: tuple[str, ...]
    vanished_tests: tuple[str, ...]
    rules: tuple[str, ...]
    # regressions not tied to a test in both reports (``vanished``, ``incomplete``)
    run_regressions: tuple[Regression, ...] = ()
    labels: tuple[str, str] = ("base", "new")
    settings: Mapping[str, Any] = field(default_factory=dict)
    base_run: RunCompleteness = field(default_factory=lambda: RunCompleteness(True, False))
    new_run: RunCompleteness = field(default_factory=lambda: RunCompleteness(True, False))
    # the cache keys of the two runs, when either records them; the paths ``explain`` is pointed at
    cache_keys: ReportKeyDiff | None = None
    sources: tuple[str, str] | None = None
    # why a selected time rule was not checked (single runs, no figures)
    rule_notes: tuple[str, ...] = ()

    @property
    def regressions(self) -> tuple[Regression, ...]:
        return tuple(r for t in self.tests for r in t.regressions) + self.run_regressions

    @property
    def regressed(self) -> bool:
        """True when any selected rule fired: the exit status 1 of ``compare``."""
        return bool(self.regressions)

    def rule_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for regression in self.regressions:
            counts[regression.rule] = counts.get(regression.rule, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        """A machine-readable comparison (``pytest-cudagraph compare --json``)."""
        return {
            "schema": COMPARISON_SCHEMA,
            "labels": {"base": self.labels[0], "new": self.labels[1]},
            "rules": list(self.rules),
            "settings": dict(self.settings),
            "regressed": self.regressed,
            "env": {key: {"base": base, "new": new} for key, base, new in self.env_changes},
            "tests": {t.nodeid: t.to_json() for t in self.tests if t.changed or t.noise},
            "unchanged": sum(1 for t in self.tests if not t.changed),
            "within_noise": sum(1 for t in self.tests if t.noise and not t.changed),
            "new_tests": list(self.new_tests),
            "vanished_tests": list(self.vanished_tests),
            "regressions": [r.to_json() for r in self.regressions],
            "rule_counts": self.rule_counts(),
            "runs": {"base": self.base_run.to_json(), "new": self.new_run.to_json()},
            "notes": self.notes(),
            **({"cache_keys": self.cache_keys.to_json()} if self.cache_keys is not None else {}),
        }

    def notes(self) -> list[str]:
        """Warnings and notes about the two runs: an incomplete base, completeness not recorded, selections."""
        base_label, new_label = self.labels
        notes = []
        if not self.base_run.complete:
            notes.append(
                f"warning: {base_label} is the record of a run that did not run to its end "
                f"({'; '.join(self.base_run.reasons)}); tests it did not run show as new here, compared with nothing"
            )
        for label, run in ((base_label, self.base_run), (new_label, self.new_run)):
            if not run.recorded:
                status = "no exit status either" if run.exitstatus is None else f"exit status {run.exitstatus}"
                verdict = "complete" if run.complete else "incomplete"
                notes.append(
                    f"note: {label} does not record whether its run ran to its end (an older plugin wrote it); "
                    f"judged {verdict} from its {status}"
                )
        if self.base_run.selection != self.new_run.selection:
            notes.append(
                f"note: the runs selected tests differently ({base_label}: {_selection_text(self.base_run)}; "
                f"{new_label}: {_selection_text(self.new_run)}), so tests one of them left out show as vanished or new"
            )
        return notes + list(self.rule_notes)

    def format_text(self, *, arrow: str = "→", verbose: bool = False) -> str:
        """The side-by-side report: environment diff, one table per changed test, new/vanished, run notes, summary.

        ``verbose`` also lists the differences within noise, marked so, and the tests
        that have nothing else.
        """
        lines = self._env_lines(arrow)
        if self.cache_keys is not None and self.cache_keys.run_wide:
            lines += ["", *run_wide_lines(self.cache_keys.run_wide, self._explain_command())]
        for test in self.tests:
            if test.changed or (verbose and test.noise):
                lines += ["", *self._test_lines(test, verbose)]
        if self.new_tests:
            lines += ["", f"new tests ({len(self.new_tests)}):"] + [f"  {n}" for n in self.new_tests]
        if self.vanished_tests:
            # listed whether or not the vanished rule is selected: a silent gap is how a crash hides
            lines += ["", f"vanished tests ({len(self.vanished_tests)}):"] + [f"  {n}" for n in self.vanished_tests]
        for regression in self.run_regressions:
            if regression.rule != INCOMPLETE_RULE:
                lines.append(f"{regression.rule}: {regression.message}")
        if not self.new_run.complete:
            lines += ["", *self._incomplete_lines()]
        notes = self.notes()
        if notes:
            lines += ["", *notes]
        lines += ["", self.summary_line()]
        return "\n".join(lines)

    def _env_lines(self, arrow: str) -> list[str]:
        lines: list[str] = []
        if self.env_changes:
            lines.append("environment:")
            rows = [[key, _env_text(base), f"{arrow} {_env_text(new)}"] for key, base, new in self.env_changes]
            lines += format_table(rows, indent="  ")
        else:
            lines.append("environment: unchanged")
        if self.env_same:
            lines.append("  same: " + ", ".join(f"{k} {_env_text(v)}" for k, v in self.env_same))
        return lines

    def _test_lines(self, test: TestComparison, verbose: bool = False) -> list[str]:
        base_label, new_label = self.labels
        if test.regressions:
            rules = ", ".join(dict.fromkeys(r.rule for r in test.regressions))
            lines = [f"{test.nodeid}  REGRESSED ({rules})"]
        else:
            lines = [f"{test.nodeid}  {'changed' if test.changed else 'within noise'}"]
        rows = [["metric", base_label, new_label, "change", ""]]
        for change in (*test.changes, *(test.noise if verbose else ())):
            rows.append(
                [
                    change.metric,
                    _value_text(change.metric, change.base),
                    _value_text(change.metric, change.new),
                    _delta_text(change.metric, change.base, change.new),
                    f"<- {change.rule}" if change.rule else "(within noise)" if change in test.noise else "",
                ]
            )
        if len(rows) > 1:
            lines += format_table(rows, indent="  ")
        lines += [f"  {regression.rule}: {regression.message}" for regression in test.regressions]
        lines += [f"  note: {note}" for note in test.notes]
        if test.cache_keys is not None and test.cache_keys.behaviour_changed:
            lines += compare_lines(test.cache_keys, self._explain_command(test.nodeid), self.labels)
        return lines

    def _explain_command(self, nodeid: str | None = None) -> str:
        # a comparison made inside a run (--cudagraph-baseline) has neither paths nor file names
        named = self.labels if self.labels != ("base", "new") else ("BASE.json", "NEW.json")
        base, new = self.sources or named
        return explain_command(base, new, nodeid)

    def _incomplete_lines(self) -> list[str]:
        """INCOMPLETE, why, and what the new run is missing: its tests that never finished, the base's absent ones."""
        base_label, new_label = self.labels
        run = self.new_run
        lines = [
            f"INCOMPLETE: {new_label} is the record of a run that did not run to its end: {'; '.join(run.reasons)}"
        ]
        if run.not_run_count:
            lines.append(f"  not run ({run.not_run_count} of the selected tests):")
            lines += [f"    {nodeid}" for nodeid in run.not_run]
            if run.not_run_count > len(run.not_run):
                lines.append(f"    ... and {run.not_run_count - len(run.not_run)} more (the report lists the first)")
        if self.vanished_tests:
            lines.append(
                f"  absent from it: {_tests(len(self.vanished_tests))} of {base_label} (listed under vanished tests)"
            )
        return lines

    def summary_line(self) -> str:
        changed = [t for t in self.tests if t.changed]
        regressed_tests = [t for t in self.tests if t.regressions]
        text = (
            f"{count_noun(len(self.tests), 'test')} in both reports: {len(changed)} changed, {len(regressed_tests)} regressed; "
            f"{len(self.new_tests)} new, {len(self.vanished_tests)} vanished"
        )
        quiet = sum(1 for t in self.tests if t.noise and not t.changed)
        if quiet:
            text += f"; {quiet} more differ only within noise (--verbose lists them)"
        if self.regressed:
            counts = ", ".join(f"{rule} {n}" for rule, n in self.rule_counts().items())
            return f"REGRESSION: {text} (by rule: {counts})"
        rules = ", ".join(self.rules) if self.rules else "none"
        return f"no regression: {text} (rules checked: {rules})"


# ----------------------------------------------------------------------------
# comparing
# ----------------------------------------------------------------------------


def compare_reports(
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    rules: Iterable[str] | None = None,
    pool_threshold: float = DEFAULT_POOL_THRESHOLD,
    numerics_growth: float = DEFAULT_NUMERICS_GROWTH,
    numerics_floor: float = DEFAULT_NUMERICS_FLOOR,
    include_timings: bool = False,
    labels: tuple[str, str] = ("base", "new"),
    sources: tuple[str, str] | None = None,
    time_threshold: float = DEFAULT_TIME_THRESHOLD,
    time_floor: float = DEFAULT_TIME_FLOOR_S,
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD,
    memory_floor: float = DEFAULT_MEMORY_FLOOR_BYTES,
    instructions_threshold: float = DEFAULT_INSTRUCTIONS_THRESHOLD,
) -> Comparison:
    """Compare two validated reports (``load_report`` output, or ``build_report`` for a live run).

    ``rules`` selects the regression rules (default: DEFAULT_RULES; see the module
    docstring).  Timings (``duration_s``, ``capture_s``) change on every run, so
    they are left out of the tables unless ``include_timings``; no rule reads them.
    ``sources``: the reports' paths as the user gave them, for the ``explain``
    command the text suggests (default: the labels).  ``time_threshold`` and
    ``time_floor`` (seconds) are the time rules' limits, ``memory_threshold`` and
    ``memory_floor`` (bytes) graph-memory's, ``instructions_threshold``
    compile-instructions' (see the module docstring).
    """
    selected = parse_rules(rules)
    limits = _Limits(
        pool_threshold,
        numerics_growth,
        numerics_floor,
        time_threshold,
        time_floor,
        memory_threshold,
        memory_floor,
        instructions_threshold,
    )

    env_changes, env_same = _env_diff(_mapping(base.get("env")), _mapping(new.get("env")))
    base_tests, new_tests = _mapping(base.get("tests")), _mapping(new.get("tests"))
    both = [n for n in base_tests if n in new_tests]
    # only where both runs record lookups: against an earlier plugin's report, compare as before
    keys = diff_reports(base, new) if records_cache_keys(base) and records_cache_keys(new) else None
    tests = tuple(
        _compare_test(n, _mapping(base_tests[n]), _mapping(new_tests[n]), selected, limits, include_timings)
        for n in sorted(both)
    )
    if keys is not None:
        tests = tuple(replace(t, cache_keys=keys.tests.get(t.nodeid)) for t in tests)
    vanished = tuple(sorted(n for n in base_tests if n not in new_tests))
    base_run, new_run = run_completeness(base), run_completeness(new)
    run_regressions: list[Regression] = []
    if "vanished" in selected and vanished:
        run_regressions.append(
            Regression(
                "",
                "vanished",
                f"{_tests(len(vanished))} of the base report did not run (first: {vanished[0]}); "
                f"run the same selection, or drop 'vanished' from --fail-on",
            )
        )
    if not new_run.complete:
        run_regressions.append(_incomplete_regression(new_run, vanished))
    return Comparison(
        env_changes=env_changes,
        env_same=env_same,
        tests=tests,
        new_tests=tuple(sorted(n for n in new_tests if n not in base_tests)),
        vanished_tests=vanished,
        rules=tuple(selected),
        run_regressions=tuple(run_regressions),
        labels=labels,
        settings={
            "pool_threshold": pool_threshold,
            "numerics_growth": numerics_growth,
            "numerics_floor": numerics_floor,
            "time_threshold": time_threshold,
            "time_floor_s": time_floor,
            "memory_threshold": memory_threshold,
            "memory_floor_bytes": memory_floor,
            "instructions_threshold": instructions_threshold,
        },
        base_run=base_run,
        new_run=new_run,
        cache_keys=keys,
        sources=sources,
        rule_notes=_time_rule_notes(selected, tests)
        + _memory_rule_notes(selected, base_tests, new_tests, both)
        + _instruction_rule_notes(selected, tests),
    )


def _incomplete_regression(run: RunCompleteness, vanished: tuple[str, ...]) -> Regression:
    missing = []
    if run.not_run_count:
        missing.append(
            f"{run.not_run_count} selected tests never finished (first: {run.not_run[0] if run.not_run else '?'})"
        )
    if vanished:
        missing.append(f"{_tests(len(vanished))} of the base report are absent")
    return Regression(
        "",
        INCOMPLETE_RULE,
        f"the new run did not run to its end ({'; '.join(run.reasons)})"
        + (f": {', '.join(missing)}" if missing else "")
        + "; run it to its end before trusting the comparison",
    )


@dataclass(frozen=True)
class _Limits:
    pool_threshold: float
    numerics_growth: float
    numerics_floor: float
    time_threshold: float = DEFAULT_TIME_THRESHOLD
    time_floor: float = DEFAULT_TIME_FLOOR_S
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    memory_floor: float = DEFAULT_MEMORY_FLOOR_BYTES
    instructions_threshold: float = DEFAULT_INSTRUCTIONS_THRESHOLD


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _selection_text(run: RunCompleteness) -> str:
    chosen = " ".join(f"{flag} {expression!r}" for flag, expression in run.selection.items()) or "no -k/-m"
    return chosen if run.deselected is None else f"{chosen}, {run.deselected} deselected"


def _env_diff(base: Mapping[str, Any], new: Mapping[str, Any]):
    keys = list(base) + [k for k in new if k not in base]
    changes = tuple((k, base.get(k), new.get(k)) for k in keys if base.get(k) != new.get(k))
    same = tuple((k, base.get(k)) for k in keys if base.get(k) == new.get(k) and base.get(k) is not None)
    return changes, same


def _flatten(prefix: str, value: Any, out: dict[str, Any], include_timings: bool) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            key = str(key)
            if key in _TABLE_SKIP_KEYS or (not include_timings and key.endswith("_s")):
                continue
            _flatten(f"{prefix}.{key}" if prefix else key, item, out, include_timings)
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float, str, bool)) or v is None for v in value):
            out[prefix] = list(value)
        else:
            out[prefix] = f"[{len(value)} items]"
    else:
        out[prefix] = value


# The outcome and the words that go with it: the outcome is compared, its message and
# skip reason are the page's to show (a reworded message is not a change of the test).
_OUTCOME_WORDS = ("outcome", "duration_s", "failure", "skip_reason")
# compared apart (key_diff), not as table rows
_NOT_IN_TABLE = ("cache_keys",)


def _table_values(record: Mapping[str, Any], include_timings: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"outcome": record.get("outcome")}
    if include_timings and "duration_s" in record:
        out["duration_s"] = record.get("duration_s")
    for section in _TABLE_SECTIONS:
        if section in record:
            _flatten(section, record[section], out, include_timings)
    for key, one in keyed_sets(record).items():
        _flatten(f"graphs.{key}", one, out, include_timings)
    for key, value in record.items():  # sections this plugin version does not know
        if key not in out and key not in _TABLE_SECTIONS and key not in _OUTCOME_WORDS and key not in _NOT_IN_TABLE:
            _flatten(key, value, out, include_timings)
    return out


# flag(rule, message, *metrics): the rule fired for this test, on these table metrics
_Flag = Callable[..., None]


def _compare_test(
    nodeid: str,
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    rules: tuple[str, ...],
    limits: _Limits,
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
        _memory_rule(base, new, limits, flag)
    else:  # every set compared with its partner; piecewise and the rest as usual
        _graph_rules({**base, "graphs": {}}, {**new, "graphs": {}}, limits, flag)
        _memory_rule({**base, "graphs": {}}, {**new, "graphs": {}}, limits, flag)
    rows, time_checks = _time_rules(base, new, rules, limits, flag)
    rows += _instruction_rule(base, new, limits, flag, time_checks)
    rule_of: dict[str, str] = {}
    for regression, metrics in regressions:
        for metric in metrics:
            rule_of.setdefault(metric, regression.rule)
    every_change = _changes(base, new, rule_of, include_timings)
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


def _recompile_rules(base_rec: Mapping[str, Any], new_rec: Mapping[str, Any], flag: _Flag) -> None:
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


def _cache_rules(base_caches: Mapping[str, Any], new_caches: Mapping[str, Any], flag: _Flag) -> None:
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


def _within_noise(change: Change, limits: _Limits, released: bool) -> bool:
    return within_noise(
        change.metric,
        change.base,
        change.new,
        numerics_growth=limits.numerics_growth,
        numerics_floor=limits.numerics_floor,
        memory_floor=limits.memory_floor,
        released=released,
    )


def _graph_set_rules(base: Mapping[str, Any], new: Mapping[str, Any], limits: _Limits, flag: _Flag) -> bool:
    """graphs, pool, numerics and graph-memory for each of several graph sets, against its partner.

    Sets pair up by capture sizes and order (``graph_set_key``).  False, so that the
    test's overall figures are compared instead, when either run has one set or
    fewer, or when some set has no partner (``unpaired_set_notes`` says which).
    """
    base_sets, new_sets = keyed_sets(base), keyed_sets(new)
    if not base_sets or not new_sets or set(base_sets) != set(new_sets):
        return False
    for key, base_set in base_sets.items():

        def set_flag(rule: str, message: str, *metrics: str, key: str = key) -> None:
            flag(rule, f"{key}: {message}", *(metric.replace("graphs.", f"graphs.{key}.", 1) for metric in metrics))

        pair_base, pair_new = {"graphs": base_set}, {"graphs": new_sets[key]}
        _graph_rules(pair_base, pair_new, limits, set_flag)
        _memory_rule(pair_base, pair_new, limits, set_flag)
    return True


def _graph_rules(base: Mapping[str, Any], new: Mapping[str, Any], limits: _Limits, flag: _Flag) -> None:
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


# ----------------------------------------------------------------------------
# costs: time (noise-aware, on startup runs) and graph memory
# ----------------------------------------------------------------------------

# rule -> (the figure of a startup pass, its words, where one run's figure lives in a plain record)
_TIME_FIGURES: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {
    "compile-time": ("compile_s", "compile time", (("compile_time", "total_s"),)),
    "capture-time": ("capture_s", "capture time", (("graphs", "capture_s"), ("piecewise", "capture_s"))),
    "startup-time": ("wall_s", "startup wall time", ()),
}
_STARTUP_PASSES = ("cold", "warm")


@dataclass(frozen=True)
class NoisyGrowth:
    """``noisy_growth``'s verdict on one figure: its growth, what the noise allows, and whether it regressed."""

    growth: float
    allowed: float
    regressed: bool


def noisy_growth(base: Mapping[str, Any], new: Mapping[str, Any], threshold: float, floor: float) -> NoisyGrowth | None:
    """Whether a median grew past the noise: ``{"median", "spread", "n"}`` of two runs; None if either has no spread.

    Regressed when ``new.median - base.median > max(threshold * base.median, floor,
    base.trimmed_spread + new.trimmed_spread)``: the growth is larger than both
    runs' ranges together, each without its run farthest from the median (so one
    slow run cannot hide a tripled median), and than the relative threshold and the
    absolute floor.  Fewer than two runs on either side give no spread: None (not
    checked).
    """
    b, n = number(base.get("median"), finite=True), number(new.get("median"), finite=True)
    if b is None or n is None or as_int(base.get("n")) < 2 or as_int(new.get("n")) < 2:
        return None
    spreads = _noise_spread(base) + _noise_spread(new)
    allowed = max(threshold * b, floor, spreads)
    return NoisyGrowth(n - b, allowed, n - b > allowed)


def _instruction_rule(
    base: Mapping[str, Any], new: Mapping[str, Any], limits: _Limits, flag: _Flag, checks: dict[str, str]
) -> list[tuple[str, Any, Any]]:
    """compile-instructions: a cold or warm median of callgrind's compile count grew past the threshold.

    Instructions are deterministic enough that one run per kind is a measurement:
    no spread is needed, only a margin (PyTorch keeps 1.5-2.5 % for its own).
    """
    rows: list[tuple[str, Any, Any]] = []
    base_startup, new_startup = _mapping(base.get("startup")), _mapping(new.get("startup"))
    for kind in _STARTUP_PASSES:
        b = number(_mapping(_mapping(base_startup.get(kind)).get("compile_instructions")).get("median"), finite=True)
        n = number(_mapping(_mapping(new_startup.get(kind)).get("compile_instructions")).get("median"), finite=True)
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


def _instruction_rule_notes(selected: tuple[str, ...], tests: Iterable[TestComparison]) -> tuple[str, ...]:
    """Why compile-instructions checked nothing, where it is selected."""
    if "compile-instructions" not in selected or any(t.time_checks.get("compile-instructions") for t in tests):
        return ()
    return (
        "compile-instructions: not checked, no test in both reports has instruction counts; measure with "
        "pytest-cudagraph startup --instructions",
    )


def _noise_spread(stats: Mapping[str, Any]) -> float:
    """The runs' spread without their outlier (``trimmed_spread``), or their range where a report has only that."""
    trimmed = number(stats.get("trimmed_spread"), finite=True)
    return trimmed if trimmed is not None else number(stats.get("spread"), finite=True) or 0.0


def _time_rules(
    base: Mapping[str, Any], new: Mapping[str, Any], rules: tuple[str, ...], limits: _Limits, flag: _Flag
) -> tuple[list[tuple[str, Any, Any]], dict[str, str]]:
    """compile-time, capture-time, startup-time: (table rows of the medians, how each selected rule went)."""
    rows: list[tuple[str, Any, Any]] = []
    checks: dict[str, str] = {}
    base_startup, new_startup = _mapping(base.get("startup")), _mapping(new.get("startup"))
    for rule, (figure, words, single_run) in _TIME_FIGURES.items():
        if rule not in rules:
            continue
        for kind in _STARTUP_PASSES:
            b = _mapping(_mapping(base_startup.get(kind)).get(figure))
            n = _mapping(_mapping(new_startup.get(kind)).get(figure))
            if not b or not n:
                continue
            verdict = noisy_growth(b, n, limits.time_threshold, limits.time_floor)
            if verdict is None:
                checks.setdefault(rule, "single")
                continue
            checks[rule] = "checked"
            metric = f"startup.{kind}.{figure}.median"
            rows.append((metric, b.get("median"), n.get("median")))
            if verdict.regressed:
                flag(rule, _time_message(kind, words, b, n, verdict, limits), metric)
        if rule not in checks:
            for section, key in single_run:
                if number(_mapping(base.get(section)).get(key)) is not None and (
                    number(_mapping(new.get(section)).get(key)) is not None
                ):
                    checks[rule] = "single"
    return rows, checks


def _time_message(
    kind: str, words: str, base: Mapping[str, Any], new: Mapping[str, Any], verdict: NoisyGrowth, limits: _Limits
) -> str:
    b, n = float(base["median"]), float(new["median"])
    relative = f", {verdict.growth / b:+.0%}" if b > 0 else ""
    return (
        f"{kind} {words} median {b:.3f} s -> {n:.3f} s (+{verdict.growth:.3f} s{relative}; "
        f"{as_int(base.get('n'))} and {as_int(new.get('n'))} runs, spreads without their outlier "
        f"{_noise_spread(base):.3f} s and {_noise_spread(new):.3f} s); allowed +{verdict.allowed:.3f} s, the largest of "
        f"{limits.time_threshold:.0%} of the base, the {limits.time_floor:g} s floor and the two spreads"
    )


def _time_rule_notes(selected: tuple[str, ...], tests: Iterable[TestComparison]) -> tuple[str, ...]:
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
                f"{rule}: not checked for {_tests(single)}, their records hold single runs with no spread; {how}"
            )
        elif not checked:
            notes.append(
                f"{rule}: not checked, no test in both reports has startup runs with a {_TIME_FIGURES[rule][1]}; {how}"
            )
    return tuple(notes)


def _memory_rule_notes(
    selected: tuple[str, ...], base_tests: Mapping[str, Any], new_tests: Mapping[str, Any], both: list[str]
) -> tuple[str, ...]:
    """graph-memory: a note naming the tests whose memory outside the pool it could not vouch for."""
    if "graph-memory" not in selected:
        return ()
    shared = [
        nodeid
        for nodeid in both
        if any(
            _mapping(_mapping(tests[nodeid]).get(section)).get("outside_unreliable")
            for tests in (base_tests, new_tests)
            for section in ("graphs", "piecewise")
        )
    ]
    if not shared:
        return ()
    return (
        f"graph-memory: memory outside the pool not checked for {_tests(len(shared))} (first: {shared[0]}): "
        f"other processes shared the GPU, and the device-wide figures count them; run with one process per GPU",
    )


def _memory_rule(base: Mapping[str, Any], new: Mapping[str, Any], limits: _Limits, flag: _Flag) -> None:
    """graph-memory: every ``*_bytes`` figure of graphs, piecewise and reduce_overhead but graphs.pool_bytes (pool's).

    Memory is deterministic enough for one run: a relative threshold and a floor, no spread.
    """
    for section in ("graphs", "piecewise", "reduce_overhead"):
        base_section, new_section = _mapping(base.get(section)), _mapping(new.get(section))
        # cudaMemGetInfo counted other processes on a shared GPU: those figures are nobody's
        shared = bool(base_section.get("outside_unreliable") or new_section.get("outside_unreliable"))
        for key in new_section:
            if not key.endswith("_bytes") or (section == "graphs" and key == "pool_bytes"):
                continue
            if (shared and key in OUTSIDE_DEVICE_FIGURES) or key in ORDER_DEPENDENT_FIGURES:
                continue
            floor = limits.memory_floor
            if key == "behind_allocator_bytes" and both_released(base_section, new_section):
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


def _changes(
    base: Mapping[str, Any], new: Mapping[str, Any], rule_of: Mapping[str, str], include_timings: bool
) -> tuple[Change, ...]:
    """The side-by-side table: every scalar that differs, marked with the rule that flags it."""
    base_values, new_values = _table_values(base, include_timings), _table_values(new, include_timings)
    changes = []
    for metric in list(base_values) + [m for m in new_values if m not in base_values]:
        b_value, n_value = base_values.get(metric), new_values.get(metric)
        # a field one plugin version adds, holding nothing (0, []), is not a change worth a row
        if metric not in rule_of and _empty(b_value) and _empty(n_value):
            continue
        if b_value != n_value or metric in rule_of:
            changes.append(Change(metric, b_value, n_value, rule_of.get(metric)))
    return tuple(changes)


def _empty(value: Any) -> bool:
    return value is None or (not isinstance(value, bool) and value in (0, "", []))


def _new_reasons(base_rec: Mapping[str, Any], new_rec: Mapping[str, Any]) -> str:
    before = set(map(str, base_rec.get("reasons") or []))
    fresh = [str(r) for r in new_rec.get("reasons") or [] if str(r) not in before]
    if not fresh:
        return ""
    more = f" (and {len(fresh) - 1} more)" if len(fresh) > 1 else ""
    return f"; new guard failure: {clip(fresh[0])}{more}"


# ----------------------------------------------------------------------------
# formatting
# ----------------------------------------------------------------------------


def _env_text(value: Any) -> str:
    return "-" if value is None else str(value)


def _value_text(metric: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        text = ",".join(map(str, value)) if len(value) <= 8 else f"{value[0]}..{value[-1]} ({len(value)})"
        return clip(text, 40)
    if metric.endswith("_bytes") and number(value) is not None:
        return format_bytes(value)
    if ".compile_instructions." in metric and number(value, finite=True) is not None:
        return f"{number(value):,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return clip(value, 40)


def _delta_text(metric: str, base: Any, new: Any) -> str:
    b, n = number(base), number(new)
    if b is None or n is None or isinstance(base, str) or isinstance(new, str):
        return "" if base is not None and new is not None else ("new" if base is None else "gone")
    if math.isnan(b) or math.isnan(n):
        return ""
    if metric.endswith("_bytes"):
        return f"{(n - b) / b:+.1%}" if b else ("+" if n > b else "") + format_bytes(n - b)
    if ".compile_instructions." in metric and b:
        return f"{(n - b) / b:+.2%}"
    if float(b).is_integer() and float(n).is_integer():
        return f"{int(n - b):+d}"
    return f"{n - b:+.3g}"


def _tests(count: int) -> str:
    return f"{count} test{'s' if count != 1 else ''}"
