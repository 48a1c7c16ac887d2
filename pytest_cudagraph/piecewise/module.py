"""The public face: ``piecewise_compile`` and the ``PiecewiseModule`` it returns.

``PiecewiseModule`` puts the package's parts together (ops, padding, trace, split,
runtime) and holds the checks a test calls: ``stats``, ``check_replay``,
``check_pool`` and the report entry.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from ..errors import InvariantViolation, MisuseError
from ..graphs import open_objects
from ..graphs.pool_check import PoolCheck
from ..graphs.sizes import validate_capture_sizes
from ..records.record import TestRecord, current_record
from .ops import resolve_splitting_ops
from .padding import BatchPadding
from .pieces import PassState
from .results import PiecewiseReplayCheck, PiecewiseResult, PiecewiseStats, SizeCheck
from .runtime import PiecewiseRuntime
from .split import GraphSplit, backend_name, check_strategy
from .trace import GraphTrace, first_line


def _as_tuple(inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


class PiecewiseModule:
    """A module compiled piecewise; call it like the module.  See ``pytest_cudagraph.piecewise``.

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
        check_strategy(strategy, backend)
        if not isinstance(batch_dim, int) or batch_dim < 0:
            raise MisuseError(f"batch_dim={batch_dim!r} must be a non-negative int (the padded dimension)")
        self.module = module
        self.splitting_ops = resolve_splitting_ops(splitting_ops)
        self.capture_sizes = validate_capture_sizes(capture_sizes, "capture_sizes", caller="piecewise_compile")
        self.strategy = strategy
        self.backend = backend
        self.batch_dim = batch_dim
        self.rtol = rtol
        self.atol = atol
        self._record = record if record is not None else current_record()
        owner = type(module).__name__
        state = PassState()
        self._padding = BatchPadding(owner, batch_dim, self.capture_sizes)
        self._trace = GraphTrace(module, batch_dim)
        self._split = GraphSplit(owner, self.splitting_ops, strategy, backend, state)
        self._runtime = PiecewiseRuntime(state, self._trace, self._padding, self.splitting_ops)
        self._runtime.arg_names = _forward_argument_names(module)
        self._built = False
        self._closed = False
        self._max_abs_err: float | None = None
        self._failed: str | None = None
        # closed and recorded by the plugin at the test's end if the test never closes it
        open_objects.track(self)

    # -- public ------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        __tracebackhide__ = True
        if self._closed:
            raise MisuseError("this piecewise module was closed (its graphs are released); compile the module again")
        if self._failed is not None:
            raise MisuseError(
                f"this piecewise module's capture failed ({self._failed}); fix that piece and compile the module again"
            )
        with torch.no_grad():
            if not self._built:
                self._build(args)
            return self._runtime.run(args)

    @property
    def stats(self) -> PiecewiseStats:
        """The split graph's figures; they exist once the first call has traced it."""
        if not self._built:
            raise MisuseError(
                "piecewise stats exist after the first call, which traces and captures; call the module or "
                "check_replay first"
            )
        runtime = self._runtime
        return self._split.stats(runtime.last_calls, runtime.not_captured, runtime.uncaptured_calls)

    @property
    def captured(self) -> bool:
        """Whether CUDA graphs were captured (False on the CPU)."""
        return self._runtime.captured

    @property
    def pool_bytes(self) -> int | None:
        """Bytes the shared pool holds (allocator segments of the pool), None when nothing was captured."""
        return self._runtime.pool_bytes()

    @property
    def pool_id(self) -> tuple[int, int] | None:
        """The one graph pool every piece of every size was captured into (None on the CPU)."""
        return tuple(self._runtime.state.pool) if self._runtime.captured else None

    def captured_graphs(self) -> dict[tuple[int, int], Any]:
        """``(piece index, batch size) -> capture.CapturedGraph`` for every captured piece graph."""
        return self._split.captured_graphs()

    @property
    def pool_bytes_after(self) -> Mapping[int, int | None]:
        """Pool bytes right after each size was captured (largest size first)."""
        meter = self._runtime.meter
        return meter.pool_bytes_after() if meter is not None else {}

    def check_replay(
        self,
        make_inputs: Callable[[int], Any],
        sizes: Iterable[int] | None = None,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> PiecewiseReplayCheck:
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
        from ..graphs.numerics import compare_tensor_trees, max_abs_error

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
            comparisons = compare_tensor_trees(obtained, expected, rtol, atol)
            err = max_abs_error(comparisons)
            err = float("inf") if err is None and comparisons else (err or 0.0)
            failed = [c for c in comparisons if not c.passed]
            checked.append(SizeCheck(size, path, err, not failed))
            if failed:
                failures.append(f"  batch size {size} ({path}): {failed[0].describe('replay', 'eager')}")
        result = PiecewiseReplayCheck(tuple(checked))
        self._max_abs_err = max(result.max_abs_err, self._max_abs_err or 0.0)
        if failures:
            raise InvariantViolation(
                f"piecewise replay ({self.strategy}, backend {backend_name(self.backend)}) differs from eager "
                f"{type(self.module).__name__} at {len(failures)} of {len(checked)} batch sizes:\n"
                + "\n".join(failures)
                + "\n  try: loosen rtol/atol if the error is rounding (Inductor reorders sums); a large error at "
                "padded sizes only means padding rows leak into real rows"
            )
        return result

    def default_check_sizes(self) -> list[int]:
        """Every captured size, the size above each gap between captured sizes, and one above the largest."""
        sizes = set(self.capture_sizes)
        for low, high in zip(self.capture_sizes, self.capture_sizes[1:]):
            if high - low > 1:
                sizes.add(low + 1)
        sizes.add(self.capture_sizes[-1] + 1)
        return sorted(sizes)

    def path_for(self, size: int) -> str:
        """How a batch of ``size`` runs: ``"captured"``, ``"padded to N"`` or ``"eager"``."""
        padded = self._padding.padded_size(size)
        kind = "captured" if self._runtime.captured else "split, uncaptured"
        if padded is None:
            return "eager (above the largest captured size)"
        return kind if padded == size else f"{kind}, padded to {padded}"

    def check_pool(
        self, slack: int | None = None, *, outside: int | None = None, first_use: int | None = None
    ) -> PoolCheck:
        """Check that all sizes together hold about as much pool as the largest size alone.

        Every piece of every size is captured into one pool, largest size first, and a
        size's piece outputs are let go (kept as non-owning aliases) before the next
        size, so the smaller sizes fit in the blocks the largest size left behind.
        The verdict is ``GraphSet.check_pool``'s: no block left allocated in the pool
        after a size's capture (the cuBLAS workspace apart), and, with ``slack=BYTES``,
        the pool within the pool right after the largest size + BYTES; what the
        allocator's caching adds is a figure (``PoolCheck.caching_bytes``).
        ``outside=BYTES`` also bounds the device memory the captures took behind
        PyTorch's allocator, ``first_use=BYTES`` what the warm-ups took there (see
        ``GraphSet.check_pool``).
        Returns the ``pool_check.PoolCheck``; raises InvariantViolation with the per-size
        table otherwise.

        Example::

            compiled(x)
            compiled.check_pool()
        """
        __tracebackhide__ = True
        if not self._runtime.captured:
            raise MisuseError(
                "check_pool needs captured graphs (a CUDA device and CUDA inputs); nothing was captured, so "
                "there is no pool to check"
            )
        check = self._runtime.pool_check(slack, outside, first_use)
        check.raise_if_failed("piecewise graphs (all pieces, all sizes): ")
        return check

    def result(self) -> PiecewiseResult:
        """The report's ``piecewise`` entry (figures so far)."""
        return PiecewiseResult(
            strategy=self.strategy,
            backend=backend_name(self.backend),
            sizes=self.capture_sizes,
            stats=self.stats if self._built else PiecewiseStats(0, 0, 0, 0),
            pool_bytes=self.pool_bytes,
            max_abs_err=self._max_abs_err,
            capture_s=self._runtime.capture_s,
            cost=self._runtime.cost,
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
            self._split.release()
            self._padding.clear()
            self._trace.release()

    def __enter__(self) -> PiecewiseModule:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- building ------------------------------------------------------------
    def _build(self, args: Sequence[Any]) -> None:
        __tracebackhide__ = True
        padding = self._padding
        padding.batch_size(args)
        padding.signature = padding.describe(args)
        # Dynamo specializes sizes 0 and 1, so a symbolic trace needs at least 2 rows.
        trace_size = max(self.capture_sizes[-1], 2)
        # zeros: the first batch may be larger than the trace size
        staged = padding.stage(padding.zeros_like(args, trace_size), trace_size)
        self._trace.trace(staged, trace_size, self._compile_graph)
        self._built = True
        try:
            self._runtime.capture_all(staged)
        except BaseException as exc:
            # half a set of graphs must never serve a call: release them, refuse later calls
            self._failed = f"{type(exc).__name__}: {first_line(exc)}"
            self._split.release()
            raise

    def _compile_graph(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        """The backend Dynamo calls with the traced graph: check it, then split and compile it."""
        self._split.check(gm)
        self._runtime.state.static_ids = self._trace.static_ids(example_inputs)
        return self._split.compile(gm, example_inputs)


def _forward_argument_names(module: torch.nn.Module) -> list[str]:
    """The names of ``module.forward``'s positional arguments, to name an input in a message."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


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

    .. warning::
        **Static input addresses.** Each call copies (and pads) its inputs into the
        captured buffers, but the module's parameters and buffers are read where
        they were at capture: update weights in place (``param.data.copy_(new)``,
        ``load_state_dict``), or the replay raises StaleGraphError naming the piece.

    .. warning::
        **No host sync, host copy or allocation outside the capture.** Every piece
        but the splitting ops is captured: a ``.item()``, ``nonzero()``, ``.cpu()``
        or ``torch.cuda.synchronize()`` there makes the capture raise CaptureError
        naming the piece and the size.  Such work belongs in a splitting op, which
        runs eagerly between the graphs.

    .. warning::
        **Static control flow.** The forward is traced once, with a symbolic batch
        dimension, and every size replays that one trace: a Python branch on the
        batch size, or on a value read on the host, is refused or frozen.  Keep the
        batch size out of Python control flow and view shapes (``-1`` in views),
        and call with the traced dtypes, devices and non-batch shapes.

    .. warning::
        **Outputs alias across sizes in a shared pool.** All pieces of all sizes
        share one pool, so a piece's outputs at one size live in memory that other
        sizes reuse.  The module hands out copies; the outputs of a graph from
        ``captured_graphs()`` are the pool's own: copy them before another replay.

    Example::

        with piecewise_compile(model, ["cudagraph_toy::attention"], [1, 2, 4, 8]) as compiled:
            compiled.check_replay(lambda n: torch.randn(n, 32, device="cuda"))
            assert compiled.stats.graphs_captured == 4 * (layers + 1)
    """
    return PiecewiseModule(module, splitting_ops, capture_sizes, strategy, backend, batch_dim, rtol, atol)
