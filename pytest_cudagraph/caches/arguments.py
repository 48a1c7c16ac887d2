"""The arguments of a function run in several passes: each pass gets a copy of the originals, as they were.

A step that calls ``backward()`` accumulates into its parameters' ``.grad``; an
optimizer step, or a state tensor advanced in place, changes its argument.  Handed
the same objects, the warm pass of ``cold_warm()`` (the control of ``sweep()``, the
moved pass of ``portable()``) would run on other inputs than the cold pass, and its
outputs would differ with every layer a hit: the check would blame the cache.

``PassArguments.fresh()`` hands each pass ``copy.deepcopy`` of the originals (one
copy of the whole tuple, so that two arguments sharing a tensor, or a view and its
base, share it in the copy too), and the caller's objects are never handed to a
pass: they stay as they were, for the next pass and for a child interpreter's spec.
A copy holds the arguments' memory once more while its pass runs.

Where the arguments cannot be copied (a tensor that is not a leaf of autograd's
graph and requires grad; an object whose ``__deepcopy__`` refuses), every pass gets
the originals, and ``changed()`` names each tensor among them that a pass changed
(its values, or its ``.grad``), so that the check says the inputs changed instead
of blaming the cache.  The tensors looked at are those in tuples, lists and dicts,
and a module's parameters and buffers.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from .outputs import cold_warm_differences
from .results import detached_copy


class PassArguments:
    """The arguments ``args`` of ``fn``, for passes that must each start from them as they were given."""

    def __init__(self, args: tuple):
        self.original = args
        # None until the first pass asks: whether a copy could be made
        self._copyable: bool | None = None
        self._copy_error = ""
        # the tensors as they were, where no copy could be made: (where, values, grad)
        self._before: list[tuple[str, Any, Any]] = []

    def fresh(self) -> tuple:
        """The arguments for one pass: a copy of the originals, or the originals where they cannot be copied."""
        if self._copyable is not False:
            try:
                fresh = copy.deepcopy(self.original)
            except Exception as exc:  # any refusal to copy: the passes share the originals, which are watched
                self._copy_error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            else:
                self._copyable = True
                return fresh
            self._copyable = False
            self._before = [(where, detached_copy(t), _grad(t)) for where, t in _tensors(self.original, "args")]
        return self.original

    @property
    def copied(self) -> bool:
        """Whether each pass got a copy of its own (False: the passes shared the originals)."""
        return self._copyable is not False

    def changed(self) -> tuple[str, ...]:
        """Where no copy could be made: each tensor a pass changed (``args[1].grad``, ``args[0]['state']``)."""
        if self._copyable is not False:
            return ()
        now = {where: (t, _grad(t)) for where, t in _tensors(self.original, "args")}
        changes: list[str] = []
        for where, values, grad in self._before:
            if where not in now:
                changes.append(where)
                continue
            tensor, grad_now = now[where]
            if cold_warm_differences(where, values, tensor.detach()):
                changes.append(where)
            if (grad is None) != (grad_now is None) or (
                grad is not None and cold_warm_differences(where, grad, grad_now)
            ):
                changes.append(f"{where}.grad")
        return tuple(changes)

    def changed_problem(self, call: str) -> str | None:
        """The one line a check reads when a pass changed arguments that could not be copied; None otherwise."""
        changes = self.changed()
        if not changes:
            return None
        shown = ", ".join(changes[:6]) + (f" and {len(changes) - 6} more" if len(changes) > 6 else "")
        return (
            f"the arguments changed during the passes ({shown}): the passes ran on other inputs, so their outputs "
            f"cannot show whether the cache loaded the right artifact; {call} copies the arguments for each pass, "
            f"but these could not be copied ({self._copy_error}): pass arguments copy.deepcopy() can copy (leaf "
            f"tensors, modules), or have the function leave its arguments as it found them"
        )


def _grad(tensor: Any) -> Any:
    grad = getattr(tensor, "grad", None)
    return grad.detach().clone() if grad is not None else None


def _tensors(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """``(where, tensor)`` for each tensor in tuples, lists and dicts, and each parameter and buffer of a module."""
    import torch

    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, torch.nn.Module):
        for name, tensor in [*value.named_parameters(), *value.named_buffers()]:
            yield f"{where}.{name}", tensor
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{where}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{where}[{key!r}]")
