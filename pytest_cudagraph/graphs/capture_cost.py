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

**Memory.**  Before a size's warm-up, between its warm-up and its capture, and
after its capture the meter reads the device's free memory (``cudaMemGetInfo``),
the caching allocator's reserved bytes, and the graph pool's bytes
(``memory.PoolMeter``).  Between two readings:

- *pool growth*: what the graph pool took;
- *allocator, outside the pool* = reserved growth - pool growth: the static input
  buffers the graphs read, and blocks the warm-up left cached in the allocator's
  ordinary pool (``torch.cuda.empty_cache()`` gives those back);
- *behind the allocator* = device memory taken - reserved growth: memory that no
  PyTorch allocator knows of.

What is behind the allocator is split by phase, because the two phases hold
different things:

- **first use** (``first_use_bytes``): what the warm-ups took behind the
  allocator.  The first eager call of a process loads its kernels (lazily, one
  module at a time) and creates library handles: on an H200 about 156 MiB for a
  plain MLP, 480 MiB with ``CUDA_MODULE_LOADING=EAGER``, and nothing for the same
  model captured again in the same process.  A library's own buffer set up on its
  first call (an NCCL communicator, a cuBLASLt or attention workspace allocated
  with ``cudaMalloc``) lands here too, at the size whose warm-up allocated it.
  It is a cost of the process, so it depends on what ran before in it;
  ``check_pool(first_use=BYTES)`` bounds it.
- **the graphs' own** (``behind_allocator_bytes``): what the captures took behind
  the allocator, graph instantiation included: a few 2 MiB driver pages for the
  first graphs of a process, nothing for later ones.  ``check_pool(outside=BYTES)``
  bounds it.

When a set is released (``GraphSet.close``) the meter reads the device once more,
before and after the graphs go (``ReleaseReading``): what comes back is what the set
held.  Memory the captures took that does not come back (the driver keeps graph
pages for later graphs) is not the graphs' any more: ``held_behind_allocator_bytes``
is the part of ``behind_allocator_bytes`` that the release gave back, and the figure
that compares across runs whatever ran before.

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
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import MisuseError
from ..render.plain_text import MIB, format_bytes, format_table, short_seconds, signed_bytes

__all__ = [
    "CaptureCost",
    "CaptureCostMeter",
    "FirstUseCheck",
    "OutsideCheck",
    "ReleaseReading",
    "SizeCost",
    "set_shared_device",
]

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
    """Where memory went, from the device's, the allocator's and the pool's growth (None where not read).

    ``warmup_device_bytes`` and ``warmup_allocator_bytes`` are the warm-up part of
    ``device_bytes`` and ``allocator_bytes``: what was behind the allocator then is
    first use, the rest is the captures'.
    """

    device_bytes: int | None
    allocator_bytes: int | None
    pool_bytes: int | None
    warmup_device_bytes: int | None
    warmup_allocator_bytes: int | None

    @property
    def first_use_bytes(self) -> int | None:
        """Device memory the warm-ups took that no PyTorch allocator reserved: kernels loaded, library handles."""
        return _minus(self.warmup_device_bytes, self.warmup_allocator_bytes)

    @property
    def behind_allocator_bytes(self) -> int | None:
        """Device memory the captures took that no PyTorch allocator reserved (the warm-ups' first use apart)."""
        return _minus(_minus(self.device_bytes, self.allocator_bytes), self.first_use_bytes)

    @property
    def allocator_outside_pool_bytes(self) -> int | None:
        """The allocator's reserved growth outside the graph pool."""
        return _minus(self.allocator_bytes, self.pool_bytes)

    @property
    def outside_pool_bytes(self) -> int | None:
        """Device memory taken that is not in the graph pool (the allocator's part, first use, the captures' own)."""
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
    warmup_device_bytes: int | None = None  # device memory the warm-up (inputs included) took
    warmup_allocator_bytes: int | None = None  # the allocator's reserved growth in the warm-up

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "order": self.order,
            "warmup_s": round(self.warmup_s, 6),
            "capture_s": round(self.capture_s, 6),
            "pool_bytes": self.pool_bytes,
            "allocator_outside_pool_bytes": self.allocator_outside_pool_bytes,
            "first_use_bytes": self.first_use_bytes,
            "behind_allocator_bytes": self.behind_allocator_bytes,
        }


def _sum_known(values: list[int | None]) -> int | None:
    """The sum, or None when any is unknown (or there is none)."""
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


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
class ReleaseReading:
    """What the device gave back when a set's graphs were released: its free memory's growth and the allocator's fall.

    Both are read after ``torch.cuda.empty_cache()``, before and after the graphs go,
    so blocks the warm-ups left cached are not counted as the graphs'.
    """

    device_bytes: int  # the device's free memory after release - before
    allocator_bytes: int  # the allocator's reserved bytes before release - after

    @property
    def behind_allocator_bytes(self) -> int:
        """What came back that no PyTorch allocator had reserved."""
        return self.device_bytes - self.allocator_bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "device_bytes": self.device_bytes,
            "allocator_bytes": self.allocator_bytes,
            "behind_allocator_bytes": self.behind_allocator_bytes,
        }


@dataclass(frozen=True)
class CaptureCost(_MemorySplit):
    """The whole capture run of one set: per-size rows and the totals from its first reading to its last.

    The memory totals come from the first and the last reading, not from summing
    rows, so memory freed between sizes is not counted twice; the warm-up parts are
    the rows' (their windows do not overlap).  ``shared_device`` says why the device
    figures are not this process's alone (None when they are).  ``release`` is set
    once the set is released (``released``).
    """

    sizes: tuple[SizeCost, ...]
    device_bytes: int | None = None
    allocator_bytes: int | None = None
    pool_bytes: int | None = None
    shared_device: str | None = None
    release: ReleaseReading | None = None

    @property
    def warmup_device_bytes(self) -> int | None:  # type: ignore[override]
        return _sum_known([row.warmup_device_bytes for row in self.sizes])

    @property
    def warmup_allocator_bytes(self) -> int | None:  # type: ignore[override]
        return _sum_known([row.warmup_allocator_bytes for row in self.sizes])

    @property
    def held_behind_allocator_bytes(self) -> int | None:
        """The captures' memory behind the allocator that the release gave back: what the graphs held there.

        None before release.  Never above what the captures took (first-use memory
        freed by the release is not the graphs'), never below zero.
        """
        if self.release is None or self.behind_allocator_bytes is None:
            return None
        return max(0, min(self.behind_allocator_bytes, self.release.behind_allocator_bytes))

    def released(self, release: ReleaseReading | None) -> CaptureCost:
        """This cost with what the release gave back."""
        return replace(self, release=release)

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
        gained = [
            row for row in self.sizes if min(row.behind_allocator_bytes or 0, row.first_use_bytes or 0) < -PAGE_BYTES
        ]
        total = _minus(self.device_bytes, self.allocator_bytes)
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
        header = ("#", "size", "warm-up", "capture", "pool", "allocator", "first use", "behind allocator")
        body = [
            (
                str(row.order + 1),
                str(row.size),
                short_seconds(row.warmup_s),
                short_seconds(row.capture_s),
                signed_bytes(row.pool_bytes),
                signed_bytes(row.allocator_outside_pool_bytes),
                signed_bytes(row.first_use_bytes),
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
            signed_bytes(self.first_use_bytes),
            signed_bytes(self.behind_allocator_bytes),
        )
        lines = format_table([header, *body, total], align=">>>>>>>>")
        hidden = [row for row in ordered if row not in shown]
        if hidden:
            outside = sum(1 for row in hidden if _went_outside(row))
            more = f", {outside} of them with memory outside the pool" if outside else " with nothing outside the pool"
            lines.append(f"({len(hidden)} more sizes not shown{more})")
        if self.unreliable:
            lines.append(f"(device figures are not this process's alone: {self.unreliable})")
        return "\n".join(lines)

    def check(self, outside: int) -> OutsideCheck:
        """The bound on the captures' memory behind the allocator (see ``OutsideCheck``)."""
        return OutsideCheck(self, int(outside))

    def check_first_use(self, first_use: int) -> FirstUseCheck:
        """The bound on the warm-ups' memory behind the allocator (see ``FirstUseCheck``)."""
        return FirstUseCheck(self, int(first_use))


def _went_outside(row: SizeCost) -> bool:
    """More than a driver page's rounding went outside the pool at this size."""
    return any(
        abs(figure or 0) >= PAGE_BYTES
        for figure in (row.behind_allocator_bytes, row.first_use_bytes, row.allocator_outside_pool_bytes)
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


def outside_limit(value: Any, name: str = "outside") -> int:
    """``outside=`` (or ``first_use=``) of ``check_pool`` as bytes; anything but an int >= 0 is a MisuseError."""
    __tracebackhide__ = True
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MisuseError(
            f"{name}={value!r}: give the bytes allowed behind the allocator as an int >= 0 (64 * 2**20 for 64 MiB)"
        )
    return value


@dataclass(frozen=True)
class OutsideCheck:
    """``check_pool(outside=BYTES)``: the memory the captures took behind the allocator is at most BYTES.

    The warm-ups' first use is not counted (``FirstUseCheck`` bounds it).  ``passed``
    is None when no verdict can be given: the figure was not measured, or the GPU's
    free memory is not this process's alone (``CaptureCost.unreliable``).
    """

    cost: CaptureCost
    limit_bytes: int

    option = "outside"
    # the message over the limit: what took the memory, what that memory is, and what shows the size it went at
    spender = "the capture"
    spent_on = (
        "memory the instantiated graphs hold, or a library's own cudaMalloc while capturing (not the warm-ups' "
        "first use: see the 'first use' column)"
    )
    shown_in = "the table"

    @property
    def figure(self) -> int | None:
        return self.cost.behind_allocator_bytes

    @property
    def behind_allocator_bytes(self) -> int | None:
        """The captures' memory behind the allocator (for ``FirstUseCheck`` too; its bound reads ``figure``)."""
        return self.cost.behind_allocator_bytes

    @property
    def passed(self) -> bool | None:
        figure = self.figure
        if figure is None or self.cost.unreliable:
            return None
        return figure <= self.limit_bytes

    def message(self) -> str:
        figure = self.figure
        if figure is None:
            return (
                f"check_pool({self.option}={self.limit_bytes}) has no figure to check: the device memory was not "
                f"read during capture"
            )
        if self.cost.unreliable:
            fix = (
                "run the test with one process per GPU (pytest -n N --cudagraph-devices=auto with N at most the "
                "number of GPUs)"
                if self.cost.shared_device
                else "run it again with no other process on the GPU"
            )
            return (
                f"check_pool({self.option}={format_bytes(self.limit_bytes)}) gives no verdict: {self.cost.unreliable}; "
                f"{fix}\n" + self.cost.table()
            )
        return (
            f"{self.spender} took {format_bytes(figure)} of device memory behind PyTorch's allocator, more than "
            f"{self.option}={format_bytes(self.limit_bytes)} allows; that is {self.spent_on}; {self.shown_in} shows "
            f"at which size it went:\n" + self.cost.table()
        )

    def to_json(self) -> dict[str, Any]:
        return {"limit_bytes": self.limit_bytes, "behind_allocator_bytes": self.figure, "passed": self.passed}


@dataclass(frozen=True)
class FirstUseCheck(OutsideCheck):
    """``check_pool(first_use=BYTES)``: the memory the warm-ups took behind the allocator is at most BYTES.

    That is the process's first use (kernels loaded, library handles) and any buffer
    a library set up on its first call; it depends on what ran before in the process.
    """

    option = "first_use"
    spender = "the warm-ups"
    spent_on = (
        "kernels loaded on first use, library handles, and buffers a library allocated itself on its first call "
        "(cudaMalloc: NCCL, a workspace set up outside PyTorch)"
    )
    shown_in = "the 'first use' column"

    @property
    def figure(self) -> int | None:
        return self.cost.first_use_bytes

    def to_json(self) -> dict[str, Any]:
        return {"limit_bytes": self.limit_bytes, "first_use_bytes": self.figure, "passed": self.passed}


@dataclass
class CaptureCostMeter:
    """Keeps each size's warm-up and capture seconds and reads the device's memory around each phase.

    The capturing code calls ``start`` once; per size ``after_warmup`` between the
    warm-up and the capture and ``after_capture`` with the seconds of its two phases;
    and ``finish`` once.  It passes the pool's bytes, which it reads anyway
    (``PoolMeter``), so the meter takes no allocator snapshot of its own.
    ``device=None`` keeps the seconds only (no CUDA device).

    Example::

        meter = CaptureCostMeter(device)
        meter.start(pool_bytes=0)
        for order, size in enumerate(sizes):
            graph = capture_callable(..., after_warmup=meter.after_warmup)
            pool_now = pools.after_size(size, order).reserved_bytes
            meter.after_capture(size, order, pool_now, graph.warmup_s, graph.capture_s)
        cost = meter.finish(pool_bytes=pools.reserved_bytes())
    """

    device: int | None
    _first: MemoryReading | None = None
    _last: MemoryReading | None = None
    _warmed: MemoryReading | None = None
    rows: list[SizeCost] = field(default_factory=list)

    def read(self, pool_bytes: int) -> MemoryReading | None:
        if self.device is None:
            return None
        from .._compat import device_memory_reading

        free, reserved = device_memory_reading(self.device)
        return MemoryReading(free, reserved, int(pool_bytes))

    def start(self, pool_bytes: int = 0) -> None:
        self._first = self._last = self.read(pool_bytes)

    def after_warmup(self) -> None:
        """Read the device between a size's warm-up and its capture (the pool has not moved since the last row)."""
        self._warmed = self.read(self._last.pool_bytes if self._last is not None else 0)

    def after_capture(self, size: int, order: int, pool_bytes: int, warmup_s: float, capture_s: float) -> None:
        """Close the size's row: its two phases, and the memory taken since the previous row, split at the warm-up."""
        after = self.read(pool_bytes)
        device, allocator, pool = _difference(self._last, after)
        warmup_device, warmup_allocator, _ = _difference(self._last, self._warmed)
        self._last, self._warmed = after, None
        self.rows.append(
            SizeCost(size, order, warmup_s, capture_s, device, allocator, pool, warmup_device, warmup_allocator)
        )

    def finish(self, pool_bytes: int) -> CaptureCost:
        device, allocator, pool = _difference(self._first, self.read(pool_bytes))
        return CaptureCost(tuple(self.rows), device, allocator, pool, shared_device())


def with_device_bounds(check: Any, cost: CaptureCost | None, outside: int | None, first_use: int | None) -> Any:
    """A ``memory.PoolCheck`` with the ``outside`` and ``first_use`` bounds (bytes, None = not asked) added."""
    cost = cost or CaptureCost(())
    if outside is not None:
        check = replace(check, outside=cost.check(outside))
    if first_use is not None:
        check = replace(check, first_use=cost.check_first_use(first_use))
    return check


def release_reading(
    device: int | None, before: tuple[int, int] | None, after: tuple[int, int] | None
) -> ReleaseReading | None:
    """What a release gave back, from two ``(free, reserved)`` device readings; None where not read."""
    if device is None or before is None or after is None:
        return None
    return ReleaseReading(device_bytes=after[0] - before[0], allocator_bytes=before[1] - after[1])


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
        "first_use_bytes": cost.first_use_bytes,
        "behind_allocator_bytes": cost.behind_allocator_bytes,
    }
    if cost.release is not None:
        out["release"] = cost.release.to_json()
        out["held_behind_allocator_bytes"] = cost.held_behind_allocator_bytes
    if cost.unreliable:
        out["outside_unreliable"] = cost.unreliable
    return out
