"""CUDA: whether a device is there, the allocator's pools and snapshots, cuBLAS workspaces.

Everything imports torch lazily.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def no_cuda_skip_reason() -> str:
    """The one skip reason of a GPU test on a machine where torch sees no CUDA device."""
    import torch

    return f"no CUDA device (torch {torch.__version__} reports torch.cuda.is_available() == False)"


def cuda_device_count() -> int:
    """How many CUDA devices this process sees, counted without initialising CUDA where possible.

    ``torch.cuda.device_count()`` asks NVML first (2.1+) and honours
    ``CUDA_VISIBLE_DEVICES``, so a later change of that variable still takes effect;
    only where NVML fails does it fall back to the CUDA runtime, which then fixes
    the set of visible devices for the life of the process.
    """
    import torch

    return int(torch.cuda.device_count())


def memory_snapshot_segments(pool_id: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Allocator segments, restricted to ``pool_id``'s where the torch can filter itself.

    ``memory_snapshot(mempool_id=)`` exists from 2.8 and ``include_traces=`` from
    2.13; older versions return every segment (callers always filter by
    ``segment_pool_id`` too, so the answer is the same, only slower).
    """
    import inspect

    import torch

    params = inspect.signature(torch.cuda.memory_snapshot).parameters
    kwargs: dict[str, Any] = {}
    if "include_traces" in params:
        kwargs["include_traces"] = False
    if pool_id is not None and "mempool_id" in params:
        kwargs["mempool_id"] = tuple(pool_id)
    # torch leaves memory_snapshot unannotated; it returns the segments as dicts of plain values
    # (the fields of its docstring's Segment TypedDict, which no module exports)
    snapshot: Callable[..., list[dict[str, Any]]] = torch.cuda.memory_snapshot
    return list(snapshot(**kwargs))


@contextlib.contextmanager
def allocation_stacks() -> Iterator[None]:
    """Record the Python stack of every CUDA allocation made inside the block, for the snapshot's blocks.

    ``torch.cuda.memory._record_memory_history(enabled="state", stacks="python")``
    (2.1+): each live block of ``memory_snapshot()`` then carries ``frames``, the
    stack that allocated it, and no trace of alloc/free events is kept.  Where the
    user already records the whole history (``enabled="all"``, seen as device
    traces in the snapshot), it is left as it is; otherwise recording is turned
    off again on the way out.
    """
    import torch

    already = any(torch.cuda.memory._snapshot().get("device_traces") or ())
    if not already:
        torch.cuda.memory._record_memory_history(enabled="state", context="alloc", stacks="python")
    try:
        yield
    finally:
        if not already:
            torch.cuda.memory._record_memory_history(enabled=None)


def abandon_capture_pool(device: int, pool_id: tuple[int, int], end_allocation: bool) -> None:
    """Undo what a capture that never ended did to the allocator's pool bookkeeping.

    ``capture_begin`` registers the pool for allocation and takes a reference on it;
    when ``capture_end`` raises before ``endAllocateToPool`` the pool stays
    "recording" forever (the next capture into it fails with "already recording to
    mempool_id") and it is never freed.  These are the bindings ``torch.cuda.use_mem_pool``
    uses: ``_cuda_releasePool`` (2.6+), and the allocator's ``endAllocateToPool(device,
    mempool_id)`` bound as ``_cuda_endAllocateToPool`` from the 2.8-era rewrite (read in
    2.14) and as ``_cuda_endAllocateCurrentStreamToPool`` in 2.6 (same arguments).
    """
    import torch

    if end_allocation:
        # the 2.6 binding is absent from the stubs of a torch that has the newer one (unused-ignore: a 2.6 torch)
        end = getattr(torch._C, "_cuda_endAllocateToPool", None) or torch._C._cuda_endAllocateCurrentStreamToPool  # type: ignore[attr-defined, unused-ignore]
        try:
            end(device, tuple(pool_id))
        except RuntimeError:
            pass  # capture_end got far enough to end it itself
    release = getattr(torch._C, "_cuda_releasePool", None)
    if release is not None:
        release(device, tuple(pool_id))


def clear_cublas_workspaces() -> bool:
    """Free cuBLAS/cuBLASLt workspaces so the next matmul allocates a fresh one.

    Cleared before a first capture the workspace is allocated inside the graph's
    pool (as Inductor's cudagraph trees do), so no later ``clear`` elsewhere can
    hand memory a graph still uses to other tensors.  Present in every supported
    torch; returns False where it is not.
    """
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    clear()
    return True


def non_owning_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor viewing ``tensor``'s memory without keeping it allocated.

    This is vLLM's "weak ref" output: the graph keeps writing there on replay while
    the allocator may hand the block to a later capture in the same pool.  Built the
    way Inductor's cudagraph trees rebuild outputs (``_construct_storage_from_data_pointer``).
    """
    import torch

    storage = tensor.untyped_storage()
    alias_storage = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), tensor.device, storage.nbytes())
    alias = torch.empty((0,), dtype=tensor.dtype, device=tensor.device)
    alias.set_(alias_storage, tensor.storage_offset(), tensor.shape, tensor.stride())
    return alias


def device_memory_reading(device: int) -> tuple[int, int]:
    """``(free, reserved)``: the device's free bytes as the driver counts them, and the caching allocator's reserved bytes.

    ``cudaMemGetInfo`` counts every allocation on the GPU, this process's and any
    other's; ``memory_reserved`` counts only what PyTorch's caching allocator holds.
    Their difference over a span of time is what was allocated behind the allocator.
    """
    import torch

    free, _total = torch.cuda.mem_get_info(device)
    # the nested statistics as the allocator gives them: memory_reserved() flattens them all first
    stats = torch.cuda.memory_stats_as_nested_dict(device)
    return int(free), int(stats.get("reserved_bytes", {}).get("all", {}).get("current", 0))


def cublas_workspace_sizes(device: int) -> frozenset[int]:
    """The byte sizes of the workspaces cuBLAS and cuBLASLt take per handle and stream on ``device``.

    Each is one allocation through the caching allocator, on the first matmul of a
    stream, of exactly this size: made during a capture, it lands in the graph's
    pool and stays allocated until the workspaces are cleared.  Read from
    ``torch._C._cuda_getCublasWorkspaceSize`` / ``_cuda_getCublasLtWorkspaceSize``
    where this torch has them (2.13 read); otherwise computed as torch 2.6's
    ``parseChosenWorkspaceSize`` does: ``CUBLAS_WORKSPACE_CONFIG`` (``:KiB:count``
    pairs), else 32 MiB on sm_90 and 8 MiB + 128 KiB on other devices.
    """
    import os
    import re

    import torch

    sizes = set()
    for name in ("_cuda_getCublasWorkspaceSize", "_cuda_getCublasLtWorkspaceSize"):
        read = getattr(torch._C, name, None)
        if read is not None:
            with contextlib.suppress(RuntimeError):
                sizes.add(int(read()))
    if sizes:
        return frozenset(s for s in sizes if s > 0)
    pairs = re.findall(r":([0-9]+):([0-9]+)", os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""))
    if pairs:
        return frozenset({sum(int(kib) * 1024 * int(count) for kib, count in pairs)})
    major, minor = torch.cuda.get_device_capability(device)
    return frozenset({4096 * 8 * 1024 if (major, minor) == (9, 0) else 4096 * 1024 * 2 + 16 * 1024 * 8})


def allocator_counters(device: int, device_free: bool = True) -> tuple[int | None, int, int, int, Any]:
    """``(free, reserved, allocated, allocations, stats)``: the driver's free bytes (None when not asked), the caching
    allocator's reserved bytes, allocated bytes and live allocations, and the statistics they were read from (for
    ``private_pool_reserved`` at the same moment).

    The allocator's part is host-side bookkeeping (``memory_stats_as_nested_dict``,
    one C call), so it may be read while a capture is live; ``cudaMemGetInfo`` is a
    driver call, read only outside a capture (``device_free=False`` inside one).
    """
    import torch

    free = int(torch.cuda.mem_get_info(device)[0]) if device_free else None
    stats = torch.cuda.memory_stats_as_nested_dict(device)

    def current(name: str) -> int:
        return int(stats.get(name, {}).get("all", {}).get("current", 0))

    return free, current("reserved_bytes"), current("allocated_bytes"), current("allocation"), stats


def private_pool_reserved(device: int, pool: tuple[int, int], stats: Any = None) -> tuple[int, int] | None:
    """``(current, peak)`` reserved bytes of one private pool, from the allocator's per-pool figures; None before 2.13.

    torch 2.13 added ``reserved_bytes_by_private_pools`` to the allocator's
    statistics (keyed by the pool's id tuple in ``memory_stats_as_nested_dict``,
    as ``"0_1"`` in the flattened ``memory_stats``): host-side bookkeeping, so it
    may be read while a capture is live, and far cheaper than a snapshot.  A pool
    the figures do not list holds nothing yet.  ``stats``: a reading of
    ``memory_stats_as_nested_dict`` already taken at this moment (``allocator_counters``
    returns it), so the figure costs no second read.
    """
    import torch

    if stats is None:
        stats = torch.cuda.memory_stats_as_nested_dict(device)
    pools = stats.get("reserved_bytes_by_private_pools")
    if pools is None:
        return None
    figures = pools.get((int(pool[0]), int(pool[1]))) or pools.get(f"{int(pool[0])}_{int(pool[1])}") or {}
    every = figures.get("all", {})
    return int(every.get("current", 0)), int(every.get("peak", 0))
