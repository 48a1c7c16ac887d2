"""What a multi-rank run gives back: each rank's result, the run's, and the sentence a failure reads as.

Plain data only (strings, numbers, the GraphSets' report entries), so a rank's
result crosses the process boundary as a pickle and the report is built from
``to_json()``.  Imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InvariantViolation, MisuseError
from ..records.record import merge_graph_sets

# A rank's outcome: its body returned and the process exited cleanly; its body raised; the run's
# time ran out with the rank still busy; the harness stopped it because another rank failed; the
# process died, or hung after its body, without the harness's say.
RANK_OUTCOMES = ("passed", "failed", "timeout", "aborted", "crashed")
# where a rank had got to, as its child process reports it (ranks/child.py)
STAGE_STARTING = "starting"
STAGE_IMPORTING = "importing the body"
STAGE_INITIALISING = "initialising the process group"
STAGE_BODY = "running the body"
STAGE_TEARDOWN = "waiting for the other ranks to finish their bodies"
STAGE_DESTROYING = "destroying the process group"
STAGE_DONE = "done"


@dataclass(frozen=True)
class RankError:
    """The exception a rank's body (or its start-up) raised, as text: it crosses a process boundary."""

    type: str
    message: str
    # the innermost frame of the user's code: "body.py:12 in tp_body `x.item()`"
    where: str | None = None
    traceback: str = ""

    def headline(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "where": self.where}


@dataclass(frozen=True)
class RankResult:
    """One rank of a run: its device, its outcome and what it captured.

    ``graph_sets`` are the report entries (``GraphSetResult.to_json()``) of every
    GraphSet the rank captured through its handle; ``waiting_at`` is where the
    harness found the rank when it stopped it (from a faulthandler dump);
    ``value`` is what the body returned; ``value_error`` says why it is None when
    the body returned something that did not reach the launcher (it could not be
    pickled in the rank, or not rebuilt in the launcher).  Either way the rank's
    outcome stands: the body passed, its value is what is missing.
    """

    rank: int
    device: str
    outcome: str
    stage: str | None = None
    error: RankError | None = None
    waiting_at: str | None = None
    graph_sets: tuple[Mapping[str, Any], ...] = ()
    agreement_checks: int = 0
    placement: Mapping[str, str] = field(default_factory=dict)
    duration_s: float = 0.0
    exitcode: int | None = None
    # when the rank's error was raised (time.time()), to tell the first failure from its echoes
    failed_at: float | None = None
    pid: int | None = None
    value: Any = None
    # the tail of the rank's own stdout and stderr
    output: str = ""
    value_error: str | None = None
    # the ranks' collectives compared before the first replay: exchanges, sizes, collectives, seconds
    collective_alignment: Mapping[str, Any] | None = None

    @property
    def graphs(self) -> dict[str, Any] | None:
        """The rank's GraphSets as one ``graphs`` entry (``record.merge_graph_sets``), or None."""
        return merge_graph_sets([dict(g) for g in self.graph_sets]) if self.graph_sets else None

    @property
    def pool_bytes(self) -> int | None:
        graphs = self.graphs
        return None if graphs is None else graphs.get("pool_bytes")

    @property
    def max_abs_err(self) -> float | None:
        graphs = self.graphs
        return None if graphs is None else graphs.get("max_abs_err")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "device": self.device,
            "outcome": self.outcome,
            "stage": self.stage,
            "error": None if self.error is None else self.error.to_json(),
            "waiting_at": self.waiting_at,
            "agreement_checks": self.agreement_checks,
            "placement": dict(self.placement),
            "duration_s": round(self.duration_s, 4),
            "exitcode": self.exitcode,
        }
        if self.collective_alignment is not None:
            out["collective_alignment"] = dict(self.collective_alignment)
        graphs = self.graphs
        if graphs is not None:
            out["graphs"] = graphs
        return out


@dataclass(frozen=True)
class RanksResult:
    """A run of a body on ``world_size`` ranks: the report's ``ranks`` section.

    ``outcome`` is "passed" when every rank's body returned and every process
    exited cleanly; otherwise "failed" (a rank raised or died) or "timeout", and
    ``message`` says which rank failed first, with its own error, and where the
    others were.  ``first_failure`` is that rank.
    """

    world_size: int
    backend: str
    timeout_s: float
    outcome: str
    per_rank: tuple[RankResult, ...]
    duration_s: float = 0.0
    first_failure: int | None = None
    message: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def values(self) -> list[Any]:
        """What each rank's body returned, by rank.

        MisuseError, naming the rank and why, when a body returned a value that
        did not reach the launcher (the run itself still passed).
        """
        missing = [rank.value_error for rank in self.per_rank if rank.value_error]
        if missing:
            raise MisuseError(
                "; ".join(missing) + "; the ranks passed, but their values are not here: return plain values "
                "(numbers, strings, lists, dicts, tensors) or objects of classes the launcher imports by the same name"
            )
        return [rank.value for rank in self.per_rank]

    def __getitem__(self, rank: int) -> RankResult:
        return self.per_rank[rank]

    def to_json(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "timeout_s": self.timeout_s,
            "outcome": self.outcome,
            "duration_s": round(self.duration_s, 4),
            "first_failure": self.first_failure,
            "message": self.message,
            "per_rank": [rank.to_json() for rank in self.per_rank],
        }


class RanksFailed(InvariantViolation):
    """A multi-rank run did not pass: a rank raised, died, or the run ran out of time.

    ``str()`` names the first failing rank with its own exception type and text, then
    where every other rank was when the harness stopped it; ``.result`` is the
    whole ``RanksResult`` (also in the test's report), ``.error_type`` the first
    failing rank's exception type name (e.g. ``"CaptureError"``).
    """

    def __init__(self, result: RanksResult):
        super().__init__(result.message or "the ranks did not all finish")
        self.result = result
        first = result.per_rank[result.first_failure] if result.first_failure is not None else None
        self.error_type = first.error.type if first is not None and first.error is not None else None


class RankSections:
    """The ``ranks`` section of a test that ran one or more multi-rank bodies (what ``record.set`` takes).

    One run is reported as it is; several as the largest world size, the worst
    outcome, and each run under ``runs``.
    """

    def __init__(self) -> None:
        self.runs: list[RanksResult] = []

    def add(self, result: RanksResult) -> None:
        self.runs.append(result)

    def to_json(self) -> dict[str, Any]:
        if len(self.runs) == 1:
            return self.runs[0].to_json()
        failed = [run for run in self.runs if not run.passed]
        first = failed[0] if failed else self.runs[-1]
        return {
            **first.to_json(),
            "world_size": max(run.world_size for run in self.runs),
            "timeout_s": max(run.timeout_s for run in self.runs),
            "duration_s": round(sum(run.duration_s for run in self.runs), 4),
            "runs": [run.to_json() for run in self.runs],
        }


# ----------------------------------------------------------------------------
# the message
# ----------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _whereabouts(rank: RankResult, first: RankResult | None = None) -> str:
    """Where one of the other ranks was when the run ended, as a clause."""
    name = f"rank {rank.rank}"
    if rank.outcome == "failed" and rank.error is not None:
        if first is not None and first.error is not None and first.error.headline() == rank.error.headline():
            return f"{name} failed too, with the same error"
        return f"{name} failed too: {_clip(_first_line(rank.error.headline()), 300)}"
    if rank.outcome == "crashed":
        return f"{name} {_crash_clause(rank)}"
    if rank.outcome == "passed":
        return f"{name} had finished"
    if rank.stage == STAGE_TEARDOWN:
        return f"{name} had finished its body and was waiting for the other ranks to finish theirs"
    if rank.stage in (None, STAGE_STARTING, STAGE_IMPORTING, STAGE_INITIALISING):
        return f"{name} was still {rank.stage or STAGE_STARTING} (it never reached its body)"
    if rank.waiting_at:
        return f"{name} was waiting {rank.waiting_at}"
    return f"{name} was {rank.stage or 'running'} (no stack could be read)"


def _crash_clause(rank: RankResult) -> str:
    code = rank.exitcode
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
    return f"{how} while {rank.stage or STAGE_STARTING}, without reporting an error"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def failure_message(
    per_rank: Sequence[RankResult], world_size: int, timeout_s: float, first: int | None, timed_out: bool
) -> str:
    """The sentence a failed run reads as: the first failing rank's own error, then where the others were."""
    others = [rank for rank in per_rank if rank.rank != first]
    if first is not None:
        culprit = per_rank[first]
        if culprit.outcome == "crashed" or culprit.error is None:
            head = f"rank {culprit.rank} of {world_size} {_crash_clause(culprit)}"
            if culprit.output.strip():
                head += "; its last output:\n" + _indent(culprit.output.strip()[-2000:])
        else:
            head = f"rank {culprit.rank} of {world_size} failed: {culprit.error.headline()}"
            if culprit.error.where and culprit.error.where not in culprit.error.message:
                head += f"\n  (raised at {culprit.error.where})"
        tail = "; ".join(_whereabouts(rank, culprit) for rank in others)
        if not tail:
            return head
        return f"{head}\nThe harness then stopped the other ranks: {tail}."
    # nobody raised: the run's time ran out (or a rank hung after its body)
    stuck = [rank for rank in per_rank if rank.outcome == "timeout"]
    clauses = []
    for rank in stuck:
        if rank.stage in (STAGE_DESTROYING,):
            clauses.append(
                f"rank {rank.rank} finished its body but did not exit within {timeout_s:g} s: it was waiting "
                f"{rank.waiting_at or 'in destroy_process_group'} (a CUDA graph that captured NCCL work was still "
                f"alive; graphs captured outside the rank handle's capture() must be reset() before the body returns)"
            )
        elif rank.stage == STAGE_TEARDOWN:
            clauses.append(
                f"rank {rank.rank} had finished its body and was waiting for the other ranks to finish theirs"
            )
        elif rank.waiting_at:
            clauses.append(f"rank {rank.rank} did not finish within {timeout_s:g} s; it was waiting {rank.waiting_at}")
        else:
            clauses.append(
                f"rank {rank.rank} did not finish within {timeout_s:g} s; it was {rank.stage or STAGE_STARTING}"
            )
    clauses += [_whereabouts(rank) for rank in per_rank if rank not in stuck]
    hint = (
        "every rank must issue the same collectives in the same order (a collective on one rank only waits "
        "forever); if the body is only slow, raise timeout= (@pytest.mark.cudagraph(timeout=...) or run(timeout=...))"
    )
    if not timed_out:
        hint = "the harness stopped the run"
    return "; ".join(clauses) + f".\n{hint[0].upper()}{hint[1:]}."


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def with_outcome(rank: RankResult, **changes: Any) -> RankResult:
    return replace(rank, **changes)


def value_kind(value: Any) -> str:
    """What a body returned, for a message: ``a mymodule.Thing``, ``a function``."""
    kind = type(value)
    return f"a {kind.__qualname__}" if kind.__module__ == "builtins" else f"a {kind.__module__}.{kind.__qualname__}"


def exception_line(exc: BaseException) -> str:
    """``Type: message``, on one line and clipped."""
    text = " ".join(str(exc).split())
    return _clip(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, 300)
