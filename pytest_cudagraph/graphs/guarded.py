"""Capture on a stream into a pool, and leave the process usable when the capture fails.

``guarded_capture`` restores the current stream, the CUDA RNG and the allocator's
pool bookkeeping after a failed capture, and raises a ``CaptureError`` naming the
real cause and the op (``capture_failure``).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

from .. import _compat
from ..errors import CaptureError
from .capture_failure import _clear_traceback_frames, describe_capture_failure_at, real_cause
from .memory import PoolId


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
        # capture_begin takes torch's private NewType over this same (int, int) tuple, which has no public name
        graph.capture_begin(new_pool(), capture_error_mode="thread_local")  # type: ignore[arg-type]
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
            # capture_begin takes torch's private NewType over this same (int, int) tuple, which has no public name
            graph.capture_begin(pool, capture_error_mode=capture_error_mode)  # type: ignore[arg-type]
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
    _restore_process(graph, device, pool, rng_state, abandon_pool=begun and not ended)
    if interrupt is not None:
        raise interrupt
    error = _capture_error(errors[0], label, fn_name)
    errors.clear()
    raise error from None


def _restore_process(
    graph: torch.cuda.CUDAGraph, device: int, pool: PoolId, rng_state: torch.Tensor, *, abandon_pool: bool
) -> None:
    """After a failed capture: the pool given back, the graph reset, the device idle, the CUDA RNG restored."""
    if abandon_pool:
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


def _capture_error(exc: BaseException, label: str, fn_name: str) -> CaptureError:
    """The ``CaptureError`` of a failed capture, with ``.cause``, ``.op`` and ``.site``; clears the failed frames."""
    message, op, site = describe_capture_failure_at(exc, label, fn_name)
    cause = real_cause(exc)
    # The failed frames' locals are tensors allocated in the abandoned pool; a
    # traceback kept by pytest would keep that pool's segments alive forever.
    _clear_traceback_frames(exc)
    error = CaptureError(message)
    error.cause = cause  # type: ignore[attr-defined]
    error.op = op  # type: ignore[attr-defined]
    error.site = site
    return error
