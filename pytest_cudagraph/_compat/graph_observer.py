"""CUDA graphs captured by any code, seen from outside: each capture, instantiation, replay and release as an event.

An engine captures its own graphs (vLLM's ``CUDAGraphWrapper``, SGLang's
``CudaGraphRunner``, TensorRT-LLM's runners, cudagraph trees), and every one of
them is a ``torch.cuda.CUDAGraph``: a Python subclass of ``torch._C._CUDAGraph``
in every supported torch, whose ``capture_begin`` / ``capture_end`` /
``replay`` / ``reset`` are Python methods.  ``torch.cuda.graph.__enter__`` calls
``capture_begin`` and ``__exit__`` calls ``capture_end``; cudagraph trees
capture with ``torch.cuda.graph`` and replay with ``CUDAGraph.replay``; so one
place sees all three sources (read in 2.6, 2.13 and 2.14.1).

How each torch is hooked (``graph_observer_kind()``):

- **2.14+, "torch hooks"**: ``torch.cuda.graphs`` has module-level hooks that
  fire for every graph, ``register_graph_capture_start_hook``,
  ``register_graph_capture_end_hook``, ``register_graph_instantiate_hook`` and
  ``register_graph_replay_start_hook``, and each graph has
  ``register_destroy_callback`` (fired on ``reset()`` and on destruction).  They
  are registered while observing and their handles removed after.  The start
  hook runs with the capture already live, so the listener makes no CUDA call
  there; the end hook runs once the capture is over and before instantiation.
- **2.6-2.13, "wrapper"**: the four methods are replaced on the class by
  wrappers while at least one listener observes, and put back when the last one
  stops; a graph's destruction is seen through a weak reference.  A wrapper that
  outlives its observation (another tool wrapped the method after it, so it could
  not be taken off) calls the original straight through.

Events, each with the graph's key (``id(graph)`` while it lives): for a listener
with ``before_capture(key, frame, pool)`` (wrapper only, outside any capture;
``pool`` is the pool ``capture_begin`` was given, None for a new one),
``capture_began(key, pool, frame)`` (capture live: host-side reads only;
``pool`` is the pool the capture was given, None for a new one, since torch
answers ``CUDAGraph.pool()`` only once a capture has ended),
``block_raised(key, error)`` (the ``torch.cuda.graph`` block is ending on an
exception: the capture ends, the graph holds only what ran before it),
``capture_ended(key, pool)`` (the pool the graph was captured into, read
from the graph), ``instantiated(key)``, ``capture_failed(key, error)``
(wrapper only: ``capture_begin`` or ``capture_end`` raised), ``replayed(key)``
and ``released(key)``.  ``frame`` is the frame
that called ``capture_begin``.  Nothing here raises into the captured code: a
listener's error goes to its ``observer_failed(error)``.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from types import FrameType
from typing import Any

__all__ = [
    "graph_capture_source",
    "graph_observer_kind",
    "graph_observer_state",
    "observing_graphs",
]

# the methods the wrapper replaces, in 2.6-2.13
_WRAPPED = ("capture_begin", "capture_end", "replay", "reset")
# the module-level hooks 2.14 has, and the per-graph destroy callback
_HOOKS = (
    "register_graph_capture_start_hook",
    "register_graph_capture_end_hook",
    "register_graph_instantiate_hook",
    "register_graph_replay_start_hook",
)
TORCH_HOOKS = "torch hooks"
WRAPPER = "wrapper"


def graph_observer_kind() -> str:
    """``"torch hooks"`` where torch has the graph lifecycle hooks (2.14+), else ``"wrapper"`` (2.6-2.13)."""
    import torch

    graphs = torch.cuda.graphs
    if all(callable(getattr(graphs, name, None)) for name in _HOOKS) and callable(
        getattr(torch.cuda.CUDAGraph, "register_destroy_callback", None)
    ):
        return TORCH_HOOKS
    return WRAPPER


class _Observation:
    """The one installation every active listener shares; installed by the first, removed with the last."""

    lock = threading.RLock()
    listeners: list[Any] = []
    kind: str | None = None
    # wrapper: (owner, name, original, wrapper) per replaced method, and the switch its wrappers read
    undo: list[tuple[Any, str, Any, Any]] = []
    switch: dict[str, bool] = {"on": False}
    # torch hooks: the handles of the module-level hooks and of each graph's destroy callback
    handles: list[Any] = []
    graph_handles: dict[int, Any] = {}
    # wrapper: a weak reference per captured graph, whose callback says it is gone
    refs: dict[int, Any] = {}

    @classmethod
    def add(cls, listener: Any) -> str:
        with cls.lock:
            if not cls.listeners:
                cls._install()
            cls.listeners.append(listener)
            return cls.kind or WRAPPER

    @classmethod
    def remove(cls, listener: Any) -> None:
        with cls.lock:
            # by identity: two listeners may compare equal
            cls.listeners[:] = [other for other in cls.listeners if other is not listener]
            if not cls.listeners:
                cls._uninstall()

    @classmethod
    def _install(cls) -> None:
        cls.kind = graph_observer_kind()
        if cls.kind == TORCH_HOOKS:
            cls._register_hooks()
        else:
            cls._wrap_methods()

    @classmethod
    def _uninstall(cls) -> None:
        for handle in [*cls.handles, *cls.graph_handles.values()]:
            handle.remove()
        cls.handles.clear()
        cls.graph_handles.clear()
        cls.switch["on"] = False  # a wrapper left under another tool's calls straight through from now on
        for owner, name, original, wrapper in reversed(cls.undo):
            if owner.__dict__.get(name) is wrapper:
                setattr(owner, name, original)
        cls.undo.clear()
        cls.refs.clear()
        cls.kind = None

    # -- publishing ----------------------------------------------------------
    @classmethod
    def publish(cls, method: str, *args: Any) -> None:
        for listener in list(cls.listeners):
            try:
                getattr(listener, method)(*args)
            except Exception as error:  # the captured code must never see an observer's error
                _tell_failed(listener, error)

    @classmethod
    def failed(cls, error: Exception) -> None:
        """The observation's own error (not a listener's): every listener is told, the captured code is not."""
        for listener in list(cls.listeners):
            _tell_failed(listener, error)

    @classmethod
    def track(cls, graph: Any) -> int:
        """The graph's key; its release is published once, when it is reset or destroyed."""
        key = id(graph)
        if cls.kind == TORCH_HOOKS:
            previous = cls.graph_handles.pop(key, None)
            if previous is not None:
                previous.remove()
            cls.graph_handles[key] = graph.register_destroy_callback(lambda: cls._released(key))
        else:
            cls.refs[key] = weakref.ref(graph, lambda _ref: cls._released(key))
        return key

    @classmethod
    def _released(cls, key: int) -> None:
        cls.refs.pop(key, None)
        cls.graph_handles.pop(key, None)
        cls.publish("released", key)

    # -- torch hooks (2.14+) -------------------------------------------------
    @classmethod
    def _register_hooks(cls) -> None:
        import torch

        graphs = torch.cuda.graphs
        begin_code = torch.cuda.CUDAGraph.capture_begin.__code__
        end_code = torch.cuda.CUDAGraph.capture_end.__code__

        def on_start(graph: Any) -> None:
            try:
                begin = _frame_of(begin_code, sys._getframe(1))
                frame = begin.f_back if begin is not None else None
                # the pool capture_begin was given, read from its frame: pool() raises until the capture ends
                given = _pool_argument((), {"pool": begin.f_locals.get("pool")}) if begin is not None else None
                key = cls.track(graph)
            except Exception as error:  # torch's fan-out would swallow it: the listeners hear of it
                cls.failed(error)
                return
            cls.publish("capture_began", key, given, frame)

        def on_end(graph: Any) -> None:
            try:
                end = _frame_of(end_code, sys._getframe(1))
                error = _block_error(end.f_back if end is not None else None)
                pool = _pool_of(graph)  # capture_end_pre has run: torch answers pool() from here on
            except Exception as failure:
                cls.failed(failure)
                return
            if error is not None:
                cls.publish("block_raised", id(graph), error)
            cls.publish("capture_ended", id(graph), pool)

        def on_instantiate(graph: Any) -> None:
            cls.publish("instantiated", id(graph))

        def on_replay(graph: Any) -> None:
            cls.publish("replayed", id(graph))

        # torch 2.14's hooks: the stubs of the torch installed for type checking may predate them
        # (unused-ignore: where they do not)
        cls.handles = [
            graphs.register_graph_capture_start_hook(on_start),  # type: ignore[attr-defined, unused-ignore]
            graphs.register_graph_capture_end_hook(on_end),  # type: ignore[attr-defined, unused-ignore]
            graphs.register_graph_instantiate_hook(on_instantiate),  # type: ignore[attr-defined, unused-ignore]
            graphs.register_graph_replay_start_hook(on_replay),  # type: ignore[attr-defined, unused-ignore]
        ]

    # -- the wrapper (2.6-2.13) ----------------------------------------------
    @classmethod
    def _wrap_methods(cls) -> None:
        import torch

        owner = torch.cuda.CUDAGraph
        originals = {name: owner.__dict__[name] for name in _WRAPPED}
        # this installation's own switch: a new one gets a new switch, so a wrapper left behind stays off
        observing = cls.switch = {"on": True}

        def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not observing["on"]:
                return originals["capture_begin"](self, *args, **kwargs)
            frame = sys._getframe(1)
            key = id(self)
            cls.publish("before_capture", key, frame, _pool_argument(args, kwargs))
            try:
                out = originals["capture_begin"](self, *args, **kwargs)
            except BaseException as error:
                cls.publish("capture_failed", key, error)
                raise
            try:
                key = cls.track(self)
            except Exception as error:
                cls.failed(error)
                return out
            # torch answers pool() only once a capture has ended: here, only the pool given is known
            cls.publish("capture_began", key, _pool_argument(args, kwargs), frame)
            return out

        def capture_end(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not observing["on"]:
                return originals["capture_end"](self, *args, **kwargs)
            key = id(self)
            raised = _block_error(sys._getframe(1))
            if raised is not None:
                cls.publish("block_raised", key, raised)
            try:
                out = originals["capture_end"](self, *args, **kwargs)
            except BaseException as error:
                cls.publish("capture_failed", key, raised or error)
                raise
            try:
                pool = _pool_of(self)
            except Exception as error:
                cls.failed(error)
                return out
            cls.publish("capture_ended", key, pool)
            cls.publish("instantiated", key)
            return out

        def replay(self: Any, *args: Any, **kwargs: Any) -> Any:
            if observing["on"]:
                cls.publish("replayed", id(self))
            return originals["replay"](self, *args, **kwargs)

        def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
            if observing["on"] and cls.refs.pop(id(self), None) is not None:
                cls.publish("released", id(self))
            return originals["reset"](self, *args, **kwargs)

        for name, wrapper in (
            ("capture_begin", capture_begin),
            ("capture_end", capture_end),
            ("replay", replay),
            ("reset", reset),
        ):
            wrapper.__name__ = name
            wrapper.__qualname__ = f"CUDAGraph.{name}"
            wrapper.__doc__ = originals[name].__doc__
            setattr(owner, name, wrapper)
            cls.undo.append((owner, name, originals[name], wrapper))


def _tell_failed(listener: Any, error: Exception) -> None:
    """Hand ``error`` to ``listener``; whatever it raises stays here, as the captured code must never see it."""
    try:
        listener.observer_failed(error)
    except Exception:
        pass  # a listener that cannot take its own error: nothing more can be done here


def _pool_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int] | None:
    """The pool ``capture_begin(pool=None, ...)`` was given (a ``graph_pool_handle()`` or a ``MemPool``), or None."""
    pool = args[0] if args else kwargs.get("pool")
    pool = getattr(pool, "id", pool)
    if isinstance(pool, tuple) and len(pool) == 2:
        return (int(pool[0]), int(pool[1]))
    return None


def _pool_of(graph: Any) -> tuple[int, int]:
    pool = graph.pool()
    return (int(pool[0]), int(pool[1]))


def _block_error(frame: FrameType | None) -> BaseException | None:
    """The exception leaving the ``with torch.cuda.graph(...)`` block whose ``__exit__`` is ``frame``, if any.

    ``graph.__exit__(*args)`` ends the capture whether or not its block raised
    (2.6-2.14): the graph then holds only the work before the exception, and an
    engine that catches it goes on with a graph that was never whole.
    """
    if frame is None or frame.f_code.co_name != "__exit__" or _file_kind(frame.f_code.co_filename) != "graphs":
        return None
    local = frame.f_locals
    # 2.6: __exit__(self, exc_type, exc_value, traceback); 2.13 and 2.14.1: __exit__(self, *args)
    args: tuple[Any, ...] = local.get("args") or ()
    value = local.get("exc_value", args[1] if len(args) > 1 else None)
    return value if isinstance(value, BaseException) else None


def _frame_of(code: Any, frame: FrameType | None) -> FrameType | None:
    """The frame running the function whose code is ``code`` (found walking out from ``frame``), or None."""
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame


@contextmanager
def observing_graphs(listener: Any) -> Iterator[str]:
    """While the block runs, ``listener`` gets every CUDA graph's events; yields how this torch is hooked.

    Observations nest and may overlap: the hooks or wrappers are installed by the
    first and taken off when the last one ends, on an exception too.
    """
    kind = _Observation.add(listener)
    try:
        yield kind
    finally:
        _Observation.remove(listener)


def graph_observer_state() -> dict[str, Any]:
    """What is installed now: ``{"kind", "listeners", "patched", "hooks"}``.

    ``patched``: the methods of ``torch.cuda.CUDAGraph`` that are not torch's own
    now (ours while observing, or another tool's); ``hooks``: how many graph
    lifecycle hooks are registered with torch (2.14+; 0 before).
    """
    import torch

    owner = torch.cuda.CUDAGraph
    patched = [name for name in _WRAPPED if not _is_torch_method(owner.__dict__.get(name))]
    graphs = torch.cuda.graphs
    hooks = sum(
        len(getattr(graphs, registry, None) or ())
        for registry in (
            "_global_capture_start_hooks",
            "_global_capture_end_hooks",
            "_global_instantiate_hooks",
            "_global_replay_start_hooks",
        )
    )
    return {"kind": _Observation.kind, "listeners": len(_Observation.listeners), "patched": patched, "hooks": hooks}


def _is_torch_method(function: Any) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and _file_kind(code.co_filename) == "graphs"


# ----------------------------------------------------------------------------
# where a capture came from
# ----------------------------------------------------------------------------

_TREES_FILE = os.path.join("_inductor", "cudagraph_trees.py")
_GRAPHS_FILE = os.path.join("torch", "cuda", "graphs.py")


def graph_capture_source(frame: FrameType | None, depth: int = 16) -> tuple[str, list[Any] | None]:
    """``(source, inputs)`` of a capture, from the frames around its ``capture_begin`` call.

    ``source``: ``"cudagraph trees"`` (a recording: ``inputs`` are the tensors it
    reads that are not static, ``CUDAGraphNode._record``'s ``inputs`` less
    ``self.static_input_idxs``, read in 2.6, 2.13 and 2.14.1), ``"cudagraph trees
    pool"`` (the empty graph ``CUDAGraphTreeManager.__init__`` captures to make its
    pool), ``"make_graphed_callables"``, ``"torch.cuda.graph"`` or
    ``"CUDAGraph.capture_begin"`` (called directly); ``inputs`` is None where the
    source does not name them.
    """
    first = frame
    for _ in range(depth):
        if frame is None:
            break
        kind = _file_kind(frame.f_code.co_filename)
        if kind == "trees":
            name = frame.f_code.co_name
            if name == "_record":
                return "cudagraph trees", _tree_inputs(frame)
            if name == "__init__" and type(frame.f_locals.get("self")).__name__ == "CUDAGraphTreeManager":
                return "cudagraph trees pool", None
        elif kind == "graphs" and frame.f_code.co_name.startswith("make_graphed"):
            return "make_graphed_callables", None
        frame = frame.f_back
    if first is not None and _file_kind(first.f_code.co_filename) == "graphs":
        return ("torch.cuda.graph" if first.f_code.co_name == "__enter__" else "torch.cuda"), None
    return "CUDAGraph.capture_begin", None


@lru_cache(maxsize=4096)
def _file_kind(filename: str) -> str:
    """``"trees"`` (Inductor's cudagraph trees), ``"graphs"`` (``torch/cuda/graphs.py``) or ``""``: a capture's frames."""
    path = os.path.normpath(filename)
    if path.endswith(_TREES_FILE):
        return "trees"
    return "graphs" if path.endswith(_GRAPHS_FILE) else ""


def _tree_inputs(frame: FrameType) -> list[Any] | None:
    try:
        local = frame.f_locals
        node, inputs = local.get("self"), local.get("inputs")
        static = set(getattr(node, "static_input_idxs", ()) or ())
        return [x for i, x in enumerate(inputs or ()) if i not in static]
    except Exception:
        return None
