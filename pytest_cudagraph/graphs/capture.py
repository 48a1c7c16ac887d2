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

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import _compat
from ..errors import CaptureError
from .capture_failure import _generated_code_site as _generated_code_site
from .capture_failure import describe_capture_failure as describe_capture_failure
from .capture_failure import real_cause as real_cause
from .captured import CapturedGraph, capture_callable
from .captured import parameter_fingerprint as parameter_fingerprint
from .graph_results import GraphReplayCheck, GraphSetResult
from .graph_set import ORDERS as ORDERS
from .graph_set import POOL_MODES as POOL_MODES
from .graph_set import GraphSet, capture_all
from .guarded import guarded_capture, new_pool
from .guarded import restore_cuda_rng as restore_cuda_rng

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


def capture_graphs(
    fn: Callable[..., Any], make_inputs: Callable[[int], Any], sizes: Sequence[int], **options: Any
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
    negative controls for ``check_pool``.  ``break_at=("ns::op", ...)`` makes the
    capture breakable (``breakable``): each size is a chain of graphs, ended at every
    call of those ops, which run eagerly between the graphs, all in the one pool.
    ``record_collectives=True`` keeps each size's collectives (``gs.graph(size).collectives``:
    the calls ``fn`` issued during capture, and the NCCL kernels read back from the graph);
    the ``cudagraph_ranks`` handle turns it on to align the ranks before the first replay.

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
    _SIGNATURE.bind(fn, make_inputs, sizes, **options)  # a wrong argument is a TypeError first, as before
    _require_cuda()
    graph_set = GraphSet(fn, make_inputs, sizes, **options)
    try:
        capture_all(graph_set)
    except BaseException:
        graph_set.record = None  # a set that never finished capturing reports nothing
        graph_set.close()
        raise
    return graph_set


def _require_cuda() -> None:
    """CaptureError where torch sees no CUDA device: the plain API has no test to skip, the fixture does."""
    __tracebackhide__ = True
    if not _compat.cuda_available():
        raise CaptureError(
            f"capture_graphs needs a CUDA device and torch {torch.__version__} sees none "
            f"(torch.cuda.is_available() is False); run on a GPU machine, or use the cudagraphs fixture, "
            f"which skips there"
        )


# The options are GraphSet's, defined there once; help() and inspect show them here.
_SIGNATURE = inspect.signature(GraphSet).replace(return_annotation="GraphSet")
capture_graphs.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
