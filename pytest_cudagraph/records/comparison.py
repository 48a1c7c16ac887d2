"""``compare``'s results: a change, a regression, a run's completeness, one test's comparison, the whole one.

Frozen data with their JSON (``pytest-cudagraph compare --json``), judged by
``pytest_cudagraph.tools.compare`` and worded by ``pytest_cudagraph.render.compare_text``;
the notes about the two runs are here, as the JSON carries them.  Plain data: no torch, no pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .json_values import list_of, mapping_of
from .key_diff import ReportKeyDiff, TestKeyDiff
from .loaded import LoadedReport, given, section_or_empty, typed_report
from .report import INCOMPLETE_EXIT_STATUSES, as_int

__all__ = [
    "COMPARISON_SCHEMA",
    "NOTHING_COMPARED_RULE",
    "Change",
    "Comparison",
    "Regression",
    "RunCompleteness",
    "TestComparison",
    "list_of",
    "mapping_of",
    "run_completeness",
    "run_notes",
    "selection_text",
]

COMPARISON_SCHEMA = "pytest-cudagraph-compare/1"
# Not a --fail-on rule: always on, as ``incomplete`` is.  A comparison of reports that share no test (a wrong
# path, another suite) vouches for nothing, so it is never "no regression".
NOTHING_COMPARED_RULE = "nothing-compared"


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


def run_completeness(report: LoadedReport | Mapping[str, Any]) -> RunCompleteness:
    """What a report's ``summary`` says about its run; an older report is judged by its exit status.

    ``summary.complete`` decides when present.  Without it, exit status 2
    (interrupted), 3 (internal error) or 4 (usage error) means incomplete, and
    anything else complete, with ``recorded`` False so that readers can say so.
    """
    from .schema import Summary

    summary = section_or_empty(typed_report(report).report.summary, Summary)
    exitstatus = given(summary.exitstatus)
    not_run = tuple(given(summary.not_run) or ())
    deselected = given(summary.deselected)
    # the facts read whichever way the run is judged; complete and unrecorded until judged
    facts = RunCompleteness(
        True,
        False,
        not_run=not_run,
        not_run_count=max(as_int(summary.not_run_count), len(not_run)),
        exitstatus=exitstatus,
        deselected=deselected,
        selection=dict(given(summary.selection) or {}),
    )
    complete = given(summary.complete)
    if complete is not None:
        reasons = tuple(given(summary.incomplete_reasons) or ())
        if not complete and not reasons:
            reasons = ("the report says so, without a reason",)
        return replace(facts, complete=complete, recorded=True, reasons=() if complete else reasons)
    if exitstatus in INCOMPLETE_EXIT_STATUSES:
        reason = f"pytest exited with status {exitstatus} ({INCOMPLETE_EXIT_STATUSES[exitstatus]})"
        return replace(facts, complete=False, reasons=(reason,))
    return facts


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
        out: dict[str, Any] = {
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
    """The result of ``compare_reports``: env diff, per-test changes, new and vanished tests.

    Its text is ``render.compare_text``'s; ``tools.compare_results.Comparison``, what
    ``compare_reports`` returns, adds it as ``format_text`` and ``summary_line``.
    """

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
    def nothing_compared(self) -> bool:
        """True when the base has tests and none of them is in the new report: the ``nothing-compared`` regression."""
        return any(r.rule == NOTHING_COMPARED_RULE for r in self.run_regressions)

    @property
    def mostly_vanished(self) -> bool:
        """True when some tests were compared but more than half the base's tests are missing from the new report."""
        return bool(self.tests) and len(self.vanished_tests) > len(self.tests)

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
            "compared": len(self.tests),
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
        """Warnings and notes about the two runs: an incomplete base, completeness not recorded, selections, most
        of the base's tests vanished."""
        notes = run_notes(self.labels, self.base_run, self.new_run)
        if self.mostly_vanished and "vanished" not in self.rules:
            base_tests = len(self.tests) + len(self.vanished_tests)
            notes.append(
                f"warning: {len(self.vanished_tests)} of the {base_tests} tests of {self.labels[0]} vanished, so most "
                "of it was not compared; run the same selection, or add vanished to --fail-on to fail on it"
            )
        return notes + list(self.rule_notes)


def run_notes(labels: tuple[str, str], base_run: RunCompleteness, new_run: RunCompleteness) -> list[str]:
    """Warnings and notes about the two runs: an incomplete base, completeness not recorded, selections."""
    base_label, new_label = labels
    notes: list[str] = []
    if not base_run.complete:
        notes.append(
            f"warning: {base_label} is the record of a run that did not run to its end "
            f"({'; '.join(base_run.reasons)}); tests it did not run show as new here, compared with nothing"
        )
    for label, run in ((base_label, base_run), (new_label, new_run)):
        if not run.recorded:
            status = "no exit status either" if run.exitstatus is None else f"exit status {run.exitstatus}"
            verdict = "complete" if run.complete else "incomplete"
            notes.append(
                f"note: {label} does not record whether its run ran to its end (an older plugin wrote it); "
                f"judged {verdict} from its {status}"
            )
    if base_run.selection != new_run.selection:
        notes.append(
            f"note: the runs selected tests differently ({base_label}: {selection_text(base_run)}; "
            f"{new_label}: {selection_text(new_run)}), so tests one of them left out show as vanished or new"
        )
    return notes


def selection_text(run: RunCompleteness) -> str:
    """How a run selected its tests: ``-k 'decode', 3 deselected``; ``no -k/-m`` when it did not."""
    chosen = " ".join(f"{flag} {expression!r}" for flag, expression in run.selection.items()) or "no -k/-m"
    return chosen if run.deselected is None else f"{chosen}, {run.deselected} deselected"
