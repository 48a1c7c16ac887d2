"""What capturing one set of CUDA graphs cost: seconds per phase, and device memory outside the pool, per size.

**Time.**  Each capture size has two phases, in host wall time:

- ``warmup_s``: the eager calls before the capture, on the capture stream.  A
  compile, cuBLAS's handle and workspace set-up and kernels loaded on first use
  happen here.  Nothing is synchronised to time it (that would slow the capture
  down): kernels of the warm-up may still run while the capture begins, as in a
  real start-up.
- ``capture_s``: ``capture_begin`` to ``capture_end``, which instantiates the graph.

A set's ``capture_s`` in the report is its whole capture run (every size, warm-ups
and this meter's readings included, as vLLM reports its start-up); ``warmup_s``
is the warm-up part of it.

**Memory.**  Before a size's warm-up and after its capture the meter reads the
device's free memory (``cudaMemGetInfo``), the caching allocator's reserved
bytes, and the graph pool's bytes (``memory.PoolMeter``).  Between two readings:

- *pool growth*: what the graph pool took;
- *allocator, outside the pool* = reserved growth - pool growth: the static input
  buffers the graphs read, and blocks the warm-up left cached in the allocator's
  ordinary pool (``torch.cuda.empty_cache()`` gives those back);
- *behind the allocator* = device memory taken - reserved growth: memory that no
  PyTorch allocator knows of: a library's own ``cudaMalloc`` (NCCL buffers, a
  custom kernel's scratch space, a cuBLASLt workspace set up outside PyTorch), the
  instantiated graphs themselves, and kernels loaded on first use.

Memory outside the pool is the allocator's part plus what is behind the allocator;
``GraphSet.check_pool(outside=BYTES)`` bounds the part behind the allocator, which
nothing in PyTorch can free.  The cuBLAS workspace is named apart: the first
capture puts it inside the pool (``cublas_workspace_bytes``).  Part of a graph's own
device memory may be allocated at its first replay, after the last reading.

**One process per GPU.**  ``cudaMemGetInfo`` counts every process on the GPU.  When
the plugin knows the GPU is shared (pytest-xdist workers on one device) it says so
(``set_shared_device``): the figures are kept with that note and no check gives a
verdict on them.  Memory that the device gained back beyond what this process
freed is noticed too: memory freed behind the allocator during the capture (by
another process, or by this one) would hide what the capture took.  Garbage
collection is paused while a set is captured (``collection_paused``), so that an
earlier test's graphs collected meanwhile do not free device memory between two
readings.  Pure parts here need no GPU; ``CaptureCostMeter`` reads the device
through ``_compat``.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import MisuseError
from .text import MIB, format_bytes, format_table, short_seconds, signed_bytes

__all__ = ["CaptureCost", "CaptureCostMeter", "OutsideCheck", "SizeCost", "set_shared_device"]

# cudaMemGetInfo moves in the driver's 2 MiB pages: a figure behind the allocator this far
# below zero cannot come from this process's own frees
PAGE_BYTES = 2 * MIB

# set by the plugin in a pytest-xdist worker whose GPU other workers use too
_shared_device: str | None = None


def set_shared_device(note: str | None) -> None:
    """Say that other processes use this process's GPU (a sentence), or None when it is this process's alone."""
    global _shared_device
    _shared_device = note


def shared_device() -> str | None:
    """The sentence set by ``set_shared_device``, if any."""
    return _shared_device


@dataclass(frozen=True)
class MemoryReading:
    """One reading: the device's free bytes, the allocator's reserved bytes and the pool's bytes."""

    free_bytes: int
    reserved_bytes: int
    pool_bytes: int


class _MemorySplit:
    """Where memory went, from ``device_bytes``, ``allocator_bytes`` and ``pool_bytes`` (None where not read)."""

    device_bytes: int | None
    allocator_bytes: int | None
    pool_bytes: int | None

    @property
    def behind_allocator_bytes(self) -> int | None:
        """Device memory taken that no PyTorch allocator reserved."""
        return _minus(self.device_bytes, self.allocator_bytes)

    @property
    def allocator_outside_pool_bytes(self) -> int | None:
        """The allocator's reserved growth outside the graph pool."""
        return _minus(self.allocator_bytes, self.pool_bytes)

    @property
    def outside_pool_bytes(self) -> int | None:
        """Device memory taken that is not in the graph pool (the allocator's part + behind it)."""
        return _minus(self.device_bytes, self.pool_bytes)


@dataclass(frozen=True)
class SizeCost(_MemorySplit):
    """One capture size: its warm-up and capture seconds and the memory they took, by where it went."""

    size: int
    order: int  # position in capture order, 0 = captured first
    warmup_s: float
    capture_s: float
    device_bytes: int | None = None  # device memory taken (free memory before - after)
    allocator_bytes: int | None = None  # the caching allocator's reserved growth
    pool_bytes: int | None = None  # the graph pool's growth

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "order": self.order,
            "warmup_s": round(self.warmup_s, 6),
            "capture_s": round(self.capture_s, 6),
            "pool_bytes": self.pool_bytes,
            "allocator_outside_pool_bytes": self.allocator_outside_pool_bytes,
            "behind_allocator_bytes": self.behind_allocator_bytes,
        }


def _minus(a: int | None, b: int | None) -> int | None:
    """``a - b``, or None when either is unknown."""
    return None if a is None or b is None else a - b


def _difference(before: MemoryReading | None, after: MemoryReading | None) -> tuple[int | None, ...]:
    """(device memory taken, reserved growth, pool growth) between two readings."""
    if before is None or after is None:
        return (None, None, None)
    return (
        before.free_bytes - after.free_bytes,
        after.reserved_bytes - before.reserved_bytes,
        after.pool_bytes - before.pool_bytes,
    )


@dataclass(frozen=True)
class CaptureCost(_MemorySplit):
    """The whole capture run of one set: per-size rows and the totals from its first reading to its last.

    The memory totals come from the first and the last reading, not from summing
    rows, so memory freed between sizes is not counted twice.  ``shared_device``
    says why the device figures are not this process's alone (None when they are).
    """

    sizes: tuple[SizeCost, ...]
    device_bytes: int | None = None
    allocator_bytes: int | None = None
    pool_bytes: int | None = None
    shared_device: str | None = None

    @property
    def warmup_s(self) -> float:
        return sum(row.warmup_s for row in self.sizes)

    @property
    def graph_capture_s(self) -> float:
        """The capture phases alone, every size."""
        return sum(row.capture_s for row in self.sizes)

    @property
    def unreliable(self) -> str | None:
        """Why the device figures cannot be vouched for, or None."""
        if self.shared_device:
            return self.shared_device
        gained = [row for row in self.sizes if (row.behind_allocator_bytes or 0) < -PAGE_BYTES]
        total = self.behind_allocator_bytes
        if gained or (total is not None and total < -PAGE_BYTES):
            where = f" at batch size {gained[0].size}" if gained else ""
            return (
                f"the GPU's free memory grew{where} by more than PyTorch's allocator gave back: device memory was "
                f"freed behind the allocator during the capture (by another process on the GPU, or by this one), "
                f"which would hide what the capture took"
            )
        return None

    def table(self, limit_rows: int = 24) -> str:
        """Per size in capture order: warm-up, capture, pool growth, the allocator's part outside the pool, behind it.

        Long tables keep the first size, the sizes where memory went outside the
        pool, and the slowest captures; a line counts the rows left out.
        """
        ordered = sorted(self.sizes, key=lambda row: row.order)
        shown = ordered
        if len(ordered) > limit_rows:
            slowest = {row.size for row in sorted(ordered, key=lambda r: r.warmup_s + r.capture_s)[-3:]}
            keep = [row for row in ordered if row.order == 0 or row.size in slowest or _went_outside(row)]
            shown = keep[:limit_rows]
        header = ("#", "size", "warm-up", "capture", "pool", "allocator", "behind allocator")
        body = [
            (
                str(row.order + 1),
                str(row.size),
                short_seconds(row.warmup_s),
                short_seconds(row.capture_s),
                signed_bytes(row.pool_bytes),
                signed_bytes(row.allocator_outside_pool_bytes),
                signed_bytes(row.behind_allocator_bytes),
            )
            for row in shown
        ]
        total = (
            "",
            "all",
            short_seconds(self.warmup_s),
            short_seconds(self.graph_capture_s),
            signed_bytes(self.pool_bytes),
            signed_bytes(self.allocator_outside_pool_bytes),
            signed_bytes(self.behind_allocator_bytes),
        )
        lines = format_table([header, *body, total], align=">>>>>>>")
        hidden = [row for row in ordered if row not in shown]
        if hidden:
            outside = sum(1 for row in hidden if _went_outside(row))
            more = f", {outside} of them with memory outside the pool" if outside else " with nothing outside the pool"
            lines.append(f"({len(hidden)} more sizes not shown{more})")
        if self.unreliable:
            lines.append(f"(device figures are not this process's alone: {self.unreliable})")
        return "\n".join(lines)

    def check(self, outside: int) -> OutsideCheck:
        """The bound on memory behind the allocator (see ``OutsideCheck``)."""
        return OutsideCheck(self, int(outside))


def _went_outside(row: SizeCost) -> bool:
    """More than a driver page's rounding went outside the pool at this size."""
    return (
        abs(row.behind_allocator_bytes or 0) >= PAGE_BYTES or abs(row.allocator_outside_pool_bytes or 0) >= PAGE_BYTES
    )


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No garbage collection in the block: a collected graph would free device memory between two readings.

    ``torch.cuda.graph`` collects before a capture for the same reason; a full
    collection costs a third of a second in a process with torch imported, so the
    meter pauses collection instead (for the seconds a capture run takes).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def outside_limit(outside: Any) -> int:
    """``outside=`` of ``check_pool`` as bytes; anything but an int >= 0 is a MisuseError."""
    __tracebackhide__ = True
    if isinstance(outside, bool) or not isinstance(outside, int) or outside < 0:
        raise MisuseError(
            f"outside={outside!r}: give the bytes allowed behind the allocator as an int >= 0 (64 * 2**20 for 64 MiB)"
        )
    return outside


@dataclass(frozen=True)
class OutsideCheck:
    """``check_pool(outside=BYTES)``: the memory the capture run took behind the allocator is at most BYTES.

    ``passed`` is None when no verdict can be given: the figure was not measured, or
    the GPU's free memory is not this process's alone (``CaptureCost.unreliable``).
    """

    cost: CaptureCost
    limit_bytes: int

    @property
    def behind_allocator_bytes(self) -> int | None:
        return self.cost.behind_allocator_bytes

    @property
    def passed(self) -> bool | None:
        figure = self.behind_allocator_bytes
        if figure is None or self.cost.unreliable:
            return None
        return figure <= self.limit_bytes

    def message(self) -> str:
        figure = self.behind_allocator_bytes
        if figure is None:
            return (
                f"check_pool(outside={self.limit_bytes}) has no figure to check: the device memory was not read "
                f"during capture"
            )
        if self.cost.unreliable:
            fix = (
                "run the test with one process per GPU (pytest -n N --cudagraph-devices=auto with N at most the "
                "number of GPUs)"
                if self.cost.shared_device
                else "run it again with no other process on the GPU"
            )
            return (
                f"check_pool(outside={format_bytes(self.limit_bytes)}) gives no verdict: {self.cost.unreliable}; "
                f"{fix}\n" + self.cost.table()
            )
        return (
            f"the capture took {format_bytes(figure)} of device memory behind PyTorch's allocator, more than "
            f"outside={format_bytes(self.limit_bytes)} allows; that is memory a library allocated itself "
            f"(cudaMalloc: NCCL, a custom kernel's buffer, a workspace set up outside PyTorch), the "
            f"instantiated graphs, or kernels loaded on first use; the table shows at which size it went:\n"
            + self.cost.table()
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "limit_bytes": self.limit_bytes,
            "behind_allocator_bytes": self.behind_allocator_bytes,
            "passed": self.passed,
        }


@dataclass
class CaptureCostMeter:
    """Keeps each size's warm-up and capture seconds and reads the device's memory between sizes.

    The capturing code calls ``start`` once, ``after_capture`` per size with the
    seconds of its two phases, and ``finish`` once; it passes the pool's bytes,
    which it reads anyway (``PoolMeter``), so the meter takes no allocator snapshot
    of its own.  ``device=None`` keeps the seconds only (no CUDA device).

    Example::

        meter = CaptureCostMeter(device)
        meter.start(pool_bytes=0)
        for order, size in enumerate(sizes):
            graph = capture_callable(...)   # times its warm-up and its capture
            pool_now = pools.after_size(size, order).reserved_bytes
            meter.after_capture(size, order, pool_now, graph.warmup_s, graph.capture_s)
        cost = meter.finish(pool_bytes=pools.reserved_bytes())
    """

    device: int | None
    _first: MemoryReading | None = None
    _last: MemoryReading | None = None
    rows: list[SizeCost] = field(default_factory=list)

    def read(self, pool_bytes: int) -> MemoryReading | None:
        if self.device is None:
            return None
        from ._compat import device_memory_reading

        free, reserved = device_memory_reading(self.device)
        return MemoryReading(free, reserved, int(pool_bytes))

    def start(self, pool_bytes: int = 0) -> None:
        self._first = self._last = self.read(pool_bytes)

    def after_capture(self, size: int, order: int, pool_bytes: int, warmup_s: float, capture_s: float) -> None:
        """Close the size's row: its two phases, and the memory taken since the previous row."""
        after = self.read(pool_bytes)
        device, allocator, pool = _difference(self._last, after)
        self._last = after
        self.rows.append(SizeCost(size, order, warmup_s, capture_s, device, allocator, pool))

    def finish(self, pool_bytes: int) -> CaptureCost:
        device, allocator, pool = _difference(self._first, self.read(pool_bytes))
        return CaptureCost(tuple(self.rows), device, allocator, pool, shared_device())


def cost_json(cost: CaptureCost | None) -> dict[str, Any]:
    """A capture run's report fields: ``warmup_s``, ``per_size``, and the memory outside the pool by where it went.

    ``outside_unreliable`` is present when the device figures are not this process's
    alone; readers (the summary, ``compare``) then vouch for none of them.
    """
    if cost is None:
        return {}
    out: dict[str, Any] = {
        "warmup_s": round(cost.warmup_s, 6),
        "per_size": [row.to_json() for row in sorted(cost.sizes, key=lambda r: r.order)],
        "outside_pool_bytes": cost.outside_pool_bytes,
        "allocator_outside_pool_bytes": cost.allocator_outside_pool_bytes,
        "behind_allocator_bytes": cost.behind_allocator_bytes,
    }
    if cost.unreliable:
        out["outside_unreliable"] = cost.unreliable
    return out
