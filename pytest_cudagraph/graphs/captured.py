"""One captured callable: warm it up, capture it over static input buffers, replay it with checks.

``capture_callable`` gives a ``CapturedGraph``, whose ``replay``/``replay_from``
check that the inputs and the module's parameters are where the graph baked
them in.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .. import _compat
from ..errors import CaptureError, MisuseError, StaleGraphError
from . import collectives
from .collectives import CapturedCollectives
from .guarded import guarded_capture
from .memory import PoolId


def _module_of(fn: Any) -> torch.nn.Module | None:
    if isinstance(fn, torch.nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        return owner
    inner = getattr(fn, "func", None)  # functools.partial
    return _module_of(inner) if inner is not None else None


def _fn_name(fn: Any) -> str:
    module = _module_of(fn)
    if module is not None and module is fn:
        return type(module).__name__
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def parameter_fingerprint(module: torch.nn.Module) -> dict[str, int]:
    """Name -> data address of every parameter and buffer (what a graph baked in)."""
    fingerprint = {}
    for name, tensor in module.named_parameters(remove_duplicate=False):
        fingerprint[name] = tensor.data_ptr()
    for name, buffer in module.named_buffers(remove_duplicate=False):
        if buffer is not None:
            fingerprint[name] = buffer.data_ptr()
    return fingerprint


def _tensor_leaves(value: Any) -> list[torch.Tensor]:
    leaves: list[torch.Tensor] = []
    _compat.tree_map(lambda t: leaves.append(t) if isinstance(t, torch.Tensor) else None, value)
    return leaves


class CapturedGraph:
    """One captured CUDA graph: its static input buffers, outputs and what it baked in.

    ``static_inputs`` are the buffers the graph reads; ``outputs`` the tensors it
    writes (with ``keep_outputs=False`` they do not own their memory, which later
    captures in the same pool may reuse, so copy them out before another replay).
    ``warmup_s`` and ``capture_s`` are the host seconds of the two phases.
    """

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        static_inputs: tuple[torch.Tensor, ...],
        outputs: Any,
        *,
        pool: PoolId,
        label: str,
        module: torch.nn.Module | None,
        fingerprint: Mapping[str, int],
        warmup_s: float,
        capture_s: float,
        collectives: CapturedCollectives | None = None,
    ):
        self.graph = graph
        self.static_inputs = static_inputs
        self.outputs = outputs
        self.pool = pool
        self.label = label
        self.module = module
        self.fingerprint = dict(fingerprint)
        self.warmup_s = warmup_s  # host seconds of the eager warm-up calls
        self.capture_s = capture_s  # host seconds from capture_begin to capture_end (instantiation included)
        self.input_ptrs = tuple(t.data_ptr() for t in static_inputs)
        # what the capture issued and the graph holds of collectives, where asked for (graphs/collectives.py)
        self.collectives = collectives
        self.replays = 0
        self.released = False

    def verify(self) -> None:
        """Raise StaleGraphError if a static input or a module tensor left its captured address."""
        __tracebackhide__ = True
        for i, (tensor, ptr) in enumerate(zip(self.static_inputs, self.input_ptrs)):
            if tensor.data_ptr() != ptr:
                raise StaleGraphError(
                    f"input {i} of the graph for {self.label} moved from {ptr:#x} to {tensor.data_ptr():#x} "
                    f"since capture; the graph reads the captured address, so write new values into "
                    f"the static buffer in place (static.copy_(new)) instead of replacing it"
                )
        if self.module is None:
            return
        now = parameter_fingerprint(self.module)
        for name, ptr in self.fingerprint.items():
            current = now.get(name)
            if current != ptr:
                where = "was removed" if current is None else f"now lives at {current:#x}"
                raise StaleGraphError(
                    f"parameter {name!r} of {type(self.module).__name__} was replaced after the graph for "
                    f"{self.label} was captured (captured at {ptr:#x}, {where}); the graph still reads the "
                    f"old memory: update it in place (param.data.copy_(new), load_state_dict) or capture again"
                )

    def replay(self, *inputs: torch.Tensor, verify: bool | None = None) -> Any:
        """Copy ``inputs`` (if given) into the static buffers, replay, return ``outputs``.

        The pointer checks run on the first replay, and on every replay with
        ``verify=True``.  The returned tensors are the graph's own: copy them out
        before replaying another graph of the same pool.
        """
        __tracebackhide__ = True
        if self.released:
            raise StaleGraphError(f"the graph for {self.label} was released; capture it again")
        if inputs:
            self._copy_in(inputs)
        if verify or (verify is None and self.replays == 0):
            self.verify()
        self.graph.replay()
        self.replays += 1
        return self.outputs

    def replay_from(self, *inputs: torch.Tensor) -> Any:
        """Replay with ``inputs`` that must be the captured buffers themselves (no copy).

        Failure: an input whose address is not the captured one raises
        StaleGraphError naming the input: a graph would silently read the old
        buffer (vLLM #37363).
        """
        __tracebackhide__ = True
        if len(inputs) != len(self.input_ptrs):
            raise MisuseError(
                f"the graph for {self.label} takes {len(self.input_ptrs)} inputs, {len(inputs)} were given"
            )
        for i, (tensor, ptr) in enumerate(zip(inputs, self.input_ptrs)):
            if tensor.data_ptr() != ptr:
                raise StaleGraphError(
                    f"input {i} passed to the graph for {self.label} is at {tensor.data_ptr():#x}, not at the "
                    f"captured buffer's address {ptr:#x}; copy it into static_inputs[{i}] "
                    f"(or use replay(), which copies) instead of passing a new tensor"
                )
        return self.replay(verify=self.replays == 0)

    def _copy_in(self, inputs: Sequence[torch.Tensor]) -> None:
        __tracebackhide__ = True
        if len(inputs) != len(self.static_inputs):
            raise MisuseError(
                f"the graph for {self.label} takes {len(self.static_inputs)} inputs, {len(inputs)} were given"
            )
        for i, (static, new) in enumerate(zip(self.static_inputs, inputs)):
            if not isinstance(new, torch.Tensor):
                raise MisuseError(f"input {i} for {self.label} is a {type(new).__name__}, not a tensor")
            if new.shape != static.shape or new.dtype != static.dtype:
                raise MisuseError(
                    f"input {i} for {self.label} has shape {tuple(new.shape)} and dtype {new.dtype}, but the "
                    f"graph was captured with {tuple(static.shape)} {static.dtype}; pass inputs of the "
                    f"captured shape (pad the batch up to a captured size)"
                )
            if new.data_ptr() != static.data_ptr():
                static.copy_(new)

    def release(self) -> None:
        """Drop the graph and the tensors it holds; its pool is freed once no graph uses it."""
        if self.released:
            return
        self.released = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.graph.reset()
        self.outputs = None
        self.static_inputs = ()


def capture_callable(
    fn: Callable[..., Any],
    static_inputs: Sequence[torch.Tensor],
    *,
    pool: PoolId,
    stream: torch.cuda.Stream,
    warmup_iters: int = 3,
    label: str = "the capture",
    keep_outputs: bool = True,
    capture_error_mode: str = "global",
    workspace_in_pool: bool = False,
    after_warmup: Callable[[], None] | None = None,
    break_at: Sequence[Any] = (),
    record_collectives: bool = False,
) -> CapturedGraph:
    """Warm ``fn`` up on ``stream``, then capture ``fn(*static_inputs)`` into ``pool``.

    Warm-up runs on the capture stream, so cuBLAS handles and lazily built kernels
    exist before capture (a first matmul inside a capture fails with
    CUBLAS_STATUS_NOT_INITIALIZED).  With ``workspace_in_pool=True`` the cuBLAS
    workspaces are cleared just before capture, so the capture allocates its
    workspace inside the pool where no later ``clear`` can give it away (do this
    for the first graph of a pool).  ``after_warmup`` is called between the two
    phases, outside both timings (a meter reads the device there).  Runs under
    ``torch.no_grad()``.  With ``break_at`` (resolved break ops,
    ``breakable.resolve_break_at``) the capture is breakable: the graph ends at each
    call of a break op, which runs eagerly, and the next graph begins in the same
    pool; the ``CapturedGraph`` then holds a ``breakable.GraphChain``.  With
    ``record_collectives=True`` the capture records the collectives ``fn`` issued and
    reads the graph's NCCL kernels back (``CapturedGraph.collectives``; a chain's
    kernels are not read).

    Failure: a warm-up error propagates unchanged (the function fails eagerly); a
    capture error is a ``CaptureError`` (see ``guarded_capture``).

    Example::

        side = torch.cuda.Stream()
        pool = new_pool()
        cg = capture_callable(model, (static_x,), pool=pool, stream=side, label="batch size 8")
        out = cg.replay(x)[0].clone()
    """
    __tracebackhide__ = True
    static_inputs = tuple(static_inputs)
    module = _module_of(fn)
    fingerprint = parameter_fingerprint(module) if module is not None else {}
    name = _fn_name(fn)
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    start = time.perf_counter()
    warmed = start
    with torch.no_grad():
        _warm_up(fn, static_inputs, stream, warmup_iters, name, label)
        warmed = time.perf_counter()
        if after_warmup is not None:
            after_warmup()
        capture_start = time.perf_counter()
        if workspace_in_pool:
            _compat.clear_cublas_workspaces()
        graph, outputs, collectives = _capture(
            fn, static_inputs, pool, stream, label, name, capture_error_mode, break_at, record_collectives
        )
    captured = time.perf_counter()
    current.wait_stream(stream)
    if not keep_outputs:
        outputs = _not_owning(outputs)
    return CapturedGraph(
        graph,
        static_inputs,
        outputs,
        pool=pool,
        label=label,
        module=module,
        fingerprint=fingerprint,
        warmup_s=warmed - start,
        capture_s=captured - capture_start,
        collectives=collectives,
    )


def _capture(
    fn: Callable[..., Any],
    static_inputs: tuple[torch.Tensor, ...],
    pool: PoolId,
    stream: torch.cuda.Stream,
    label: str,
    name: str,
    capture_error_mode: str,
    break_at: Sequence[Any],
    record_collectives: bool = False,
) -> tuple[Any, Any, CapturedCollectives | None]:
    """Capture ``fn(*static_inputs)``: ``(graph, outputs, collectives)``, the graph a chain where ``break_at`` is given."""
    __tracebackhide__ = True
    recording = collectives.record_collectives() if record_collectives else contextlib.nullcontext(None)
    if break_at:
        from .breakable import capture_chain

        with recording as record:
            chain, outputs = capture_chain(
                fn, static_inputs, pool=pool, stream=stream, break_ops=break_at, label=label, fn_name=name,
                capture_error_mode=capture_error_mode,
            )  # fmt: skip
        return chain, outputs, None if record is None else CapturedCollectives(tuple(record.calls), None)
    graph = _compat.new_readable_cuda_graph() if record_collectives else torch.cuda.CUDAGraph()
    outputs = None
    try:
        with guarded_capture(
            graph, pool=pool, stream=stream, label=label, fn_name=name, capture_error_mode=capture_error_mode
        ):
            with recording as record:
                outputs = fn(*static_inputs)
    except CaptureError:
        # A capture can fail after fn returned (unjoined streams): its outputs live
        # in the abandoned pool, and this frame stays alive in the traceback.
        outputs = None
        raise
    if record is None:
        return graph, outputs, None
    kernels = collectives.graph_collective_kernels(graph)  # read before instantiation, as the graph was kept for
    _compat.instantiate_kept_graph(graph)
    return graph, outputs, CapturedCollectives(tuple(record.calls), kernels)


def _warm_up(
    fn: Callable[..., Any],
    static_inputs: tuple[torch.Tensor, ...],
    stream: torch.cuda.Stream,
    iters: int,
    name: str,
    label: str,
) -> None:
    """Call ``fn(*static_inputs)`` ``iters`` times on ``stream``; an error propagates with a note saying so."""
    __tracebackhide__ = True
    with torch.cuda.stream(stream):
        for _ in range(iters):
            try:
                fn(*static_inputs)
            except Exception as exc:
                if hasattr(exc, "add_note"):
                    exc.add_note(f"(raised while warming up {name} for {label}, before capture)")
                raise


def _not_owning(outputs: Any) -> Any:
    """``outputs`` with every CUDA tensor replaced by an alias that does not own its memory."""
    # The graph keeps writing there; the allocator may lend the memory to the next
    # capture in this pool, which is what lets all sizes fit in the largest's mark.
    return _compat.tree_map(
        lambda t: _compat.non_owning_alias(t) if isinstance(t, torch.Tensor) and t.is_cuda else t, outputs
    )


def _as_tuple(value: Any) -> tuple:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def _clone_out(value: Any) -> Any:
    return _compat.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, value)
