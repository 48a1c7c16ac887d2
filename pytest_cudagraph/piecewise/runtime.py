"""The split graph at run time: capture every size into one pool, then pad, replay and slice.

Each non-splitting piece is captured as one CUDA graph per capture size, largest
size first, all sizes and all pieces in **one** memory pool.  Outputs of a piece
feed the next piece through static buffers; after a size is captured its piece
outputs are kept only as non-owning aliases (vLLM's weak refs), so the next,
smaller size reuses the same pool memory.  The pool is metered by the same
``memory.PoolMeter`` as a ``GraphSet``'s.

At run time a batch of ``n`` rows is padded (zeros, along ``batch_dim``) to the
next captured size and the outputs are sliced back to ``n`` rows; a batch larger
than the largest captured size runs the compiled pieces without graphs.  Without
CUDA (or with CPU inputs) nothing is captured and the split pieces run as they are.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch

from .. import _compat as compat
from ..graphs.capture_cost import CaptureCost, CaptureCostMeter, collection_paused, outside_limit, with_device_bounds
from ..graphs.memory import PoolMeter
from ..graphs.pool_check import PoolCheck
from .ops import SplittingOp, SplittingOpCounter
from .padding import BatchPadding
from .pieces import PassState
from .trace import GraphTrace


class PiecewiseRuntime:
    """Runs the traced, split graph: one capture pass per size, then calls that replay.

    ``state`` is the pass state every capturable piece reads; ``meter`` meters the
    one pool once something was captured.
    """

    def __init__(
        self, state: PassState, trace: GraphTrace, padding: BatchPadding, splitting_ops: Sequence[SplittingOp]
    ):
        self.state = state
        self.trace = trace
        self.padding = padding
        self.splitting_ops = splitting_ops
        self.meter: PoolMeter | None = None
        self.device_index: int | None = None
        self.captured = False
        self.capture_s: float | None = None
        # per size: warm-up and capture seconds, memory outside the pool
        self.cost: CaptureCost | None = None
        self.last_calls: Counter[str] = Counter()
        # why the capturable pieces were not captured (None once they were, or before the first call)
        self.not_captured: str | None = None
        # calls that replayed no graph, by reason
        self.uncaptured_calls: Counter[str] = Counter()
        # the module's forward argument names, to name an input in a reason
        self.arg_names: list[str] = []

    def capture_all(self, args: Sequence[Any]) -> None:
        """Capture every capturable piece at every size, largest first, into one pool."""
        __tracebackhide__ = True
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if not compat.cuda_available():
            self.not_captured = "no CUDA device: the split pieces run without graphs"
            return
        if devices != {"cuda"}:  # the CPU path: the split pieces run uncaptured
            on_cpu = [
                f"{self.arg_names[i] if i < len(self.arg_names) else f'input {i}'!r} on {a.device}"
                for i, a in enumerate(args)
                if isinstance(a, torch.Tensor) and a.device.type != "cuda"
            ]
            self.not_captured = f"a CPU input ({', '.join(on_cpu)}): the split pieces run without graphs"
            return
        from ..graphs.capture import new_pool

        state = self.state
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        self.device_index = device.index if device.index is not None else torch.cuda.current_device()
        started = time.perf_counter()
        self.meter = PoolMeter(self.device_index)
        state.pool = self.meter.add_pool(new_pool())
        state.stream = torch.cuda.Stream(device)
        state.workspace_in_pool = True
        cost = CaptureCostMeter(self.device_index)
        # an earlier graph collected between two readings would free device memory behind the allocator
        with collection_paused():
            cost.start(pool_bytes=0)  # a new pool holds nothing
            try:
                for order, size in enumerate(sorted(self.padding.capture_sizes, reverse=True)):
                    warmup_s, capture_s = self._capture_size(args, size, device, cost.after_warmup)
                    pool_now = self.meter.after_size(size, order).reserved_bytes
                    cost.after_capture(size, order, pool_now, warmup_s, capture_s)
                self.cost = cost.finish(pool_bytes=self.meter.reserved_bytes())
            finally:
                state.mode, state.size = "run", None
                if state.pool is not None:
                    # The workspace the first capture put in the pool stays registered with
                    # cuBLAS; clear it so no later matmul elsewhere writes into our pool.
                    self.meter.release_cublas_workspace()
        self.captured = True
        self.capture_s = time.perf_counter() - started

    def _capture_size(
        self, args: Sequence[Any], size: int, device: torch.device, after_warmup: Any
    ) -> tuple[float, float]:
        """Warm the chain up at ``size``, then capture every piece: (warm-up seconds, capture seconds)."""
        __tracebackhide__ = True
        state, runner = self.state, self.trace.runner
        assert runner is not None  # build() traced the module before any capture
        started = time.perf_counter()
        graph_args = self.trace.graph_args(self.padding.stage(self.padding.zeros_like(args, size), size), size)
        # Warm the whole chain up on the capture stream: cuBLAS handles and
        # lazily built kernels must exist before any piece is captured.
        state.stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(state.stream):
            state.mode = "run"
            runner(*graph_args)
        torch.cuda.current_stream(device).wait_stream(state.stream)
        warmed = time.perf_counter()
        after_warmup()  # a reading between the phases, in neither timing
        capture_start = time.perf_counter()
        state.mode, state.size = "capture", size
        state.captured_in_pass = []
        out = runner(*graph_args)
        captured = time.perf_counter()
        del out, graph_args
        # Only now, with every piece of this size captured, may its pool
        # tensors go: the pieces read each other's outputs.
        pool_storages = set().union(*(p.output_storages(size) for p in state.captured_in_pass))
        for piece in state.captured_in_pass:
            piece.weaken(size, pool_storages)
        state.captured_in_pass = []
        return warmed - started, captured - capture_start

    def run(self, args: Sequence[Any]) -> Any:
        """One call: pad to the next captured size, replay (or run the pieces), slice the outputs back."""
        __tracebackhide__ = True
        padding, state = self.padding, self.state
        padding.check_signature(args)
        rows = padding.batch_size(args)
        padded = padding.padded_size(rows)
        if padded is None:
            inputs = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
            size = rows
            if self.captured:
                largest = max(padding.capture_sizes)
                self.uncaptured_calls[f"batch size above the largest captured size {largest}: ran without graphs"] += 1
        else:
            inputs = padding.stage(args, padded)
            size = padded
        graph_args = self.trace.graph_args(inputs, size)
        runner = self.trace.runner
        assert runner is not None  # build() traced the module before the first call
        counter = SplittingOpCounter(self.splitting_ops)
        try:
            if padded is not None and self.captured:
                state.mode, state.size = "replay", padded
            with counter:
                raw = runner(*graph_args)
        finally:
            state.mode, state.size = "run", None
        self.last_calls = counter.counts
        return self.trace.outputs(raw, inputs, size, rows)

    def pool_bytes(self) -> int | None:
        """Bytes the one pool holds now; None when nothing was captured."""
        return self.meter.reserved_bytes() if self.captured and self.meter is not None else None

    def pool_check(self, slack: int | None, outside: int | None = None, first_use: int | None = None) -> PoolCheck:
        """The pool now against the pool right after the largest size (less the cuBLAS workspace).

        ``outside`` (bytes) also bounds the memory the captures took behind the
        allocator, ``first_use`` the memory the warm-ups took there.
        """
        assert self.meter is not None, "pool_check needs captured graphs"
        meter = self.meter
        order = sorted(self.padding.capture_sizes, reverse=True)
        largest = order[0]
        workspace = meter.cublas_workspace_bytes or 0
        largest_after = meter.rows[largest].pool_bytes_after
        assert largest_after is not None  # the meter read the pool right after each size was captured
        outside_bytes = None if outside is None else outside_limit(outside)
        first_use_bytes = None if first_use is None else outside_limit(first_use, "first_use")
        check = meter.check(
            largest_size=largest,
            largest_graph_bytes=max(0, largest_after - workspace),
            slack=slack,
            capture_order=order,
        )
        return with_device_bounds(check, self.cost, outside_bytes, first_use_bytes)
