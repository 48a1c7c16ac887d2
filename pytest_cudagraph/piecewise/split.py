"""Splitting the traced graph at the splitting ops, two ways, and compiling the pieces.

``fx_split`` (the default) cuts the FX graph at every splitting-op node with
``torch.fx.passes.split_module.split_module(..., keep_original_order=True)`` (the
original order matters for ops that mutate their arguments).  Each splitting op
becomes a piece of its own that runs eagerly; every other piece is compiled by the
backend (Inductor by default) once, with a symbolic batch dimension.

``inductor_partition`` gives the whole graph to Inductor, which partitions it at
``config.custom_should_partition_ops`` after fusion and hands each partition to a
wrapper that captures it the same way.  Both strategies must give the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .. import _compat as compat
from ..errors import MisuseError
from .ops import SplittingOp, is_splitting, op_label
from .pieces import CapturablePiece, PassState, SplittingPiece
from .results import PiecewiseStats, UncapturedPiece

STRATEGIES = ("fx_split", "inductor_partition")


def check_strategy(strategy: str, backend: Any) -> None:
    """Raise a MisuseError for an unknown strategy or one this torch or backend cannot run."""
    if strategy not in STRATEGIES:
        raise MisuseError(f"strategy={strategy!r} is not one of {', '.join(STRATEGIES)}; use 'fx_split' (the default)")
    if strategy == "inductor_partition":
        if backend != "inductor":
            raise MisuseError(
                f"strategy='inductor_partition' partitions inside Inductor, so backend={backend!r} cannot be "
                f"used; drop backend= or use strategy='fx_split'"
            )
        missing = compat.inductor_partition_missing()
        if missing:
            raise MisuseError(
                f"strategy='inductor_partition' needs Inductor's graph partition at custom ops, which this "
                f"torch ({torch.__version__}) lacks ({missing}); use strategy='fx_split'"
            )


def backend_name(backend: Any) -> str:
    """The backend as the report names it."""
    return backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))


def batch_size_guards() -> list[str]:
    """Dynamo's guards on symbolic sizes (the batch), e.g. ``s77 > 4``, from the trace's ShapeEnv.

    vLLM-style replay serves every size from one trace without Dynamo's guards, so
    a guard on the batch size would be silently violated at the other sizes.
    """
    guards = compat.tracing_shape_guards()
    return [str(g.expr) for g in guards if getattr(getattr(g, "expr", None), "free_symbols", None)]


class GraphSplit:
    """The pieces of one traced graph: split at the splitting ops, the others compiled.

    ``owner`` names the module in messages; every capturable piece shares ``state``.
    """

    def __init__(self, owner: str, splitting_ops: Sequence[SplittingOp], strategy: str, backend: Any, state: PassState):
        self.owner = owner
        self.splitting_ops = splitting_ops
        self.strategy = strategy
        self.backend = backend
        self.state = state
        self.capturable: list[CapturablePiece] = []
        self.splitting: list[SplittingPiece] = []
        self.splitting_nodes = 0
        self.backend_compilations = 0
        # (piece, why it runs without a graph) for every splitting piece or node
        self.eager_pieces: list[tuple[str, str]] = []

    def check(self, gm: torch.fx.GraphModule) -> None:
        """Raise a MisuseError unless the graph calls a splitting op and holds for every batch size."""
        split_nodes = [
            n for n in gm.graph.nodes if n.op == "call_function" and is_splitting(self.splitting_ops, n.target)
        ]
        if not split_nodes:
            calls = sorted({name for n in gm.graph.nodes if (name := op_label(n)) is not None})
            raise MisuseError(
                f"none of the splitting ops {[str(op) for op in self.splitting_ops]} occurs in the traced graph of "
                f"{self.owner}; its registered ops are {calls or 'none'}: pass one of those"
            )
        self.splitting_nodes = len(split_nodes)
        if self.strategy != "fx_split":  # partitions: the splitting nodes run between them
            self.eager_pieces = [
                (node.name, f"splitting op {op_label(node) or node.target}: runs eagerly between the partitions")
                for node in split_nodes
            ]
        conditions = batch_size_guards()
        if conditions:
            raise MisuseError(
                f"Dynamo traced {self.owner}.forward under conditions on the batch size "
                f"({'; '.join(conditions)}), so its one graph is wrong for other sizes and piecewise replay "
                f"skips Dynamo's guards; keep the batch size out of Python control flow and view shapes"
            )

    def compile(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        """Split ``gm`` with the strategy and compile its pieces; returns the callable that runs them."""
        if self.strategy == "fx_split":
            return self._split_and_compile(gm)
        return self._compile_with_partitions(gm, example_inputs)

    def _split_and_compile(self, gm: torch.fx.GraphModule) -> Callable[..., Any]:
        from torch.fx.passes.split_module import split_module

        piece_of: dict[torch.fx.Node, int] = {}
        current = 0
        splitting_ids = set()
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if node.op == "call_function" and is_splitting(self.splitting_ops, node.target):
                current += 1
                piece_of[node] = current
                splitting_ids.add(current)
                current += 1
            else:
                piece_of[node] = current
        # keep_original_order: a mutating op (attention writing ``out``) must stay
        # between the reads and writes around it
        split = split_module(gm, gm, lambda node: piece_of[node], keep_original_order=True)
        backend_fn = self._piece_backend()
        submodules = sorted(
            ((int(name.rsplit("_", 1)[1]), name) for name, _ in split.named_children() if name.startswith("submod_")),
        )
        for position, (piece_id, name) in enumerate(submodules):
            submodule = getattr(split, name)
            if piece_id in splitting_ids:
                wrapper: Any = SplittingPiece(position, name, submodule)
                self.splitting.append(wrapper)
                ops = sorted({op_label(n) or str(n.target) for n in submodule.graph.nodes if n.op == "call_function"})
                self.eager_pieces.append((name, f"splitting op {', '.join(ops)}: runs eagerly between the graphs"))
            else:
                example = [
                    n.meta.get("example_value", n.meta.get("val"))
                    for n in submodule.graph.nodes
                    if n.op == "placeholder"
                ]
                compiled = backend_fn(submodule, example)
                self.backend_compilations += 1
                wrapper = CapturablePiece(position, name, compiled, self.state)
                self.capturable.append(wrapper)
            delattr(split, name)
            setattr(split, name, wrapper)
        return split

    def _piece_backend(self) -> Callable[..., Any]:
        if self.backend == "eager":
            return lambda gm, example_inputs: gm
        if self.backend == "inductor":
            return compat.inductor_compiler()
        if isinstance(self.backend, str):
            return compat.lookup_backend(self.backend)
        return self.backend

    def _compile_with_partitions(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compile_fx = compat.inductor_compiler()

        def wrap_partition(fn: Callable[..., Any], metadata: Any) -> Callable[..., Any]:
            index = metadata.partition_index
            if index == 0:  # wrappers are applied again when a compiled graph is (re)loaded
                del self.capturable[:]
            piece = CapturablePiece(index, f"partition_{index}", fn, self.state, list_call=True)
            self.capturable.append(piece)
            return piece

        names = sorted({op.packet if op.overload is None else str(op) for op in self.splitting_ops})
        with compat.inductor_partition_at_ops(names, wrap_partition):
            compiled = compile_fx(gm, example_inputs)
        self.backend_compilations += 1
        return compiled

    def stats(
        self,
        splitting_op_calls: Mapping[str, int],
        not_captured: str | None = None,
        uncaptured_calls: Mapping[str, int] | None = None,
    ) -> PiecewiseStats:
        """The split's figures, with the splitting ops' eager calls of the last call.

        ``not_captured``: why no capturable piece was captured (None when they were).
        """
        capturable = len(self.capturable)
        uncaptured = [UncapturedPiece(name, reason) for name, reason in self.eager_pieces]
        if not_captured is not None:
            uncaptured += [UncapturedPiece(piece.name, not_captured) for piece in self.capturable]
        pieces = capturable + (len(self.splitting) if self.strategy == "fx_split" else self.splitting_nodes)
        return PiecewiseStats(
            pieces=pieces,
            capturable_pieces=capturable,
            graphs_captured=sum(len(p.graphs) for p in self.capturable),
            backend_compilations=self.backend_compilations,
            splitting_op_calls=dict(splitting_op_calls),
            uncaptured=tuple(uncaptured),
            uncaptured_calls=dict(uncaptured_calls or {}),
        )

    def captured_graphs(self) -> dict[tuple[int, int], Any]:
        """``(piece index, batch size) -> capture.CapturedGraph`` for every captured piece graph."""
        return {(piece.index, size): g.captured for piece in self.capturable for size, g in piece.graphs.items()}

    def release(self) -> None:
        """Release every captured piece graph."""
        for piece in self.capturable:
            piece.release()
