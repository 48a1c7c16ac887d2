"""The results of a piecewise-compiled module: its split's figures, a replay check, the report entry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..graphs.capture_cost import CaptureCost, cost_json


@dataclass(frozen=True)
class UncapturedPiece:
    """A piece that runs without a CUDA graph, and why: a splitting op, a CPU input, no CUDA device."""

    piece: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"piece": self.piece, "reason": self.reason}


@dataclass(frozen=True)
class PiecewiseStats:
    """vLLM's figures for one split graph (``compilation_counter`` names in brackets).

    ``pieces`` [num_piecewise_graphs_seen] counts every piece, splitting included;
    ``capturable_pieces`` [num_piecewise_capturable_graphs_seen] the others;
    ``graphs_captured`` is sizes x capturable pieces (0 without CUDA);
    ``backend_compilations`` [num_backend_compilations] the compiles of pieces
    (one per capturable piece for ``fx_split``, one for ``inductor_partition``);
    ``splitting_op_calls`` the eager calls of each splitting op (``"ns::op"`` ->
    count) during the last call; ``uncaptured`` every piece that runs without a
    graph with the reason (:class:`UncapturedPiece`); ``uncaptured_calls`` the calls
    that replayed no graph at all, by reason (a batch above the largest captured size).
    """

    pieces: int
    capturable_pieces: int
    graphs_captured: int
    backend_compilations: int
    splitting_op_calls: Mapping[str, int] = field(default_factory=dict)
    uncaptured: tuple[UncapturedPiece, ...] = ()
    uncaptured_calls: Mapping[str, int] = field(default_factory=dict)

    @property
    def splitting_op_calls_total(self) -> int:
        return sum(self.splitting_op_calls.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "pieces": self.pieces,
            "capturable_pieces": self.capturable_pieces,
            "graphs_captured": self.graphs_captured,
            "backend_compilations": self.backend_compilations,
            "splitting_op_calls": dict(self.splitting_op_calls),
            "splitting_op_calls_total": self.splitting_op_calls_total,
            "uncaptured": [piece.to_json() for piece in self.uncaptured],
            "uncaptured_calls": dict(self.uncaptured_calls),
        }


@dataclass(frozen=True)
class SizeCheck:
    """One batch size of ``check_replay``: the path it took and its worst error."""

    size: int
    path: str  # "captured", "padded to N", "eager"
    max_abs_err: float
    ok: bool


@dataclass(frozen=True)
class PiecewiseReplayCheck:
    """What ``PiecewiseModule.check_replay`` compared: one :class:`SizeCheck` per size."""

    sizes: tuple[SizeCheck, ...]

    @property
    def max_abs_err(self) -> float:
        return max((s.max_abs_err for s in self.sizes), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "max_abs_err": self.max_abs_err,
            "sizes": [{"size": s.size, "path": s.path, "max_abs_err": s.max_abs_err, "ok": s.ok} for s in self.sizes],
        }


@dataclass(frozen=True)
class PiecewiseResult:
    """The report's ``piecewise`` entry for one piecewise-compiled module."""

    strategy: str
    backend: str
    sizes: tuple[int, ...]
    stats: PiecewiseStats
    pool_bytes: int | None = None
    max_abs_err: float | None = None
    capture_s: float | None = None
    cost: CaptureCost | None = None  # per size: warm-up and capture seconds, memory outside the pool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"strategy": self.strategy, "backend": self.backend, "sizes": list(self.sizes)}
        out.update(self.stats.to_json())
        if self.pool_bytes is not None:
            out["pool_bytes"] = self.pool_bytes
        if self.capture_s is not None:
            out["capture_s"] = round(self.capture_s, 6)
        if self.max_abs_err is not None:
            out["max_abs_err"] = self.max_abs_err
        out.update(cost_json(self.cost))
        return out
