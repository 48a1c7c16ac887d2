"""Ops and graphs: op overload names, custom ops, the dispatcher, nested containers (pytree).

torch has no public pytree module in 2.6-2.14 (``torch.utils._pytree`` is the one
every version has; the C++ one is optional), no public accessor for an op's
qualified name and overload, and no public dispatch-mode base class; these are
the names the plugin uses for them.  Everything imports torch lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch

# --------------------------------------------------------------------------
# Nested containers of tensors: torch.utils._pytree (2.4-2.14)
# --------------------------------------------------------------------------


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``fn`` applied to every leaf of ``tree`` (tuples, lists, dicts, namedtuples), same structure."""
    from torch.utils import _pytree

    return _pytree.tree_map(fn, tree)


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of ``tree``, in order."""
    from torch.utils import _pytree

    return _pytree.tree_leaves(tree)


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """``(leaves, spec)``; ``tree_unflatten(leaves, spec)`` builds the same structure again."""
    from torch.utils import _pytree

    return _pytree.tree_flatten(tree)


def tree_unflatten(leaves: list[Any], spec: Any) -> Any:
    from torch.utils import _pytree

    return _pytree.tree_unflatten(leaves, spec)


# --------------------------------------------------------------------------
# Registered ops: OpOverload, OpOverloadPacket, torch.library.custom_op
# --------------------------------------------------------------------------


def is_op(target: Any) -> bool:
    """Whether ``target`` is a registered op: an OpOverload or an OpOverloadPacket (``torch._ops``)."""
    import torch

    return isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def op_overload_names(target: Any) -> tuple[str, str | None] | None:
    """``("namespace::op", overload)`` of an OpOverload, ``("namespace::op", None)`` of a packet; None otherwise.

    An OpOverload's ``_schema.name`` and ``_overloadname`` and a packet's
    ``_qualified_op_name`` (2.4-2.14); an FX node target or a function dispatched to
    a ``TorchDispatchMode`` is one of the two.
    """
    import torch

    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name, target._overloadname
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name, None
    return None


def op_qualified_name(op: torch._ops.OpOverload) -> str:
    """``"namespace::op"`` of an OpOverload (a dispatched ``func``): its ``_schema.name``."""
    return op._schema.name


def custom_op_overload(op: Any) -> Any:
    """The OpOverload behind a ``torch.library.custom_op`` object (its ``_opoverload``); anything else as given."""
    return getattr(op, "_opoverload", op)


def dispatch_mode_base() -> type:
    """``torch.utils._python_dispatch.TorchDispatchMode`` (2.4-2.14), the base of a mode that sees every dispatched op.

    For a class statement: ``class Counter(compat.dispatch_mode_base()): ...``.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode
