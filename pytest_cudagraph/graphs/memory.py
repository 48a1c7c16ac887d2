"""Graph-pool accounting from allocator snapshots.

The bytes a CUDA graph pool holds are the ``total_size`` of the allocator
segments whose ``segment_pool_id`` is that pool (``torch.cuda.memory_snapshot()``).
``memory_reserved()`` deltas are not used: ``torch.cuda.graph`` empties the cache
on entry and warm-up on a side stream leaves cached blocks behind, so a delta
mixes the pool with unrelated memory.  A live pool's segments are never returned
by ``empty_cache``, so its reserved bytes are in effect its high-water mark,
rounded up to whole segments.

The rounding is the caching allocator's (c10/cuda/CUDACachingAllocator.cpp):

- a request is rounded up to 512 bytes;
- requests up to 1 MiB come from 2 MiB "small" segments;
- requests between 1 MiB and 10 MiB come from 20 MiB "large" segments;
- bigger requests get a segment of their own, rounded up to 2 MiB.

Those rules say why a shared pool can hold more than its largest graph with
nothing in it alive; ``pool_check`` says what the check fails on instead.  Pure
functions here work on plain segment dicts, so the arithmetic is tested on a CPU.

``PoolMeter`` is the one meter both ``capture.GraphSet`` and the piecewise runtime
use: the pool bytes and the live blocks after each capture size, each size's own
mark, the cuBLAS workspace the first capture puts in the pool, and the ``PoolCheck``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .pool_blocks import (
    LARGE_BUFFER,
    MIN_BLOCK_SIZE,
    MIN_LARGE_ALLOC,
    ROUND_LARGE,
    SMALL_BUFFER,
    SMALL_SIZE,
    LiveBlock,
    live_blocks_from_segments,
)
from .pool_check import PoolCheck, SizeMemory, format_size_table, live_after_capture, segment_growth

# the readings a user may take of a pool (the check is pool_check's)
__all__ = [
    "PoolMeter",
    "PoolUsage",
    "graph_pool_segments",
    "pool_bytes",
    "pool_usage",
]


PoolId = tuple[int, int]
# size -> (the fresh pool it was captured into alone, the graph: anything with ``release()``)
CaptureAlone = Callable[[int], tuple[PoolId, Any]]
# every size captured largest first into one fresh pool, outputs released: (the pool, anything with ``release()``)
CaptureAll = Callable[[], tuple[PoolId, Any]]


def round_request(nbytes: int) -> int:
    """The block size the allocator hands out for a request of ``nbytes``."""
    if nbytes < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    return -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


def segment_size_for(nbytes: int) -> int:
    """Size of the segment a fresh request of ``nbytes`` makes the allocator reserve.

    >>> segment_size_for(4096) == SMALL_BUFFER
    True
    >>> segment_size_for(4 * MIB) == LARGE_BUFFER
    True
    >>> segment_size_for(33 * MIB) == 34 * MIB
    True
    """
    size = round_request(nbytes)
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


# --------------------------------------------------------------------------
# reading pools
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolUsage:
    """What one or more graph pools hold, from an allocator snapshot.

    ``reserved_bytes`` is the pool's footprint (whole segments); ``allocated_bytes``
    the blocks handed out and not freed; ``segment_sizes`` each segment's size.
    """

    pool_ids: tuple[PoolId, ...]
    reserved_bytes: int = 0
    allocated_bytes: int = 0
    segment_sizes: tuple[int, ...] = ()

    @property
    def segments(self) -> int:
        return len(self.segment_sizes)

    def to_json(self) -> dict[str, Any]:
        return {
            "pool_ids": [list(p) for p in self.pool_ids],
            "reserved_bytes": self.reserved_bytes,
            "allocated_bytes": self.allocated_bytes,
            "segments": self.segments,
        }


def _pool_key(value: Any) -> PoolId:
    return (int(value[0]), int(value[1]))


def pool_usage_from_segments(
    segments: Iterable[Mapping[str, Any]], pool_ids: Iterable[PoolId], device: int | None = None
) -> PoolUsage:
    """Sum the snapshot segments that belong to ``pool_ids`` (and ``device``, if given)."""
    wanted = tuple(_pool_key(p) for p in pool_ids)
    wanted_set = set(wanted)
    reserved = allocated = 0
    sizes = []
    for seg in segments:
        if _pool_key(seg.get("segment_pool_id", (0, 0))) not in wanted_set:
            continue
        if device is not None and int(seg.get("device", device)) != device:
            continue
        reserved += int(seg["total_size"])
        allocated += int(seg.get("allocated_size", 0))
        sizes.append(int(seg["total_size"]))
    return PoolUsage(wanted, reserved, allocated, tuple(sorted(sizes, reverse=True)))


def pool_usage(pool_ids: PoolId | Iterable[PoolId], device: int | None = None) -> PoolUsage:
    """Read the allocator now: the segments of ``pool_ids`` (one id or several).

    Example::

        g = torch.cuda.CUDAGraph()
        ...capture...
        pool_usage(g.pool()).reserved_bytes   # the graph's high-water mark, in segments
    """
    from .._compat import memory_snapshot_segments

    if isinstance(pool_ids, tuple) and len(pool_ids) == 2 and all(isinstance(v, int) for v in pool_ids):
        ids: list[PoolId] = [_pool_key(pool_ids)]
    else:
        ids = [_pool_key(p) for p in pool_ids]
    # one pool: let torch filter (2.8+); several: one full snapshot covers them all
    segments = memory_snapshot_segments(ids[0] if len(ids) == 1 else None)
    return pool_usage_from_segments(segments, ids, device)


def pool_bytes(pool_ids: PoolId | Iterable[PoolId], device: int | None = None) -> int:
    """Reserved bytes of one pool (or the sum over several): the reader other modules use."""
    return pool_usage(pool_ids, device).reserved_bytes


def graph_pool_segments(device: int | None = None) -> list[dict]:
    """Every segment that belongs to any graph pool (``segment_pool_id != (0, 0)``).

    PyTorch's cudagraph-tree tests assert this is empty at tear-down; so can a test
    that captured many GraphSets (they must all have been released).
    """
    from .._compat import memory_snapshot_segments

    return [
        seg
        for seg in memory_snapshot_segments(None)
        if _pool_key(seg.get("segment_pool_id", (0, 0))) != (0, 0)
        and (device is None or int(seg.get("device", device)) == device)
    ]


# --------------------------------------------------------------------------
# the pool meter: one set of graph pools, size by size
# --------------------------------------------------------------------------


class PoolMeter:
    """What the graph pools of one capture run hold, per capture size, and their pool check.

    The capturing code adds each pool it captures into (``add_pool``) and calls
    ``after_size`` once a size is captured; the meter reads one allocator snapshot
    and keeps a ``SizeMemory`` row per size, the pools' segments and the blocks
    still allocated in them.  ``release_cublas_workspace`` clears cuBLAS's
    workspaces after the last capture: the bytes and blocks that left the pools
    are the workspace the first capture put there, which the check sets apart.
    ``note_alone`` keeps a size's own high-water mark (that size captured alone
    into a fresh pool).  ``check`` builds the ``PoolCheck``.

    Example::

        meter = PoolMeter(device)
        pool = meter.add_pool(new_pool())
        ...capture the largest size into pool...
        meter.after_size(512, order=0)
        ...capture the other sizes...
        meter.release_cublas_workspace()
        meter.reserved_bytes()   # the pools' footprint, whole segments
    """

    def __init__(self, device: int | None = None) -> None:
        self.device = device
        self.pool_ids: list[PoolId] = []
        self.rows: dict[int, SizeMemory] = {}  # insertion order = capture order
        self.segments_after: dict[int, tuple[int, ...]] = {}
        self.live_after: dict[int, tuple[LiveBlock, ...]] = {}  # blocks allocated right after each capture
        self.graph_bytes: dict[int, int] = {}  # each size alone in a fresh pool
        self.cublas_workspace_bytes: int | None = None  # set by release_cublas_workspace
        self.workspace_addresses: frozenset[int] = frozenset()  # the blocks that release freed

    def add_pool(self, pool: PoolId) -> PoolId:
        """Meter ``pool`` too (a shared pool once, or each separate pool)."""
        self.pool_ids.append(pool)
        return pool

    def _snapshot(self) -> list[dict]:
        from .._compat import memory_snapshot_segments

        # one pool: let torch filter (2.8+); several: one full snapshot covers them all
        return memory_snapshot_segments(self.pool_ids[0] if len(self.pool_ids) == 1 else None)

    def read(self) -> tuple[PoolUsage, tuple[LiveBlock, ...]]:
        """The metered pools now, from one snapshot: their segments, and the blocks allocated in them."""
        if not self.pool_ids:
            return PoolUsage(()), ()
        segments = self._snapshot()
        return (
            pool_usage_from_segments(segments, self.pool_ids, self.device),
            live_blocks_from_segments(segments, self.pool_ids, self.device),
        )

    def usage(self) -> PoolUsage:
        """The metered pools now (nothing before the first pool)."""
        return pool_usage(self.pool_ids, self.device) if self.pool_ids else PoolUsage(())

    def reserved_bytes(self) -> int:
        """Bytes the metered pools reserve now, in whole segments."""
        return self.usage().reserved_bytes

    def after_size(self, size: int, order: int) -> PoolUsage:
        """Record the pools right after ``size`` (the ``order``-th size, 0 = first) was captured."""
        usage, live = self.read()
        self.rows[size] = SizeMemory(size, order, usage.reserved_bytes)
        self.segments_after[size] = usage.segment_sizes
        self.live_after[size] = live
        return usage

    def pool_bytes_after(self) -> dict[int, int | None]:
        """Size -> the pools' bytes right after it was captured, in capture order."""
        return {size: row.pool_bytes_after for size, row in self.rows.items()}

    def release_cublas_workspace(self) -> int:
        """Clear cuBLAS's workspaces and count the bytes that left the metered pools.

        The workspace the first capture put in the pool stays registered with cuBLAS;
        clearing it keeps a later matmul elsewhere from writing into the pool, and the
        blocks it frees are the workspace: the live-block verdict sets them apart.
        """
        from .._compat import clear_cublas_workspaces

        before_usage, before = self.read()
        clear_cublas_workspaces()
        after_usage, after = self.read()
        self.cublas_workspace_bytes = max(0, before_usage.allocated_bytes - after_usage.allocated_bytes)
        still = {b.address for b in after}
        self.workspace_addresses = frozenset(b.address for b in before if b.address not in still)
        return self.cublas_workspace_bytes

    def live_by_size(self, held: frozenset[int] | None = None) -> tuple[tuple[int, tuple[LiveBlock, ...]], ...]:
        """Per size, in capture order: the blocks allocated right after its capture, the workspace's apart.

        ``held``: only the blocks at these addresses (the ones still allocated now).
        """
        live = live_after_capture(list(self.live_after.items()), self.workspace_addresses)
        if held is None:
            return live
        return tuple((size, tuple(b for b in blocks if b.address in held)) for size, blocks in live)

    def note_alone(self, size: int, pool: PoolId) -> int:
        """Record ``size``'s own high-water mark: its graph, captured alone into the fresh ``pool``."""
        usage = pool_usage(pool, self.device)
        self.graph_bytes[size] = usage.reserved_bytes
        row = self.rows.get(size)
        if row is not None:
            self.rows[size] = replace(row, graph_bytes=usage.reserved_bytes)
        return usage.reserved_bytes

    def measure_alone(self, sizes: Iterable[int], capture_alone: CaptureAlone) -> dict[int, int]:
        """Each size's own high-water mark, measuring the sizes not measured yet.

        ``capture_alone(size)`` captures that size alone into a fresh pool and returns
        ``(pool, graph)``; the meter reads the pool, then releases the graph.  The
        measuring pools are given back to the device afterwards.
        """
        wanted = list(sizes)
        todo = [s for s in wanted if s not in self.graph_bytes]
        for size in todo:
            pool, probe = capture_alone(size)
            self.note_alone(size, pool)
            probe.release()
        if todo:
            _give_back_freed_pools()
        return {s: self.graph_bytes[s] for s in wanted}

    def largest_alone_bytes(self, default_size: int, capture_alone: CaptureAlone) -> int:
        """The largest own mark measured; measures ``default_size`` alone if none was."""
        if not self.graph_bytes:
            self.measure_alone([default_size], capture_alone)
        return max(self.graph_bytes.values())

    def largest_measured_size(self) -> int:
        """The size with the largest own mark (the larger size on a tie)."""
        return max(self.graph_bytes, key=lambda s: (self.graph_bytes[s], s))

    def rows_in(self, sizes: Iterable[int], held: frozenset[int] | None = None) -> tuple[SizeMemory, ...]:
        """The rows of ``sizes`` that were recorded, in that order, each with the bytes live after it."""
        live = dict(self.live_by_size(held))
        return tuple(
            replace(self.rows[s], live_bytes=sum(b.size for b in live.get(s, ()))) for s in sizes if s in self.rows
        )

    def check(
        self,
        *,
        largest_size: int,
        largest_graph_bytes: int,
        slack: int | None,
        capture_order: Sequence[int],
        pool_mode: str = "shared",
        order: str = "largest_first",
        keep_outputs: bool = False,
        largest_first_bytes: int | None = None,
    ) -> PoolCheck:
        """The pool check from what the allocator did (``pool_check`` says what fails).

        ``slack`` in bytes adds the user's own budget over the largest graph and the
        workspace; ``largest_first_bytes`` is the same sizes captured largest first
        into a fresh pool, measured where the capture order was otherwise.
        """
        # Captures run with the collector paused, so an output caught in a reference cycle
        # is allocated at a size's reading without anyone holding it: what survives a
        # collection is held.  One snapshot then gives the pools, each pool and what is held.
        gc.collect()
        segments = self._snapshot() if self.pool_ids else []
        usage = pool_usage_from_segments(segments, self.pool_ids, self.device)
        held = frozenset(b.address for b in live_blocks_from_segments(segments, self.pool_ids, self.device))
        first = next(iter(self.segments_after), None)
        growth = segment_growth(self.segments_after[first], usage.segment_sizes) if first is not None else ()
        return PoolCheck(
            pool_bytes=usage.reserved_bytes,
            largest_size=largest_size,
            largest_graph_bytes=largest_graph_bytes,
            cublas_workspace_bytes=self.cublas_workspace_bytes or 0,
            pool_mode=pool_mode,
            order=order,
            keep_outputs=keep_outputs,
            rows=self.rows_in(capture_order, held),
            pools=tuple(
                (p, pool_usage_from_segments(segments, [p], self.device).reserved_bytes) for p in self.pool_ids
            ),
            live=tuple((s, blocks) for s, blocks in self.live_by_size(held) if s in set(capture_order)),
            capture_order=tuple(capture_order),
            largest_first_bytes=largest_first_bytes,
            growth=growth,
            slack_bytes=None if slack is None else int(slack),
        )

    def check_against_alone(
        self,
        slack: int | None,
        capture_alone: CaptureAlone,
        *,
        capture_order: Sequence[int],
        pool_mode: str,
        order: str,
        keep_outputs: bool,
        capture_largest_first: CaptureAll | None = None,
    ) -> PoolCheck:
        """The pool check against the largest size's own mark (``GraphSet.pool_check``).

        Measures the largest size alone when nothing was measured.  Where the sizes
        were not captured largest first and the pool holds more than the largest
        graph and the workspace, ``capture_largest_first()`` captures them all that
        way into a fresh pool, whose bytes are what the order is judged against.
        """
        largest_bytes = self.largest_alone_bytes(max(capture_order), capture_alone)
        check = self.check(
            largest_size=self.largest_measured_size(),
            largest_graph_bytes=largest_bytes,
            slack=slack,
            capture_order=capture_order,
            pool_mode=pool_mode,
            order=order,
            keep_outputs=keep_outputs,
        )
        if check.largest_first or check.caching_bytes == 0 or len(check.pools) > 1 or capture_largest_first is None:
            return check
        pool, graphs = capture_largest_first()
        reference = pool_usage(pool, self.device).reserved_bytes
        graphs.release()
        _give_back_freed_pools()
        return replace(check, largest_first_bytes=reference)

    def size_table(self, capture_order: Sequence[int]) -> str:
        """The per-size table of the recorded sizes (see ``format_size_table``)."""
        return format_size_table(list(self.rows_in(capture_order)))


def _give_back_freed_pools() -> None:
    import torch

    torch.cuda.empty_cache()  # the measuring pools are freeable now; give their segments back
