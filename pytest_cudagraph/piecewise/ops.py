"""Splitting ops: resolving the names a user gives, matching graph nodes, counting eager calls.

A splitting op is a ``torch.library`` op (``"namespace::op"``, optionally with an
overload) that cannot live inside a CUDA graph, attention mostly.  The graph is
split at every node whose target is one; at run time the dispatcher counts its
eager calls, so a splitting op captured into a graph by mistake shows up as a
missing call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import _compat as compat
from ..errors import MisuseError


@dataclass(frozen=True)
class SplittingOp:
    """One splitting op: ``packet`` is ``"namespace::op"``, ``overload`` None for all overloads."""

    packet: str
    overload: str | None = None

    def __str__(self) -> str:
        return self.packet if self.overload is None else f"{self.packet}.{self.overload}"

    def matches(self, target: Any) -> bool:
        """Whether an FX node target or a dispatched OpOverload is this op."""
        names = op_names(target)
        if names is None or names[0] != self.packet:
            return False
        # A packet target (``torch.ops.ns.op(...)`` in the Dynamo graph) resolves its
        # overload only when called, so it matches any overload of the op.
        return self.overload is None or names[1] is None or names[1] == self.overload


def op_names(target: Any) -> tuple[str, str | None] | None:
    """``("namespace::op", overload)`` of an OpOverload or a packet (overload None); None otherwise."""
    return compat.op_overload_names(target)


def is_splitting(ops: Sequence[SplittingOp], target: Any) -> bool:
    """Whether ``target`` (an FX node target or an OpOverload) is one of ``ops``."""
    return any(op.matches(target) for op in ops)


def op_label(node: torch.fx.Node) -> str | None:
    """The ``"namespace::op"`` a graph node calls, for a registered op outside ``aten``."""
    if node.op != "call_function":
        return None
    names = op_names(node.target)
    if names is None or names[0].startswith("aten::"):
        return None
    return names[0]


def resolve_splitting_ops(ops: Iterable[Any]) -> tuple[SplittingOp, ...]:
    """Turn names (``"ns::op"``, ``"ns::op.overload"``), OpOverloads, packets or custom-op
    objects into :class:`SplittingOp`; an op that is not registered is a MisuseError."""
    if isinstance(ops, str) or compat.is_op(ops):
        ops = [ops]
    resolved = []
    for op in ops:
        op = compat.custom_op_overload(op)  # torch.library.custom_op returns a CustomOpDef
        names = op_names(op)
        if names is not None:
            resolved.append(SplittingOp(*names))
            continue
        resolved.append(_resolve_name(op))
    if not resolved:
        raise MisuseError(
            "piecewise_compile got no splitting ops; pass at least one, e.g. ['cudagraph_toy::attention']"
        )
    return tuple(resolved)


def _resolve_name(op: Any) -> SplittingOp:
    if not isinstance(op, str) or "::" not in op:
        raise MisuseError(
            f"splitting op {op!r} is neither an op nor a 'namespace::op' name; pass e.g. "
            f"'cudagraph_toy::attention' or torch.ops.cudagraph_toy.attention.default"
        )
    return registered_op(op, "splitting op", "piecewise_compile")


def registered_op(name: str, role: str, before: str) -> SplittingOp:
    """``"namespace::op[.overload]"`` as a SplittingOp, once torch.library has that op.

    Failure: MisuseError naming the op as ``role`` and saying to register it before ``before``.
    """
    __tracebackhide__ = True
    namespace, _, rest = name.partition("::")
    op_name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), op_name)
        if overload:
            getattr(packet, overload)
    except (AttributeError, RuntimeError):
        raise MisuseError(
            f"{role} {name!r} is not registered with torch.library; import the module that "
            f"registers it (torch.library.custom_op) before {before}, or fix the name"
        ) from None
    return SplittingOp(f"{namespace}::{op_name}", overload or None)


# the base comes from the gateway at import time (torch internals stay there), which mypy cannot follow
class SplittingOpCounter(compat.dispatch_mode_base()):  # type: ignore[misc]
    """Counts eager calls of the splitting ops as the dispatcher sees them.

    Inside a replayed CUDA graph nothing is dispatched, so a splitting op captured by
    mistake into a graph is *not* counted: the count is the eager calls only.
    """

    def __init__(self, ops: Sequence[SplittingOp]):
        super().__init__()
        self.ops = ops
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(op.matches(func) for op in self.ops):
            self.counts[compat.op_qualified_name(func)] += 1
        return func(*args, **(kwargs or {}))
