"""The batch inputs a GraphSet captures and replays with: ``make_inputs(size)``, checked to be CUDA tensors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import MisuseError
from .captured import _as_tuple


def batch_inputs(make_inputs: Callable[[int], Any], size: int) -> tuple[torch.Tensor, ...]:
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


def check_not_all_zero(inputs: Sequence[torch.Tensor], size: int) -> None:
    __tracebackhide__ = True
    floats = [t for t in inputs if t.is_floating_point() and t.numel()]
    if floats and all(not bool(t.any()) for t in floats):
        raise MisuseError(
            f"make_inputs({size}) returned only all-zero tensors; a replay check on zeros cannot tell a "
            f"right graph from a wrong one: return fresh random inputs (e.g. torch.randn)"
        )
