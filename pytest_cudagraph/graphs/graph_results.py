"""What a GraphSet gives back: the outcome of a replay check, and the report's ``graphs`` entry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .capture_cost import CaptureCost, cost_json


@dataclass(frozen=True)
class GraphReplayCheck:
    """Outcome of ``GraphSet.check_replay``: every size and trial agreed with the reference."""

    sizes: tuple[int, ...]
    trials: int
    max_abs_err: float | None
    reference: str
    # why the reference ran one after the replay instead of beside it (None: beside it)
    serial_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sizes": list(self.sizes),
            "trials": self.trials,
            "max_abs_err": self.max_abs_err,
            "reference": self.reference,
        }


@dataclass(frozen=True)
class GraphSetResult:
    """The report's ``graphs`` entry for one GraphSet."""

    sizes: tuple[int, ...]
    captured: int
    pool_bytes: int | None
    largest_graph_bytes: int | None
    max_abs_err: float | None
    capture_s: float
    order: str
    pool: str
    keep_outputs: bool
    cublas_workspace_bytes: int | None
    graph_bytes: Mapping[int, int] | None = None
    pool_check_passed: bool | None = None
    # from the pool check: bytes left allocated across captures, and what the allocator's caching added
    pool_live_bytes: int | None = None
    pool_caching_bytes: int | None = None
    replay_checks: int = 0
    cost: CaptureCost | None = None  # per size: warm-up and capture seconds, memory outside the pool
    static_input_bytes: int | None = None  # the graphs' input buffers, outside the pool
    # a breakable set's break ops, graphs in all, and per size graphs, eager calls, pool (breakable.chain_result)
    breakable: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sizes": list(self.sizes),
            "captured": self.captured,
            "pool_bytes": self.pool_bytes,
            "largest_graph_bytes": self.largest_graph_bytes,
            # NaN stays NaN: the report writer stores it as "nan", and compare flags it
            "max_abs_err": self.max_abs_err,
            "capture_s": round(self.capture_s, 6),
            "order": self.order,
            "pool": self.pool,
            "keep_outputs": self.keep_outputs,
            "cublas_workspace_bytes": self.cublas_workspace_bytes,
            "replay_checks": self.replay_checks,
        }
        if self.graph_bytes:
            out["graph_bytes"] = {str(size): n for size, n in sorted(self.graph_bytes.items())}
        if self.pool_check_passed is not None:
            out["pool_check_passed"] = self.pool_check_passed
            out["pool_live_bytes"] = self.pool_live_bytes
            out["pool_caching_bytes"] = self.pool_caching_bytes
        if self.static_input_bytes is not None:
            out["static_input_bytes"] = self.static_input_bytes
        out.update(cost_json(self.cost))
        if self.breakable is not None:
            out.update(self.breakable)
        return out
