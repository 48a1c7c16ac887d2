"""Piecewise CUDA graphs: split the FX graph at the splitting ops, capture every other piece.

Some ops (attention, mostly) cannot live inside a CUDA graph, but everything around
them can.  vLLM's answer, which this module reproduces so that a test can check it:

1. Dynamo traces the whole forward into one FX graph (``fullgraph=True``: a Dynamo
   graph break is a bug here, not a split).
2. The graph is cut at every node whose target is a *splitting op*, a
   ``torch.library`` op such as ``"cudagraph_toy::attention"``, with
   ``torch.fx.passes.split_module.split_module(..., keep_original_order=True)`` (the
   original order matters for ops that mutate their arguments).  Each splitting op
   becomes a piece of its own that runs eagerly; every other piece is compiled
   (Inductor by default) once, with a symbolic batch dimension.
3. Each non-splitting piece is captured as one CUDA graph per capture size, largest
   size first, all sizes and all pieces in **one** memory pool.  Outputs of a piece
   feed the next piece through static buffers; after a size is captured its piece
   outputs are kept only as non-owning aliases (vLLM's weak refs), so the next,
   smaller size reuses the same pool memory.

``strategy="inductor_partition"`` does step 2 inside Inductor instead (strategy 2
in docs/concepts.md): the whole graph goes to Inductor, which partitions it at
``config.custom_should_partition_ops`` after fusion and hands each partition to a
wrapper that captures it the same way.  Both strategies must give the same numbers.

At run time a batch of ``n`` rows is padded (zeros, along ``batch_dim``) to the
next captured size and the outputs are sliced back to ``n`` rows; a batch larger
than the largest captured size runs the compiled pieces without graphs.  Without
CUDA (or with CPU inputs) nothing is captured and the split pieces run as they are,
so the split itself is validated on the CPU.

Invariants checked, and the failures they report:

- ``.stats`` (vLLM's counters): ``pieces`` (all, splitting included),
  ``capturable_pieces``, ``graphs_captured`` (sizes x capturable pieces),
  ``backend_compilations`` and ``splitting_op_calls`` (eager calls of each
  splitting op during the last call, observed at the dispatcher).
- ``.check_replay(make_inputs)`` compares every captured size, a padded size in
  each gap and one size above the largest with the original module run eagerly,
  and raises :class:`InvariantViolation` naming the size, the path (captured,
  padded, eager), the worst element and the error.
- A parameter or buffer that moved since capture raises :class:`StaleGraphError`;
  a capture that fails raises :class:`CaptureError` naming the piece and the size.

Example::

    compiled = piecewise_compile(model, ["cudagraph_toy::attention"], [1, 2, 4, 8])
    out = compiled(x)                      # traces, splits, captures 4 sizes x (L+1) pieces
    compiled.check_replay(lambda n: torch.randn(n, 32, device="cuda"))
    assert compiled.stats.pieces == 2 * L + 1
"""

from __future__ import annotations

import itertools
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import _compat as compat
from . import open_objects
from .errors import CaptureError, InvariantViolation, StaleGraphError, UsageProblem
from .record import TestRecord, current_record

STRATEGIES = ("fx_split", "inductor_partition")

_entry_ids = itertools.count()


# ----------------------------------------------------------------------------
# splitting ops
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SplittingOp:
    """One splitting op: ``packet`` is ``"namespace::op"``, ``overload`` None for all overloads."""

    packet: str
    overload: str | None = None

    def __str__(self) -> str:
        return self.packet if self.overload is None else f"{self.packet}.{self.overload}"

    def matches(self, target: Any) -> bool:
        """Whether an FX node target or a dispatched OpOverload is this op."""
        names = _op_names(target)
        if names is None or names[0] != self.packet:
            return False
        # A packet target (``torch.ops.ns.op(...)`` in the Dynamo graph) resolves its
        # overload only when called, so it matches any overload of the op.
        return self.overload is None or names[1] is None or names[1] == self.overload


def _op_names(target: Any) -> tuple[str, str | None] | None:
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name, target._overloadname
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name, None
    return None


def resolve_splitting_ops(ops: Iterable[Any]) -> tuple[SplittingOp, ...]:
    """Turn names (``"ns::op"``, ``"ns::op.overload"``), OpOverloads, packets or custom-op
    objects into :class:`SplittingOp`; an op that is not registered is a UsageProblem."""
    if isinstance(ops, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        ops = [ops]
    resolved = []
    for op in ops:
        op = getattr(op, "_opoverload", op)  # torch.library.custom_op returns a CustomOpDef
        names = _op_names(op)
        if names is not None:
            resolved.append(SplittingOp(*names))
            continue
        if not isinstance(op, str) or "::" not in op:
            raise UsageProblem(
                f"splitting op {op!r} is neither an op nor a 'namespace::op' name; pass e.g. "
                f"'cudagraph_toy::attention' or torch.ops.cudagraph_toy.attention.default"
            )
        namespace, _, rest = op.partition("::")
        name, _, overload = rest.partition(".")
        try:
            packet = getattr(getattr(torch.ops, namespace), name)
            if overload:
                getattr(packet, overload)
        except (AttributeError, RuntimeError):
            raise UsageProblem(
                f"splitting op {op!r} is not registered with torch.library; import the module that "
                f"registers it (torch.library.custom_op) before piecewise_compile, or fix the name"
            ) from None
        resolved.append(SplittingOp(f"{namespace}::{name}", overload or None))
    if not resolved:
        raise UsageProblem("piecewise_compile got no splitting ops; pass at least one, e.g. ['cudagraph_toy::attention']")
    return tuple(resolved)


class _SplittingOpCounter(TorchDispatchMode):
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
            self.counts[func._schema.name] += 1
        return func(*args, **(kwargs or {}))


# ----------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PiecewiseStats:
    """vLLM's figures for one split graph (``compilation_counter`` names in brackets).

    ``pieces`` [num_piecewise_graphs_seen] counts every piece, splitting included;
    ``capturable_pieces`` [num_piecewise_capturable_graphs_seen] the others;
    ``graphs_captured`` is sizes x capturable pieces (0 without CUDA);
    ``backend_compilations`` [num_backend_compilations] the compiles of pieces
    (one per capturable piece for ``fx_split``, one for ``inductor_partition``);
    ``splitting_op_calls`` the eager calls of each splitting op (``"ns::op"`` ->
    count) during the last call.
    """

    pieces: int
    capturable_pieces: int
    graphs_captured: int
    backend_compilations: int
    splitting_op_calls: Mapping[str, int] = field(default_factory=dict)

    @property
    def splitting_op_calls_total(self) -> int:
        return sum(self.splitting_op_calls.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "pieces": self.pieces,
            "capturable_pieces": self.capturable_pieces,
            "graphs_captured": self.graphs_captured,
            "backend_compilations": self.backend_compilations,
            "splitting_op_calls": dict(self.splitting_op_calls),
            "splitting_op_calls_total": self.splitting_op_calls_total,
        }


@dataclass(frozen=True)
class SizeCheck:
    """One batch size of ``check_replay``: the path it took and its worst error."""

    size: int
    path: str  # "captured", "padded to N", "eager"
    max_abs_err: float
    ok: bool


@dataclass(frozen=True)
class ReplayCheck:
    """What ``check_replay`` compared: one :class:`SizeCheck` per size."""

    sizes: tuple[SizeCheck, ...]

    @property
    def max_abs_err(self) -> float:
        return max((s.max_abs_err for s in self.sizes), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "max_abs_err": self.max_abs_err,
            "sizes": [{"size": s.size, "path": s.path, "max_abs_err": s.max_abs_err, "ok": s.ok} for s in self.sizes],
        }


@dataclass(frozen=True)
class PiecewiseResult:
    """The report's ``piecewise`` entry for one piecewise-compiled module."""

    strategy: str
    backend: str
    sizes: tuple[int, ...]
    stats: PiecewiseStats
    pool_bytes: int | None = None
    max_abs_err: float | None = None
    capture_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"strategy": self.strategy, "backend": self.backend, "sizes": list(self.sizes)}
        out.update(self.stats.to_json())
        if self.pool_bytes is not None:
            out["pool_bytes"] = self.pool_bytes
        if self.capture_s is not None:
            out["capture_s"] = round(self.capture_s, 6)
        if self.max_abs_err is not None:
            out["max_abs_err"] = self.max_abs_err
        return out


# ----------------------------------------------------------------------------
# captured pieces
# ----------------------------------------------------------------------------


class _Runtime:
    """State the pieces share: what the current pass does, and the one pool."""

    def __init__(self) -> None:
        self.mode = "run"  # "run": call the compiled piece; "capture" / "replay": the size's graph
        self.size: int | None = None
        self.pool: Any = None
        self.stream: Any = None
        self.workspace_in_pool = True  # the first capture of the pool takes the cuBLAS workspace
        self.static_ids: set[int] = set()  # parameters and buffers: must not move after capture
        self.captured_in_pass: list[_CapturablePiece] = []


@dataclass
class _PieceGraph:
    captured: Any  # capture.CapturedGraph over the piece's tensor inputs
    tensor_positions: tuple[int, ...]
    must_match: frozenset[int]  # indices into the tensor inputs: parameters and buffers


class _CapturablePiece:
    """One non-splitting piece: its compiled callable and one CUDA graph per size.

    ``list_call`` pieces are Inductor partitions, called with one list of inputs.
    """

    def __init__(self, index: int, name: str, fn: Callable[..., Any], runtime: _Runtime, list_call: bool = False):
        self.index = index
        self.name = name
        self.fn = fn
        self.runtime = runtime
        self.list_call = list_call
        self.graphs: dict[int, _PieceGraph] = {}

    def __call__(self, *args: Any) -> Any:
        inputs = list(args[0]) if self.list_call else list(args)
        mode = self.runtime.mode
        if mode == "capture":
            return self._capture(inputs)
        if mode == "replay":
            return self._replay(inputs)
        return self._invoke(inputs)

    def _invoke(self, inputs: list[Any]) -> Any:
        return self.fn(list(inputs)) if self.list_call else self.fn(*inputs)

    def _capture(self, inputs: list[Any]) -> Any:
        from .capture import capture_callable

        runtime = self.runtime
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
            pool=runtime.pool,
            stream=runtime.stream,
            warmup_iters=0,
            label=f"batch size {runtime.size}, piece {self.index} ({self.name})",
            keep_outputs=True,  # the next pieces of this size read them; weakened after the size
            workspace_in_pool=runtime.workspace_in_pool,
        )
        runtime.workspace_in_pool = False
        must_match = frozenset(j for j, i in enumerate(positions) if id(inputs[i]) in runtime.static_ids)
        self.graphs[runtime.size] = _PieceGraph(captured, positions, must_match)
        runtime.captured_in_pass.append(self)
        return captured.outputs

    def _replay(self, inputs: list[Any]) -> Any:
        __tracebackhide__ = True
        piece = self.graphs[self.runtime.size]
        tensors = [inputs[i] for i in piece.tensor_positions]
        for j in piece.must_match:
            static = piece.captured.static_inputs[j]
            if static.data_ptr() != tensors[j].data_ptr():
                raise StaleGraphError(
                    f"piece {self.index} ({self.name}) was captured at batch size {self.runtime.size} reading a "
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

        captured.outputs = pytree.tree_map(alias, captured.outputs)
        captured.static_inputs = tuple(alias(t) for t in captured.static_inputs)

    def output_storages(self, size: int) -> set[int]:
        leaves = pytree.tree_leaves(self.graphs[size].captured.outputs)
        return {t.untyped_storage().data_ptr() for t in leaves if isinstance(t, torch.Tensor)}

    def release(self) -> None:
        for piece in self.graphs.values():
            piece.captured.release()
        self.graphs.clear()


class _SplittingPiece:
    """A splitting piece: runs eagerly in every mode."""

    def __init__(self, index: int, name: str, module: torch.nn.Module):
        self.index = index
        self.name = name
        self.module = module

    def __call__(self, *args: Any) -> Any:
        return self.module(*args)


# ----------------------------------------------------------------------------
# the compiled module
# ----------------------------------------------------------------------------


def _as_tuple(inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _parse_sizes(capture_sizes: Any) -> tuple[int, ...]:
    if capture_sizes is None:
        raise UsageProblem(
            "piecewise_compile needs capture_sizes; pass capture_sizes=[1, 2, 4, 8] (or set the cudagraph "
            "marker's capture_sizes / the ini option cudagraph_capture_sizes when using the fixture)"
        )
    if isinstance(capture_sizes, int):
        capture_sizes = [capture_sizes]
    sizes = list(capture_sizes)
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise UsageProblem(f"capture_sizes={sizes!r} must be a non-empty list of positive ints, e.g. [1, 2, 4, 8]")
    return tuple(sorted(set(sizes)))


class PiecewiseModule:
    """A module compiled piecewise; call it like the module.  See the module docstring.

    Build it with :func:`piecewise_compile`.  The first call (or ``check_replay``)
    traces, splits, compiles and captures; later calls pad, replay and slice.  It
    runs under ``torch.no_grad()``: piecewise graphs are for inference.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        splitting_ops: Iterable[Any],
        capture_sizes: Any,
        strategy: str = "fx_split",
        backend: Any = "inductor",
        batch_dim: int = 0,
        rtol: float | None = None,
        atol: float | None = None,
        record: TestRecord | None = None,
    ):
        if strategy not in STRATEGIES:
            raise UsageProblem(f"strategy={strategy!r} is not one of {', '.join(STRATEGIES)}; use 'fx_split' (the default)")
        if strategy == "inductor_partition":
            if backend != "inductor":
                raise UsageProblem(
                    f"strategy='inductor_partition' partitions inside Inductor, so backend={backend!r} cannot be "
                    f"used; drop backend= or use strategy='fx_split'"
                )
            missing = compat.inductor_partition_missing()
            if missing:
                raise UsageProblem(
                    f"strategy='inductor_partition' needs Inductor's graph partition at custom ops, which this "
                    f"torch ({torch.__version__}) lacks ({missing}); use strategy='fx_split'"
                )
        if not isinstance(batch_dim, int) or batch_dim < 0:
            raise UsageProblem(f"batch_dim={batch_dim!r} must be a non-negative int (the padded dimension)")
        self.module = module
        self.splitting_ops = resolve_splitting_ops(splitting_ops)
        self.capture_sizes = _parse_sizes(capture_sizes)
        self.strategy = strategy
        self.backend = backend
        self.batch_dim = batch_dim
        self.rtol = rtol
        self.atol = atol
        self._record = record if record is not None else current_record()
        self._runtime = _Runtime()
        self._built = False
        self._closed = False
        self._capturable: list[_CapturablePiece] = []
        self._splitting_pieces: list[_SplittingPiece] = []
        self._splitting_nodes = 0
        self._backend_compilations = 0
        self._runner: Callable[..., Any] | None = None
        self._trace_call: dict[str, Any] | None = None
        self._bindings: list[tuple[str, Any]] = []
        self._out_spec: Any = None
        self._out_sources: list[tuple[str, Any]] = []
        self._signature: list[Any] = []
        self._staging: dict[int, list[Any]] = {}
        self._captured = False
        self._capture_s: float | None = None
        self._pool_bytes_after: dict[int, int] = {}
        self._largest_segments: list[int] = []
        self._cublas_workspace_bytes = 0
        self._device_index: int | None = None
        self._last_calls: Counter[str] = Counter()
        self._max_abs_err: float | None = None
        self._failed: str | None = None
        # closed and recorded by the plugin at the test's end if the test never closes it
        open_objects.track(self)

    # -- public ------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        __tracebackhide__ = True
        if self._closed:
            raise UsageProblem("this piecewise module was closed (its graphs are released); compile the module again")
        if self._failed is not None:
            raise UsageProblem(
                f"this piecewise module's capture failed ({self._failed}); fix that piece and compile the module again"
            )
        with torch.no_grad():
            if not self._built:
                self._build(args)
            return self._run(args)

    @property
    def stats(self) -> PiecewiseStats:
        """The split graph's figures; they exist once the first call has traced it."""
        if not self._built:
            raise UsageProblem("piecewise stats exist after the first call, which traces and captures; call the module or check_replay first")
        capturable = len(self._capturable)
        pieces = capturable + (len(self._splitting_pieces) if self.strategy == "fx_split" else self._splitting_nodes)
        return PiecewiseStats(
            pieces=pieces,
            capturable_pieces=capturable,
            graphs_captured=sum(len(p.graphs) for p in self._capturable),
            backend_compilations=self._backend_compilations,
            splitting_op_calls=dict(self._last_calls),
        )

    @property
    def captured(self) -> bool:
        """Whether CUDA graphs were captured (False on the CPU)."""
        return self._captured

    @property
    def pool_bytes(self) -> int | None:
        """Bytes the shared pool holds (allocator segments of the pool), None when nothing was captured."""
        if not self._captured:
            return None
        from .memory import pool_bytes

        return pool_bytes(self._runtime.pool, self._device_index)

    @property
    def pool_id(self) -> tuple[int, int] | None:
        """The one graph pool every piece of every size was captured into (None on the CPU)."""
        return tuple(self._runtime.pool) if self._captured else None

    def captured_graphs(self) -> dict[tuple[int, int], Any]:
        """``(piece index, batch size) -> capture.CapturedGraph`` for every captured piece graph."""
        return {(piece.index, size): g.captured for piece in self._capturable for size, g in piece.graphs.items()}

    @property
    def pool_bytes_after(self) -> Mapping[int, int]:
        """Pool bytes right after each size was captured (largest size first)."""
        return dict(self._pool_bytes_after)

    def check_replay(
        self,
        make_inputs: Callable[[int], Any],
        sizes: Iterable[int] | None = None,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> ReplayCheck:
        """Compare the piecewise module with the original module, run eagerly, at every size.

        ``make_inputs(n)`` returns the positional inputs for a batch of ``n`` (a tensor
        or a tuple).  By default the sizes are every captured size, the size just above
        each captured size that leaves a gap (it is padded), and one size above the
        largest (it runs the pieces without graphs).  Raises InvariantViolation listing
        each size that differs: the path, the worst element and the error.

        Example::

            compiled.check_replay(lambda n: torch.randn(n, 32, device="cuda"), atol=1e-4)
        """
        __tracebackhide__ = True
        if not self._built:
            self(*_as_tuple(make_inputs(self.capture_sizes[-1])))
        from .numerics import compare_outputs, max_abs_error

        rtol = self.rtol if rtol is None else rtol
        atol = self.atol if atol is None else atol
        checked: list[SizeCheck] = []
        failures: list[str] = []
        for size in sorted(set(sizes) if sizes is not None else self.default_check_sizes()):
            inputs = _as_tuple(make_inputs(size))
            with torch.no_grad():
                expected = self.module(*inputs)
                obtained = self(*inputs)
            path = self.path_for(size)
            comparisons = compare_outputs(obtained, expected, rtol, atol)
            err = max_abs_error(comparisons)
            err = float("inf") if err is None and comparisons else (err or 0.0)
            failed = [c for c in comparisons if not c.passed]
            checked.append(SizeCheck(size, path, err, not failed))
            if failed:
                failures.append(f"  batch size {size} ({path}): {failed[0].describe('replay', 'eager')}")
        result = ReplayCheck(tuple(checked))
        self._max_abs_err = max(result.max_abs_err, self._max_abs_err or 0.0)
        if failures:
            raise InvariantViolation(
                f"piecewise replay ({self.strategy}, backend {self._backend_name()}) differs from eager "
                f"{type(self.module).__name__} at {len(failures)} of {len(checked)} batch sizes:\n"
                + "\n".join(failures)
                + "\n  try: loosen rtol/atol if the error is rounding (Inductor reorders sums); a large error at "
                "padded sizes only means padding rows leak into real rows"
            )
        return result

    def default_check_sizes(self) -> list[int]:
        sizes = set(self.capture_sizes)
        for low, high in zip(self.capture_sizes, self.capture_sizes[1:]):
            if high - low > 1:
                sizes.add(low + 1)
        sizes.add(self.capture_sizes[-1] + 1)
        return sorted(sizes)

    def path_for(self, size: int) -> str:
        """How a batch of ``size`` runs: ``"captured"``, ``"padded to N"`` or ``"eager"``."""
        padded = self._padded_size(size)
        kind = "captured" if self._captured else "split, uncaptured"
        if padded is None:
            return "eager (above the largest captured size)"
        return kind if padded == size else f"{kind}, padded to {padded}"

    def check_pool(self, slack: int | None = None) -> Any:
        """Check that all sizes together hold about as much pool as the largest size alone.

        Every piece of every size is captured into one pool, largest size first, and a
        size's piece outputs are let go (kept as non-owning aliases) before the next
        size, so the smaller sizes fit in the blocks the largest size left behind.
        Invariant: pool bytes <= the pool right after the largest size (minus the cuBLAS
        workspace, counted apart) + cuBLAS workspace + slack, the slack derived from
        the allocator's rounding (``memory.derive_slack``) unless given in bytes.
        Returns the ``memory.PoolCheck``; raises InvariantViolation with the per-size
        table otherwise.

        Example::

            compiled(x)
            compiled.check_pool()
        """
        __tracebackhide__ = True
        from .memory import PoolCheck, SizeMemory, Slack, derive_slack, format_bytes, pool_bytes

        if not self._captured:
            raise UsageProblem(
                "check_pool needs captured graphs (a CUDA device and CUDA inputs); nothing was captured, so "
                "there is no pool to check"
            )
        largest = self.capture_sizes[-1]
        workspace = self._cublas_workspace_bytes
        largest_bytes = max(0, self._pool_bytes_after[largest] - workspace)
        if slack is None:
            slack_obj = derive_slack(self._largest_segments)
        else:
            slack_obj = Slack(int(slack), (f"{format_bytes(int(slack))} given",))
        order = sorted(self.capture_sizes, reverse=True)
        check = PoolCheck(
            pool_bytes=pool_bytes(self._runtime.pool, self._device_index),
            largest_size=largest,
            largest_graph_bytes=largest_bytes,
            cublas_workspace_bytes=workspace,
            slack=slack_obj,
            pool_mode="shared",
            order="largest_first",
            keep_outputs=False,
            rows=tuple(SizeMemory(s, order.index(s), self._pool_bytes_after.get(s)) for s in order),
        )
        if not check.passed:
            raise InvariantViolation("piecewise graphs (all pieces, all sizes): " + check.message())
        return check

    def result(self) -> PiecewiseResult:
        return PiecewiseResult(
            strategy=self.strategy,
            backend=self._backend_name(),
            sizes=self.capture_sizes,
            stats=self.stats if self._built else PiecewiseStats(0, 0, 0, 0),
            pool_bytes=self.pool_bytes,
            max_abs_err=self._max_abs_err,
            capture_s=self._capture_s,
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "built" if self._built else "not built yet"
        return f"<PiecewiseModule {type(self.module).__name__} sizes={list(self.capture_sizes)} {state}>"

    def close(self) -> None:
        """Record the result in the test's report record and release every graph."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._built and self._record is not None:
                self._record.add_piecewise(self.result())
        finally:
            for piece in self._capturable:
                piece.release()
            self._staging.clear()
            self._runner = None
            self._entry = None

    def __enter__(self) -> PiecewiseModule:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- building ------------------------------------------------------------
    def _backend_name(self) -> str:
        return self.backend if isinstance(self.backend, str) else getattr(self.backend, "__name__", repr(self.backend))

    def _batch_size(self, args: Sequence[Any]) -> int:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            raise UsageProblem(f"piecewise {type(self.module).__name__} got no tensor input; pass the batch as a tensor")
        sizes = set()
        for t in tensors:
            if t.dim() <= self.batch_dim:
                raise UsageProblem(
                    f"a {t.dim()}-d input has no batch dimension {self.batch_dim}; every tensor input is padded "
                    f"along batch_dim, so pass batch_dim= or batched inputs"
                )
            sizes.add(t.shape[self.batch_dim])
        if len(sizes) != 1:
            raise UsageProblem(
                f"tensor inputs disagree on the batch size along dim {self.batch_dim} ({sorted(sizes)}); every "
                f"tensor input is padded along batch_dim, so give them one batch size"
            )
        size = sizes.pop()
        if size < 1:
            raise UsageProblem("piecewise modules need a batch of at least one row; got an empty batch")
        return size

    def _describe(self, t: torch.Tensor) -> tuple[Any, ...]:
        shape = list(t.shape)
        shape[self.batch_dim] = None
        return ("tensor", t.dtype, t.device, tuple(shape))

    def _check_signature(self, args: Sequence[Any]) -> None:
        __tracebackhide__ = True
        given = [self._describe(a) if isinstance(a, torch.Tensor) else ("value", a) for a in args]
        if given != self._signature:
            raise UsageProblem(
                f"piecewise {type(self.module).__name__} was traced for inputs {self._signature} (batch dim as None) "
                f"but got {given}; call it with the traced dtypes, devices and non-batch shapes, or compile again"
            )

    def _padded_size(self, size: int) -> int | None:
        for captured in self.capture_sizes:
            if captured >= size:
                return captured
        return None

    def _stage(self, args: Sequence[Any], size: int) -> list[Any]:
        """The static input buffers for ``size`` (allocated once), holding ``args`` zero-padded."""
        staged = self._staging.get(size)
        if staged is None:
            staged = []
            for a in args:
                if isinstance(a, torch.Tensor):
                    shape = list(a.shape)
                    shape[self.batch_dim] = size
                    staged.append(torch.zeros(shape, dtype=a.dtype, device=a.device))
                else:
                    staged.append(a)
            self._staging[size] = staged
        for buffer, a in zip(staged, args):
            if isinstance(a, torch.Tensor):
                rows = a.shape[self.batch_dim]
                buffer.narrow(self.batch_dim, 0, rows).copy_(a)
                if rows < size:
                    buffer.narrow(self.batch_dim, rows, size - rows).zero_()
        return staged

    def _make_entry(self) -> Callable[..., Any]:
        module = self.module

        def entry(*args):
            return module(*args)

        # Dynamo caches compiled frames per code object, and every PiecewiseModule of
        # one class would share ``forward``'s: a fresh code object per instance keeps
        # each trace its own, with no recompile and no stale cache hit.
        name = f"piecewise_entry_{next(_entry_ids)}"
        replace = {"co_name": name}
        if hasattr(entry.__code__, "co_qualname"):
            replace["co_qualname"] = name
        code = entry.__code__.replace(**replace)
        return types.FunctionType(code, entry.__globals__, name, entry.__defaults__, entry.__closure__)

    def _build(self, args: Sequence[Any]) -> None:
        __tracebackhide__ = True
        self._batch_size(args)
        self._signature = [self._describe(a) if isinstance(a, torch.Tensor) else ("value", a) for a in args]
        # Dynamo specializes sizes 0 and 1, so a symbolic trace needs at least 2 rows.
        trace_size = max(self.capture_sizes[-1], 2)
        # zeros: the first batch may be larger than the trace size
        staged = self._stage(self._zero_like(args, trace_size), trace_size)
        for t in staged:
            if isinstance(t, torch.Tensor):
                torch._dynamo.mark_dynamic(t, self.batch_dim)
        named = dict(self.module.named_parameters(remove_duplicate=False))
        named.update(self.module.named_buffers(remove_duplicate=False))
        self._static_names = {id(t): name for name, t in named.items()}
        self._entry = self._make_entry()
        compiled = torch.compile(self._entry, backend=self._compile_graph, fullgraph=True)
        try:
            user_out = compiled(*staged)
        except torch._dynamo.exc.BackendCompilerFailed as exc:
            inner = getattr(exc, "inner_exception", None)
            if isinstance(inner, (UsageProblem, CaptureError)):
                raise inner from None
            raise
        except torch._dynamo.exc.Unsupported as exc:  # UserError is a subclass
            if compat.is_shape_specialization_error(exc):
                raise UsageProblem(
                    f"{type(self.module).__name__}.forward specializes on the batch dimension {self.batch_dim} "
                    f"({_first_line(exc)}); piecewise capture needs one graph for every batch size"
                ) from None
            raise UsageProblem(
                f"Dynamo cannot trace {type(self.module).__name__}.forward as one graph ({_first_line(exc)}); "
                f"piecewise_compile needs fullgraph=True: make the breaking call a registered custom op "
                f"and a splitting op"
            ) from None
        if self._trace_call is None:
            raise UsageProblem(f"Dynamo compiled {type(self.module).__name__}.forward without calling the graph; it has no tensor work to split")
        self._bind(staged, trace_size, user_out)
        self._built = True
        try:
            self._capture_all(staged)
        except BaseException as exc:
            # half a set of graphs must never serve a call: release them, refuse later calls
            self._failed = f"{type(exc).__name__}: {_first_line(exc)}"
            for piece in self._capturable:
                piece.release()
            raise

    def _bind(self, staged: list[Any], trace_size: int, user_out: Any) -> None:
        """Map the graph's placeholders to user inputs, the batch size and the module's tensors.

        After the trace Dynamo is no longer called: its guards would recompile at a
        size of 1 (Dynamo specializes 0 and 1), and piecewise graphs serve every size
        from one trace, as vLLM's do.  The inputs are checked against the traced
        signature instead.
        """
        args = self._trace_call["args"]
        inputs = {id(t): j for j, t in enumerate(staged) if isinstance(t, torch.Tensor)}
        for a in args:
            if isinstance(a, torch.Tensor) and id(a) in inputs:
                self._bindings.append(("input", inputs[id(a)]))
            elif isinstance(a, torch.Tensor) and id(a) in self._static_names:
                self._bindings.append(("static", self._static_names[id(a)]))
            elif isinstance(a, int) and not isinstance(a, bool) and a == trace_size:
                self._bindings.append(("batch", None))
            else:
                self._bindings.append(("const", a))
        raw = self._trace_call["out"]
        raw_ids = {id(t): i for i, t in enumerate(raw)} if isinstance(raw, (tuple, list)) else {}
        leaves, self._out_spec = pytree.tree_flatten(user_out)
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and id(leaf) in raw_ids:
                self._out_sources.append(("out", raw_ids[id(leaf)]))
            elif isinstance(leaf, torch.Tensor) and id(leaf) in inputs:
                self._out_sources.append(("input", inputs[id(leaf)]))
            elif isinstance(leaf, torch.Tensor):
                raise UsageProblem(
                    f"{type(self.module).__name__}.forward returns a tensor that is neither a graph output nor an "
                    f"input; return the computed tensors directly"
                )
            else:
                self._out_sources.append(("const", leaf))
        self._trace_call = None

    def _graph_args(self, inputs: Sequence[Any], size: int) -> list[Any]:
        out = []
        for kind, value in self._bindings:
            if kind == "input":
                out.append(inputs[value])
            elif kind == "batch":
                out.append(size)
            elif kind == "static":
                out.append(self._static_tensor(value))
            else:
                out.append(value)
        return out

    def _static_tensor(self, name: str) -> torch.Tensor:
        # fetched by name each call: a reassigned parameter is used (and, once
        # captured, reported stale) instead of silently reading the old one
        module_path, _, leaf = name.rpartition(".")
        owner = self.module.get_submodule(module_path) if module_path else self.module
        return getattr(owner, leaf)

    # -- the backend Dynamo calls ------------------------------------------------
    def _compile_graph(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        split_nodes = [n for n in gm.graph.nodes if n.op == "call_function" and self._is_splitting(n.target)]
        if not split_nodes:
            calls = sorted({name for n in gm.graph.nodes if (name := _op_label(n)) is not None})
            raise UsageProblem(
                f"none of the splitting ops {[str(op) for op in self.splitting_ops]} occurs in the traced graph of "
                f"{type(self.module).__name__}; its registered ops are {calls or 'none'}: pass one of those"
            )
        self._splitting_nodes = len(split_nodes)
        conditions = _batch_size_guards()
        if conditions:
            raise UsageProblem(
                f"Dynamo traced {type(self.module).__name__}.forward under conditions on the batch size "
                f"({'; '.join(conditions)}), so its one graph is wrong for other sizes and piecewise replay "
                f"skips Dynamo's guards; keep the batch size out of Python control flow and view shapes"
            )
        self._runtime.static_ids = {id(t) for t in example_inputs if isinstance(t, torch.Tensor) and id(t) in self._static_names}
        if self.strategy == "fx_split":
            runner = self._split_and_compile(gm)
        else:
            runner = self._compile_with_partitions(gm, example_inputs)

        def run_graph(*args: Any) -> Any:
            out = runner(*args)
            if self._runner is None:  # the trace call: remember how Dynamo binds the graph
                self._trace_call = {"args": args, "out": out}
                self._runner = runner
            return out

        return run_graph

    def _is_splitting(self, target: Any) -> bool:
        return any(op.matches(target) for op in self.splitting_ops)

    def _split_and_compile(self, gm: torch.fx.GraphModule) -> Callable[..., Any]:
        from torch.fx.passes.split_module import split_module

        piece_of: dict[torch.fx.Node, int] = {}
        current = 0
        splitting_ids = set()
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if node.op == "call_function" and self._is_splitting(node.target):
                current += 1
                piece_of[node] = current
                splitting_ids.add(current)
                current += 1
            else:
                piece_of[node] = current
        # keep_original_order: a mutating op (attention writing ``out``) must stay
        # between the reads and writes around it
        split = split_module(gm, None, lambda node: piece_of[node], keep_original_order=True)
        backend_fn = self._piece_backend()
        submodules = sorted(
            ((int(name.rsplit("_", 1)[1]), name) for name, _ in split.named_children() if name.startswith("submod_")),
        )
        for position, (piece_id, name) in enumerate(submodules):
            submodule = getattr(split, name)
            if piece_id in splitting_ids:
                wrapper: Any = _SplittingPiece(position, name, submodule)
                self._splitting_pieces.append(wrapper)
            else:
                example = [n.meta.get("example_value", n.meta.get("val")) for n in submodule.graph.nodes if n.op == "placeholder"]
                compiled = backend_fn(submodule, example)
                self._backend_compilations += 1
                wrapper = _CapturablePiece(position, name, compiled, self._runtime)
                self._capturable.append(wrapper)
            delattr(split, name)
            setattr(split, name, wrapper)
        return split

    def _piece_backend(self) -> Callable[..., Any]:
        if self.backend == "eager":
            return lambda gm, example_inputs: gm
        if self.backend == "inductor":
            from torch._inductor.compile_fx import compile_fx

            return compile_fx
        if isinstance(self.backend, str):
            from torch._dynamo import lookup_backend

            return lookup_backend(self.backend)
        return self.backend

    def _compile_with_partitions(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from torch._inductor.compile_fx import compile_fx

        def wrap_partition(fn: Callable[..., Any], metadata: Any) -> Callable[..., Any]:
            index = metadata.partition_index
            if index == 0:  # wrappers are applied again when a compiled graph is (re)loaded
                del self._capturable[:]
            piece = _CapturablePiece(index, f"partition_{index}", fn, self._runtime, list_call=True)
            self._capturable.append(piece)
            return piece

        names = sorted({op.packet if op.overload is None else str(op) for op in self.splitting_ops})
        with compat.inductor_partition_at_ops(names, wrap_partition):
            compiled = compile_fx(gm, example_inputs)
        self._backend_compilations += 1
        return compiled

    # -- capture and run -----------------------------------------------------
    def _capture_all(self, args: Sequence[Any]) -> None:
        """Capture every capturable piece at every size, largest first, into one pool."""
        __tracebackhide__ = True
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if devices != {"cuda"} or not compat.cuda_available():
            return  # the CPU path: the split pieces run uncaptured
        from .capture import new_pool
        from .memory import pool_usage

        runtime = self._runtime
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        self._device_index = device.index if device.index is not None else torch.cuda.current_device()
        started = time.perf_counter()
        runtime.pool = new_pool()
        runtime.stream = torch.cuda.Stream(device)
        runtime.workspace_in_pool = True
        try:
            for size in sorted(self.capture_sizes, reverse=True):
                graph_args = self._graph_args(self._stage(self._zero_like(args, size), size), size)
                # Warm the whole chain up on the capture stream: cuBLAS handles and
                # lazily built kernels must exist before any piece is captured.
                runtime.stream.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(runtime.stream):
                    runtime.mode = "run"
                    self._runner(*graph_args)
                torch.cuda.current_stream(device).wait_stream(runtime.stream)
                runtime.mode, runtime.size = "capture", size
                runtime.captured_in_pass = []
                out = self._runner(*graph_args)
                del out, graph_args
                # Only now, with every piece of this size captured, may its pool
                # tensors go: the pieces read each other's outputs.
                pool_storages = set().union(*(p.output_storages(size) for p in runtime.captured_in_pass))
                for piece in runtime.captured_in_pass:
                    piece.weaken(size, pool_storages)
                runtime.captured_in_pass = []
                usage = pool_usage(runtime.pool, self._device_index)
                self._pool_bytes_after[size] = usage.reserved_bytes
                if size == self.capture_sizes[-1]:
                    self._largest_segments = list(usage.segment_sizes)
        finally:
            runtime.mode, runtime.size = "run", None
            if runtime.pool is not None:
                # The workspace the first capture put in the pool stays registered with
                # cuBLAS; clear it so no later matmul elsewhere writes into our pool.
                before = pool_usage(runtime.pool, self._device_index).allocated_bytes
                compat.clear_cublas_workspaces()
                after = pool_usage(runtime.pool, self._device_index).allocated_bytes
                self._cublas_workspace_bytes = max(0, before - after)
        self._captured = True
        self._capture_s = time.perf_counter() - started

    def _zero_like(self, args: Sequence[Any], size: int) -> list[Any]:
        out = []
        for a in args:
            if isinstance(a, torch.Tensor):
                shape = list(a.shape)
                shape[self.batch_dim] = size
                out.append(torch.zeros(shape, dtype=a.dtype, device=a.device))
            else:
                out.append(a)
        return out

    def _run(self, args: Sequence[Any]) -> Any:
        __tracebackhide__ = True
        self._check_signature(args)
        rows = self._batch_size(args)
        padded = self._padded_size(rows)
        runtime = self._runtime
        if padded is None:
            inputs = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
            size = rows
        else:
            inputs = self._stage(args, padded)
            size = padded
        graph_args = self._graph_args(inputs, size)
        counter = _SplittingOpCounter(self.splitting_ops)
        try:
            if padded is not None and self._captured:
                runtime.mode, runtime.size = "replay", padded
            with counter:
                raw = self._runner(*graph_args)
        finally:
            runtime.mode, runtime.size = "run", None
        self._last_calls = counter.counts
        leaves = []
        for kind, value in self._out_sources:
            leaf = raw[value] if kind == "out" else inputs[value] if kind == "input" else value
            if isinstance(leaf, torch.Tensor):
                if leaf.dim() > self.batch_dim and leaf.shape[self.batch_dim] == size and size != rows:
                    leaf = leaf.narrow(self.batch_dim, 0, rows)
                # pool memory is overwritten by the next replay: hand out a copy
                leaf = leaf.clone()
            leaves.append(leaf)
        return pytree.tree_unflatten(leaves, self._out_spec)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _batch_size_guards() -> list[str]:
    """Dynamo's guards on symbolic sizes (the batch), e.g. ``s77 > 4``, from the trace's ShapeEnv.

    vLLM-style replay serves every size from one trace without Dynamo's guards, so
    a guard on the batch size would be silently violated at the other sizes.
    """
    context = torch._guards.TracingContext.try_get()
    shape_env = getattr(getattr(context, "fake_mode", None), "shape_env", None)
    guards = getattr(shape_env, "guards", None) or []
    return [str(g.expr) for g in guards if getattr(getattr(g, "expr", None), "free_symbols", None)]


def _op_label(node: torch.fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    names = _op_names(node.target)
    if names is None or names[0].startswith("aten::"):
        return None
    return names[0]


def piecewise_compile(
    module: torch.nn.Module,
    splitting_ops: Iterable[Any],
    capture_sizes: Any,
    strategy: str = "fx_split",
    backend: Any = "inductor",
    batch_dim: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
) -> PiecewiseModule:
    """Split ``module``'s graph at ``splitting_ops`` and capture every other piece per size.

    ``splitting_ops``: ``"namespace::op"`` names (optionally ``".overload"``),
    OpOverloads, packets or ``torch.library.custom_op`` objects.  ``backend``
    compiles each non-splitting piece (``"inductor"``, ``"eager"``, any Dynamo
    backend name or a callable ``(gm, example_inputs) -> callable``).
    ``strategy="inductor_partition"`` lets Inductor partition instead (where the
    torch has it).  ``rtol``/``atol`` are ``check_replay``'s defaults.  The result
    is recorded into the running test's report when it is closed (``with`` block,
    ``.close()``, or the ``piecewise`` fixture's teardown).

    Example::

        with piecewise_compile(model, ["cudagraph_toy::attention"], [1, 2, 4, 8]) as compiled:
            compiled.check_replay(lambda n: torch.randn(n, 32, device="cuda"))
            assert compiled.stats.graphs_captured == 4 * (layers + 1)
    """
    return PiecewiseModule(module, splitting_ops, capture_sizes, strategy, backend, batch_dim, rtol, atol)


class PiecewiseFixture:
    """The ``piecewise`` fixture: ``piecewise(module, splitting_ops, capture_sizes=None, **options)``.

    Sizes and tolerances default to the test's ``cudagraph`` marker and the ini
    options.  At teardown every module it compiled is recorded into the test's report
    (``piecewise`` section) and its graphs are released.
    """

    def __init__(
        self,
        record: TestRecord | None,
        sizes: Sequence[int] | None = None,
        rtol: float | None = None,
        atol: float | None = None,
    ):
        self.record = record
        self.sizes = tuple(sizes) if sizes else None
        self.rtol = rtol
        self.atol = atol
        self.modules: list[PiecewiseModule] = []

    def __call__(self, module: torch.nn.Module, splitting_ops: Iterable[Any], capture_sizes: Any = None, **options: Any) -> PiecewiseModule:
        options.setdefault("rtol", self.rtol)
        options.setdefault("atol", self.atol)
        compiled = PiecewiseModule(
            module, splitting_ops, capture_sizes if capture_sizes is not None else self.sizes, record=self.record, **options
        )
        self.modules.append(compiled)
        return compiled

    def close(self) -> None:
        for compiled in self.modules:
            compiled.close()
        self.modules.clear()
