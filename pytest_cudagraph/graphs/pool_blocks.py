"""The blocks of a graph pool that are still allocated, and the line that allocated each.

A shared pool that holds more than its largest graph holds one of two things:

- **free blocks**: the caching allocator keeps every segment a pool ever reserved.
  A smaller size's request of another kind (requests up to 1 MiB live in 2 MiB
  small segments, apart from large ones), a hole left by a split block that the
  next request does not fit, or a cuBLAS workspace taken at one size only, each
  reserves a segment the largest graph never needed.  Nothing the user holds is
  in them, and the graphs replay from them correctly: it is the allocator's
  caching, reported as a figure;
- **live blocks**: memory that something still holds after the capture, once the
  outputs are released: outputs kept alive, a tensor the captured function keeps
  across captures (a cache, a list of results).  Every later capture must work
  around them, so the pool grows by what they hold at each size: this is what a
  user can fix, and what the pool check fails on.

The snapshot's blocks say which is which (``state == "active_allocated"``); where
allocation stacks are recorded (``_compat.allocation_stacks()``) each live block
also carries the frames that allocated it.  Pure functions over snapshot dicts, so
they are tested on recorded snapshots without a GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..compile.call_site import is_library_file, relative_path
from ..render.plain_text import MIB, format_bytes

__all__ = ["LiveBlock", "describe_live_blocks", "live_blocks_from_segments", "read_live_blocks"]

PoolKey = tuple[int, int]

# The caching allocator's rounding (c10/cuda/CUDACachingAllocator.cpp)
MIN_BLOCK_SIZE = 512  # kMinBlockSize: every request is rounded up to this
SMALL_SIZE = 1 * MIB  # kSmallSize: largest request served from small segments
SMALL_BUFFER = 2 * MIB  # kSmallBuffer: size of a small segment
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc: from here a request gets its own segment
LARGE_BUFFER = 20 * MIB  # kLargeBuffer: size of a large segment for 1-10 MiB requests
ROUND_LARGE = 2 * MIB  # kRoundLarge: rounding of a request's own segment


@dataclass(frozen=True)
class LiveBlock:
    """One allocated block of a graph pool: where, how big, and the stack that allocated it (if recorded).

    ``frames`` are ``(file, line, function)``, innermost first, as the allocator
    recorded them; empty where allocation stacks were not recorded.
    """

    pool_id: PoolKey
    address: int
    size: int
    requested_size: int
    frames: tuple[tuple[str, int, str], ...] = ()

    def user_frame(self) -> tuple[str, int, str] | None:
        """The innermost frame outside torch, the plugin and Python's own library: the line that allocated it."""
        for frame in self.frames:
            if frame[0] and not frame[0].startswith("<") and not is_library_file(frame[0]):
                return frame
        return None

    def describe(self) -> str:
        """``4.0 MiB (requested 4.0 MiB) allocated at model.py:12 in forward``."""
        requested = f" (requested {format_bytes(self.requested_size)})" if self.requested_size != self.size else ""
        frame = self.user_frame()
        where = f" allocated at {relative_path(frame[0])}:{frame[1]} in {frame[2]}" if frame is not None else ""
        return f"{format_bytes(self.size)}{requested}{where}"

    def to_json(self) -> dict[str, Any]:
        frame = self.user_frame()
        out: dict[str, Any] = {"size": self.size, "requested_size": self.requested_size}
        if frame is not None:
            out["allocated_at"] = f"{relative_path(frame[0])}:{frame[1]}"
        return out


def _pool_key(value: Any) -> PoolKey:
    return (int(value[0]), int(value[1]))


def _frames(block: Mapping[str, Any]) -> tuple[tuple[str, int, str], ...]:
    return tuple(
        (str(f.get("filename", "")), int(f.get("line", 0)), str(f.get("name", ""))) for f in block.get("frames") or ()
    )


def live_blocks_from_segments(
    segments: Iterable[Mapping[str, Any]], pool_ids: Iterable[PoolKey], device: int | None = None
) -> tuple[LiveBlock, ...]:
    """The allocated blocks of the segments that belong to ``pool_ids`` (and ``device``, if given).

    A block freed on one stream while another still uses it (``active_pending_free``)
    is on its way out and not counted: only ``active_allocated`` is something held.
    """
    wanted = {_pool_key(p) for p in pool_ids}
    live = []
    for seg in segments:
        pool = _pool_key(seg.get("segment_pool_id", (0, 0)))
        if pool not in wanted or (device is not None and int(seg.get("device", device)) != device):
            continue
        for block in seg.get("blocks") or ():
            if block.get("state") != "active_allocated":
                continue
            live.append(
                LiveBlock(
                    pool_id=pool,
                    address=int(block.get("address", 0)),
                    size=int(block.get("size", 0)),
                    requested_size=int(block.get("requested_size", block.get("size", 0))),
                    frames=_frames(block),
                )
            )
    return tuple(sorted(live, key=lambda b: (-b.size, b.address)))


def read_live_blocks(pool_ids: Iterable[PoolKey], device: int | None = None) -> tuple[LiveBlock, ...]:
    """The allocator now: the allocated blocks of ``pool_ids``."""
    from .._compat import memory_snapshot_segments

    ids = [_pool_key(p) for p in pool_ids]
    if not ids:
        return ()
    return live_blocks_from_segments(memory_snapshot_segments(ids[0] if len(ids) == 1 else None), ids, device)


def describe_live_blocks(blocks: Iterable[LiveBlock], limit: int = 4) -> str:
    """``3 blocks, 12.0 MiB: 8.0 MiB allocated at model.py:12 in forward, 4.0 MiB, ...``."""
    blocks = list(blocks)
    total = sum(b.size for b in blocks)
    shown = ", ".join(b.describe() for b in blocks[:limit])
    more = f", and {len(blocks) - limit} more" if len(blocks) > limit else ""
    count = f"{len(blocks)} block{'s' if len(blocks) != 1 else ''}"
    return f"{count}, {format_bytes(total)}: {shown}{more}"
