"""Tracing: one Dynamo trace of the module with a symbolic batch dimension, then no Dynamo.

Dynamo traces the whole forward into one FX graph (``fullgraph=True``: a Dynamo
graph break is a bug here, not a split) and hands it to a backend, which splits
and compiles it.  After that first call Dynamo is no longer called: its guards
would recompile at a size of 1 (Dynamo specializes 0 and 1), and piecewise graphs
serve every size from one trace, as vLLM's do.  :class:`GraphTrace` remembers how
Dynamo bound the graph (which placeholder is which input, the batch size, or a
parameter) and where each output of the module comes from, so later calls go to
the compiled graph directly.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import _compat as compat
from ..errors import CaptureError, MisuseError

_entry_ids = itertools.count()

# (gm, example_inputs) -> the callable that runs the graph: the split's compile step
GraphCompiler = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class GraphTrace:
    """One trace of ``module`` and how to call its compiled graph again without Dynamo."""

    def __init__(self, module: torch.nn.Module, batch_dim: int):
        self.module = module
        self.batch_dim = batch_dim
        self.runner: Callable[..., Any] | None = None  # the compiled graph, called with graph_args()
        self.static_names: dict[int, str] = {}  # id of a parameter or buffer -> its name
        self._entry: Callable[..., Any] | None = None
        self._trace_call: dict[str, Any] | None = None
        self._bindings: list[tuple[str, Any]] = []
        self._out_spec: Any = None
        self._out_sources: list[tuple[str, Any]] = []

    @property
    def owner(self) -> str:
        return type(self.module).__name__

    def trace(self, staged: list[Any], trace_size: int, compile_graph: GraphCompiler) -> None:
        """Trace the module on ``staged`` (``trace_size`` rows), compiling the graph with ``compile_graph``.

        Failure (MisuseError): a graph break, a specialization on the batch dimension,
        or a forward with no tensor work; a MisuseError or CaptureError raised by
        ``compile_graph`` comes out as it is.
        """
        __tracebackhide__ = True
        for t in staged:
            if isinstance(t, torch.Tensor):
                compat.mark_dynamic(t, self.batch_dim)
        named: dict[str, torch.Tensor] = dict(self.module.named_parameters(remove_duplicate=False))
        named.update(self.module.named_buffers(remove_duplicate=False))
        self.static_names = {id(t): name for name, t in named.items()}
        self._entry = self._make_entry()
        compiled = torch.compile(self._entry, backend=self._backend(compile_graph), fullgraph=True)
        try:
            user_out = compiled(*staged)
        except compat.backend_compiler_failed_type() as exc:
            inner = getattr(exc, "inner_exception", None)
            if isinstance(inner, (MisuseError, CaptureError)):
                raise inner from None
            raise
        except compat.unsupported_type() as exc:
            if compat.is_shape_specialization_error(exc):
                raise MisuseError(
                    f"{self.owner}.forward specializes on the batch dimension {self.batch_dim} "
                    f"({first_line(exc)}); piecewise capture needs one graph for every batch size"
                ) from None
            raise MisuseError(
                f"Dynamo cannot trace {self.owner}.forward as one graph ({first_line(exc)}); "
                f"piecewise_compile needs fullgraph=True: make the breaking call a registered custom op "
                f"and a splitting op"
            ) from None
        if self._trace_call is None:
            raise MisuseError(
                f"Dynamo compiled {self.owner}.forward without calling the graph; it has no tensor work to split"
            )
        self._bind(staged, trace_size, user_out)

    def static_ids(self, example_inputs: Sequence[Any]) -> set[int]:
        """Ids of the graph inputs that are the module's parameters and buffers."""
        return {id(t) for t in example_inputs if isinstance(t, torch.Tensor) and id(t) in self.static_names}

    def _backend(self, compile_graph: GraphCompiler) -> GraphCompiler:
        def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            runner = compile_graph(gm, example_inputs)

            def run_graph(*args: Any) -> Any:
                out = runner(*args)
                if self.runner is None:  # the trace call: remember how Dynamo binds the graph
                    self._trace_call = {"args": args, "out": out}
                    self.runner = runner
                return out

            return run_graph

        return backend

    def _make_entry(self) -> Callable[..., Any]:
        module = self.module

        def entry(*args):
            return module(*args)

        # Dynamo caches compiled frames per code object, and every PiecewiseModule of
        # one class would share ``forward``'s: a fresh code object per instance keeps
        # each trace its own, with no recompile and no stale cache hit.
        name = f"piecewise_entry_{next(_entry_ids)}"
        replace: dict[str, Any] = {"co_name": name}
        if hasattr(entry.__code__, "co_qualname"):
            replace["co_qualname"] = name
        code = entry.__code__.replace(**replace)
        return types.FunctionType(code, entry.__globals__, name, entry.__defaults__, entry.__closure__)

    def _bind(self, staged: list[Any], trace_size: int, user_out: Any) -> None:
        """Map the graph's placeholders to user inputs, the batch size and the module's tensors.

        The inputs of later calls are checked against the traced signature instead of
        Dynamo's guards (see the module docstring).
        """
        call = self._trace_call
        assert call is not None  # trace() binds only after the graph was called
        args = call["args"]
        inputs = {id(t): j for j, t in enumerate(staged) if isinstance(t, torch.Tensor)}
        for a in args:
            if isinstance(a, torch.Tensor) and id(a) in inputs:
                self._bindings.append(("input", inputs[id(a)]))
            elif isinstance(a, torch.Tensor) and id(a) in self.static_names:
                self._bindings.append(("static", self.static_names[id(a)]))
            elif isinstance(a, int) and not isinstance(a, bool) and a == trace_size:
                self._bindings.append(("batch", None))
            else:
                self._bindings.append(("const", a))
        raw = call["out"]
        raw_ids = {id(t): i for i, t in enumerate(raw)} if isinstance(raw, (tuple, list)) else {}
        leaves, self._out_spec = compat.tree_flatten(user_out)
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and id(leaf) in raw_ids:
                self._out_sources.append(("out", raw_ids[id(leaf)]))
            elif isinstance(leaf, torch.Tensor) and id(leaf) in inputs:
                self._out_sources.append(("input", inputs[id(leaf)]))
            elif isinstance(leaf, torch.Tensor):
                raise MisuseError(
                    f"{self.owner}.forward returns a tensor that is neither a graph output nor an "
                    f"input; return the computed tensors directly"
                )
            else:
                self._out_sources.append(("const", leaf))
        self._trace_call = None

    def graph_args(self, inputs: Sequence[Any], size: int) -> list[Any]:
        """The compiled graph's arguments for ``inputs`` of ``size`` rows."""
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

    def outputs(self, raw: Any, inputs: Sequence[Any], size: int, rows: int) -> Any:
        """The module's outputs from the graph's ``raw`` outputs, sliced to ``rows`` and copied out."""
        leaves = []
        for kind, value in self._out_sources:
            leaf = raw[value] if kind == "out" else inputs[value] if kind == "input" else value
            if isinstance(leaf, torch.Tensor):
                if leaf.dim() > self.batch_dim and leaf.shape[self.batch_dim] == size and size != rows:
                    leaf = leaf.narrow(self.batch_dim, 0, rows)
                # pool memory is overwritten by the next replay: hand out a copy
                leaf = leaf.clone()
            leaves.append(leaf)
        return compat.tree_unflatten(leaves, self._out_spec)

    def release(self) -> None:
        """Drop the compiled graph and the traced entry function."""
        self.runner = None
        self._entry = None
