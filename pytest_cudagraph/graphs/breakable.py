"""Breakable CUDA graphs: capture a function as a chain of graphs, broken at ops that run eagerly.

Serving engines (vLLM's ``VLLM_USE_BREAKABLE_CUDAGRAPH``, SGLang, TensorRT-LLM)
capture a model without a compiler: capture runs the model, and where it calls an
op that cannot live in a graph (attention with per-batch metadata) the current
graph ends (``capture_end``), the op runs eagerly on the graph's own tensors, and
the next graph begins (``capture_begin``) in the same pool.  A replay runs the
graphs in order with the ops in between.

Here the break ops (``break_at=("ns::op", ...)``) are seen at the dispatcher: a
``TorchDispatchMode`` is active while the chain is captured, as the piecewise
splitting ops are counted.  At replay each eager op runs again with the tensors
it was called with at capture (pool memory the graph before it wrote), and an
output it returns as a new tensor is copied into the tensor the capture returned,
which is where the graphs after it read.  After capture the op's arguments in the
pool are kept as non-owning aliases (vLLM's weak refs), so the next, smaller size
reuses the same pool memory, as a full graph's outputs do.

``capture_chain`` is what ``capture_callable(..., break_at=...)`` runs for a
``GraphSet``; a size's ``CapturedGraph`` then holds a :class:`GraphChain` where a
full capture holds one ``torch.cuda.CUDAGraph``, so replay, the pointer and
stale-parameter checks, ``check_replay`` and ``check_pool`` are the full graphs' own.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from .. import _compat
from ..errors import CaptureError, MisuseError
from .break_ops import EXAMPLE, break_at_entries
from .capture_failure import break_at_hint
from .guarded import _capture_error, _restore_process
from .memory import PoolId

__all__ = ["GraphChain", "capture_chain", "chain_result", "resolve_break_at"]


def resolve_break_at(break_at: Any) -> tuple[Any, ...]:
    """The break ops of ``break_at`` as ``piecewise.ops.SplittingOp``; () for None.

    Names (``"ns::op"``, ``"ns::op.overload"``), OpOverloads, packets and
    ``torch.library.custom_op`` objects are accepted; a name that is not a
    registered op is a MisuseError naming the fix.
    """
    __tracebackhide__ = True
    from ..piecewise.ops import SplittingOp, op_names, registered_op

    resolved = []
    for entry in break_at_entries(break_at):
        if isinstance(entry, SplittingOp):  # already resolved: agree() hands its resolved ops to each capture
            resolved.append(entry)
            continue
        op = _compat.custom_op_overload(entry)
        names = op_names(op)
        if names is not None:
            resolved.append(SplittingOp(*names))
        elif isinstance(op, str):
            resolved.append(registered_op(op, "break_at op", "capturing"))
        else:
            raise MisuseError(
                f"break_at entry {op!r} is a {type(op).__name__}, not an op; give 'namespace::op' names or "
                f"registered ops, e.g. {EXAMPLE}"
            )
    return tuple(dict.fromkeys(resolved))


def break_op_names(break_ops: Sequence[Any]) -> list[str]:
    """The names of the break ops, as the report keeps them."""
    return [str(op) for op in break_ops]


class EagerStep:
    """One eager op of a chain: the op, the arguments it had at capture, and the outputs later graphs read."""

    def __init__(self, op: Any, args: tuple, kwargs: dict, result: Any):
        self.op = op
        self.name = _compat.op_qualified_name(op)
        self.args = args
        self.kwargs = kwargs
        self.results = [t for t in _compat.tree_leaves(result) if isinstance(t, torch.Tensor)]

    def run(self) -> None:
        """Run the op again on its capture-time tensors; a new output is copied where the next graph reads."""
        out = self.op(*self.args, **self.kwargs)
        fresh = [t for t in _compat.tree_leaves(out) if isinstance(t, torch.Tensor)]
        for new, static in zip(fresh, self.results):
            if new.data_ptr() != static.data_ptr():
                static.copy_(new)

    def weaken(self, in_pool: Callable[[torch.Tensor], bool]) -> None:
        """Keep the op's tensors that live in the pool as non-owning aliases (the graphs own that memory)."""

        def alias(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.is_cuda and in_pool(value):
                return _compat.non_owning_alias(value)
            return value

        self.args = _compat.tree_map(alias, self.args)
        self.kwargs = _compat.tree_map(alias, self.kwargs)
        self.results = [alias(t) for t in self.results]

    def release(self) -> None:
        self.args, self.kwargs, self.results = (), {}, []


class GraphChain:
    """A size's breakable capture: CUDA graphs and eager ops, replayed in capture order.

    It stands where a full capture's ``torch.cuda.CUDAGraph`` stands in a
    ``CapturedGraph`` (``replay()``, ``reset()``).  ``segments`` is the number of
    graphs; ``eager_calls`` counts the eager op calls of one replay by op name.
    """

    def __init__(self) -> None:
        self.steps: list[Any] = []  # torch.cuda.CUDAGraph or EagerStep

    @property
    def graphs(self) -> list[Any]:
        return [step for step in self.steps if not isinstance(step, EagerStep)]

    @property
    def segments(self) -> int:
        return len(self.graphs)

    @property
    def eager_calls(self) -> Counter[str]:
        return Counter(step.name for step in self.steps if isinstance(step, EagerStep))

    def replay(self) -> None:
        for step in self.steps:
            if isinstance(step, EagerStep):
                step.run()
            else:
                step.replay()

    def weaken(self, in_pool: Callable[[torch.Tensor], bool]) -> None:
        for step in self.steps:
            if isinstance(step, EagerStep):
                step.weaken(in_pool)

    def reset(self) -> None:
        """Release every graph of the chain and the tensors its eager ops hold."""
        for step in self.steps:
            if isinstance(step, EagerStep):
                step.release()
            else:
                step.reset()
        self.steps.clear()

    def __repr__(self) -> str:
        return f"<GraphChain {self.segments} graphs, eager calls {dict(self.eager_calls)}>"


class _ChainRecorder:
    """Captures the chain: the graph being captured, and a break at each break op."""

    def __init__(self, chain: GraphChain, break_ops: Sequence[Any], pool: PoolId, capture_error_mode: str):
        self.chain = chain
        self.break_ops = tuple(break_ops)
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.open_graph: Any = None  # begun, not ended
        self.failing_op: str | None = None  # the first op that raised while capturing

    def breaks_at(self, func: Any) -> bool:
        return any(op.matches(func) for op in self.break_ops)

    def begin(self) -> None:
        graph = torch.cuda.CUDAGraph()
        _compat.begin_graph_segment(graph, self.pool, self.capture_error_mode)
        self.open_graph = graph  # only once begun: a capture that never began holds no pool

    def end(self) -> None:
        graph = self.open_graph
        _compat.end_graph_segment(graph)
        self.open_graph = None
        self.chain.steps.append(graph)

    def break_here(self, func: Any, args: tuple, kwargs: dict) -> Any:
        self.end()
        result = func(*args, **kwargs)
        self.chain.steps.append(EagerStep(func, args, kwargs, result))
        self.begin()
        return result

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """The dispatch mode that breaks the chain at the break ops, for the ``with`` block."""
        with _BreakMode(self):
            yield


# the base comes from the gateway at import time (torch internals stay there), which mypy cannot follow
class _BreakMode(_compat.dispatch_mode_base()):  # type: ignore[misc]
    """Sees every op dispatched while the chain is captured: a break op ends the graph and runs eagerly."""

    def __init__(self, recorder: _ChainRecorder):
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        recorder = self.recorder
        if recorder.open_graph is not None and recorder.breaks_at(func):
            return recorder.break_here(func, args, kwargs)
        try:
            return func(*args, **kwargs)
        except Exception:
            if recorder.failing_op is None:
                recorder.failing_op = _compat.op_qualified_name(func)
            raise


def capture_chain(
    fn: Callable[..., Any],
    static_inputs: Sequence[torch.Tensor],
    *,
    pool: PoolId,
    stream: torch.cuda.Stream,
    break_ops: Sequence[Any],
    label: str = "the capture",
    fn_name: str = "the function",
    capture_error_mode: str = "global",
) -> tuple[GraphChain, Any]:
    """Capture ``fn(*static_inputs)`` on ``stream`` into ``pool`` as a chain broken at ``break_ops``: ``(chain, outputs)``.

    Invariant, as for ``guarded_capture``: after the call, success or not, the
    current stream is the one from before, and a failed capture leaves the CUDA RNG
    where it was and holds no pool.  Failure: a CaptureError naming the cause, the op
    and its line (``capture_failure``), the graph of the chain it failed in, and
    whether a break op would have covered it.
    """
    __tracebackhide__ = True
    device = stream.device.index if stream.device.index is not None else torch.cuda.current_device()
    prev_stream = torch.cuda.current_stream(device)
    rng_state = torch.cuda.get_rng_state(device)
    chain = GraphChain()
    recorder = _ChainRecorder(chain, break_ops, pool, capture_error_mode)
    error: Exception | None = None
    interrupt: BaseException | None = None
    outputs = None
    torch.cuda.set_stream(stream)
    try:
        try:
            recorder.begin()
            with recorder.watching():
                outputs = fn(*static_inputs)
        except Exception as exc:
            error = exc
        except BaseException as exc:  # KeyboardInterrupt: clean up, then let it through
            interrupt = exc
        if recorder.open_graph is not None:
            if torch.cuda.current_stream(device) != stream:
                torch.cuda.set_stream(stream)  # the body changed streams; capture_end must run on ours
            try:
                # the last graph; after a failure this still ends the stream's (invalidated) capture
                recorder.end()
            except Exception as exc:
                if error is None:
                    error = exc
    finally:
        torch.cuda.set_stream(prev_stream)
    if error is None and interrupt is None:
        chain.weaken(_pool_membership(pool, device))
        return chain, outputs
    outputs = None
    segment = chain.segments + 1
    open_graph = recorder.open_graph
    chain.reset()
    _restore_process(
        open_graph if open_graph is not None else torch.cuda.CUDAGraph(),
        device,
        pool,
        rng_state,
        abandon_pool=open_graph is not None,
    )
    if interrupt is not None:
        raise interrupt
    assert error is not None
    raise _chain_capture_error(error, f"{label} (graph {segment} of the chain)", fn_name, recorder) from None


def _chain_capture_error(exc: Exception, label: str, fn_name: str, recorder: _ChainRecorder) -> CaptureError:
    failing_op = recorder.failing_op
    error = _capture_error(exc, label, fn_name)
    hinted = CaptureError(f"{error} {break_at_hint(failing_op, break_op_names(recorder.break_ops))}")
    hinted.cause = error.cause  # type: ignore[attr-defined]
    hinted.op = error.op  # type: ignore[attr-defined]
    hinted.failing_op = failing_op  # type: ignore[attr-defined]
    hinted.site = error.site
    return hinted


def _pool_membership(pool: PoolId, device: int) -> Callable[[torch.Tensor], bool]:
    """Whether a tensor's memory lies in ``pool``'s segments (read from the allocator snapshot once)."""
    ranges = [
        (int(seg["address"]), int(seg["address"]) + int(seg["total_size"]))
        for seg in _compat.memory_snapshot_segments(pool)
        if tuple(seg.get("segment_pool_id", (0, 0))) == tuple(pool) and int(seg.get("device", device)) == device
        and "address" in seg
    ]  # fmt: skip

    def in_pool(tensor: torch.Tensor) -> bool:
        ptr = tensor.data_ptr()
        return any(start <= ptr < end for start, end in ranges)

    return in_pool


def chain_result(graph_set: Any) -> dict[str, Any] | None:
    """The report's breakable figures of a GraphSet (None for full graphs): per size, graphs, eager calls, pool."""
    if not getattr(graph_set, "break_at", ()):
        return None
    chains = []
    for size in graph_set.capture_order:
        captured = graph_set.graphs.get(size)
        chain = getattr(captured, "graph", None)
        if not isinstance(chain, GraphChain):
            continue
        row = graph_set.meter.rows.get(size)
        chains.append(
            {
                "size": size,
                "segments": chain.segments,
                "eager_calls": dict(chain.eager_calls),
                "pool_bytes": None if row is None else row.pool_bytes_after,
            }
        )
    return {
        "break_at": break_op_names(graph_set.break_at),
        "segments": sum(c["segments"] for c in chains),
        "chains": chains,
    }
