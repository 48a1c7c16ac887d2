"""A captured graph's collectives: what the function issued while it was captured, and the NCCL kernels the graph holds.

A replay re-launches every collective recorded at capture, and a collective waits
until every rank of its group launches the same one.  So ranks whose graphs hold
different collectives (another count, another order, one more on one rank) hang
at their first replay.  ``record_collectives()`` is pushed around a capture: a
dispatch mode that keeps each collective call (kind, dtype, element count, group,
the user's line that issued it).  ``graph_collective_kernels(graph)`` reads the
NCCL kernel nodes of the captured graph back (kind, reduction, dtype; never the
count), which also sees collectives issued past the dispatcher.  How torch
exposes both, per version, is ``_compat/collectives``.

The ranks compare these sequences before the first replay (``ranks/alignment.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import _compat
from ..compile.call_site import user_call_site

__all__ = ["CapturedCollectives", "Collective", "CollectiveRecord", "graph_collective_kernels", "record_collectives"]


@dataclass(frozen=True)
class Collective:
    """One collective: ``kind`` ("all_reduce"), ``dtype`` ("float32"), ``count`` (elements sent), group, reduction.

    ``where`` is the user's line that issued it ("tests/test_tp.py:57 in forward"),
    for a recorded call; a kernel read back from the graph has none, nor a count.
    Two collectives are the same when everything but ``where`` and ``op`` is.
    """

    kind: str
    dtype: str | None = None
    count: int | None = None
    group: str | None = None
    reduce: str | None = None
    op: str | None = None
    where: str | None = None

    @property
    def signature(self) -> tuple[Any, ...]:
        """What must match across ranks (the call site and the op's overload need not)."""
        return (self.kind, self.dtype, self.count, self.group, self.reduce)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Collective:
        return cls(data["kind"], **{k: data.get(k) for k in ("dtype", "count", "group", "reduce", "op", "where")})


@dataclass(frozen=True)
class CapturedCollectives:
    """One capture's collectives: the ``calls`` it issued, and the graph's NCCL ``kernels`` (None: not read)."""

    calls: tuple[Collective, ...]
    kernels: tuple[Collective, ...] | None


class CollectiveRecord:
    """The collectives one capture issued, in order (``calls``); filled while ``record_collectives()`` is active."""

    def __init__(self) -> None:
        self.calls: list[Collective] = []


def _where() -> str | None:
    site = user_call_site(skip=lambda frame: _compat.is_generated_code(frame.f_code.co_filename))
    if site is None:
        return None
    return f"{site.label} in {site.function}"


def _recorder_class() -> type:
    base = _compat.collective_recorder_base()

    class CollectiveRecorder(base):  # type: ignore[misc, valid-type]
        def __init__(self, record: CollectiveRecord):
            super().__init__()
            self.record = record

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            call = _compat.collective_call(func, args, kwargs)
            if call is not None:
                self.record.calls.append(Collective(**call, where=_where()))
            return func(*args, **kwargs)

    return CollectiveRecorder


_RECORDER: type | None = None


@contextlib.contextmanager
def record_collectives() -> Iterator[CollectiveRecord]:
    """Record every collective dispatched inside the block; yields the record, filled as they come.

    Push it around a capture only: a dispatch mode sees every op, and on torch
    versions whose modes cannot tell Dynamo to go on compiling (see
    ``_compat/collectives``), a frame Dynamo has not compiled yet runs eagerly
    under it.  Warm-up, which runs before the capture, compiles it.
    """
    global _RECORDER
    if _RECORDER is None:
        _RECORDER = _recorder_class()
    record = CollectiveRecord()
    with _RECORDER(record):
        yield record


def graph_collective_kernels(graph: Any) -> tuple[Collective, ...] | None:
    """The NCCL kernels of a captured graph, in topological order, as Collectives (no count); None if unreadable.

    ``graph`` must come from ``_compat.new_readable_cuda_graph()`` (a graph that kept
    its nodes after instantiation).
    """
    symbols = _compat.graph_kernel_names(graph)
    if symbols is None:
        return None
    kernels = []
    for symbol in symbols:
        decoded = _compat.nccl_kernel_collective(symbol)
        if decoded is not None:
            kernels.append(Collective(kind=decoded["kind"], dtype=decoded["dtype"], reduce=decoded["reduce"]))
    return tuple(kernels)
