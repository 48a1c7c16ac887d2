"""The captures a ``GraphSet``'s pool check measures against, and the check built from them.

``GraphSet.pool_check()`` compares the set's pool with what the same function
holds when captured otherwise: each size alone in a fresh pool (its own
high-water mark), every size again largest first into one fresh pool (what the
capture order is judged against) and, once a block was found live, the first size
that left one captured again with allocation stacks recorded (the line that
allocated it).  The set is a ``MeasuredGraphSet``, typed here so that this module
imports nothing of ``graph_set``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from .. import _compat
from .capture_cost import CaptureCost, outside_limit, with_device_bounds
from .captured import CapturedGraph, capture_callable
from .guarded import new_pool
from .memory import PoolId, PoolMeter
from .pool_blocks import read_live_blocks
from .pool_check import PoolCheck, with_block_frames


class MeasuredGraphSet(Protocol):
    """What the measuring captures read of a ``GraphSet``: its function, sizes, options, stream and meter."""

    @property
    def fn(self) -> Callable[..., Any]: ...
    @property
    def sizes(self) -> tuple[int, ...]: ...
    @property
    def capture_order(self) -> tuple[int, ...]: ...
    @property
    def pool_mode(self) -> str: ...
    @property
    def order(self) -> str: ...
    @property
    def keep_outputs(self) -> bool: ...
    @property
    def break_at(self) -> tuple[Any, ...]: ...
    @property
    def device(self) -> int: ...
    @property
    def stream(self) -> torch.cuda.Stream: ...
    @property
    def meter(self) -> PoolMeter: ...
    @property
    def cost(self) -> CaptureCost | None: ...

    def graph(self, size: int) -> CapturedGraph: ...

    def _capture_alone(self, size: int) -> tuple[PoolId, CapturedGraph]: ...


def capture_in_fresh_pool(
    fn: Callable[..., Any],
    static_inputs: Sequence[torch.Tensor],
    stream: torch.cuda.Stream,
    label: str,
    break_at: Sequence[Any] = (),
    keep_outputs: bool = True,
) -> tuple[PoolId, CapturedGraph]:
    """Capture ``fn`` alone into a new pool, to measure its own high-water mark: ``(pool, graph)``."""
    pool = new_pool()
    probe = capture_callable(
        fn,
        static_inputs,
        pool=pool,
        stream=stream,
        warmup_iters=1,
        label=f"{label} (measured alone)",
        keep_outputs=keep_outputs,
        break_at=break_at,
    )
    return pool, probe


class ReleasedGraphs:
    """Graphs captured to be measured, released together."""

    def __init__(self, graphs: Sequence[CapturedGraph]) -> None:
        self.graphs = list(graphs)

    def release(self) -> None:
        for graph in self.graphs:
            graph.release()
        self.graphs.clear()


def capture_largest_first(graph_set: MeasuredGraphSet) -> tuple[PoolId, ReleasedGraphs]:
    """Every size again, largest first, into one fresh pool, outputs released: what the order is judged against."""
    pool = new_pool()
    graphs = []
    for size in sorted(graph_set.sizes, reverse=True):
        graphs.append(
            capture_callable(
                graph_set.fn,
                graph_set.graph(size).static_inputs,
                pool=pool,
                stream=graph_set.stream,
                warmup_iters=1,
                label=f"batch size {size} (captured largest first, to compare)",
                keep_outputs=False,
                break_at=graph_set.break_at,
            )
        )
    return pool, ReleasedGraphs(graphs)


def with_allocating_lines(graph_set: MeasuredGraphSet, check: PoolCheck) -> PoolCheck:
    """The check with the stack of each live block, from one more capture of the first size that left one.

    Allocation stacks cost every allocation a stack walk, so they are recorded
    only here, once something was found live: the size is captured again alone,
    as it was (outputs kept or not), and its live blocks' stacks are matched to
    the blocks found by size.
    """
    size = next(s for s, blocks in check.live if blocks)
    with _compat.allocation_stacks():
        pool, probe = capture_in_fresh_pool(
            graph_set.fn,
            graph_set.graph(size).static_inputs,
            graph_set.stream,
            f"batch size {size}",
            graph_set.break_at,
            keep_outputs=graph_set.keep_outputs,
        )
        traced = read_live_blocks([pool], graph_set.device)
    probe.release()
    torch.cuda.empty_cache()
    return with_block_frames(check, traced)


def measured_pool_check(
    graph_set: MeasuredGraphSet, slack: int | None, outside: int | None, first_use: int | None
) -> PoolCheck:
    """``GraphSet.pool_check()``'s figures: the pool against each size's own mark, the order, the device bounds."""
    __tracebackhide__ = True
    # before any measuring capture
    outside_bytes = None if outside is None else outside_limit(outside)
    first_use_bytes = None if first_use is None else outside_limit(first_use, "first_use")
    check = graph_set.meter.check_against_alone(
        slack,
        graph_set._capture_alone,
        capture_order=graph_set.capture_order,
        pool_mode=graph_set.pool_mode,
        order=graph_set.order,
        keep_outputs=graph_set.keep_outputs,
        capture_largest_first=lambda: capture_largest_first(graph_set),
    )
    if any(rule == "kept alive" for rule, _ in check.causes):
        check = with_allocating_lines(graph_set, check)
    check = with_device_bounds(check, graph_set.cost, outside_bytes, first_use_bytes)
    return check
