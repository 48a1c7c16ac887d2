"""The batch dimension of a piecewise module's inputs: its size, padding, and the traced signature.

A batch of ``n`` rows runs as the next captured size: its tensors are copied into
that size's static buffers (allocated once) and the rows beyond ``n`` are zeroed.
Every tensor input is padded along ``batch_dim``; the rest of an input's shape,
its dtype and device must be what the module was traced with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import MisuseError


class BatchPadding:
    """The inputs' batch size, the traced input signature and the static input buffers per size.

    ``owner`` names the module in messages; ``capture_sizes`` is sorted ascending.
    """

    def __init__(self, owner: str, batch_dim: int, capture_sizes: tuple[int, ...]):
        self.owner = owner
        self.batch_dim = batch_dim
        self.capture_sizes = capture_sizes
        self.signature: list[Any] = []
        self.staging: dict[int, list[Any]] = {}

    def batch_size(self, args: Sequence[Any]) -> int:
        """The one batch size of the tensor inputs; a MisuseError when they have none or disagree."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            raise MisuseError(f"piecewise {self.owner} got no tensor input; pass the batch as a tensor")
        sizes = set()
        for t in tensors:
            if t.dim() <= self.batch_dim:
                raise MisuseError(
                    f"a {t.dim()}-d input has no batch dimension {self.batch_dim}; every tensor input is padded "
                    f"along batch_dim, so pass batch_dim= or batched inputs"
                )
            sizes.add(t.shape[self.batch_dim])
        if len(sizes) != 1:
            raise MisuseError(
                f"tensor inputs disagree on the batch size along dim {self.batch_dim} ({sorted(sizes)}); every "
                f"tensor input is padded along batch_dim, so give them one batch size"
            )
        size = sizes.pop()
        if size < 1:
            raise MisuseError("piecewise modules need a batch of at least one row; got an empty batch")
        return size

    def describe(self, args: Sequence[Any]) -> list[Any]:
        """The signature of ``args``: dtype, device and shape of each tensor, with the batch dim as None."""
        return [self._describe(a) if isinstance(a, torch.Tensor) else ("value", a) for a in args]

    def _describe(self, t: torch.Tensor) -> tuple[Any, ...]:
        shape: list[int | None] = list(t.shape)
        shape[self.batch_dim] = None
        return ("tensor", t.dtype, t.device, tuple(shape))

    def check_signature(self, args: Sequence[Any]) -> None:
        """Raise a MisuseError unless ``args`` match the traced signature."""
        __tracebackhide__ = True
        given = self.describe(args)
        if given != self.signature:
            raise MisuseError(
                f"piecewise {self.owner} was traced for inputs {self.signature} (batch dim as None) "
                f"but got {given}; call it with the traced dtypes, devices and non-batch shapes, or compile again"
            )

    def padded_size(self, size: int) -> int | None:
        """The smallest captured size that holds ``size`` rows; None above the largest."""
        for captured in self.capture_sizes:
            if captured >= size:
                return captured
        return None

    def stage(self, args: Sequence[Any], size: int) -> list[Any]:
        """The static input buffers for ``size`` (allocated once), holding ``args`` zero-padded."""
        staged = self.staging.get(size)
        if staged is None:
            staged = self.staging[size] = self.zeros_like(args, size)
        for buffer, a in zip(staged, args):
            if isinstance(a, torch.Tensor):
                rows = a.shape[self.batch_dim]
                buffer.narrow(self.batch_dim, 0, rows).copy_(a)
                if rows < size:
                    buffer.narrow(self.batch_dim, rows, size - rows).zero_()
        return staged

    def zeros_like(self, args: Sequence[Any], size: int) -> list[Any]:
        """Zero tensors like ``args`` with ``size`` rows (non-tensors as they are)."""
        out = []
        for a in args:
            if isinstance(a, torch.Tensor):
                shape = list(a.shape)
                shape[self.batch_dim] = size
                out.append(torch.zeros(shape, dtype=a.dtype, device=a.device))
            else:
                out.append(a)
        return out

    def clear(self) -> None:
        """Drop the static input buffers."""
        self.staging.clear()
