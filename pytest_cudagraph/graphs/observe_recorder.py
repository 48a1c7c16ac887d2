"""The recorder behind ``observe_graphs()``: the gateway's graph events turned into one record per capture.

``GraphRecorder`` is the listener ``_compat.observing_graphs`` calls: per capture
it reads the allocator's counters and, where blocks moved, the pool's segments,
finds the engine's call site and the shapes of the inputs the capturing function
holds, and counts replays.  It reads the allocator only through a ``readings``
object, so the whole recording is tested on the CPU with recorded readings
(``RecordedReadings`` in the tests); on the GPU ``AllocatorReadings`` reads the
device.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import FrameType
from typing import Any, Protocol

from .. import _compat
from ..compile.call_site import CallSite, is_library_file, user_call_site
from .memory import pool_usage_from_segments
from .observe_verdict import ObservedCapture, infer_sizes
from .pool_blocks import LiveBlock, live_blocks_from_segments

__all__ = ["AllocatorReadings", "Counters", "GraphRecorder", "Readings", "error_text", "refresh_read_frames"]


PoolKey = tuple[int, int]
# the plugin's own package: a capture made from inside it is the plugin's (capture_graphs), not the engine's
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_GATEWAY_DIR = os.path.join(_PACKAGE_DIR, "_compat") + os.sep
# how many inputs' shapes a capture keeps, and how far into a container the locals are searched
MAX_SHAPES = 16
MAX_ITEMS = 64


@dataclass(frozen=True)
class Counters:
    """One reading of the allocator's counters, and of the device's free bytes where read (outside captures)."""

    free: int | None
    reserved: int
    allocated: int
    allocations: int


class Readings(Protocol):
    """What the recorder reads: the allocator's counters, a pool's segments, the cuBLAS workspace sizes."""

    def counters(self, device_free: bool) -> Counters | None: ...

    def segments(self, pools: Iterable[PoolKey]) -> list[Mapping[str, Any]]: ...

    def workspace_sizes(self) -> frozenset[int]: ...

    def pool_reserved(self, pool: PoolKey) -> int | None: ...


@dataclass
class AllocatorReadings:
    """The readings of the running process: the allocator's counters and snapshot, the device's free memory."""

    device_index: int | None = None
    # the allocator's statistics of the last counters() reading, for pool_reserved() at the same moment
    _stats: Any = field(default=None, repr=False)

    def counters(self, device_free: bool) -> Counters | None:
        if self.device_index is None:
            return None
        free, reserved, allocated, allocations, self._stats = _compat.allocator_counters(self.device_index, device_free)
        return Counters(free, reserved, allocated, allocations)

    def segments(self, pools: Iterable[PoolKey]) -> list[Mapping[str, Any]]:
        ids = list(dict.fromkeys(pools))
        # one pool: torch filters (2.8+); several: one full snapshot covers them all
        return list(_compat.memory_snapshot_segments(ids[0] if len(ids) == 1 else None))

    def workspace_sizes(self) -> frozenset[int]:
        if self.device_index is None:
            return frozenset()
        return _compat.cublas_workspace_sizes(self.device_index)

    def pool_reserved(self, pool: PoolKey) -> int | None:
        """The pool's reserved bytes from the allocator's per-pool figures (2.13+), None where torch has none.

        Read from the statistics of the last ``counters()`` reading (the recorder asks
        right after it, at the same moment), so it costs no second read.
        """
        if self.device_index is None:
            return None
        stats, self._stats = self._stats, None
        figures = _compat.private_pool_reserved(self.device_index, pool, stats)
        return None if figures is None else figures[0]


@dataclass
class _Open:
    """A capture between its first event and its last."""

    index: int
    call_site: CallSite | None
    pool: PoolKey | None  # None until capture_end where the capture made a new pool
    source: str
    started: float
    pool_bytes_before: int | None
    input_shapes: tuple[tuple[int, ...], ...]
    before: Counters | None = None  # at capture_begin (the wrapper: just before it, with the device's free bytes)
    after: Counters | None = None  # once the capture is over
    ended: bool = False
    pool_bytes_after: int | None = None
    live_after: tuple[LiveBlock, ...] = ()
    failed: str | None = None


@dataclass(eq=False)
class GraphRecorder:
    """The listener: turns the gateway's events into one ``ObservedCapture`` per capture.

    Per capture it reads the allocator's counters when the capture begins (host-side
    bookkeeping, allowed while it is live) and once it is over, and the device's
    free bytes outside it: the pool's growth is the reserved bytes' growth across the
    capture (every allocation of a capture goes to its pool, and nothing is released
    during one).  The pool's blocks are read (an allocator snapshot) only where they
    may have changed: after a capture whose allocations outlive it (the allocated
    bytes or the count of live allocations moved), and after every capture into a
    pool that held blocks before, the cuBLAS workspace's apart.  A pool first seen is
    read once: before the capture where the wrapper sees it given to ``capture_begin``
    (a capture given none makes a new, empty one), else when the capture begins.  A
    replay only counts (the hot path); ``captures`` puts the counts in.
    """

    readings: Readings
    errors: list[str] = field(default_factory=list)
    _records: dict[int, ObservedCapture] = field(default_factory=dict)  # capture index -> its record
    _replays: Counter[int] = field(default_factory=Counter)  # capture index -> replays
    # replays of graphs the recorder did not see captured (before the observation, or the plugin's own)
    unseen_replays: int = 0
    _live: dict[int, int] = field(default_factory=dict)  # graph key -> its capture's index, while it lives
    _alive_at_end: frozenset[int] | None = None
    _open: dict[int, _Open] = field(default_factory=dict)
    _before: dict[int, tuple[Counters | None, FrameType | None]] = field(default_factory=dict)
    _ignored: set[int] = field(default_factory=set)
    _pool_bytes: dict[PoolKey, int] = field(default_factory=dict)
    _pool_blocks: dict[PoolKey, tuple[LiveBlock, ...]] = field(default_factory=dict)
    _workspace: frozenset[int] | None = None
    _count: int = 0
    # the call site of each (code, line) the captures began from: an engine captures every size from one line
    _sites: dict[tuple[Any, int], CallSite | None] = field(default_factory=dict)

    @property
    def captures(self) -> list[ObservedCapture]:
        """Every capture recorded so far, in capture order, with its replays (and, once finished, whether alive)."""
        alive = self._alive_at_end
        return list(
            infer_sizes(
                [
                    replace(c, replays=self._replays[i], alive_at_end=alive is not None and i in alive)
                    for i, c in sorted(self._records.items())
                ]
            )
        )

    # -- the gateway's events ------------------------------------------------
    def before_capture(self, key: int, frame: FrameType | None, pool: PoolKey | None = None) -> None:
        """Outside any capture, just before ``capture_begin`` (the wrapper only): read the counters and the device,
        and a pool given that was not seen yet (``pool=None``: the capture makes a new one, empty)."""
        if _plugin_frame(frame):
            self._ignored.add(key)
            return
        if pool is not None:
            self._pool_bytes_before(pool)
        self._before[key] = (self.readings.counters(device_free=True), frame)

    def capture_began(self, key: int, pool: PoolKey | None, frame: FrameType | None) -> None:
        """The capture is live: host-side reads only (the stack, the allocator's bookkeeping).

        ``pool``: the pool the capture was given, or None where it makes a new one
        (empty before the capture; its id is known at ``capture_ended``)."""
        started = time.perf_counter()
        self._close_unended(key)
        if key in self._before:
            before, _ = self._before.pop(key)
        elif key in self._ignored or _plugin_frame(frame):
            self._ignored.add(key)
            return
        else:  # torch's hooks: the capture is live already
            before = self.readings.counters(device_free=False)
        source, tree_inputs = _compat.graph_capture_source(frame)
        if source == "cudagraph trees pool":
            self._ignored.add(key)
            return
        self._ignored.discard(key)
        site_frame = _site_frame(frame)
        site = self._call_site(site_frame)
        pool_bytes_before = 0 if pool is None else self._pool_bytes_before(pool)
        held = () if pool is None else self._pool_blocks.get(pool, ())
        if tree_inputs is not None:
            shapes = _shapes(tree_inputs)
        else:  # an earlier graph's output held in the pool is not an input of this one
            shapes = _local_shapes(site_frame, held)
        self._open[key] = _Open(
            index=self._next_index(),
            call_site=site,
            pool=pool,
            source=source,
            started=started,
            pool_bytes_before=pool_bytes_before,
            input_shapes=shapes,
            before=before,
        )

    def block_raised(self, key: int, error: BaseException) -> None:
        """The ``torch.cuda.graph`` block is ending on an exception: the graph holds only what ran before it."""
        opened = self._open.get(key)
        if opened is not None:
            opened.failed = f"its torch.cuda.graph block raised {error_text(error)}"

    def capture_ended(self, key: int, pool: PoolKey) -> None:
        """The capture is over (torch's hooks: before instantiation): the pool's growth, and its blocks if they moved."""
        opened = self._open.get(key)
        if opened is None or opened.ended:
            return
        pool = (int(pool[0]), int(pool[1]))
        if opened.pool is None:  # a new pool: empty before this capture
            opened.pool = pool
            self._pool_bytes.setdefault(pool, 0)
        after = self.readings.counters(device_free=True)
        opened.after, opened.ended = after, True
        before = opened.before
        moved = (
            before is None
            or after is None
            or (after.allocated, after.allocations)
            != (
                before.allocated,
                before.allocations,
            )
        )
        exact = self.readings.pool_reserved(pool)  # the allocator's own per-pool figure, where torch has one
        if moved or self._holds_blocks(pool):
            segments = self.readings.segments([pool])
            from_segments = pool_usage_from_segments(segments, [pool]).reserved_bytes
            opened.pool_bytes_after = exact if exact is not None else from_segments
            self._pool_blocks[pool] = live_blocks_from_segments(segments, [pool])
        elif exact is not None:
            opened.pool_bytes_after = exact
        elif opened.pool_bytes_before is not None and before is not None and after is not None:
            opened.pool_bytes_after = opened.pool_bytes_before + (after.reserved - before.reserved)
        opened.live_after = self._pool_blocks.get(pool, ())
        if opened.pool_bytes_after is not None:
            self._pool_bytes[pool] = opened.pool_bytes_after

    def instantiated(self, key: int) -> None:
        """The graph is instantiated: the device memory behind the allocator, the seconds; the record is done."""
        opened = self._open.get(key)
        if opened is None or not opened.ended:
            return  # a later instantiation of a graph already recorded
        del self._open[key]
        first: Counters | None
        last: Counters | None
        if opened.before is not None and opened.before.free is not None:  # the wrapper: across the whole capture
            first, last = opened.before, opened.after
        else:  # torch's hooks: across instantiation
            first, last = opened.after, self.readings.counters(device_free=True)
        behind = None
        if first is not None and last is not None and first.free is not None and last.free is not None:
            behind = (first.free - last.free) - (last.reserved - first.reserved)
        self._add(
            key,
            opened,
            behind_allocator_bytes=behind,
            capture_s=time.perf_counter() - opened.started,
            failed=opened.failed,
        )

    def capture_failed(self, key: int, error: BaseException) -> None:
        """``capture_begin`` or ``capture_end`` raised (the wrapper only)."""
        reason = error_text(error)
        opened = self._open.pop(key, None)
        if opened is None:
            _counters, frame = self._before.pop(key, (None, None))
            if key in self._ignored or frame is None:
                return
            site_frame = _site_frame(frame)
            site = self._call_site(site_frame)
            opened = _Open(self._next_index(), site, (0, 0), "CUDAGraph.capture_begin", time.perf_counter(), None, ())
        self._add(key, opened, failed=opened.failed or reason, capture_s=time.perf_counter() - opened.started)

    def replayed(self, key: int) -> None:
        index = self._live.get(key)
        if index is not None:
            self._replays[index] += 1
        else:
            self.unseen_replays += 1

    def replay_counts(self) -> tuple[Counter[int], int]:
        """The replays so far: per capture index, and of graphs not seen captured (for coverage, across one call)."""
        return Counter(self._replays), self.unseen_replays

    def released(self, key: int) -> None:
        self._live.pop(key, None)
        self._ignored.discard(key)

    def observer_failed(self, error: BaseException) -> None:
        self.errors.append(error_text(error))

    # -- the end -------------------------------------------------------------
    def finish(self) -> tuple[tuple[PoolKey, int], ...]:
        """Close what did not end; note the graphs still alive; read every pool once."""
        for key in list(self._open):
            self._close_unended(key)
        self._alive_at_end = frozenset(self._live.values())
        pools = list(dict.fromkeys(c.pool for c in self._records.values() if c.failed is None))
        if not pools:
            return ()
        segments = self.readings.segments(pools)
        return tuple((p, pool_usage_from_segments(segments, [p]).reserved_bytes) for p in pools)

    # -- pieces --------------------------------------------------------------
    def _call_site(self, site_frame: FrameType | None) -> CallSite | None:
        """The engine's line for a capture whose first frame outside torch and the plugin is ``site_frame``."""
        if site_frame is None:
            return None
        key = (site_frame.f_code, site_frame.f_lineno)
        if key not in self._sites:
            self._sites[key] = user_call_site(start=site_frame)
        return self._sites[key]

    def _next_index(self) -> int:
        self._count += 1
        return self._count - 1

    def _pool_bytes_before(self, pool: PoolKey) -> int | None:
        known = self._pool_bytes.get(pool)
        if known is not None:
            return known
        segments = self.readings.segments([pool])  # a pool first seen: read once (host-side)
        reserved = pool_usage_from_segments(segments, [pool]).reserved_bytes
        self._pool_bytes[pool] = reserved
        self._pool_blocks[pool] = live_blocks_from_segments(segments, [pool])
        return reserved

    def _holds_blocks(self, pool: PoolKey) -> bool:
        """Whether the pool held blocks at its last reading, a possible cuBLAS workspace apart."""
        blocks = self._pool_blocks.get(pool, ())
        if not blocks:
            return False
        if self._workspace is None:
            self._workspace = self.readings.workspace_sizes()
        return any(b.requested_size not in self._workspace for b in blocks)

    def _close_unended(self, key: int) -> None:
        opened = self._open.pop(key, None)
        if opened is None:
            return
        if opened.ended:  # ended, never instantiated (keep_graph=True, instantiated later): recorded
            self._add(key, opened, capture_s=None, failed=opened.failed)
        else:
            self._add(key, opened, failed="the capture began and never ended: it raised, or the test ended during it")

    def _add(self, key: int, opened: _Open, **figures: Any) -> None:
        capture = ObservedCapture(
            index=opened.index,
            call_site=opened.call_site,
            pool=opened.pool if opened.pool is not None else (0, 0),  # a capture that failed into a new pool
            source=opened.source,
            pool_bytes_before=opened.pool_bytes_before,
            pool_bytes_after=opened.pool_bytes_after,
            live_after=opened.live_after,
            input_shapes=opened.input_shapes,
            **figures,
        )
        self._records[capture.index] = capture
        if opened.ended:  # a graph exists (whole, or up to where its block raised): its replays count
            self._live[key] = capture.index


def _plugin_frame(frame: FrameType | None) -> bool:
    """Whether the capture was made by the plugin: its first frame outside torch and the gateway is the plugin's.

    The gateway's frames are passed over: its wrappers (a tree watch's around the
    tree manager) run the user's code, not captures of their own.
    """
    while frame is not None:
        owner = _owner(frame.f_code.co_filename)
        if owner == "plugin":
            return True
        if owner == "user":
            return False
        frame = frame.f_back
    return False


@lru_cache(maxsize=4096)
def _owner(filename: str) -> str:
    """``"plugin"``, ``"gateway"`` (the plugin's ``_compat``), ``"library"`` (torch, Python's own) or ``"user"``."""
    path = os.path.abspath(filename)
    if path.startswith(_PACKAGE_DIR):
        return "gateway" if path.startswith(_GATEWAY_DIR) else "plugin"
    return "library" if is_library_file(filename) else "user"


def _site_frame(frame: FrameType | None) -> FrameType | None:
    """The call site's frame: the first from ``frame`` outward outside torch, the plugin, Python and generated code."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_library_file(filename) and not _generated(filename):
            return frame
        frame = frame.f_back
    return None


# a file Inductor generated stays generated, and the user's stays theirs: asked once per file
_GENERATED: dict[str, bool] = {}


def _generated(filename: str) -> bool:
    known = _GENERATED.get(filename)
    if known is None:
        known = _GENERATED[filename] = _compat.is_generated_code(filename)
    return known


def _shapes(tensors: Iterable[Any]) -> tuple[tuple[int, ...], ...]:
    import torch

    out = []
    for value in tensors:
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
            out.append(tuple(int(d) for d in value.shape))
            if len(out) >= MAX_SHAPES:
                break
    return tuple(out)


def _local_shapes(frame: FrameType | None, in_pool: Iterable[LiveBlock] = ()) -> tuple[tuple[int, ...], ...]:
    """The shapes of the device tensors the frame's local variables hold (directly, or in a tuple, list or dict).

    A graph reads device memory only: a CPU tensor in the frame is not among its
    inputs; nor is a tensor in one of the ``in_pool`` blocks (an earlier graph's
    output, held by the capturing function).
    """
    if frame is None:
        return ()
    import torch

    if _LOCALS_SNAPSHOT:
        _READ_FRAMES[id(frame)] = frame.f_code
    spans = [(b.address, b.address + b.size) for b in in_pool]
    found: list[Any] = []
    for name, value in frame.f_locals.items():
        if name == "self":
            continue
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else (value,)
        for index, item in enumerate(items):
            if index >= MAX_ITEMS:
                break
            if isinstance(item, torch.Tensor) and item.device.type != "cpu" and item.dim() > 0:
                address = item.data_ptr() if spans else 0
                if not any(start <= address < end for start, end in spans):
                    found.append(item)
    unique = list({id(t): t for t in found}.values())
    return _shapes(unique)


# Before Python 3.13 a running function's ``f_locals`` is a snapshot the frame keeps: read once, it holds every local
# of that moment, so a graph the function deletes later stays alive until the snapshot is taken again (PEP 667 made
# it a live view in 3.13).  The frames read are noted, by id and code (never the frame: that would keep it alive),
# and ``refresh_read_frames`` takes their snapshot again where they still run.
_LOCALS_SNAPSHOT = sys.version_info < (3, 13)
_READ_FRAMES: dict[int, Any] = {}


def refresh_read_frames(start: FrameType | None, depth: int = 64) -> None:
    """Take again the locals snapshot of the frames ``_local_shapes`` read that still run, from ``start`` outwards.

    The snapshot then holds what the function holds now, not what it held when its
    capture began; frames that have ended hold nothing.
    """
    if not _READ_FRAMES:
        return
    frame = start
    for _ in range(depth):
        if frame is None:
            break
        if _READ_FRAMES.get(id(frame)) is frame.f_code:
            frame.f_locals  # noqa: B018  # taking the snapshot again drops the locals deleted since
        frame = frame.f_back
    _READ_FRAMES.clear()


def error_text(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
