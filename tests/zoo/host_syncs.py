"""Finding, on the CPU, the ops of a forward that would break a CUDA graph capture.

A capture fails on an op that makes the host wait for the device (``.item()``,
``int(tensor)``, ``bool(tensor)``, ``nonzero()``, ...) or that copies a Python
value to the device (``torch.tensor(data)``).  On the CPU nothing waits, but every
such op still reaches the dispatcher, so a dispatch mode sees it, with the model
line that called it.  While it watches, ``torch.cuda.is_current_stream_capturing()``
answers True, so that a library that takes another branch while a stream captures
(transformers skips its own host syncs then) takes the branch the capture takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import traceback
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ops whose CUDA kernels read a value back to the host, or copy host data to the device
CAPTURE_BREAKING_OPS = {
    "aten::_local_scalar_dense": "a tensor read back to the host (.item(), int(), bool(), `in`)",
    "aten::nonzero": "nonzero() (its output size is read back to the host)",
    "aten::masked_select": "masked_select (its output size is read back to the host)",
    "aten::unique_consecutive": "unique (its output size is read back to the host)",
    "aten::_unique2": "unique (its output size is read back to the host)",
    "aten::repeat_interleave.Tensor": "repeat_interleave without output_size",
    "aten::lift_fresh": "torch.tensor(data) (host data copied to the device)",
}

_OWN_FILES = (os.path.dirname(torch.__file__), __file__, contextlib.__file__)


@dataclasses.dataclass(frozen=True)
class HostSync:
    op: str
    what: str
    where: str  # "file:line in function", the innermost frame outside torch

    def __str__(self) -> str:
        return f"{self.what} ({self.op}) at {self.where}"


class _Watch(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[HostSync] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        overload = f"{name}.{func._overloadname}"
        key = overload if overload in CAPTURE_BREAKING_OPS else name
        if key in CAPTURE_BREAKING_OPS:
            self.found.append(HostSync(key, CAPTURE_BREAKING_OPS[key], _caller()))
        return func(*args, **(kwargs or {}))


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_OWN_FILES):
            return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"
    return "an unknown line"


@contextlib.contextmanager
def watch_host_syncs() -> Iterator[list[HostSync]]:
    """Yield a list that fills with every capture-breaking op run in the block (CPU tensors)."""
    capturing = torch.cuda.is_current_stream_capturing
    torch.cuda.is_current_stream_capturing = lambda: True
    try:
        with _Watch() as watch:
            yield watch.found
    finally:
        torch.cuda.is_current_stream_capturing = capturing
