"""Cudagraph trees from the inside: which input a skip concerns, and what each call of a region did.

``mode="reduce-overhead"`` hands each compiled graph (or each partition of one,
Inductor's ``graph_partition`` being on by default from 2.9) to the thread's
``CUDAGraphTreeManager`` as a function (a ``FunctionID``).  Every call of it goes
through ``CUDAGraphTreeManager._run``, which either replays a recorded graph
(``execute_node``), records one (``record_function``), warms up (``run_eager``),
or, for a function it gave up on (an input it mutates, past the re-record
limit), runs the function without graphs.  A graph Inductor decided not to
cudagraph at compile time (a CPU input without partitioning, dynamic shapes, an
incompatible op) never reaches the manager: its ``CompiledFxGraph`` runs the plain
code.  Verified in the source of 2.6, 2.11, 2.13 and 2.14 and on an H200 with 2.11.

* :class:`TreeCallMeter` counts, over a block, what each call did, and keeps each
  recording's function and input shape (``record_function``'s inputs).  It wraps
  ``_run`` and its three outcomes and ``CompiledFxGraph.__call__`` at class level
  (``add_function`` binds ``self.run`` into a partial, so an instance patch would
  miss calls); meters share one patch, removed when the last one ends.  Class
  attributes survive ``torch._dynamo.reset()``, which shuts the trees down: the
  next manager numbers its functions from 0 again, so a region is keyed by its
  manager too.  Where something patched a method again over the meter's, the
  meter's stays in that chain, passing calls straight through once no meter
  listens, and ``TreeCallMeter.intact()`` says the meter may have missed calls.
* :func:`cudagraph_skip_context` is called from a handler of the
  "skipping cudagraphs due to ..." record and reads, from the frames still on the
  stack, the tensors a mutation skip concerns (the manager's
  ``_update_non_cudagraph_managed_mutation``), or the Dynamo sources of the graph
  inputs a compile-time skip names (``CompiledFxGraph.__init__``'s graph, whose
  placeholders carry AOTAutograd's ``PlainAOTInput`` descriptors, 2.9+).

Nothing here raises into torch: every read is guarded, and a torch whose internals
differ gives empty figures (None) instead.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from collections import Counter
from types import FrameType
from typing import Any

__all__ = ["TreeCallMeter", "cudagraph_skip_context"]

# A recording's shape: each dynamic tensor input's shape, or the int inputs where no tensor is dynamic
RecordedShape = tuple[tuple[int, ...] | int, ...]

# what a user reaches for against re-recording, as this torch names it: dynamic dims, the recorded sizes
RERECORD_REMEDY_NAMES = {
    "mark_dynamic": "torch._dynamo.mark_dynamic",
    "capture_sizes": "torch._inductor.config.triton.cudagraph_capture_sizes",
}

CALL_KINDS = ("replayed", "recorded", "warmup", "without_graph")


class _Patch:
    """The one class-level patch every active meter listens to."""

    lock = threading.Lock()
    meters: list[TreeCallMeter] = []
    # (owner, name, what was there before, the wrapper put there), in the order patched
    undo: list[tuple[Any, str, Any, Any]] = []
    state = threading.local()
    # one number per install: a wrapper of an earlier install, left in someone else's chain, stays silent
    generation = 0

    @classmethod
    def add(cls, meter: TreeCallMeter) -> bool:
        with cls.lock:
            if not cls.meters and not cls._install():
                return False
            cls.meters.append(meter)
            return True

    @classmethod
    def remove(cls, meter: TreeCallMeter) -> None:
        with cls.lock:
            if meter in cls.meters:
                cls.meters.remove(meter)
            if not cls.meters:
                cls._unpatch()

    @classmethod
    def _unpatch(cls) -> None:
        # only where the attribute is still the meter's: a wrapper someone put over it stays theirs
        for owner, name, original, wrapper in reversed(cls.undo):
            if owner.__dict__.get(name) is wrapper:
                setattr(owner, name, original)
        cls.undo.clear()

    @classmethod
    def intact(cls) -> bool:
        """Whether every patched method is still the meter's own wrapper."""
        with cls.lock:
            last = {(id(owner), name): (owner, name, wrapper) for owner, name, _, wrapper in cls.undo}
            return bool(last) and all(owner.__dict__.get(name) is wrapper for owner, name, wrapper in last.values())

    @classmethod
    def _install(cls) -> bool:
        patched = _patched_classes()
        if patched is None:
            return False
        manager, CompiledFxGraph = patched
        state = cls.state
        cls.generation += 1
        generation = cls.generation

        def live() -> bool:
            return cls.generation == generation and bool(cls.meters)

        def patch(owner: Any, name: str, make: Any) -> None:
            original = owner.__dict__[name]
            wrapper = make(original)
            setattr(owner, name, wrapper)
            cls.undo.append((owner, name, original, wrapper))

        def run_wrapper(original: Any) -> Any:
            def _run(self: Any, new_inputs: Any, function_id: Any) -> Any:
                if not live():  # left in someone else's chain after the last meter ended
                    return original(self, new_inputs, function_id)
                outer = getattr(state, "call", None) is None
                if outer:
                    state.call = {"outcome": None}
                try:
                    return original(self, new_inputs, function_id)
                finally:
                    if outer:
                        call, state.call = state.call, None
                        graph_call = getattr(state, "graph_call", None)
                        if graph_call is not None:
                            graph_call["managed"] = True
                        key = ("tree", _manager_serial(self), _function_key(function_id))
                        cls._publish(
                            "on_region_call", key, _name(self, function_id), call["outcome"] or "without_graph"
                        )

            return _run

        def graph_call_wrapper(original: Any) -> Any:
            def __call__(self: Any, inputs: Any) -> Any:
                if not live():
                    return original(self, inputs)
                outer = getattr(state, "graph_call", None) is None
                if outer:
                    state.graph_call = {"managed": False}
                try:
                    return original(self, inputs)
                finally:
                    if outer:
                        graph_call, state.graph_call = state.graph_call, None
                        if not graph_call["managed"]:
                            # this compiled graph runs without the tree manager: not cudagraphed at all
                            cls._publish("on_region_call", ("graph", id(self)), _graph_name(self), "without_graph")

            return __call__

        try:
            patch(manager, "_run", run_wrapper)
            patch(manager, "execute_node", _outcome_wrapper(state, "replayed"))
            patch(manager, "record_function", _outcome_wrapper(state, "recorded"))
            patch(manager, "run_eager", _outcome_wrapper(state, "warmup"))
            patch(manager, "record_function", _recording_wrapper(cls._publish, live))
            patch(CompiledFxGraph, "__call__", graph_call_wrapper)
        except Exception:
            cls._unpatch()
            return False
        return True

    @classmethod
    def _publish(cls, method: str, *args: Any) -> None:
        for meter in list(cls.meters):
            try:
                getattr(meter, method)(*args)
            except Exception:  # a meter must never break the user's call
                pass


def _patched_classes() -> tuple[Any, Any] | None:
    """``(CUDAGraphTreeManager, CompiledFxGraph)`` where this torch has every method the meter patches; else None."""
    try:
        from torch._inductor import cudagraph_trees
        from torch._inductor.output_code import CompiledFxGraph

        manager = cudagraph_trees.CUDAGraphTreeManager
        for name in ("_run", "execute_node", "record_function", "run_eager"):
            if not callable(getattr(manager, name, None)):
                return None
        if "__call__" not in CompiledFxGraph.__dict__:
            return None
    except Exception:
        return None
    return manager, CompiledFxGraph


def _outcome_wrapper(state: threading.local, outcome: str) -> Any:
    """The patch of a manager method that books the running call's ``outcome`` (the first one booked stands)."""

    def make(original: Any) -> Any:
        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            call = getattr(state, "call", None)
            if call is not None and call["outcome"] is None:
                call["outcome"] = outcome
            return original(self, *args, **kwargs)

        return wrapped

    return make


def _recording_wrapper(publish: Any, live: Any) -> Any:
    """The patch of ``record_function`` that publishes each recording, then its ``(function, shape)``."""

    def make(original: Any) -> Any:
        def record_function(self: Any, new_inputs: Any, function_id: Any) -> Any:
            if not live():
                return original(self, new_inputs, function_id)
            # before torch's own recording callbacks run (inside the original)
            publish("before_recording")
            # read before recording: the new node frees the inputs list it is given
            event = _recording_event(self, function_id, new_inputs)
            out = original(self, new_inputs, function_id)
            if event is not None:
                publish("on_recording", *event)
            return out

        return record_function

    return make


def _function_key(function_id: Any) -> Any:
    return getattr(function_id, "id", function_id)


# tree manager -> a number of its own: ids of dead managers are reused, and a new manager
# (after torch._dynamo.reset()) numbers its functions from 0 again
_MANAGER_SERIALS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_NEXT_SERIAL = itertools.count()


def _manager_serial(manager: Any) -> int:
    try:
        serial = _MANAGER_SERIALS.get(manager)
        if serial is None:
            serial = _MANAGER_SERIALS[manager] = next(_NEXT_SERIAL)
        return serial
    except TypeError:  # a manager that takes no weak reference
        return id(manager)


def _name(manager: Any, function_id: Any) -> str:
    try:
        return str(manager.get_func_name(function_id))
    except Exception:
        return f"function {_function_key(function_id)}"


def _recording_event(manager: Any, function_id: Any, inputs: Any) -> tuple[str, RecordedShape] | None:
    """``(function, shape)`` of a recording about to happen, or None where it cannot be read.

    The function is the user's frame that called the compiled code (Dynamo runs a
    compiled function's transformed code in a frame of the user's file and name),
    its first line and, for a backward, the mode (``manager.id_to_mode``); a
    dynamic-shape graph gets a new ``FunctionID`` per size, so the id itself is no
    key.  The shape is the shapes of the tensor inputs that are not static (a
    module's parameters and buffers are, ``WrappedFunction.static_input_idxs``), or the
    int inputs where no tensor varies.  Read in 2.6, 2.11 and 2.13.
    """
    try:
        import torch

        wrapped = manager.ids_to_funcs[function_id]
        static = set(getattr(wrapped, "static_input_idxs", ()) or ())
        inputs = list(inputs)
        shapes: RecordedShape = tuple(
            tuple(int(d) for d in t.shape)
            for i, t in enumerate(inputs)
            if isinstance(t, torch.Tensor) and i not in static
        )
        if not shapes:
            shapes = tuple(v for v in inputs if isinstance(v, int) and not isinstance(v, bool))
        mode = getattr(getattr(manager, "id_to_mode", {}).get(function_id), "name", "")
        function = _calling_function(sys._getframe(1))
        if mode == "BACKWARD":
            function += " (backward)"
        return function, shapes
    except Exception:
        return None


def _calling_function(frame: Any) -> str:
    """``name (file.py:line)`` of the innermost frame outside torch, this package, the standard library and generated code."""
    import os
    import sysconfig

    import torch

    from .inductor import is_generated_code

    library = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    stdlib = sysconfig.get_paths()["stdlib"]
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if not filename.startswith("<") and not is_generated_code(filename):
            path = os.path.abspath(filename)
            installed = "site-packages" in path or "dist-packages" in path
            if not any(path.startswith(d) for d in library) and not (path.startswith(stdlib) and not installed):
                name = getattr(code, "co_qualname", code.co_name)
                return f"{name} ({os.path.basename(filename)}:{code.co_firstlineno})"
        frame = frame.f_back
    return "a compiled function"


def _graph_name(compiled_graph: Any) -> str:
    key = getattr(compiled_graph, "_fx_graph_cache_key", None)
    return f"compiled graph {key[:12] if isinstance(key, str) else id(compiled_graph)}"


class TreeCallMeter:
    """Counts, while active, each call of a reduce-overhead region and what it did.

    A region is a cudagraph-tree function (a compiled graph, or one partition of
    it) or a compiled graph that never reached the tree manager.  Each call is
    ``replayed`` (a recorded graph ran), ``recorded`` (a graph was recorded, and run),
    ``warmup`` (the first call of a function runs eagerly) or ``without_graph``.
    ``available`` is False where this torch's trees cannot be metered.
    """

    def __init__(self) -> None:
        self.regions: dict[Any, dict[str, Any]] = {}
        # every recording as (function, shape), in order (graphs/rerecords.py counts them)
        self.recordings: list[tuple[str, RecordedShape]] = []
        # every call of record_function, its function and shape read or not
        self.recorded_graphs = 0
        # called before each recording, before torch runs its own recording callbacks
        self.on_before_recording: Any = None
        self.available = False

    def __enter__(self) -> TreeCallMeter:
        self.available = _Patch.add(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.available:
            _Patch.remove(self)

    def on_region_call(self, key: Any, name: str, outcome: str) -> None:
        region = self.regions.setdefault(key, {"name": name, "calls": Counter()})
        region["calls"][outcome] += 1

    def before_recording(self) -> None:
        self.recorded_graphs += 1
        if self.on_before_recording is not None:
            self.on_before_recording()

    def on_recording(self, function: str, shape: RecordedShape) -> None:
        self.recordings.append((function, shape))

    def intact(self) -> bool:
        """Whether the meter still sees every call: nothing patched the tree manager's methods over its own."""
        return self.available and _Patch.intact()

    def calls(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for region in self.regions.values():
            total.update(region["calls"])
        return total


# --------------------------------------------------------------------------
# what a skip concerns, from the frames of the code that logs it
# --------------------------------------------------------------------------


def _source_name(source: Any) -> str | None:
    name = getattr(source, "name", None)
    if callable(name):  # a method before 2.11, a cached property after
        try:
            name = name()
        except Exception:
            return None
    return name if isinstance(name, str) else None


def cudagraph_skip_context() -> dict[str, Any] | None:
    """Inside the skip record: what it concerns, from the frames of the code that logs it, or None.

    ``{"tensors": [the mutated input tensors], "placeholders": [graph input names],
    "sources": {placeholder: Dynamo source name such as "L['x']"}, "function": the
    tree's name for the function, "frame": the frame to start looking for the user's
    from, "code": the code object Dynamo is compiling (a compile-time skip)}``; a key is
    missing where it could not be read.
    """
    try:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_name
            owner = frame.f_locals.get("self")
            if name == "_update_non_cudagraph_managed_mutation" and owner is not None:
                return _mutation_context(frame, owner)
            if name == "__init__" and type(owner).__name__ == "CompiledFxGraph" and "gm" in frame.f_locals:
                return _compile_time_context(frame, frame.f_locals["gm"])
            frame = frame.f_back
    except Exception:
        return None
    return None


def _mutation_context(frame: Any, manager: Any) -> dict[str, Any]:
    import torch

    function_id, inputs = frame.f_locals.get("function_id"), frame.f_locals.get("inputs")
    out: dict[str, Any] = {"frame": frame, "function": _name(manager, function_id)}
    wrapped = manager.ids_to_funcs[function_id]
    try:
        recorded = manager._get_cuda_graph_recorded_tensor_checker()
    except Exception:
        recorded = None
    static = set(getattr(wrapped, "static_input_idxs", ()) or ())
    indices = [
        i
        for i in getattr(wrapped, "mutated_input_idxs", ()) or ()
        if i not in static
        and inputs is not None
        and i < len(inputs)
        and not (recorded is not None and isinstance(inputs[i], torch.Tensor) and recorded(inputs[i]))
    ]
    placeholders = getattr(wrapped, "placeholders", None) or []
    out["placeholders"] = [getattr(placeholders[i], "name", f"input {i}") if i < len(placeholders) else f"input {i}"
                           for i in indices]  # fmt: skip
    out["tensors"] = [inputs[i] for i in indices] if inputs is not None else []
    return out


def _compile_time_context(frame: Any, graph_module: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"frame": frame}
    sources: dict[str, str] = {}
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        translator = InstructionTranslator.current_tx()
        graph_args = list(translator.output.graphargs) if translator is not None else []
        # the code being compiled: its frame is not on the stack yet
        out["code"] = getattr(translator, "f_code", None)
    except Exception:
        graph_args = []
    for node in graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        desc = node.meta.get("desc")
        index = getattr(desc, "idx", None) if type(desc).__name__ == "PlainAOTInput" else None
        if isinstance(index, int) and index < len(graph_args):
            name = _source_name(getattr(graph_args[index], "source", None))
            if name:
                sources[node.name] = name
    out["sources"] = sources
    return out
