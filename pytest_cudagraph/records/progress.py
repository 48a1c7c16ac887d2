"""How far a run got: what it selected, what finished, what crashed or was cut short, and how long each took.

A report is only the record of a run if it says whether the run ran to its end.
The plugin feeds this object from pytest's hooks (in the process that writes the
report: the xdist controller under ``-n``) and writes ``summary_fields()`` into
the report's ``summary``; ``compare`` refuses to call an incomplete run "no
regression".  A run that is one shard of a split suite (pytest-split's
``--splits N --group I``) says which, so that ``pytest-cudagraph merge`` can tell
a missing shard from a finished run; ``durations()`` is what pytest-split needs
to split the next run.  Nothing here imports pytest or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# pytest's exit codes that mean the run did not get through its tests
_EXIT_INTERRUPTED = 2
_EXIT_INTERNAL_ERROR = 3
_EXIT_USAGE_ERROR = 4
# not_run ids kept in the report (report.build_report cuts there too); the count is always exact
NOT_RUN_LIMIT = 100


@dataclass
class RunProgress:
    """Collected, deselected, finished and crashed tests of one run."""

    # node ids selected to run, in collection order (None until collection finished)
    selected: list[str] | None = None
    deselected: int | None = None
    finished: set[str] = field(default_factory=set)
    crashed: dict[str, str] = field(default_factory=dict)
    # "-k"/"-m" expressions that narrowed the run
    selection: dict[str, str] = field(default_factory=dict)
    # set when the run was stopped from outside (SIGTERM; Ctrl-C shows in the exit status)
    interrupted: str | None = None
    # -x/--maxfail (0: no limit) and the failed reports so far, counted as pytest counts them
    maxfail: int = 0
    failures: int = 0
    # --sw (stepwise) stops the run at its first failure, --sw-skip at its second (None: no stepwise)
    stepwise_stop: int | None = None
    # collect reports that failed (a module that does not import, a bad marker argument)
    collection_errors: int = 0
    # one line per crashed xdist worker
    worker_crashes: list[str] = field(default_factory=list)
    # pytest-split's shard: {"group", "splits", "algorithm", "durations_path"} (None: the run is not split)
    shard: dict[str, Any] | None = None
    # tests pytest-split gave to the other groups (None: not counted, e.g. every xdist worker crashed)
    shard_deselected: int | None = None
    # seconds of setup + call + teardown per (node id, xdist worker)
    _seconds: dict[tuple[str, str], float] = field(default_factory=dict)

    def collected(self, nodeids: list[str]) -> None:
        # Under xdist every worker collects the same tests; the first list is the run's.
        if self.selected is None:
            self.selected = list(nodeids)

    def add_deselected(self, count: int) -> None:
        self.deselected = (self.deselected or 0) + count

    def finish(self, nodeid: str) -> None:
        self.finished.add(nodeid)

    def crash(self, nodeid: str, message: str) -> None:
        self.crashed[nodeid] = message
        self.finished.add(nodeid)

    def add_duration(self, nodeid: str, seconds: float, worker: str = "main") -> None:
        """One phase's duration of a test; the phases of one test add up, as pytest-split adds them."""
        key = (nodeid, worker)
        self._seconds[key] = self._seconds.get(key, 0.0) + max(float(seconds), 0.0)

    def durations(self) -> dict[str, float]:
        """Seconds per node id of every test that finished, to the millisecond (pytest-split's durations).

        A test cut short (Ctrl-C in its call) is left out: its time so far would tell
        the next split it is quick.  A test run on several xdist workers (``--dist
        each``) counts its slowest run: each worker ran it once, so the sum would be
        no run's duration.
        """
        slowest: dict[str, float] = {}
        for (nodeid, _worker), seconds in self._seconds.items():
            if nodeid in self.finished:
                slowest[nodeid] = max(slowest.get(nodeid, 0.0), seconds)
        return {nodeid: round(seconds, 3) for nodeid, seconds in slowest.items()}

    def not_run(self) -> list[str]:
        return [nodeid for nodeid in (self.selected or ()) if nodeid not in self.finished]

    def incomplete_reasons(self, exitstatus: int) -> list[str]:
        reasons = []
        missing = self.not_run()
        stopped_by_maxfail = bool(self.maxfail) and self.failures >= self.maxfail
        stopped_by_stepwise = self.stepwise_stop is not None and self.failures >= self.stepwise_stop
        if self.collection_errors:
            errors = self.collection_errors
            reasons.append(f"{errors} error{'s' if errors != 1 else ''} during collection")
        # pytest's "interrupted" status also follows collection errors, -x/--maxfail's stop and
        # --sw's: alone it names an interrupt only where none of them happened
        if self.interrupted or (
            exitstatus == _EXIT_INTERRUPTED
            and not self.collection_errors
            and not stopped_by_maxfail
            and not stopped_by_stepwise
        ):
            reasons.append(f"interrupted ({self.interrupted or 'KeyboardInterrupt'})")
        if exitstatus == _EXIT_INTERNAL_ERROR:
            reasons.append("pytest stopped on an internal error")
        if exitstatus == _EXIT_USAGE_ERROR:
            reasons.append("pytest stopped on a usage error")
        reasons.extend(self.worker_crashes)
        for nodeid, message in self.crashed.items():
            reasons.append(message or f"crashed while running {nodeid}")
        if stopped_by_stepwise and (missing or exitstatus == _EXIT_INTERRUPTED):
            which = "first" if self.stepwise_stop == 1 else "second (--sw-skip)"
            reasons.append(f"stepwise (--sw) stopped the run at its {which} failure")
        elif stopped_by_maxfail and (missing or exitstatus == _EXIT_INTERRUPTED):
            reasons.append(
                f"stopped early by -x/--maxfail after {self.failures} failure{'s' if self.failures != 1 else ''}"
            )
        if missing and not reasons:
            reasons.append(f"{len(missing)} selected tests never finished")
        return reasons

    def summary_fields(self, exitstatus: int) -> dict[str, Any]:
        """The report's ``summary`` fields about completeness (see report.build_report)."""
        reasons = self.incomplete_reasons(exitstatus)
        missing = self.not_run()
        fields: dict[str, Any] = {
            "complete": not reasons,
            "incomplete_reasons": reasons,
            "not_run": missing[:NOT_RUN_LIMIT],
            "not_run_count": len(missing),
        }
        if self.deselected is not None:
            fields["deselected"] = self.deselected
        if self.selection:
            fields["selection"] = dict(self.selection)
        if self.shard is not None:
            fields["shard"] = self.shard_fields()
        return fields

    def shard_fields(self) -> dict[str, Any]:
        """The report's ``summary.shard``: pytest-split's group and how many tests it selected and deselected."""
        shard = dict(self.shard or {})
        if self.selected is not None:
            shard["selected"] = len(self.selected)
        if self.shard_deselected is not None:
            shard["deselected"] = self.shard_deselected
        return shard
