"""What ``torch.compile(mode="reduce-overhead")`` did with CUDA graphs: recordings and skips.

Reduce-overhead hands compiled graphs to Inductor's cudagraph trees, which record a
CUDA graph per new input shape (after a warm-up run) and silently fall back to
running without graphs when they cannot record one: mutated inputs, CPU tensors,
dynamic shapes past a limit.  Those skips only show as a WARNING and a counter, so
a model can lose its graphs without any test noticing.  ``watch_trees`` counts,
over a block:

- ``recordings``: CUDA graphs recorded (Dynamo's CUDAGRAPH_RECORDING callback, or
  the tree manager's node count where that callback does not exist);
- ``skips`` and ``skip_reasons``: ``counters["inductor"]["cudagraph_skips"]`` and the
  "skipping cudagraphs due to ..." messages, verbatim;
- ``recorded_non_static_inputs``: inputs copied into the graph before each replay
  (a cost that a static input avoids).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from . import _compat
from .record import TestRecord, current_record

__all__ = ["ReduceOverheadResult", "TreeWatch", "watch_trees"]

_COUNTERS = {
    "skips": "cudagraph_skips",
    "recorded_non_static_inputs": "cudagraph_recorded_non_static_inputs",
    "partitions": "cudagraph_partitions",
}


@dataclass(frozen=True)
class ReduceOverheadResult:
    """Reduce-overhead figures over one watched block (report section ``reduce_overhead``)."""

    recordings: int
    skips: int
    skip_reasons: tuple[str, ...]
    recorded_non_static_inputs: int
    partitions: int
    tree_nodes: int
    pool_bytes: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "recordings": self.recordings,
            "skips": self.skips,
            "skip_reasons": list(self.skip_reasons),
            "recorded_non_static_inputs": self.recorded_non_static_inputs,
            "partitions": self.partitions,
            "tree_nodes": self.tree_nodes,
            "pool_bytes": self.pool_bytes,
        }


class _ReasonHandler(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(level=logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink.append(record.getMessage())
        except Exception:  # a broken log call must not break the test
            self.sink.append(str(record.msg))


class TreeWatch:
    """Counts cudagraph-tree recordings and skips while active (a context manager).

    Invariant it lets a test state: ``watch.recordings == n`` and ``watch.skips == 0``
    (or ``"mutated inputs" in watch.skip_reasons[0]`` for an expected skip).
    Everything it touches (log handlers, logger levels, callbacks) is undone on exit.

    Example::

        with watch_trees() as trees:
            compiled(x64); compiled(x64); compiled(x32); compiled(x32)
        assert trees.recordings == 2 and trees.skips == 0
    """

    def __init__(self, device: int | None = None, record: TestRecord | None = None):
        self.device = device
        self.record = record
        self.skip_reasons: list[str] = []
        self._callback_recordings = 0
        self._undo_callback: Any = None
        self._handlers: list[tuple[logging.Logger, logging.Handler, int]] = []
        self._counters_before: dict[str, int] = {}
        self._nodes_before = 0
        self._result: ReduceOverheadResult | None = None
        self.active = False

    def _device(self) -> int:
        import torch

        return torch.cuda.current_device() if self.device is None else self.device

    def _counter(self, name: str) -> int:
        return _compat.counter_value("inductor", name)

    def _nodes(self) -> int:
        return _compat.cudagraph_tree_node_count(_compat.cudagraph_tree_manager(self._device()))

    def __enter__(self) -> TreeWatch:
        _compat.load_cudagraph_trees()  # creates the loggers and the manager registry

        self._counters_before = {key: self._counter(name) for key, name in _COUNTERS.items()}
        self._nodes_before = self._nodes()

        def on_recording() -> None:
            self._callback_recordings += 1

        self._undo_callback = _compat.watch_cudagraph_recordings(on_recording)
        for name in _compat.cudagraph_skip_logger_names():
            logger = logging.getLogger(name)
            handler = _ReasonHandler(self.skip_reasons)
            previous_level = logger.level
            if not logger.isEnabledFor(logging.WARNING):
                logger.setLevel(logging.WARNING)
            logger.addHandler(handler)
            self._handlers.append((logger, handler, previous_level))
        self.active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        try:
            self._result = self._snapshot()
        finally:
            self.active = False
            if self._undo_callback is not None:
                self._undo_callback()
            for logger, handler, level in self._handlers:
                logger.removeHandler(handler)
                logger.setLevel(level)
            self._handlers.clear()
        record = self.record if self.record is not None else current_record()
        if record is not None:
            record.set("reduce_overhead", self._result)

    def _snapshot(self) -> ReduceOverheadResult:
        deltas = {key: self._counter(name) - self._counters_before.get(key, 0) for key, name in _COUNTERS.items()}
        manager = _compat.cudagraph_tree_manager(self._device())
        nodes = _compat.cudagraph_tree_node_count(manager)
        if self._undo_callback is not None:
            recordings = self._callback_recordings
        else:  # no recording callback in this torch: new tree nodes are the recordings
            recordings = max(0, nodes - self._nodes_before)
        pool = _compat.cudagraph_tree_pool(manager) if manager is not None else None
        pool_bytes = None
        if pool is not None:
            from .memory import pool_bytes as read_pool_bytes

            pool_bytes = read_pool_bytes(pool, self._device())
        return ReduceOverheadResult(
            recordings=recordings,
            skips=deltas["skips"],
            skip_reasons=tuple(self.skip_reasons),
            recorded_non_static_inputs=deltas["recorded_non_static_inputs"],
            partitions=deltas["partitions"],
            tree_nodes=nodes,
            pool_bytes=pool_bytes,
        )

    # -- figures (live while active, final after exit) ---------------------------
    def result(self) -> ReduceOverheadResult:
        return self._result if self._result is not None and not self.active else self._snapshot()

    @property
    def recordings(self) -> int:
        return self.result().recordings

    @property
    def skips(self) -> int:
        return self.result().skips

    @property
    def recorded_non_static_inputs(self) -> int:
        return self.result().recorded_non_static_inputs


def watch_trees(device: int | None = None, record: TestRecord | None = None) -> TreeWatch:
    """A ``TreeWatch`` over the ``with`` block; it reports into ``record`` (default: the running test's).

    Its ``result()`` is a :class:`ReduceOverheadResult`.
    """
    return TreeWatch(device=device, record=record)
