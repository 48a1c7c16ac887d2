"""``GraphSet``: CUDA graphs of one function, one per batch size, in one shared pool, and the checks on them."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import _compat
from ..errors import InvariantViolation, MisuseError
from ..records.record import TestRecord, current_record
from . import open_objects
from .batch_inputs import batch_inputs, check_not_all_zero
from .breakable import resolve_break_at
from .capture_cost import (
    CaptureCost,
    CaptureCostMeter,
    collection_paused,
)
from .captured import CapturedGraph, _clone_out, _fn_name, capture_callable
from .graph_results import GraphReplayCheck, GraphSetResult
from .graph_set_release import graph_set_result, release_and_record
from .guarded import new_pool
from .memory import PoolId, PoolMeter
from .numerics import DeferredComparisons, TensorComparison, max_abs_error, replay_mismatch_message
from .pool_check import PoolCheck
from .pool_measuring import capture_in_fresh_pool, measured_pool_check
from .reference_overlap import StateWatch, serial_reason
from .sizes import capture_sizes_in_order

POOL_MODES = ("shared", "separate")
ORDERS = ("largest_first", "as_given")


def _check_options(pool: str, order: str, warmup_iters: int, size_warmup_iters: int) -> None:
    __tracebackhide__ = True
    if pool not in POOL_MODES:
        raise MisuseError(f"pool={pool!r} is not a pool mode; use pool='shared' or pool='separate'")
    if order not in ORDERS:
        raise MisuseError(f"order={order!r} is not a capture order; use 'largest_first' or 'as_given'")
    if not isinstance(warmup_iters, int) or warmup_iters < 1:
        raise MisuseError(f"warmup_iters={warmup_iters!r}: give at least 1 warm-up iteration")
    if isinstance(size_warmup_iters, bool) or not isinstance(size_warmup_iters, int) or size_warmup_iters < 1:
        raise MisuseError(
            f"size_warmup_iters={size_warmup_iters!r}: give at least 1 (each shape runs once eagerly before "
            f"its capture, so what loads on a shape's first call does not load inside the capture)"
        )


def _worse_error(current: float | None, err: float | None) -> float | None:
    """The larger replay error of the two; NaN is the worst, None is no error seen."""
    if err is None:
        return current
    if current is None or math.isnan(err) or err > current:
        return err
    return current


class GraphSet:
    """CUDA graphs of one function, one per batch size, and the checks on them.

    Built by ``capture_graphs`` or the ``cudagraphs`` fixture.  Invariants checked:

    - ``replay`` / ``check_replay``: a replay equals eager (or ``reference``) on fresh
      random inputs; the failure names the size, the trial, the worst element.
    - ``check_pool``: one shared pool, and no block left allocated in it across
      captures (the allocator's caching is a figure, not a failure); the failure shows
      the per-size table.
    - every replay: inputs and module parameters are where they were at capture
      (StaleGraphError otherwise).

    The pool figures come from ``meter`` (a ``memory.PoolMeter``).  Release it with
    ``close()`` or a ``with`` block; the fixture releases its own.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[int], Any],
        sizes: Sequence[int],
        *,
        rtol: float | None = None,
        atol: float | None = None,
        pool: str = "shared",
        order: str = "largest_first",
        keep_outputs: bool = False,
        warmup_iters: int = 3,
        size_warmup_iters: int = 1,
        capture_error_mode: str = "global",
        record: TestRecord | None = None,
        break_at: Any = None,
        record_collectives: bool = False,
    ):
        _check_options(pool, order, warmup_iters, size_warmup_iters)
        self.break_at = resolve_break_at(break_at)  # breakable: each size a chain of graphs (graphs/breakable.py)
        # each size's collectives, recorded at capture (graphs/collectives.py; the ranks align them)
        self.record_collectives = bool(record_collectives)
        self.fn = fn
        self.make_inputs = make_inputs
        given = capture_sizes_in_order(sizes, "sizes", caller="capture_graphs")
        self.capture_order: tuple[int, ...] = tuple(sorted(given, reverse=True) if order == "largest_first" else given)
        self.sizes: tuple[int, ...] = tuple(sorted(given))
        self.rtol = rtol
        self.atol = atol
        self.pool_mode = pool
        self.order = order
        self.keep_outputs = keep_outputs
        self.warmup_iters = warmup_iters
        self.size_warmup_iters = size_warmup_iters
        self.capture_error_mode = capture_error_mode
        self.record = record if record is not None else current_record()
        self.name = _fn_name(fn)
        self.graphs: dict[int, CapturedGraph] = {}
        self.capture_s = 0.0
        # per size: warm-up and capture seconds, memory outside the pool (set once capture ends)
        self.cost: CaptureCost | None = None
        self._max_abs_err: float | None = None
        self._replay_checks = 0
        self._pool_check: PoolCheck | None = None
        self._final_pool_bytes: int | None = None
        self._result: GraphSetResult | None = None
        self.closed = False
        self.device = torch.cuda.current_device()
        self.stream = torch.cuda.Stream(self.device)
        self.meter = PoolMeter(self.device)
        self.pool_ids: list[PoolId] = self.meter.pool_ids  # the meter's list: one pool, or one per size
        self.cublas_workspace_bytes: int | None = None
        # closed and recorded by the plugin at the test's end if the test never closes it
        open_objects.track(self)

    # -- replay -----------------------------------------------------------
    def graph(self, size: int) -> CapturedGraph:
        """The CapturedGraph of one size (its ``static_inputs``, ``outputs``, ``graph``)."""
        __tracebackhide__ = True
        self._require_open()
        if size not in self.graphs:
            raise MisuseError(f"batch size {size} was not captured; captured sizes are {list(self.sizes)}")
        return self.graphs[size]

    def replay(self, size: int, *inputs: torch.Tensor, copy: bool = True) -> Any:
        """Replay the graph of ``size`` on ``inputs``; returns the outputs copied out of the pool.

        With ``copy=True`` the inputs are copied into the static buffers.  With
        ``copy=False`` they must be the static buffers (``graph(size).static_inputs``):
        an input at another address raises StaleGraphError naming it.  Module
        parameters replaced since capture raise StaleGraphError naming the parameter.

        .. warning::
            **Static input addresses.** The graph reads the captured buffers, never
            the tensors passed: with ``copy=False``, write new values into
            ``graph(size).static_inputs`` in place (``static.copy_(new)``); update
            a module's weights in place too.

        .. warning::
            **Outputs alias across sizes in a shared pool.** The graph writes its
            outputs into pool memory that other sizes' graphs reuse; this method
            returns copies for that reason.  ``graph(size).replay()`` returns the
            graph's own tensors: copy them out before replaying another size.
        """
        __tracebackhide__ = True
        captured = self.graph(size)
        if copy:
            captured._copy_in(inputs)
            out = captured.replay(verify=True)
        else:
            out = captured.replay_from(*inputs)
            captured.verify()
        return _clone_out(out)

    def check_replay(
        self,
        reference: Callable[..., Any] | None = None,
        trials: int = 3,
        rtol: float | None = None,
        atol: float | None = None,
        sizes: Sequence[int] | None = None,
        side_by_side: bool = True,
    ) -> GraphReplayCheck:
        """Replay every size on fresh random inputs and compare with eager (or ``reference``).

        ``make_inputs(size)`` is called again for every trial.  Tolerances: the
        arguments, else the GraphSet's, else the output dtype's default; NaN never
        passes.  Failure (InvariantViolation): the size, the trial, the output, the
        worst element's index, both values and the error, and the static control
        flow hint (a Python branch taken at capture stays taken on every replay).

        ``side_by_side``: after the first pair, the reference runs on the set's own
        stream while the replay runs on the current one, where that is safe: the first
        reference call wrote no tensor reachable from it (parameters, buffers, a KV
        cache held in an attribute or closure), every such tensor keeps a version
        counter, and no process group is initialized.  ``.serial_reason`` of the
        result says why it ran one after the other instead.  A mismatch seen side by
        side is checked again one after the other before it is reported.  Give
        ``side_by_side=False`` where the function writes shared state through a
        kernel that bumps no version counter.

        .. warning::
            **Static control flow.** A replay re-launches the kernels recorded at
            capture, whatever the inputs: a Python branch, or a Python number,
            that depends on the batch is frozen at its capture-time value.  Fresh
            random inputs per trial are what catch it; inputs that make every
            branch agree (all zeros, one fixed tensor) hide it.

        Example::

            gs.check_replay(trials=3)            # against fn itself, eagerly
            gs.check_replay(reference=ref_fn)    # against a reference implementation
        """
        __tracebackhide__ = True
        return _check_replay(self, reference, trials, rtol, atol, sizes, side_by_side)

    @property
    def max_abs_err(self) -> float | None:
        """Largest absolute replay-vs-reference error seen by ``check_replay`` so far."""
        return self._max_abs_err

    # -- memory -----------------------------------------------------------
    @property
    def pool_bytes(self) -> int:
        """Bytes reserved by the set's pool(s) now, from the allocator snapshot."""
        if self.closed:
            return self._final_pool_bytes or 0
        return self.meter.reserved_bytes()

    def measure_graph_bytes(self, sizes: Sequence[int] | None = None) -> dict[int, int]:
        """Each size's own high-water mark: that size captured alone in a fresh pool.

        The figure excludes the cuBLAS workspace (it already exists outside the
        measuring pool) and is rounded to whole segments, like ``pool_bytes``.
        Costs one warm-up and one capture per size; measured sizes are remembered.
        The measuring graphs are dropped at once and their pools freed.
        """
        self._require_open()
        wanted = self.capture_order if sizes is None else capture_sizes_in_order(sizes, "sizes")
        return self.meter.measure_alone(wanted, self._capture_alone)

    def _capture_alone(self, size: int) -> tuple[PoolId, CapturedGraph]:
        label = f"batch size {size}"
        return capture_in_fresh_pool(self.fn, self.graph(size).static_inputs, self.stream, label, self.break_at)

    @property
    def graph_bytes(self) -> dict[int, int]:
        """Per-size high-water marks (measured on first access; see ``measure_graph_bytes``)."""
        return self.measure_graph_bytes()

    @property
    def largest_graph_bytes(self) -> int:
        """The largest high-water mark measured; measures the largest size if none was."""
        return self.meter.largest_alone_bytes(max(self.sizes), self._capture_alone)

    def pool_check(
        self, slack: int | None = None, *, outside: int | None = None, first_use: int | None = None
    ) -> PoolCheck:
        """The pool check's figures without raising (see ``check_pool``)."""
        __tracebackhide__ = True
        self._require_open()
        check = measured_pool_check(self, slack, outside, first_use)
        self._pool_check = check
        return check

    def check_pool(
        self, slack: int | None = None, *, outside: int | None = None, first_use: int | None = None
    ) -> PoolCheck:
        """Assert the graphs share one pool that nothing they left behind keeps growing.

        Derived from what the allocator did (``pool_check``), it fails on what a
        user can get wrong, and names it:

        - **separate pools**: more than one pool (each holds its own high-water mark);
        - **kept alive**: blocks still allocated in the pool after a capture, once the
          outputs are released (outputs kept, a tensor the function keeps across
          captures): the failure names each block's size and, from one more capture
          with allocation stacks recorded, the line that allocated it;
        - **capture order**: sizes not captured largest first, where the same sizes
          captured largest first into a fresh pool hold less;
        - ``slack=BYTES`` given: the pool over the largest graph's own mark + the
          cuBLAS workspace + BYTES.

        What the allocator does by itself (a 2 MiB small segment a smaller size needs,
        a hole a split block leaves, a workspace taken at one size) holds only free
        blocks: it does not fail, and ``PoolCheck.caching_bytes`` and ``.growth`` give
        it as a figure.  The check proves that no memory is held across captures and
        that one pool is shared; it does not prove the pool is as small as a perfect
        allocator would make it.

        With ``outside=BYTES``, also: the device memory the captures took behind
        PyTorch's allocator (the instantiated graphs, a library's own cudaMalloc while
        capturing; see ``capture_cost``) is at most BYTES.  With ``first_use=BYTES``:
        the device memory the warm-ups took behind the allocator (kernels loaded on
        first use, library handles, a library's buffer set up on its first call) is
        at most BYTES.  First use is a cost of the process: it depends on what ran
        before in it.

        Failure (InvariantViolation): the cause first, then the figures and the
        per-size table (pool growth in capture order, what was live, each size's own mark);
        for ``outside`` and ``first_use``, the figure and the per-size cost table.
        MisuseError when a device bound can get no verdict (the GPU is shared with
        other processes).

        Example::

            gs = cudagraphs.capture(model, make_inputs, sizes=[1, 2, 4, 8])
            gs.check_pool()
            gs.check_pool(outside=64 * 2**20)   # the graphs: at most 64 MiB behind the allocator
            gs.check_pool(first_use=256 * 2**20)   # the warm-ups: at most 256 MiB
        """
        __tracebackhide__ = True
        check = self.pool_check(slack, outside=outside, first_use=first_use)
        check.raise_if_failed()
        return check

    def size_table(self) -> str:
        """The per-size table (capture order, pool after each capture, growth, own mark)."""
        return self.meter.size_table(self.capture_order)

    # -- results and release ------------------------------------------------
    def result(self) -> GraphSetResult:
        """The report entry of this set (figures measured so far; nothing new is measured)."""
        if self._result is not None:
            return self._result
        return graph_set_result(self, self._pool_check, self._max_abs_err, self._replay_checks)

    def close(self) -> None:
        """Free the graphs and their pool(s), and add the result to the test's record once."""
        if self.closed:
            return
        result = self.result()
        self._final_pool_bytes = result.pool_bytes
        self.closed = True
        self._result = result
        release_and_record(self, result)

    def _require_open(self) -> None:
        __tracebackhide__ = True
        if self.closed:
            raise MisuseError(f"the GraphSet of {self.name} was closed; its graphs were released")

    def __enter__(self) -> GraphSet:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.graphs)} graph{'s' if len(self.graphs) != 1 else ''}"
        return f"<GraphSet {self.name} sizes={list(self.sizes)} pool={self.pool_mode} {state}>"


def capture_all(graph_set: GraphSet) -> None:
    """Capture every size of ``graph_set`` in its capture order (what ``capture_graphs`` runs)."""
    __tracebackhide__ = True
    shared = graph_set.meter.add_pool(new_pool()) if graph_set.pool_mode == "shared" else None
    start = time.perf_counter()
    cost = CaptureCostMeter(graph_set.device)
    # an earlier graph collected between two readings would free device memory behind the allocator
    with collection_paused():
        cost.start(pool_bytes=0)  # a new pool holds nothing
        try:
            for position, size in enumerate(graph_set.capture_order):
                inputs = batch_inputs(graph_set.make_inputs, size)
                if position == 0:
                    check_not_all_zero(inputs, size)
                static = tuple(t.clone() for t in inputs)
                pool = shared if shared is not None else graph_set.meter.add_pool(new_pool())
                captured = capture_callable(
                    graph_set.fn,
                    static,
                    pool=pool,
                    stream=graph_set.stream,
                    # What warms up once (cuBLAS handles, lazily loaded kernels, a compile)
                    # is warm after the first size; a later size runs its own shape once.
                    warmup_iters=graph_set.warmup_iters if position == 0 else graph_set.size_warmup_iters,
                    label=f"batch size {size}",
                    keep_outputs=graph_set.keep_outputs,
                    capture_error_mode=graph_set.capture_error_mode,
                    workspace_in_pool=position == 0,
                    after_warmup=cost.after_warmup,
                    break_at=graph_set.break_at,
                    record_collectives=graph_set.record_collectives,
                )
                graph_set.graphs[size] = captured
                pool_now = graph_set.meter.after_size(size, position).reserved_bytes
                cost.after_capture(size, position, pool_now, captured.warmup_s, captured.capture_s)
            graph_set.cost = cost.finish(pool_bytes=graph_set.meter.reserved_bytes())
        finally:
            graph_set.capture_s = time.perf_counter() - start
            # The workspace the first capture put in the pool is the live block that a
            # clear frees; leaving it registered would let a later capture elsewhere reuse it.
            graph_set.cublas_workspace_bytes = graph_set.meter.release_cublas_workspace()


def _check_replay(
    graph_set: GraphSet,
    reference: Callable[..., Any] | None,
    trials: int,
    rtol: float | None,
    atol: float | None,
    sizes: Sequence[int] | None,
    side_by_side: bool = True,
) -> GraphReplayCheck:
    """``GraphSet.check_replay``: replay the sizes ``trials`` times each, compare, count the check."""
    __tracebackhide__ = True
    graph_set._require_open()
    if not isinstance(trials, int) or trials < 1:
        raise MisuseError(f"trials={trials!r}: give at least one trial")
    if not isinstance(side_by_side, bool):
        raise MisuseError(f"side_by_side={side_by_side!r}: give True (where safe) or False (one after the other)")
    reference_fn = reference if reference is not None else graph_set.fn
    reference_name = "eager" if reference is None else "the reference"
    rtol = graph_set.rtol if rtol is None else rtol
    atol = graph_set.atol if atol is None else atol
    chosen = graph_set.capture_order if sizes is None else capture_sizes_in_order(sizes, "sizes")
    entries = [(trial, size) for trial in range(trials) for size in chosen]
    run = _compare_replays(graph_set, reference_fn, entries, rtol, atol, side_by_side, trials, reference_name)
    worst, mismatch = _first_mismatch(graph_set, run.results, trials, reference_name)
    if mismatch is not None and run.serial_reason is None:
        # Side by side, a write the version counters cannot see races the replay: only a
        # mismatch seen one after the other is reported as the graph's.
        serial = _compare_replays(graph_set, reference_fn, entries, rtol, atol, False, trials, reference_name)
        _, serial_mismatch = _first_mismatch(graph_set, serial.results, trials, reference_name)
        if serial_mismatch is None:
            # (not the static control flow hint: that flow agreed one after the other)
            _, serial_mismatch = _first_mismatch(
                graph_set, run.results, trials, reference_name, cause=_side_by_side_only(reference_name)
            )
        raise InvariantViolation(serial_mismatch)
    if mismatch is not None:
        raise InvariantViolation(mismatch)
    err = max_abs_error(worst)
    graph_set._max_abs_err = _worse_error(graph_set._max_abs_err, err)
    graph_set._replay_checks += 1
    return GraphReplayCheck(tuple(sorted(chosen)), trials, err, reference_name, run.serial_reason)


@dataclass(frozen=True)
class _ComparedReplays:
    """The comparisons of one pass over the entries, and why the reference ran one after the replay (None: beside it)."""

    results: list[tuple[tuple[int, int], list[TensorComparison]]]
    serial_reason: str | None


def _compare_replays(
    graph_set: GraphSet,
    reference_fn: Callable[..., Any],
    entries: list[tuple[int, int]],
    rtol: float | None,
    atol: float | None,
    side_by_side: bool,
    trials: int,
    reference_name: str,
) -> _ComparedReplays:
    """Replay and compare every ``(trial, size)``; the reference beside the replay once that is known to be safe."""
    __tracebackhide__ = True
    # Compared on the device and read back once: the host never waits for a replay,
    # so it queues the next size's work while the device runs this one.
    pending = DeferredComparisons()
    reason: str | None = "side_by_side=False" if not side_by_side else None
    side: torch.cuda.Stream | None = None
    try:
        for index, (trial, size) in enumerate(entries):
            inputs = batch_inputs(graph_set.make_inputs, size)
            if side is not None:
                actual, expected = _replay_beside_reference(graph_set, size, inputs, reference_fn, side)
            else:
                # the first pair runs one after the other whatever is allowed: it is what the
                # watch learns from (whether the reference writes state the replay reads)
                watch = StateWatch(reference_fn) if index == 0 and reason is None else None
                actual = graph_set.replay(size, *inputs)
                with torch.no_grad():
                    expected = reference_fn(*inputs)
                if watch is not None:
                    reason = serial_reason(watch)
                    side = graph_set.stream if reason is None else None
            pending.add((trial, size), actual, expected, rtol, atol)
            del actual, expected
    except Exception:
        if side is not None:
            raise  # side by side, an earlier mismatch is not confirmed: the error is what went wrong
        _, mismatch = _first_mismatch(graph_set, pending.results(), trials, reference_name)
        if mismatch is None:
            raise
        # a mismatch on an earlier size or trial is the first thing that went wrong
        raise InvariantViolation(mismatch) from None
    if reason is None and not entries[1:]:
        reason = "one size and one trial: nothing to run beside it"
    return _ComparedReplays(pending.results(), reason)


def _replay_beside_reference(
    graph_set: GraphSet,
    size: int,
    inputs: tuple[torch.Tensor, ...],
    reference_fn: Callable[..., Any],
    side: torch.cuda.Stream,
) -> tuple[Any, Any]:
    """One replay on the current stream and the reference on ``side`` at the same time; both joined back."""
    __tracebackhide__ = True
    captured = graph_set.graph(size)
    main = torch.cuda.current_stream()
    captured._copy_in(inputs)
    inputs_ready = torch.cuda.Event()
    inputs_ready.record(main)
    # the replay is queued first: one launch, which the device runs while the host
    # launches the reference's kernels
    actual = _clone_out(captured.replay(verify=True))
    side.wait_event(inputs_ready)
    with torch.cuda.stream(side), torch.no_grad():
        expected = reference_fn(*inputs)
    main.wait_stream(side)
    # memory used on the other stream is not lent out again before that stream is done with it
    for tensor in inputs:
        tensor.record_stream(side)
    for leaf in _compat.tree_leaves(expected):
        if isinstance(leaf, torch.Tensor) and leaf.is_cuda:
            leaf.record_stream(main)
    return actual, expected


def _side_by_side_only(reference_name: str) -> str:
    """How a mismatch seen only side by side ends: what it points to, and the fix."""
    return (
        f"This mismatch appeared only while {reference_name} ran beside the replay on a second "
        f"stream; run one after the other, every size and trial agreed. The function most likely writes state "
        f"that both read, through a kernel whose writes the check cannot see (a C++ extension's or a Triton "
        f"kernel's): pass side_by_side=False to check_replay to check it one after the other."
    )


def _first_mismatch(
    graph_set: GraphSet,
    results: list[tuple[tuple[int, int], list[TensorComparison]]],
    trials: int,
    reference_name: str,
    cause: str | None = None,
) -> tuple[list[TensorComparison], str | None]:
    """The comparisons in the order they ran, up to the first that failed, and that failure's message."""
    seen: list[TensorComparison] = []
    for (trial, size), comparisons in results:
        seen.extend(comparisons)
        failed = next((c for c in comparisons if not c.passed), None)
        if failed is not None:
            graph_set._max_abs_err = _worse_error(graph_set._max_abs_err, max_abs_error(comparisons))
            return seen, replay_mismatch_message(failed, size, trial, trials, reference_name, cause)
    return seen, None
