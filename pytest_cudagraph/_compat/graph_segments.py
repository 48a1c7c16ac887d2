"""Breakable CUDA graphs: a chain of graphs captured back to back into one pool, with eager ops between.

A breakable capture (vLLM's ``VLLM_USE_BREAKABLE_CUDAGRAPH``, SGLang's, TensorRT-LLM's)
drives ``torch.cuda.CUDAGraph.capture_begin`` / ``capture_end`` itself instead of
``torch.cuda.graph``: it ends the graph at an op that cannot be captured, runs that
op eagerly, and begins the next graph in the same pool.  What differs between
versions, or is not public, is here:

* ``capture_begin(pool, capture_error_mode=)``: the keyword exists in 2.6-2.14; the
  pool is a ``graph_pool_handle()`` tuple in every version.
* ``capture_end`` of a graph that recorded no node warns "The CUDA Graph is empty"
  (a TORCH_WARN, a UserWarning in Python).  A segment can be empty by design (a
  function that calls the break op first), so the warning is silenced for it.
  Replaying an empty graph launches nothing (read in 2.6, 2.11 and 2.13).
* Whether the current stream is capturing: ``torch.cuda.is_current_stream_capturing()``.

Everything imports torch lazily.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch

__all__ = ["begin_graph_segment", "end_graph_segment", "stream_is_capturing"]

_EMPTY_GRAPH_WARNING = "The CUDA Graph is empty"


def begin_graph_segment(graph: torch.cuda.CUDAGraph, pool: tuple[int, int], capture_error_mode: str = "global") -> None:
    """Begin capturing ``graph`` on the current stream, allocating from ``pool`` (shared with the chain's other graphs)."""
    # torch's stub names a pool id with a NewType of tuple[int, int] (``_POOL_HANDLE``, not in every version)
    handle = cast("torch.cuda._POOL_HANDLE", (pool[0], pool[1]))
    graph.capture_begin(handle, capture_error_mode=capture_error_mode)


def end_graph_segment(graph: torch.cuda.CUDAGraph) -> None:
    """End the capture of ``graph`` (and instantiate it); an empty segment ends quietly."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=f".*{_EMPTY_GRAPH_WARNING}.*")
        graph.capture_end()


def stream_is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph now (False without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return False
    return bool(torch.cuda.is_current_stream_capturing())
