"""torch.distributed: whether it is there, the rendezvous store, and binding a rank's process group to its GPU.

Everything imports torch lazily.  Read in torch 2.6-2.14.
"""

from __future__ import annotations

import datetime
import inspect
from typing import Any


def distributed_available() -> bool:
    """True where this torch was built with torch.distributed (not every macOS/Windows build is)."""
    import torch.distributed as dist

    return bool(dist.is_available())


def process_group_initialized() -> bool:
    """True once this process joined a default process group (``init_process_group``)."""
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized())


def backend_available(backend: str) -> bool:
    """Whether ``backend`` ("nccl" or "gloo") was built into this torch; ``is_nccl_available`` is False on CPU builds."""
    import torch.distributed as dist

    if not dist.is_available():
        return False
    probe = {"nccl": dist.is_nccl_available, "gloo": dist.is_gloo_available}.get(backend)
    return bool(probe()) if probe is not None else False


def rendezvous_store_server() -> tuple[Any, int]:
    """A TCPStore server on a free port of 127.0.0.1, held by the launching process: ``(store, port)``.

    The port is the one the server bound (port 0 asks the OS), so no other process
    can take it between choosing and binding, as it can with a port probed and
    closed.  ``wait_for_workers=False`` lets the constructor return at once; the
    ranks connect as clients.  ``TCPStore(host, port, world_size, is_master,
    timeout, wait_for_workers)`` has had these arguments since torch 1.x;
    ``.port`` since 2.0.
    """
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30), wait_for_workers=False)
    return store, int(store.port)


def rendezvous_store_client(port: int, timeout_s: float) -> Any:
    """A rank's client of the launcher's TCPStore."""
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=timeout_s))


def init_rank_process_group(
    backend: str, *, store: Any, rank: int, world_size: int, timeout_s: float, device: Any
) -> str:
    """Initialise the default process group; returns how the group was bound to the rank's device.

    With NCCL, ``device_id=`` (torch 2.3+, the ``device_id`` parameter of
    ``init_process_group``) binds the group to the rank's GPU and creates the NCCL
    communicator at once, not at the first collective: a first collective inside a
    CUDA graph capture would otherwise create the communicator while capturing.
    Where the parameter is missing the caller warms the communicator up with an
    eager collective (it does in every version anyway).  Returns
    ``"device_id"`` or ``"set_device"``.
    """
    import torch.distributed as dist

    kwargs: dict[str, Any] = {
        "backend": backend,
        "store": store,
        "rank": rank,
        "world_size": world_size,
        "timeout": datetime.timedelta(seconds=timeout_s),
    }
    bound = "set_device"
    if device is not None and getattr(device, "type", None) == "cuda":
        if "device_id" in inspect.signature(dist.init_process_group).parameters:
            kwargs["device_id"] = device
            bound = "device_id"
    dist.init_process_group(**kwargs)
    return bound
