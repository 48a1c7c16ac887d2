"""Capture a function as CUDA graphs, one per batch size, in one shared pool, and check replays.

A CUDA graph records a kernel sequence once and replays it with one launch.  The
kernels' arguments, tensor addresses included, are baked in at capture, so a replay
is only right when:

- the inputs sit at the captured addresses (the graph's static input buffers);
- a module's parameters and buffers were updated in place, not replaced;
- nothing synchronised with the host, copied to the CPU or allocated outside the
  capture while capturing (``.item()``, ``nonzero()``, ``torch.cuda.synchronize()``...);
- the Python control flow taken at capture is the one wanted on every replay.

Graphs for many batch sizes can share one memory pool, so they should cost about
as much as the largest alone: capture the largest size first and let each size's
outputs go (graphs sharing a pool alias each other's outputs, so copy them out
right after each replay).

The lower-level pieces, reused by the piecewise capture, are:

- ``guarded_capture``: capture on a stream into a pool; a failed capture raises a
  ``CaptureError`` naming the real cause and the op, after restoring the current
  stream, the CUDA RNG and the allocator's pool bookkeeping;
- ``capture_callable``: warm up on a side stream, then capture one callable over
  static input buffers, giving a ``CapturedGraph``;
- ``CapturedGraph.replay`` / ``.replay_from``: replay with the pointer and
  stale-parameter checks;
- ``memory.PoolMeter``: the pool figures and the pool check, shared with the
  piecewise runtime.

``capture_graphs`` (plain API) and the ``cudagraphs`` fixture build a ``GraphSet``
from these.
"""

from __future__ import annotations

import contextlib
import linecache
import math
import os
import re
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from .. import _compat
from ..compile.call_site import in_function, innermost_user_frame, is_library_file, same_statement
from ..errors import CaptureError, InvariantViolation, MisuseError, StaleGraphError
from ..records.record import TestRecord, current_record
from . import open_objects
from .capture_cost import (
    CaptureCost,
    CaptureCostMeter,
    collection_paused,
    cost_json,
    outside_limit,
    release_reading,
    with_device_bounds,
)
from .memory import PoolCheck, PoolId, PoolMeter
from .numerics import DeferredComparisons, TensorComparison, max_abs_error, replay_mismatch_message
from .sizes import capture_sizes_in_order

POOL_MODES = ("shared", "separate")
ORDERS = ("largest_first", "as_given")

# the plain API and what it returns, then the pieces the piecewise capture is built from
__all__ = [
    "CapturedGraph",
    "GraphReplayCheck",
    "GraphSet",
    "GraphSetResult",
    "capture_callable",
    "capture_graphs",
    "guarded_capture",
    "new_pool",
]


# --------------------------------------------------------------------------
# failed captures: the real cause, the op, and restoring the process
# --------------------------------------------------------------------------

# (substring of the CUDA/torch message, what it means for the captured function)
_HOST_SYNC = (
    "a call that waits for the GPU or allocates outside the capture: a host sync "
    "(.item(), bool(tensor), .tolist(), nonzero(), torch.multinomial, torch.cuda.synchronize(), "
    "printing a tensor) or memory allocated on a stream that is not capturing"
)
_CAUSE_KINDS: tuple[tuple[str, str], ...] = (
    (
        "Cannot copy between CPU and CUDA tensors during CUDA graph capture",
        "a copy between host and GPU memory (.cpu(), .to('cpu'), .numpy(), or a pageable CPU tensor copied to the GPU)",
    ),
    ("operation not permitted when stream is capturing", _HOST_SYNC),
    ("cudaErrorStreamCaptureUnsupported", _HOST_SYNC),
    (
        "CUBLAS_STATUS_NOT_INITIALIZED",
        "cuBLAS being initialised inside the capture (the function was not warmed up on the capture stream)",
    ),
    (
        "legacy stream depend on a capturing blocking stream",
        "work issued on the default (legacy) stream while capturing",
    ),
    (
        "not joined",
        "work forked onto another stream during capture and not joined back "
        "(capture_stream.wait_stream(other)) before the capture ended",
    ),
    (
        "unjoined",
        "work forked onto another stream during capture and not joined back "
        "(capture_stream.wait_stream(other)) before the capture ended",
    ),
    (
        "Capture must end on the same stream it began on",
        "the captured function changed the current stream and did not restore it",
    ),
    ("isolation", "a stream outside the capture waited on the capturing stream"),
)
_GENERIC_CAPTURE_FAILURE = ("previous error during capture", "invalidated")
_OPS = (
    (r"\.item\(\)", ".item()"),
    (r"\.tolist\(\)", ".tolist()"),
    (r"\.cpu\(\)", ".cpu()"),
    (r"\.numpy\(\)", ".numpy()"),
    (r"synchronize\(", "torch.cuda.synchronize()"),
    (r"nonzero\(", "nonzero()"),
    (r"multinomial\(", "torch.multinomial()"),
    (r"\.to\([^)]*cpu", ".to('cpu')"),
    (r"\bprint\(", "print(tensor)"),
    (r"\b(bool|int|float)\(", "a tensor converted to a Python number"),
)


def _is_generic(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _GENERIC_CAPTURE_FAILURE)


def real_cause(exc: BaseException) -> BaseException:
    """The first error of a failed capture, not torch's generic follow-up.

    ``capture_end`` reports "operation failed due to a previous error during
    capture"; the error that invalidated the capture is in ``__context__``.
    """
    chain = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    specific = [e for e in chain if not _is_generic(e) and not isinstance(e, CaptureError)]
    return specific[-1] if specific else chain[-1]


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the error that is the user's: not torch's, the plugin's, or Inductor's generated code."""
    return innermost_user_frame(exc.__traceback__, skip=_compat.is_generated_code)


def _op_of(line: str) -> str | None:
    for pattern, name in _OPS:
        if re.search(pattern, line):
            return name
    return None


def _generated_code_site(exc: BaseException) -> tuple[traceback.FrameSummary, str] | None:
    """For a failure inside Inductor's generated code: the user's line behind the op, and what ran there.

    The traceback's innermost frame in a generated module (``/tmp/torchinductor_*/..py``,
    function ``call``) is mapped through the line map Inductor recorded while writing
    it, to the user's source line of the op; the text names the generated line and
    the ATen ops of its comment.  None when no frame is generated or nothing maps.

    A line map read from the FX graph cache holds the stack traces of the compile
    that filled the cache, which may be another function with the same graph (in
    another file); it is used only where it lies in a function of this traceback,
    else its statement is looked up in that function's source.
    """
    tb = exc.__traceback__
    generated = None
    user_code = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if _compat.is_generated_code(filename):
            generated = (filename, tb.tb_lineno)
        elif not is_library_file(filename):
            user_code.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    if generated is None:
        return None
    origin = _compat.generated_code_origin(*generated)
    if origin is None:
        # Only now read frame locals (the compiled graph's line map): reading them keeps the
        # pool's tensors referenced from the traceback until its frames are cleared.
        compiled_graph = None
        tb = exc.__traceback__
        while tb is not None and compiled_graph is None:
            compiled_graph = _compat.compiled_graph_of_frame(tb.tb_frame)
            tb = tb.tb_next
        origin = _compat.generated_code_origin(*generated, compiled_graph=compiled_graph)
    if origin is None:
        return None
    frames = [f for f in origin["frames"] if not is_library_file(f["filename"])]
    if not frames:
        return None
    inside = f"in the compiled code `{origin['generated_line']}`"
    if origin.get("aten"):
        inside += f" (ATen: {origin['aten']})"
    if any(in_function(code, f["filename"], int(f["line"])) for f in frames for code in user_code):
        user = frames[0]
        filename, lineno, name = user["filename"], int(user["line"]), user["name"]
    else:
        # the map is from a cached compile of another function: find its statement in this one's source
        found = same_statement(user_code, frames[0]["filename"], int(frames[0]["line"]))
        if found is None:
            return None
        filename, lineno, name = found
    line = linecache.getline(filename, lineno).strip()
    return traceback.FrameSummary(filename, lineno, name, line=line), inside


def describe_capture_failure(exc: BaseException, label: str, fn_name: str) -> tuple[str, str | None]:
    """``(message, op)`` for a failed capture: the kind, the real cause, the op and the fix."""
    cause = real_cause(exc)
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    text = text.replace("CUDA error: ", "")
    kind = next((meaning for marker, meaning in _CAUSE_KINDS if marker in str(cause)), None)
    site = _generated_code_site(cause) or _generated_code_site(exc)
    frame, inside = site if site is not None else (_user_frame(cause), None)
    op = None
    if frame is not None:
        line = (frame.line or "").strip()
        op = _op_of(line)
        where = f"{os.path.basename(frame.filename)}:{frame.lineno} `{line}`"
        op_text = f"the op {op} at {where}" if op else f"the op at {where}"
        if inside:
            op_text += f", {inside}"
    else:
        op_text = "no line of the captured function (it failed when the capture ended)"
    if kind is None:
        kind = "an operation that cannot be captured"
    message = (
        f"capturing {fn_name} for {label} failed: {kind}; real cause {type(cause).__name__}: {text}; "
        f"{op_text}. Move host syncs, CPU copies and allocations on other streams out of the captured "
        f"function (do them before capture, or keep the values on the GPU as tensors). "
        f"The current stream, the CUDA RNG and the graph pool were restored, so the session can go on."
    )
    return message, op


def restore_cuda_rng(device: int, saved_state: torch.Tensor) -> None:
    """Leave the device's default CUDA generator usable and at ``saved_state``.

    A capture that never reached ``capture_end`` leaves the generator "capturing",
    and every later ``torch.randn(..., device="cuda")`` raises "Offset increment
    outside graph capture".  A trivial capture that ends properly runs the
    generator's capture epilogue; if that is not enough the generator gets a fresh
    copy of its state.  Finally the state from before the capture is put back.
    """
    generator = torch.cuda.default_generators[device]

    def usable() -> bool:
        try:
            torch.empty(1, device=torch.device("cuda", device)).normal_()
            return True
        except RuntimeError:
            return False

    try:
        if not usable():
            _end_generator_capture(device)
            if not usable() and hasattr(generator, "graphsafe_set_state"):
                generator.graphsafe_set_state(generator.clone_state())
    finally:
        torch.cuda.set_rng_state(saved_state, device)


def _end_generator_capture(device: int) -> None:
    prev = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    target = torch.zeros(1, device=torch.device("cuda", device))
    side.wait_stream(prev)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.set_stream(side)
    try:
        graph.capture_begin(new_pool(), capture_error_mode="thread_local")
        try:
            target.add_(1)
        finally:
            graph.capture_end()
    except RuntimeError:
        pass
    finally:
        torch.cuda.set_stream(prev)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph.reset()


def new_pool() -> PoolId:
    """A fresh graph-pool id to pass to ``capture_callable``/``guarded_capture``."""
    return tuple(torch.cuda.graph_pool_handle())  # type: ignore[return-value]


@contextlib.contextmanager
def guarded_capture(
    graph: torch.cuda.CUDAGraph,
    *,
    pool: PoolId,
    stream: torch.cuda.Stream,
    label: str = "the capture",
    fn_name: str = "the function",
    capture_error_mode: str = "global",
) -> Iterator[None]:
    """Capture the body's CUDA work into ``graph`` (on ``stream``, allocating from ``pool``).

    Invariant: after the block, success or not, the current stream is the one from
    before, the CUDA RNG works and is where it was, and a failed graph holds no pool.

    Failure: any error in the body or at ``capture_end`` becomes a ``CaptureError``
    whose message names the kind of failure, the real cause (torch's own exception
    only says "operation failed due to a previous error during capture"), and the
    source line of the op.  ``CaptureError.cause`` keeps the original exception.

    Example::

        g = torch.cuda.CUDAGraph()
        with guarded_capture(g, pool=new_pool(), stream=side, label="batch size 8"):
            out = model(static_x)
    """
    __tracebackhide__ = True
    device = stream.device.index if stream.device.index is not None else torch.cuda.current_device()
    prev_stream = torch.cuda.current_stream(device)
    rng_state = torch.cuda.get_rng_state(device)
    begun = ended = False
    errors: list[BaseException] = []
    interrupt: BaseException | None = None
    torch.cuda.set_stream(stream)
    try:
        try:
            graph.capture_begin(pool, capture_error_mode=capture_error_mode)
            begun = True
        except Exception as exc:
            errors.append(exc)
        if begun:
            try:
                yield
            except Exception as exc:
                errors.append(exc)
            except BaseException as exc:  # KeyboardInterrupt: clean up, then let it through
                interrupt = exc
            if torch.cuda.current_stream(device) != stream:
                torch.cuda.set_stream(stream)  # the body changed streams; capture_end must run on ours
            try:
                graph.capture_end()
                ended = True
            except Exception as exc:
                if not errors:
                    errors.append(exc)
    finally:
        torch.cuda.set_stream(prev_stream)
    if not errors and interrupt is None:
        return
    # -- restore the process ------------------------------------------------
    if begun and not ended:
        _compat.abandon_capture_pool(device, pool, end_allocation=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            graph.reset()
        except RuntimeError:
            pass
    with contextlib.suppress(RuntimeError):
        torch.cuda.synchronize(device)
    # a workspace created inside the failed capture belongs to its pool: let it go
    _compat.clear_cublas_workspaces()
    restore_cuda_rng(device, rng_state)
    if interrupt is not None:
        raise interrupt
    message, op = describe_capture_failure(errors[0], label, fn_name)
    cause = real_cause(errors[0])
    # The failed frames' locals are tensors allocated in the abandoned pool; a
    # traceback kept by pytest would keep that pool's segments alive forever.
    _clear_traceback_frames(errors[0])
    error = CaptureError(message)
    error.cause = cause  # type: ignore[attr-defined]
    error.op = op  # type: ignore[attr-defined]
    errors.clear()
    raise error from None


def _clear_traceback_frames(exc: BaseException) -> None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


# --------------------------------------------------------------------------
# one captured callable
# --------------------------------------------------------------------------


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
    for name, tensor in module.named_buffers(remove_duplicate=False):
        if tensor is not None:
            fingerprint[name] = tensor.data_ptr()
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
) -> CapturedGraph:
    """Warm ``fn`` up on ``stream``, then capture ``fn(*static_inputs)`` into ``pool``.

    Warm-up runs on the capture stream, so cuBLAS handles and lazily built kernels
    exist before capture (a first matmul inside a capture fails with
    CUBLAS_STATUS_NOT_INITIALIZED).  With ``workspace_in_pool=True`` the cuBLAS
    workspaces are cleared just before capture, so the capture allocates its
    workspace inside the pool where no later ``clear`` can give it away (do this
    for the first graph of a pool).  ``after_warmup`` is called between the two
    phases, outside both timings (a meter reads the device there).  Runs under
    ``torch.no_grad()``.

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
        with torch.cuda.stream(stream):
            for _ in range(warmup_iters):
                try:
                    fn(*static_inputs)
                except Exception as exc:
                    if hasattr(exc, "add_note"):
                        exc.add_note(f"(raised while warming up {name} for {label}, before capture)")
                    raise
        warmed = time.perf_counter()
        if after_warmup is not None:
            after_warmup()
        capture_start = time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        if workspace_in_pool:
            _compat.clear_cublas_workspaces()
        outputs = None
        try:
            with guarded_capture(
                graph, pool=pool, stream=stream, label=label, fn_name=name, capture_error_mode=capture_error_mode
            ):
                outputs = fn(*static_inputs)
        except CaptureError:
            # A capture can fail after fn returned (unjoined streams): its outputs live
            # in the abandoned pool, and this frame stays alive in the traceback.
            outputs = None
            raise
    captured = time.perf_counter()
    current.wait_stream(stream)
    if not keep_outputs:
        # The graph keeps writing there; the allocator may lend the memory to the next
        # capture in this pool, which is what lets all sizes fit in the largest's mark.
        outputs = _compat.tree_map(
            lambda t: _compat.non_owning_alias(t) if isinstance(t, torch.Tensor) and t.is_cuda else t, outputs
        )
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
    )


def _as_tuple(value: Any) -> tuple:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def _clone_out(value: Any) -> Any:
    return _compat.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, value)


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphReplayCheck:
    """Outcome of ``GraphSet.check_replay``: every size and trial agreed with the reference."""

    sizes: tuple[int, ...]
    trials: int
    max_abs_err: float | None
    reference: str

    def to_json(self) -> dict[str, Any]:
        return {
            "sizes": list(self.sizes),
            "trials": self.trials,
            "max_abs_err": self.max_abs_err,
            "reference": self.reference,
        }


@dataclass(frozen=True)
class GraphSetResult:
    """The report's ``graphs`` entry for one GraphSet."""

    sizes: tuple[int, ...]
    captured: int
    pool_bytes: int | None
    largest_graph_bytes: int | None
    max_abs_err: float | None
    capture_s: float
    order: str
    pool: str
    keep_outputs: bool
    cublas_workspace_bytes: int | None
    graph_bytes: Mapping[int, int] | None = None
    pool_check_passed: bool | None = None
    replay_checks: int = 0
    cost: CaptureCost | None = None  # per size: warm-up and capture seconds, memory outside the pool
    static_input_bytes: int | None = None  # the graphs' input buffers, outside the pool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sizes": list(self.sizes),
            "captured": self.captured,
            "pool_bytes": self.pool_bytes,
            "largest_graph_bytes": self.largest_graph_bytes,
            # NaN stays NaN: the report writer stores it as "nan", and compare flags it
            "max_abs_err": self.max_abs_err,
            "capture_s": round(self.capture_s, 6),
            "order": self.order,
            "pool": self.pool,
            "keep_outputs": self.keep_outputs,
            "cublas_workspace_bytes": self.cublas_workspace_bytes,
            "replay_checks": self.replay_checks,
        }
        if self.graph_bytes:
            out["graph_bytes"] = {str(size): n for size, n in sorted(self.graph_bytes.items())}
        if self.pool_check_passed is not None:
            out["pool_check_passed"] = self.pool_check_passed
        if self.static_input_bytes is not None:
            out["static_input_bytes"] = self.static_input_bytes
        out.update(cost_json(self.cost))
        return out


# --------------------------------------------------------------------------
# GraphSet
# --------------------------------------------------------------------------


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


def _batch_inputs(make_inputs: Callable[[int], Any], size: int) -> tuple[torch.Tensor, ...]:
    """``make_inputs(size)`` as a tuple of CUDA tensors; anything else is a MisuseError."""
    __tracebackhide__ = True
    inputs = _as_tuple(make_inputs(size))
    for i, tensor in enumerate(inputs):
        if not isinstance(tensor, torch.Tensor):
            raise MisuseError(
                f"make_inputs({size}) returned a {type(tensor).__name__} as input {i}; return a CUDA tensor "
                f"or a tuple of CUDA tensors (bind other arguments into fn with functools.partial)"
            )
        if not tensor.is_cuda:
            raise MisuseError(
                f"make_inputs({size}) returned input {i} on {tensor.device}; create inputs on the GPU "
                f"(device='cuda') so they can be captured"
            )
    return inputs


def _check_not_all_zero(inputs: Sequence[torch.Tensor], size: int) -> None:
    __tracebackhide__ = True
    floats = [t for t in inputs if t.is_floating_point() and t.numel()]
    if floats and all(not bool(t.any()) for t in floats):
        raise MisuseError(
            f"make_inputs({size}) returned only all-zero tensors; a replay check on zeros cannot tell a "
            f"right graph from a wrong one: return fresh random inputs (e.g. torch.randn)"
        )


def _capture_in_fresh_pool(
    fn: Callable[..., Any], static_inputs: Sequence[torch.Tensor], stream: torch.cuda.Stream, label: str
) -> tuple[PoolId, CapturedGraph]:
    """Capture ``fn`` alone into a new pool, to measure its own high-water mark: ``(pool, graph)``."""
    pool = new_pool()
    probe = capture_callable(
        fn,
        static_inputs,
        pool=pool,
        stream=stream,
        warmup_iters=1,
        label=f"{label} (measured alone)",
        keep_outputs=True,
    )
    return pool, probe


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
    - ``check_pool``: the pool stays within the largest graph's high-water mark plus
      the cuBLAS workspace and the allocator's rounding slack; the failure shows
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
    ):
        _check_options(pool, order, warmup_iters, size_warmup_iters)
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

    # -- capture ----------------------------------------------------------
    def _capture_all(self) -> None:
        __tracebackhide__ = True
        shared = self.meter.add_pool(new_pool()) if self.pool_mode == "shared" else None
        start = time.perf_counter()
        cost = CaptureCostMeter(self.device)
        # an earlier graph collected between two readings would free device memory behind the allocator
        with collection_paused():
            cost.start(pool_bytes=0)  # a new pool holds nothing
            try:
                for position, size in enumerate(self.capture_order):
                    inputs = _batch_inputs(self.make_inputs, size)
                    if position == 0:
                        _check_not_all_zero(inputs, size)
                    static = tuple(t.clone() for t in inputs)
                    pool = shared if shared is not None else self.meter.add_pool(new_pool())
                    captured = capture_callable(
                        self.fn,
                        static,
                        pool=pool,
                        stream=self.stream,
                        # What warms up once (cuBLAS handles, lazily loaded kernels, a compile)
                        # is warm after the first size; a later size runs its own shape once.
                        warmup_iters=self.warmup_iters if position == 0 else self.size_warmup_iters,
                        label=f"batch size {size}",
                        keep_outputs=self.keep_outputs,
                        capture_error_mode=self.capture_error_mode,
                        workspace_in_pool=position == 0,
                        after_warmup=cost.after_warmup,
                    )
                    self.graphs[size] = captured
                    pool_now = self.meter.after_size(size, position).reserved_bytes
                    cost.after_capture(size, position, pool_now, captured.warmup_s, captured.capture_s)
                self.cost = cost.finish(pool_bytes=self.meter.reserved_bytes())
            finally:
                self.capture_s = time.perf_counter() - start
                # The workspace the first capture put in the pool is the live block that a
                # clear frees; leaving it registered would let a later capture elsewhere reuse it.
                self.cublas_workspace_bytes = self.meter.release_cublas_workspace()

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
    ) -> GraphReplayCheck:
        """Replay every size on fresh random inputs and compare with eager (or ``reference``).

        ``make_inputs(size)`` is called again for every trial.  Tolerances: the
        arguments, else the GraphSet's, else the output dtype's default; NaN never
        passes.  Failure (InvariantViolation): the size, the trial, the output, the
        worst element's index, both values and the error, and the static control
        flow hint (a Python branch taken at capture stays taken on every replay).

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
        self._require_open()
        if not isinstance(trials, int) or trials < 1:
            raise MisuseError(f"trials={trials!r}: give at least one trial")
        reference_fn = reference if reference is not None else self.fn
        reference_name = "eager" if reference is None else "the reference"
        rtol = self.rtol if rtol is None else rtol
        atol = self.atol if atol is None else atol
        chosen = self.capture_order if sizes is None else capture_sizes_in_order(sizes, "sizes")
        # Compared on the device and read back once: the host never waits for a replay,
        # so it queues the next size's work while the device runs this one.
        pending = DeferredComparisons()
        try:
            for trial in range(trials):
                for size in chosen:
                    inputs = _batch_inputs(self.make_inputs, size)
                    actual = self.replay(size, *inputs)
                    with torch.no_grad():
                        expected = reference_fn(*inputs)
                    pending.add((trial, size), actual, expected, rtol, atol)
                    del actual, expected
        except Exception:
            _, mismatch = self._first_mismatch(pending.results(), trials, reference_name)
            if mismatch is None:
                raise
            # a mismatch on an earlier size or trial is the first thing that went wrong
            raise InvariantViolation(mismatch) from None
        worst, mismatch = self._first_mismatch(pending.results(), trials, reference_name)
        if mismatch is not None:
            raise InvariantViolation(mismatch)
        err = max_abs_error(worst)
        self._max_abs_err = _worse_error(self._max_abs_err, err)
        self._replay_checks += 1
        return GraphReplayCheck(tuple(sorted(chosen)), trials, err, reference_name)

    def _first_mismatch(
        self, results: list[tuple[tuple[int, int], list[TensorComparison]]], trials: int, reference_name: str
    ) -> tuple[list[TensorComparison], str | None]:
        """The comparisons in the order they ran, up to the first that failed, and that failure's message."""
        seen: list[TensorComparison] = []
        for (trial, size), comparisons in results:
            seen.extend(comparisons)
            failed = next((c for c in comparisons if not c.passed), None)
            if failed is not None:
                self._max_abs_err = _worse_error(self._max_abs_err, max_abs_error(comparisons))
                return seen, replay_mismatch_message(failed, size, trial, trials, reference_name)
        return seen, None

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
        return _capture_in_fresh_pool(self.fn, self.graph(size).static_inputs, self.stream, f"batch size {size}")

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
        # before any measuring capture
        outside_bytes = None if outside is None else outside_limit(outside)
        first_use_bytes = None if first_use is None else outside_limit(first_use, "first_use")
        check = self.meter.check_against_alone(
            slack,
            self._capture_alone,
            capture_order=self.capture_order,
            pool_mode=self.pool_mode,
            order=self.order,
            keep_outputs=self.keep_outputs,
        )
        check = with_device_bounds(check, self.cost, outside_bytes, first_use_bytes)
        self._pool_check = check
        return check

    def check_pool(
        self, slack: int | None = None, *, outside: int | None = None, first_use: int | None = None
    ) -> PoolCheck:
        """Assert the shared pool costs about what the largest graph costs alone.

        Invariant: ``pool_bytes <= largest graph's high-water mark + cuBLAS workspace
        + slack``, the slack derived from the allocator's rounding (one more 2 MiB
        small segment and one more 20 MiB large segment where the largest graph
        uses those kinds; see ``memory.derive_slack``) unless given in bytes.

        With ``outside=BYTES``, also: the device memory the captures took behind
        PyTorch's allocator (the instantiated graphs, a library's own cudaMalloc while
        capturing; see ``capture_cost``) is at most BYTES.  With ``first_use=BYTES``:
        the device memory the warm-ups took behind the allocator (kernels loaded on
        first use, library handles, a library's buffer set up on its first call) is
        at most BYTES.  First use is a cost of the process: it depends on what ran
        before in it.

        Failure (InvariantViolation): both figures, the bound's parts, what to try,
        and the per-size table (pool growth in capture order, each size's own mark);
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
        return GraphSetResult(
            sizes=self.sizes,
            captured=len(self.graphs),
            pool_bytes=self.pool_bytes if self.graphs else None,
            largest_graph_bytes=max(self.meter.graph_bytes.values()) if self.meter.graph_bytes else None,
            max_abs_err=self._max_abs_err,
            capture_s=self.capture_s,
            order=self.order,
            pool=self.pool_mode,
            keep_outputs=self.keep_outputs,
            cublas_workspace_bytes=self.cublas_workspace_bytes,
            graph_bytes=dict(self.meter.graph_bytes) or None,
            pool_check_passed=None if self._pool_check is None else self._pool_check.passed,
            replay_checks=self._replay_checks,
            cost=self.cost,
            static_input_bytes=sum(
                t.untyped_storage().nbytes() for g in self.graphs.values() for t in g.static_inputs if t.is_cuda
            )
            if self.graphs
            else None,
        )

    def close(self) -> None:
        """Free the graphs and their pool(s), and add the result to the test's record once."""
        if self.closed:
            return
        result = self.result()
        self._final_pool_bytes = result.pool_bytes
        self.closed = True
        self._result = result
        # What comes back is what the set held: read the device before and after the
        # graphs go, each time with the allocator's cached blocks given back first.
        # A reading that fails (a sticky CUDA error) costs the figure, never the release
        # or the record.
        before = self._settled_reading()
        try:
            for captured in self.graphs.values():
                captured.release()
            self.graphs.clear()
        finally:
            # released pools are only "freeable": give their segments back to the device
            after = self._settled_reading() if before is not None else None
            if self.cost is not None and after is not None:
                self.cost = self.cost.released(release_reading(self.device, before, after))
                result = self._result = replace(result, cost=self.cost)
            if self.record is not None and result.captured:
                self.record.add_graph_set(result)

    def _settled_reading(self) -> tuple[int, int] | None:
        """``(free, reserved)`` once the device is idle and the allocator's cached blocks are given back.

        None when the device cannot be read (an earlier CUDA error the synchronize reports).
        """
        try:
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
            return _compat.device_memory_reading(self.device)
        except RuntimeError:
            return None

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


def capture_graphs(
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
) -> GraphSet:
    """Capture ``fn`` once per batch size and return the GraphSet (plain API).

    For each size (largest first unless ``order="as_given"``), all in one pool
    (``pool="separate"`` gives each its own), ``make_inputs(size)`` gives the inputs,
    which are copied into static buffers; ``fn`` is warmed up on a side stream and
    captured.  The first size captured is warmed up ``warmup_iters`` times (cuBLAS
    handles, lazily loaded kernels, a compile: what needs warming once), each later
    size ``size_warmup_iters`` times (its own shape runs eagerly before its capture).
    ``keep_outputs=False`` lets each size's outputs go after capture, so
    smaller sizes reuse the memory.  The options other than the defaults are
    negative controls for ``check_pool``.

    Failure: a capture that syncs, copies to the CPU or allocates off-stream raises
    CaptureError naming the cause and the op; the process is restored.  Without a
    CUDA device it raises CaptureError (the fixture skips instead).

    Usable inside ``@hypothesis.given`` bodies; release with ``with``/``close()``.
    The result goes to the running test's report record when released.

    .. warning::
        **Static input addresses.** A graph reads its inputs, and a module's
        parameters and buffers, at the addresses it was captured with.
        ``GraphSet.replay`` copies new inputs into the static buffers for you;
        update weights in place (``param.data.copy_(new)``, ``load_state_dict``),
        never by assigning a new tensor, or the replay raises StaleGraphError.

    .. warning::
        **No host sync, host copy or allocation outside the capture.** ``fn`` must
        not call ``.item()``, ``bool(tensor)``, ``.tolist()``, ``nonzero()``,
        ``.cpu()``, ``torch.cuda.synchronize()`` or print a tensor, nor allocate on
        another stream: the capture raises CaptureError naming the op.  Do such
        work before the capture, or keep the values on the GPU as tensors.

    .. warning::
        **Static control flow.** ``fn``'s Python code runs once, at capture; every
        replay re-launches the kernels it launched then.  A branch on a Python
        value (a flag, a step counter, a number read on the host) stays as taken at
        capture, and Python numbers keep their capture-time values: make such state
        a tensor input, or capture one graph per branch.

    .. warning::
        **Outputs alias across sizes in a shared pool.** With ``pool="shared"``
        every size allocates from one pool, and a smaller size reuses the memory a
        larger one left, so one size's graph outputs (``graph(size).outputs``) are
        overwritten by the replay of another.  ``GraphSet.replay`` returns copies;
        when replaying a ``CapturedGraph`` yourself, copy its outputs out before
        replaying another size.

    Example::

        def make_inputs(n):
            return torch.randn(n, 1024, device="cuda")

        with capture_graphs(model, make_inputs, [1, 2, 4, 8]) as gs:
            gs.check_replay()
            gs.check_pool()
    """
    __tracebackhide__ = True
    if not _compat.cuda_available():
        raise CaptureError(
            f"capture_graphs needs a CUDA device and torch {torch.__version__} sees none "
            f"(torch.cuda.is_available() is False); run on a GPU machine, or use the cudagraphs fixture, "
            f"which skips there"
        )
    graph_set = GraphSet(
        fn,
        make_inputs,
        sizes,
        rtol=rtol,
        atol=atol,
        pool=pool,
        order=order,
        keep_outputs=keep_outputs,
        warmup_iters=warmup_iters,
        size_warmup_iters=size_warmup_iters,
        capture_error_mode=capture_error_mode,
        record=record,
    )
    try:
        graph_set._capture_all()
    except BaseException:
        graph_set.record = None  # a set that never finished capturing reports nothing
        graph_set.close()
        raise
    return graph_set
