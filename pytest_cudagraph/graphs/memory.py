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

The pool check's slack is derived from those rules (``derive_slack``) instead of
being guessed.  Pure functions here work on plain segment dicts, so the
arithmetic and the table are tested on a CPU.

``PoolMeter`` is the one meter both ``capture.GraphSet`` and the piecewise runtime
use: the pool bytes after each capture size, each size's own mark, the cuBLAS
workspace the first capture puts in the pool, and the ``PoolCheck``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..text import MIB, format_bytes, format_table

# what check_pool returns and the readings a user may take of a pool
__all__ = [
    "PoolCheck",
    "PoolMeter",
    "PoolUsage",
    "SizeMemory",
    "Slack",
    "derive_slack",
    "graph_pool_segments",
    "pool_bytes",
    "pool_usage",
]


MIN_BLOCK_SIZE = 512  # kMinBlockSize: every request is rounded up to this
SMALL_SIZE = 1 * MIB  # kSmallSize: largest request served from small segments
SMALL_BUFFER = 2 * MIB  # kSmallBuffer: size of a small segment
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc: from here a request gets its own segment
LARGE_BUFFER = 20 * MIB  # kLargeBuffer: size of a large segment for 1-10 MiB requests
ROUND_LARGE = 2 * MIB  # kRoundLarge: rounding of a request's own segment

PoolId = tuple[int, int]
# size -> (the fresh pool it was captured into alone, the graph: anything with ``release()``)
CaptureAlone = Callable[[int], tuple[PoolId, Any]]


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


def segment_class(total_size: int) -> str:
    """``'small'`` (2 MiB), ``'large'`` (20 MiB) or ``'own'`` (one big request's segment)."""
    if total_size == SMALL_BUFFER:
        return "small"
    if total_size == LARGE_BUFFER:
        return "large"
    return "own"


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
        ids = [_pool_key(p) for p in pool_ids]  # type: ignore[union-attr]
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
# the pool check: slack, per-size table, message
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Slack:
    """Bytes a shared pool may hold beyond the largest graph, and where they come from."""

    nbytes: int
    parts: tuple[str, ...] = ()

    def describe(self) -> str:
        return " + ".join(self.parts) if self.parts else "none"


def given_slack(nbytes: int) -> Slack:
    """A slack the caller gave in bytes (``check_pool(slack=...)``)."""
    return Slack(int(nbytes), (f"{format_bytes(int(nbytes))} given",))


def derive_slack(largest_graph_segments: Sequence[int]) -> Slack:
    """One more segment of each kind the largest graph's pool uses.

    Capturing smaller graphs into the pool the largest one left behind reuses its
    freed blocks, but a block split for one size may be too small for the next
    size's request of the same kind; the allocator then reserves one more segment
    of that kind: 2 MiB for small requests, 20 MiB for 1-10 MiB requests, and for a
    request with its own segment at most the 2 MiB it is rounded up by.  A second
    copy of a whole activation is not forgiven: that is what outputs kept alive or
    smallest-first capture cost.

    >>> derive_slack([20 * MIB, 2 * MIB]).nbytes == 22 * MIB
    True
    """
    classes = {segment_class(size) for size in largest_graph_segments}
    parts = []
    nbytes = 0
    if "small" in classes:
        nbytes += SMALL_BUFFER
        parts.append("one 2 MiB small segment")
    if "large" in classes:
        nbytes += LARGE_BUFFER
        parts.append("one 20 MiB large segment")
    if "own" in classes:
        nbytes += ROUND_LARGE
        parts.append("2 MiB rounding of one big request")
    return Slack(nbytes, tuple(parts))


@dataclass(frozen=True)
class SizeMemory:
    """One row of the per-size table: a capture size and what its capture cost."""

    size: int
    order: int  # position in capture order, 0 = captured first
    pool_bytes_after: int | None  # all pools of the set, right after this size was captured
    graph_bytes: int | None = None  # this size alone in a fresh pool (measured on request)

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "order": self.order,
            "pool_bytes_after": self.pool_bytes_after,
            "graph_bytes": self.graph_bytes,
        }


def format_size_table(rows: Sequence[SizeMemory], limit_rows: int = 24) -> str:
    """The per-size table in capture order: growth of the pool and each size's own mark.

    Rows where the pool did not grow are elided in long tables, so the table shows
    where memory went.
    """
    header = ("#", "size", "pool after", "growth", "alone")
    body: list[tuple[str, ...]] = []
    previous = 0
    ordered = sorted(rows, key=lambda r: r.order)
    growth_rows = []
    for row in ordered:
        growth = None if row.pool_bytes_after is None else row.pool_bytes_after - previous
        if row.pool_bytes_after is not None:
            previous = row.pool_bytes_after
        growth_rows.append((row, growth))
    shown = growth_rows
    elided = 0
    if len(growth_rows) > limit_rows:
        shown = [(r, g) for r, g in growth_rows if g != 0 or r.order == 0 or r.graph_bytes is not None]
        shown = shown[:limit_rows]
        elided = len(growth_rows) - len(shown)
    for row, growth in shown:
        body.append(
            (
                str(row.order + 1),
                str(row.size),
                format_bytes(row.pool_bytes_after),
                "-" if growth is None else ("+" + format_bytes(growth) if growth > 0 else "0"),
                format_bytes(row.graph_bytes),
            )
        )
    table = [header, *body]
    lines = format_table(table, align=">>>>>")
    if elided:
        lines.append(f"({elided} sizes where the pool did not grow are not shown)")
    return "\n".join(lines)


@dataclass(frozen=True)
class PoolCheck:
    """The outcome of ``GraphSet.check_pool``: the bound, its parts and the per-size rows."""

    pool_bytes: int
    largest_size: int
    largest_graph_bytes: int
    cublas_workspace_bytes: int
    slack: Slack
    pool_mode: str
    order: str
    keep_outputs: bool
    rows: tuple[SizeMemory, ...] = field(default_factory=tuple)
    # check_pool(outside=BYTES): the bound on the captures' memory behind the allocator
    # (capture_cost.OutsideCheck); check_pool(first_use=BYTES): the warm-ups' (FirstUseCheck)
    outside: Any = None
    first_use: Any = None

    @property
    def limit(self) -> int:
        return self.largest_graph_bytes + self.cublas_workspace_bytes + self.slack.nbytes

    @property
    def pool_passed(self) -> bool:
        return self.pool_bytes <= self.limit

    @property
    def device_checks(self) -> tuple[Any, ...]:
        """The bounds on memory behind the allocator that were asked for (outside, first use)."""
        return tuple(check for check in (self.outside, self.first_use) if check is not None)

    @property
    def passed(self) -> bool:
        """Nothing failed: the pool within its bound, and memory behind the allocator within ``outside``/``first_use``.

        A bound that could give no verdict does not fail the pool check
        (``raise_if_failed`` raises MisuseError for it); its ``passed`` is None.
        """
        return self.pool_passed and all(check.passed is not False for check in self.device_checks)

    def message(self) -> str:
        """What failed: the pool's sentence and table, the device bounds', or both."""
        parts = [] if self.pool_passed else [self.pool_message()]
        parts.extend(check.message() for check in self.device_checks if check.passed is not True)
        return "\n".join(parts)

    def raise_if_failed(self, prefix: str = "") -> None:
        """InvariantViolation with ``message()`` when the check failed; MisuseError when the only
        trouble is that a device bound could give no verdict (the GPU is not this process's alone)."""
        __tracebackhide__ = True
        from ..errors import InvariantViolation, MisuseError

        if not self.passed:
            raise InvariantViolation(prefix + self.message())
        no_verdict = [check for check in self.device_checks if check.passed is None]
        if no_verdict:
            raise MisuseError(prefix + no_verdict[0].message())

    def pool_message(self) -> str:
        hints = []
        if self.pool_mode != "shared":
            hints.append("share one pool (pool='shared')")
        if self.order != "largest_first":
            hints.append("capture the largest size first (order='largest_first')")
        if self.keep_outputs:
            hints.append("drop each size's outputs after capture (keep_outputs=False)")
        what_to_try = (
            "try: " + "; ".join(hints)
            if hints
            else "look for tensors the captured function keeps alive across captures (caches, "
            "lists of outputs), or allocations that only smaller sizes make"
        )
        return (
            f"the graph pool holds {format_bytes(self.pool_bytes)}, more than the largest graph's "
            f"high-water mark (batch size {self.largest_size}: {format_bytes(self.largest_graph_bytes)}) "
            f"+ cuBLAS workspace {format_bytes(self.cublas_workspace_bytes)} "
            f"+ slack {format_bytes(self.slack.nbytes)} ({self.slack.describe()}) "
            f"= {format_bytes(self.limit)} "
            f"(pool={self.pool_mode!r}, order={self.order!r}, keep_outputs={self.keep_outputs}); "
            f"{what_to_try}.\n" + format_size_table(self.rows)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pool_bytes": self.pool_bytes,
            "limit_bytes": self.limit,
            "largest_size": self.largest_size,
            "largest_graph_bytes": self.largest_graph_bytes,
            "cublas_workspace_bytes": self.cublas_workspace_bytes,
            "slack_bytes": self.slack.nbytes,
            "passed": self.passed,
            **({"outside": self.outside.to_json()} if self.outside is not None else {}),
            **({"first_use": self.first_use.to_json()} if self.first_use is not None else {}),
        }


# --------------------------------------------------------------------------
# the pool meter: one set of graph pools, size by size
# --------------------------------------------------------------------------


class PoolMeter:
    """What the graph pools of one capture run hold, per capture size, and their pool check.

    The capturing code adds each pool it captures into (``add_pool``) and calls
    ``after_size`` once a size is captured; the meter reads the allocator snapshot
    (``pool_usage``) and keeps a ``SizeMemory`` row per size.  ``release_cublas_workspace``
    clears cuBLAS's workspaces after the last capture and counts the bytes that left the
    pools: the workspace the first capture put there, which the pool check allows for.
    ``note_alone`` keeps a size's own high-water mark (that size captured alone into a
    fresh pool).  ``check`` builds the ``PoolCheck``.

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
        self.graph_bytes: dict[int, int] = {}  # each size alone in a fresh pool
        self.alone_segments: dict[int, list[int]] = {}
        self.cublas_workspace_bytes: int | None = None  # set by release_cublas_workspace

    def add_pool(self, pool: PoolId) -> PoolId:
        """Meter ``pool`` too (a shared pool once, or each separate pool)."""
        self.pool_ids.append(pool)
        return pool

    def usage(self) -> PoolUsage:
        """The metered pools now (nothing before the first pool)."""
        return pool_usage(self.pool_ids, self.device) if self.pool_ids else PoolUsage(())

    def reserved_bytes(self) -> int:
        """Bytes the metered pools reserve now, in whole segments."""
        return self.usage().reserved_bytes

    def after_size(self, size: int, order: int) -> PoolUsage:
        """Record the pools right after ``size`` (the ``order``-th size, 0 = first) was captured."""
        usage = self.usage()
        self.rows[size] = SizeMemory(size, order, usage.reserved_bytes)
        self.segments_after[size] = usage.segment_sizes
        return usage

    def pool_bytes_after(self) -> dict[int, int | None]:
        """Size -> the pools' bytes right after it was captured, in capture order."""
        return {size: row.pool_bytes_after for size, row in self.rows.items()}

    def release_cublas_workspace(self) -> int:
        """Clear cuBLAS's workspaces and count the bytes that left the metered pools.

        The workspace the first capture put in the pool stays registered with cuBLAS;
        clearing it keeps a later matmul elsewhere from writing into the pool, and the
        blocks it frees are the workspace's size.
        """
        from .._compat import clear_cublas_workspaces

        before = self.usage().allocated_bytes
        clear_cublas_workspaces()
        self.cublas_workspace_bytes = max(0, before - self.usage().allocated_bytes)
        return self.cublas_workspace_bytes

    def note_alone(self, size: int, pool: PoolId) -> int:
        """Record ``size``'s own high-water mark: its graph, captured alone into the fresh ``pool``."""
        usage = pool_usage(pool, self.device)
        self.graph_bytes[size] = usage.reserved_bytes
        self.alone_segments[size] = list(usage.segment_sizes)
        row = self.rows.get(size)
        if row is not None:
            self.rows[size] = SizeMemory(row.size, row.order, row.pool_bytes_after, usage.reserved_bytes)
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
            import torch

            torch.cuda.empty_cache()  # the measuring pools are freeable now; give their segments back
        return {s: self.graph_bytes[s] for s in wanted}

    def largest_alone_bytes(self, default_size: int, capture_alone: CaptureAlone) -> int:
        """The largest own mark measured; measures ``default_size`` alone if none was."""
        if not self.graph_bytes:
            self.measure_alone([default_size], capture_alone)
        return max(self.graph_bytes.values())

    def largest_measured_size(self) -> int:
        """The size with the largest own mark (the larger size on a tie)."""
        return max(self.graph_bytes, key=lambda s: (self.graph_bytes[s], s))

    def rows_in(self, sizes: Iterable[int]) -> tuple[SizeMemory, ...]:
        """The rows of ``sizes`` that were recorded, in that order."""
        return tuple(self.rows[s] for s in sizes if s in self.rows)

    def check(
        self,
        *,
        largest_size: int,
        largest_graph_bytes: int,
        largest_segments: Sequence[int],
        slack: int | None,
        capture_order: Sequence[int],
        pool_mode: str = "shared",
        order: str = "largest_first",
        keep_outputs: bool = False,
    ) -> PoolCheck:
        """The pool check: the pools now against the largest graph's mark + workspace + slack.

        ``slack=None`` derives it from ``largest_segments`` (``derive_slack``); an int
        is a slack in bytes.
        """
        slack_obj = derive_slack(largest_segments) if slack is None else given_slack(slack)
        return PoolCheck(
            pool_bytes=self.reserved_bytes(),
            largest_size=largest_size,
            largest_graph_bytes=largest_graph_bytes,
            cublas_workspace_bytes=self.cublas_workspace_bytes or 0,
            slack=slack_obj,
            pool_mode=pool_mode,
            order=order,
            keep_outputs=keep_outputs,
            rows=self.rows_in(capture_order),
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
    ) -> PoolCheck:
        """The pool check against the largest size's own mark (``GraphSet.pool_check``).

        Measures the largest size alone when nothing was measured; a derived slack
        needs the largest measured size's own segments, measured again if missing.
        """
        largest_bytes = self.largest_alone_bytes(max(capture_order), capture_alone)
        largest_size = self.largest_measured_size()
        segments: Sequence[int] = ()
        if slack is None:
            # The slack follows the segment kinds the largest graph's own capture needs:
            # those are the kinds a smaller graph's request can fail to find room in.
            if largest_size not in self.alone_segments:
                self.graph_bytes.pop(largest_size, None)
                self.measure_alone([largest_size], capture_alone)
            segments = self.alone_segments[largest_size]
        return self.check(
            largest_size=largest_size,
            largest_graph_bytes=largest_bytes,
            largest_segments=segments,
            slack=slack,
            capture_order=capture_order,
            pool_mode=pool_mode,
            order=order,
            keep_outputs=keep_outputs,
        )

    def size_table(self, capture_order: Sequence[int]) -> str:
        """The per-size table of the recorded sizes (see ``format_size_table``)."""
        return format_size_table(list(self.rows_in(capture_order)))
