"""A ``GraphSet``'s report entry and its release: the figures measured so far, then the graphs freed and what came back.

``graph_set_result`` builds the set's ``GraphSetResult`` (nothing new is
measured); ``release_and_record`` frees the graphs and their pool(s), reads what the
device got back, and adds the entry to the test's record.  The set is a
``ReleasedGraphSet``, typed here so that this module imports nothing of ``graph_set``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import torch

from .. import _compat
from ..records.record import TestRecord
from .breakable import chain_result
from .capture_cost import CaptureCost, release_reading
from .captured import CapturedGraph
from .graph_results import GraphSetResult
from .memory import PoolMeter
from .pool_check import PoolCheck


class ReleasedGraphSet(Protocol):
    """What a ``GraphSet``'s report entry and release read and set."""

    graphs: dict[int, CapturedGraph]
    cost: CaptureCost | None
    _result: GraphSetResult | None

    @property
    def sizes(self) -> tuple[int, ...]: ...
    @property
    def pool_bytes(self) -> int: ...
    @property
    def meter(self) -> PoolMeter: ...
    @property
    def capture_s(self) -> float: ...
    @property
    def order(self) -> str: ...
    @property
    def pool_mode(self) -> str: ...
    @property
    def keep_outputs(self) -> bool: ...
    @property
    def cublas_workspace_bytes(self) -> int | None: ...
    @property
    def device(self) -> int: ...
    @property
    def record(self) -> TestRecord | None: ...


def graph_set_result(
    graph_set: ReleasedGraphSet, check: PoolCheck | None, max_abs_err: float | None, replay_checks: int
) -> GraphSetResult:
    """The report entry of ``graph_set``, with its last pool check, worst replay error and replay checks."""
    return GraphSetResult(
        sizes=graph_set.sizes,
        captured=len(graph_set.graphs),
        pool_bytes=graph_set.pool_bytes if graph_set.graphs else None,
        largest_graph_bytes=max(graph_set.meter.graph_bytes.values()) if graph_set.meter.graph_bytes else None,
        max_abs_err=max_abs_err,
        capture_s=graph_set.capture_s,
        order=graph_set.order,
        pool=graph_set.pool_mode,
        keep_outputs=graph_set.keep_outputs,
        cublas_workspace_bytes=graph_set.cublas_workspace_bytes,
        graph_bytes=dict(graph_set.meter.graph_bytes) or None,
        pool_check_passed=None if check is None else check.passed,
        pool_live_bytes=None if check is None else check.live_bytes,
        pool_caching_bytes=None if check is None else check.caching_bytes,
        replay_checks=replay_checks,
        cost=graph_set.cost,
        breakable=chain_result(graph_set),
        static_input_bytes=sum(
            t.untyped_storage().nbytes() for g in graph_set.graphs.values() for t in g.static_inputs if t.is_cuda
        )
        if graph_set.graphs
        else None,
    )


def release_and_record(graph_set: ReleasedGraphSet, result: GraphSetResult) -> None:
    """Free the graphs and their pool(s), the release's reading added to ``result``, and record it once."""
    # What comes back is what the set held: read the device before and after the
    # graphs go, each time with the allocator's cached blocks given back first.
    # A reading that fails (a sticky CUDA error) costs the figure, never the release
    # or the record.
    before = _settled_reading(graph_set.device)
    try:
        for captured in graph_set.graphs.values():
            captured.release()
        graph_set.graphs.clear()
    finally:
        # released pools are only "freeable": give their segments back to the device
        after = _settled_reading(graph_set.device) if before is not None else None
        if graph_set.cost is not None and after is not None:
            graph_set.cost = graph_set.cost.released(release_reading(graph_set.device, before, after))
            result = graph_set._result = replace(result, cost=graph_set.cost)
        if graph_set.record is not None and result.captured:
            graph_set.record.add_graph_set(result)


def _settled_reading(device: int) -> tuple[int, int] | None:
    """``(free, reserved)`` once the device is idle and the allocator's cached blocks are given back.

    None when the device cannot be read (an earlier CUDA error the synchronize reports).
    """
    try:
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        return _compat.device_memory_reading(device)
    except RuntimeError:
        return None
