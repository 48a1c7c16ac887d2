"""One piece of a split graph at run time: run, captured per size, or replayed.

Every piece sees the same ``PassState``: its ``mode`` says whether a call runs the
compiled piece (``"run"``), captures it as the CUDA graph of ``size`` into the one
pool (``"capture"``) or replays that graph (``"replay"``).  A splitting piece runs
eagerly in every mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import _compat as compat
from ..errors import StaleGraphError


class PassState:
    """State the pieces share: what the current pass does, and the one pool."""

    def __init__(self) -> None:
        self.mode = "run"  # "run": call the compiled piece; "capture" / "replay": the size's graph
        self.size: int | None = None
        self.pool: Any = None
        self.stream: Any = None
        self.workspace_in_pool = True  # the first capture of the pool takes the cuBLAS workspace
        self.static_ids: set[int] = set()  # parameters and buffers: must not move after capture
        self.captured_in_pass: list[CapturablePiece] = []


@dataclass
class PieceGraph:
    """One size's graph of a piece, over the piece's tensor inputs."""

    captured: Any  # capture.CapturedGraph over the piece's tensor inputs
    tensor_positions: tuple[int, ...]
    must_match: frozenset[int]  # indices into the tensor inputs: parameters and buffers


class CapturablePiece:
    """One non-splitting piece: its compiled callable and one CUDA graph per size.

    ``list_call`` pieces are Inductor partitions, called with one list of inputs.
    """

    def __init__(self, index: int, name: str, fn: Callable[..., Any], state: PassState, list_call: bool = False):
        self.index = index
        self.name = name
        self.fn = fn
        self.state = state
        self.list_call = list_call
        self.graphs: dict[int, PieceGraph] = {}

    def __call__(self, *args: Any) -> Any:
        inputs = list(args[0]) if self.list_call else list(args)
        mode = self.state.mode
        if mode == "capture":
            return self._capture(inputs)
        if mode == "replay":
            return self._replay(inputs)
        return self._invoke(inputs)

    def _invoke(self, inputs: list[Any]) -> Any:
        return self.fn(list(inputs)) if self.list_call else self.fn(*inputs)

    def _capture(self, inputs: list[Any]) -> Any:
        from ..graphs.capture import capture_callable

        state = self.state
        positions = tuple(i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor))

        def piece(*tensors: torch.Tensor) -> Any:
            merged = list(inputs)
            for position, tensor in zip(positions, tensors):
                merged[position] = tensor
            return self._invoke(merged)

        piece.__qualname__ = piece.__name__ = f"piece {self.index} ({self.name})"
        # The whole chain was warmed up on the capture stream just before; a second
        # warm-up here would run pieces that mutate their inputs once more.
        captured = capture_callable(
            piece,
            [inputs[i] for i in positions],
            pool=state.pool,
            stream=state.stream,
            warmup_iters=0,
            label=f"batch size {state.size}, piece {self.index} ({self.name})",
            keep_outputs=True,  # the next pieces of this size read them; weakened after the size
            workspace_in_pool=state.workspace_in_pool,
        )
        state.workspace_in_pool = False
        must_match = frozenset(j for j, i in enumerate(positions) if id(inputs[i]) in state.static_ids)
        assert state.size is not None  # a capture pass runs at one batch size
        self.graphs[state.size] = PieceGraph(captured, positions, must_match)
        state.captured_in_pass.append(self)
        return captured.outputs

    def _replay(self, inputs: list[Any]) -> Any:
        __tracebackhide__ = True
        assert self.state.size is not None  # a replay pass runs at one batch size
        piece = self.graphs[self.state.size]
        tensors = [inputs[i] for i in piece.tensor_positions]
        for j in piece.must_match:
            static = piece.captured.static_inputs[j]
            if static.data_ptr() != tensors[j].data_ptr():
                raise StaleGraphError(
                    f"piece {self.index} ({self.name}) was captured at batch size {self.state.size} reading a "
                    f"parameter or buffer at {static.data_ptr():#x}, which now lives at {tensors[j].data_ptr():#x}; "
                    f"update weights in place (param.data.copy_(new)) or piecewise-compile the module again"
                )
        # Inputs made by an eager splitting op are fresh tensors each call: replay()
        # copies them into the static buffers; inputs already there are not copied.
        return piece.captured.replay(*tensors)

    def weaken(self, size: int, pool_storages: set[int]) -> None:
        """Keep the pool tensors of ``size`` only as aliases, so smaller sizes reuse the memory."""
        captured = self.graphs[size].captured

        def alias(t: Any) -> Any:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in pool_storages:
                return compat.non_owning_alias(t)
            return t

        captured.outputs = compat.tree_map(alias, captured.outputs)
        captured.static_inputs = tuple(alias(t) for t in captured.static_inputs)

    def output_storages(self, size: int) -> set[int]:
        """Storages of ``size``'s outputs: pool memory the next pieces of that size read."""
        leaves = compat.tree_leaves(self.graphs[size].captured.outputs)
        return {t.untyped_storage().data_ptr() for t in leaves if isinstance(t, torch.Tensor)}

    def release(self) -> None:
        """Release every size's graph of this piece."""
        for piece in self.graphs.values():
            piece.captured.release()
        self.graphs.clear()


class SplittingPiece:
    """A splitting piece: runs eagerly in every mode."""

    def __init__(self, index: int, name: str, module: torch.nn.Module):
        self.index = index
        self.name = name
        self.module = module

    def __call__(self, *args: Any) -> Any:
        return self.module(*args)
