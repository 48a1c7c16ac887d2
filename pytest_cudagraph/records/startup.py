"""The startup benchmark's results: one run's sample, the statistics of some runs, a node id's runs, the whole benchmark.

Per kind of run (cold, warm) the statistic is the **median** over the runs and the
noise is their **median absolute deviation** (``mad``), which fewer than half the
runs cannot widen however slow they are (``compare`` allows ``NOISE_MADS`` of it per
side, and sets aside the runs farther than that from the median); the **spread**,
max - min, and the spread one outlier cannot move (``trimmed_spread``) stay beside
it for people and for older readers; a ``StartupResult`` is written as a report whose
records carry a ``startup`` section (``to_report``), and its table is
``render.startup_text``'s; ``pytest-cudagraph startup`` (``tools.startup_cost``)
measures them.  Plain data: no torch, no pytest.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .report import build_report

__all__ = [
    "FIGURES",
    "MAD",
    "NOISE_MADS",
    "ORDER",
    "PASSES",
    "SPREAD",
    "STATISTIC",
    "TRIMMED_SPREAD",
    "NodeStartup",
    "RunSample",
    "StartupResult",
    "Stats",
    "median_absolute_deviation",
    "outlying_runs",
    "trimmed_spread",
]

STATISTIC = "median"
SPREAD = "max - min"
TRIMMED_SPREAD = "max - min of the runs without the one farthest from the median (3 runs or more)"
MAD = "the median of the runs' distances from their median"
# A run within this many median absolute deviations of its median is ordinary noise (for normal noise,
# about two standard deviations); ``compare`` allows that much per side, and sets the runs beyond aside.
NOISE_MADS = 3.0
ORDER = "cold 1, warm 1, cold 2, warm 2, ...: a warm run reuses the compile caches of cold run 1"
PASSES = ("cold", "warm")
# the figures of one run, in the order the table prints them
FIGURES = ("wall_s", "duration_s", "compile_s", "capture_s", "compile_instructions")
_FIGURE_WORDS = {
    "wall_s": "the child process, start to exit",
    "duration_s": "the test (setup + call + teardown)",
    "compile_s": "torch.compile, all phases",
    "capture_s": "CUDA graph capture",
    "compile_instructions": "instructions torch.compile executed (callgrind)",
}


@dataclass(frozen=True)
class RunSample:
    """One child run: its kind (cold/warm), exit status, and what it measured (None: not measured)."""

    kind: str
    index: int
    exitcode: int | None
    wall_s: float
    outcome: str | None = None
    duration_s: float | None = None
    compile_s: float | None = None
    capture_s: float | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    # instructions torch.compile executed in the run, counted by callgrind (startup --instructions)
    compile_instructions: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def figure(self, name: str) -> float | None:
        value: float | None = getattr(self, name)  # one of the measured fields above
        return value

    def to_json(self) -> dict[str, Any]:
        return {
            "pass": self.kind,
            "index": self.index,
            "exitcode": self.exitcode,
            "outcome": self.outcome,
            "wall_s": round(self.wall_s, 4),
            "duration_s": _rounded(self.duration_s),
            "compile_s": _rounded(self.compile_s),
            "capture_s": _rounded(self.capture_s),
            "phases": {name: round(value, 4) for name, value in self.phases.items()},
            "error": self.error,
            **({"compile_instructions": self.compile_instructions} if self.compile_instructions is not None else {}),
        }


@dataclass(frozen=True)
class Stats:
    """The median of some runs' figure, with their spread (max - min), the spread one outlier cannot move, and count."""

    median: float
    min: float
    max: float
    n: int
    # max - min without the run farthest from the median (3 runs or more; the full range below that)
    trimmed_spread: float | None = None
    # the median of the runs' distances from their median: fewer than half the runs cannot widen it
    mad: float | None = None

    @property
    def spread(self) -> float:
        return self.max - self.min

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stats | None:
        """The statistics of the figures measured (finite, not None); None when there are none."""
        finite = [v for v in values if v is not None and math.isfinite(v)]
        if not finite:
            return None
        median = statistics.median(finite)
        return cls(
            median,
            min(finite),
            max(finite),
            len(finite),
            trimmed_spread(finite, median),
            median_absolute_deviation(finite, median),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "median": round(self.median, 4),
            "min": round(self.min, 4),
            "max": round(self.max, 4),
            "spread": round(self.spread, 4),
            "trimmed_spread": round(self.spread if self.trimmed_spread is None else self.trimmed_spread, 4),
            **({"mad": round(self.mad, 4)} if self.mad is not None else {}),
            "n": self.n,
        }


def trimmed_spread(values: list[float], median: float) -> float:
    """max - min of the runs without the one farthest from the median; the full range of fewer than 3 runs.

    One slow run (the first cold run on a fresh machine) would otherwise widen the
    range by as much as it is slow, and a range that wide hides a real regression.
    """
    if len(values) < 3:
        return max(values) - min(values)
    rest = sorted(values, key=lambda v: abs(v - median))[:-1]
    return max(rest) - min(rest)


def median_absolute_deviation(values: list[float], median: float) -> float:
    """The median of the values' distances from ``median``: two slow runs of five move it no further than the
    third-farthest run, where they widen the range (and the trimmed range) by as much as they are slow."""
    return statistics.median(abs(value - median) for value in values)


def outlying_runs(runs: Iterable[tuple[int, float]], median: float, mad: float) -> list[tuple[int, float]]:
    """The (index, value) of the runs farther than ``NOISE_MADS`` median absolute deviations from the median."""
    return [(index, value) for index, value in runs if abs(value - median) > NOISE_MADS * mad]


@dataclass(frozen=True)
class NodeStartup:
    """Every run of one node id, and the sections of its first cold run's record worth keeping."""

    nodeid: str
    runs: int
    samples: tuple[RunSample, ...]
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # graphs / piecewise of the first cold run's record: memory is deterministic-ish, one run is enough
    sections: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    # what stopped the runs from outside (Ctrl-C, SIGTERM), one sentence; None when nothing did
    interrupted: str | None = None

    @property
    def complete(self) -> bool:
        return (
            not self.errors
            and self.interrupted is None
            and all(len(self.of_kind(kind)) == self.runs for kind in PASSES)
        )

    def of_kind(self, kind: str) -> list[RunSample]:
        return [s for s in self.samples if s.kind == kind and s.ok]

    def stats(self, kind: str, figure: str) -> Stats | None:
        return Stats.of(s.figure(figure) for s in self.of_kind(kind))

    def phase_stats(self, kind: str) -> dict[str, Stats]:
        names = list(dict.fromkeys(name for s in self.of_kind(kind) for name in s.phases))
        out: dict[str, Stats] = {}
        for name in names:
            stats = Stats.of(s.phases.get(name) for s in self.of_kind(kind))
            if stats is not None:
                out[name] = stats
        return out

    def warm_over_cold(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for figure in FIGURES:
            cold, warm = self.stats("cold", figure), self.stats("warm", figure)
            if cold is not None and warm is not None and cold.median > 0:
                out[figure] = round(warm.median / cold.median, 4)
        return out

    @property
    def outcome(self) -> str:
        outcomes = [s.outcome for s in self.samples]
        for worst in ("crashed", "error", "failed"):
            if worst in outcomes:
                return worst
        if any(s.error for s in self.samples):
            return "error"
        return next((o for o in outcomes if o), "passed")

    def to_record(self) -> dict[str, Any]:
        section: dict[str, Any] = {
            "runs": self.runs,
            "complete": self.complete,
            "statistic": STATISTIC,
            "spread": SPREAD,
            "trimmed_spread": TRIMMED_SPREAD,
            "mad": MAD,
            "order": ORDER,
            "command": list(self.command),
        }
        for kind in PASSES:
            part: dict[str, Any] = {"runs": len(self.of_kind(kind))}
            for figure in FIGURES:
                stats = self.stats(kind, figure)
                if stats is not None:
                    part[figure] = stats.to_json()
            phases = self.phase_stats(kind)
            if phases:
                part["phases"] = {name: stats.to_json() for name, stats in phases.items()}
            part["samples"] = [s.to_json() for s in self.samples if s.kind == kind]
            section[kind] = part
        section["warm_over_cold"] = self.warm_over_cold()
        section["errors"] = list(self.errors)
        section["notes"] = list(self.notes)
        if self.interrupted is not None:
            section["interrupted"] = self.interrupted
        record: dict[str, Any] = {"outcome": self.outcome, **self.sections, "startup": section}
        if self.errors:
            record["failure"] = {"when": "startup", "message": self.errors[0]}
        return record


@dataclass(frozen=True)
class StartupResult:
    """The startup benchmark of some node ids: what ``pytest-cudagraph startup`` writes and prints."""

    nodes: tuple[NodeStartup, ...]
    env: Mapping[str, Any] = field(default_factory=dict)
    # what stopped the benchmark from outside (Ctrl-C, SIGTERM), one sentence; None when nothing did
    interrupted: str | None = None
    # node ids the interrupt left without one finished run: not among the report's tests, listed as not run
    not_run: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.interrupted is None and not self.not_run and all(node.complete for node in self.nodes)

    @property
    def errors(self) -> list[str]:
        """Every run that did not pass, and what interrupted the benchmark, one sentence each."""
        out = [error for node in self.nodes for error in node.errors]
        return out + ([self.interrupted] if self.interrupted is not None else [])

    def to_report(self) -> dict[str, Any]:
        """A pytest-cudagraph/1 report: one record per node id measured, with its ``startup`` section."""
        reasons = self.errors or [
            f"{node.nodeid}: {len(node.of_kind('cold'))} cold and {len(node.of_kind('warm'))} warm runs "
            f"of the {node.runs} asked for"
            for node in self.nodes
            if not node.complete
        ]
        run: dict[str, Any] = {"complete": self.complete, "incomplete_reasons": reasons}
        if self.not_run:
            run["not_run"] = list(self.not_run)
        return build_report(
            self.env,
            {node.nodeid: node.to_record() for node in self.nodes},
            exitstatus=0 if self.complete else 1,
            run=run,
        )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
