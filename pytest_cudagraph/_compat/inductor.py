"""Inductor: its compiler entry point and start-up, graph partition at custom ops, and cudagraph trees.

Everything imports torch lazily.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

# --------------------------------------------------------------------------
# Compiling with Inductor (piecewise fx_split)
# --------------------------------------------------------------------------


def inductor_compiler() -> Any:
    """Inductor's compiler function, ``(gm, example_inputs) -> callable``: ``torch._inductor.compile_fx.compile_fx`` (2.4-2.14)."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx


# --------------------------------------------------------------------------
# Piecewise graphs: Inductor's graph partition at custom ops
# --------------------------------------------------------------------------


def inductor_partition_missing() -> str | None:
    """What this torch lacks to partition a graph inside Inductor at custom ops; None if nothing.

    Strategy 2 of piecewise capture (partition inside Inductor) needs ``torch._inductor.config.graph_partition``,
    ``config.custom_should_partition_ops`` (op names Inductor's scheduler cuts at,
    checked on ``FallbackKernel`` nodes after fusion) and
    ``torch._inductor.utils.set_customized_partition_wrappers`` (a hook that wraps
    each cudagraph-safe partition).  All three are in 2.13 (read in its source);
    vLLM gates its ``use_inductor_graph_partition`` on torch 2.9.
    """
    import torch._inductor.config as inductor_config
    import torch._inductor.utils as inductor_utils

    for owner, name in (
        (inductor_config, "graph_partition"),
        (inductor_config, "custom_should_partition_ops"),
        (inductor_utils, "set_customized_partition_wrappers"),
        (inductor_utils, "_unstable_customized_partition_wrapper"),
    ):
        if not hasattr(owner, name):
            return f"{owner.__name__}.{name}"
    return None


@contextlib.contextmanager
def inductor_partition_at_ops(op_names: list[str], wrapper: Any) -> Iterator[None]:
    """Compile in the block with Inductor partitioning at ``op_names``, each partition wrapped.

    ``wrapper(fn, metadata)`` receives each partition function (called with one list
    of inputs) and its ``CUDAGraphWrapperMetadata``.  Inductor applies it when the
    compiled graph is loaded (``post_compile``, also on a cache hit), so it only has
    to be set while compiling.  The previous wrapper and config are restored.
    """
    import torch._inductor.config as inductor_config
    import torch._inductor.utils as inductor_utils

    previous = inductor_utils._unstable_customized_partition_wrapper.wrapper
    inductor_utils.set_customized_partition_wrappers(wrapper)
    try:
        with inductor_config.patch(graph_partition=True, custom_should_partition_ops=list(op_names)):
            yield
    finally:
        # set_customized_partition_wrappers only assigns this attribute; its annotation leaves out the None it starts at
        inductor_utils._unstable_customized_partition_wrapper.wrapper = previous


# --------------------------------------------------------------------------
# mode="reduce-overhead": cudagraph trees (trees.py)
# --------------------------------------------------------------------------


def load_cudagraph_trees() -> None:
    """Import ``torch._inductor.cudagraph_trees``, which creates its loggers and its manager registry."""
    import torch._inductor.cudagraph_trees  # noqa: F401


def cudagraph_skip_logger_names() -> tuple[str, ...]:
    """Loggers that carry reduce-overhead's "skipping cudagraphs due to ..." WARNING.

    ``torch._inductor.cudagraph_utils.__cudagraphs`` from 2.11,
    ``...__perf_hints`` in 2.4-2.8; both are listed, one of them stays silent.
    """
    return (
        "torch._inductor.cudagraph_utils.__cudagraphs",
        "torch._inductor.cudagraph_utils.__perf_hints",
    )


class CudagraphRecordingCallback:
    """``callback()`` at each recording of the cudagraph trees, kept registered with Dynamo until :meth:`close`.

    Registered as one of Dynamo's start callbacks, called with
    ``CallbackTrigger.CUDAGRAPH_RECORDING`` (2.8+).  ``torch._dynamo.reset()`` empties
    those lists (``callback_handler.clear()``): :meth:`ensure` registers it again,
    and says whether it had to.  :meth:`close` takes it off wherever it still is,
    and never fails for one that a reset already took off.
    """

    def __init__(self, trigger: Any, callback: Any):
        self._trigger = trigger
        self._callback = callback

        def on_start(args: Any) -> None:
            if getattr(args, "callback_trigger", None) == trigger:
                callback()

        self._on_start = on_start
        self._handlers: list[Any] = []
        handler = _callback_handler()
        if handler is not None:
            handler.register_start_callback(on_start)
            self._handlers.append(handler)

    def registered(self) -> bool:
        """Whether Dynamo's current callback handler will call it at the next recording."""
        handler = _callback_handler()
        return handler is not None and any(cb is self._on_start for cb in _start_callbacks(handler))

    def ensure(self) -> bool:
        """Register again where something (a reset) took it off; True when it had to."""
        if self.registered():
            return False
        handler = _callback_handler()
        if handler is None:
            return True
        handler.register_start_callback(self._on_start)
        if not any(h is handler for h in self._handlers):
            self._handlers.append(handler)
        return True

    def close(self) -> None:
        for handler in self._handlers:
            callbacks = _start_callbacks(handler)
            while any(cb is self._on_start for cb in callbacks):
                handler.remove_start_callback(self._on_start)
        self._handlers.clear()


def _callback_handler() -> Any | None:
    dynamo = sys.modules.get("torch._dynamo")
    return getattr(dynamo, "callback_handler", None) if dynamo is not None else None


def _start_callbacks(handler: Any) -> list[Any]:
    callbacks = getattr(handler, "start_callbacks", None)
    return callbacks if isinstance(callbacks, list) else []


def watch_cudagraph_recordings(callback: Any) -> CudagraphRecordingCallback | None:
    """Call ``callback()`` each time cudagraph trees record a graph, until the returned object's ``close()``.

    Uses Dynamo's start callbacks with ``CallbackTrigger.CUDAGRAPH_RECORDING`` (2.8+;
    their ``start_callbacks`` list read in 2.13 and 2.14.1); returns None where that
    trigger or that list does not exist (callers then count otherwise).
    """
    import torch._dynamo

    try:
        from torch._dynamo.callback import CallbackTrigger
    except ImportError:
        return None
    trigger = getattr(CallbackTrigger, "CUDAGRAPH_RECORDING", None)
    handler = getattr(torch._dynamo, "callback_handler", None)
    if trigger is None or handler is None or not isinstance(getattr(handler, "start_callbacks", None), list):
        return None
    return CudagraphRecordingCallback(trigger, callback)


def cudagraph_tree_manager(device_index: int) -> Any | None:
    """The thread's cudagraph-tree manager for a device, or None (never creates one)."""
    from torch._inductor import cudagraph_trees

    return cudagraph_trees.get_manager(device_index, create_if_none_exists=False)


def cudagraph_tree_node_count(manager: Any) -> int:
    """Graphs recorded in a tree manager: every root and every descendant is one recording."""
    if manager is None:
        return 0
    return sum(1 + node.num_descendants() for nodes in manager.roots.values() for node in nodes)


def cudagraph_tree_pool(manager: Any) -> tuple[int, int] | None:
    pool = getattr(manager, "cuda_graphs_thread_pool", None)
    return tuple(pool) if pool is not None else None


# --------------------------------------------------------------------------
# Inductor-generated wrapper code: which user line an op came from (capture.py)
# --------------------------------------------------------------------------


def _inductor_cache_root() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir  # 2.8+
    except ImportError:
        try:
            # torch 2.6's location: the installed torch has it only at the 2.8+ one above
            from torch._inductor.utils import cache_dir  # type: ignore[attr-defined, no-redef, unused-ignore]
        except ImportError:
            return None
    try:
        return os.path.realpath(cache_dir())
    except Exception:
        return None


def is_generated_code(filename: str) -> bool:
    """Whether ``filename`` is a module Inductor generated (its Python wrapper code), not the user's.

    Inductor registers each generated module's line map with ``PyCodeCache.linemaps``
    when it loads it (cache hits too); a module under Inductor's cache directory is
    generated even where that table does not know it.  Where Inductor's code cache
    was never imported, no generated module was loaded, and the answer is False
    without importing Inductor (seconds, on a first call).
    """
    if "torch._inductor.codecache" not in sys.modules:
        return False
    try:
        from torch._inductor.codecache import PyCodeCache

        if filename in getattr(PyCodeCache, "linemaps", {}):
            return True
    except Exception:
        return False
    root = _inductor_cache_root()
    return root is not None and os.path.realpath(filename).startswith(root + os.sep)


def generated_code_origin(filename: str, line: int, compiled_graph: Any = None) -> dict[str, Any] | None:
    """The user's source behind one line of Inductor's generated wrapper code, or None.

    Returns ``{"frames": [{"filename", "line", "name"}, ...] innermost first,
    "generated_line": the code at ``line``, "aten": "aten.sin, aten._to_copy" from the
    ``Original ATen: [...]`` comment above it (or None)}``.

    The frames come from the line map Inductor always records while it writes the
    code (each scheduler node's FX stack trace, no config needed):
    ``PyCodeCache.stack_frames_for_code`` (2.4-2.14), else the ``cache_linemap`` of the
    ``CompiledFxGraph`` on the traceback (``compiled_graph``), bisected.
    """
    import bisect
    import linecache
    import re

    frames: list[dict[str, Any]] = []
    try:
        from torch._inductor.codecache import PyCodeCache

        found = PyCodeCache.stack_frames_for_code(filename, line)
        frames = [dict(f) for f in found or []]
    except Exception:
        frames = []
    if not frames and compiled_graph is not None:
        linemap = getattr(compiled_graph, "cache_linemap", None) or []
        try:
            starts = [start for start, _ in linemap]
            index = bisect.bisect_right(starts, line)
            trace = linemap[index - 1][1] if index else None
        except Exception:
            trace = None
        if trace:
            parsed = re.findall(r'File "(.+?)", line (\d+), in (\S+)', trace)
            frames = [{"filename": f, "line": int(n), "name": name} for f, n, name in reversed(parsed)]
    if not frames:
        return None
    aten = None
    for above in range(line - 1, max(0, line - 12), -1):
        text = linecache.getline(filename, above).strip()
        if not text.startswith("#"):
            if aten is not None or text:
                break
            continue
        match = re.search(r"Original ATen: \[(.*?)\]", text)
        if match:
            aten = match.group(1)
            break
    return {"frames": frames, "generated_line": linecache.getline(filename, line).strip(), "aten": aten}


def compiled_graph_of_frame(frame: Any) -> Any:
    """The ``CompiledFxGraph`` a traceback frame runs (``self`` of its ``__call__``), or None."""
    owner = frame.f_locals.get("self")
    return owner if type(owner).__name__ == "CompiledFxGraph" else None


# --------------------------------------------------------------------------
# The compiler's start-up in a process, done and timed apart from a compile
# --------------------------------------------------------------------------

# imported by the first Inductor compile of a process (read in 2.13's compile_fx path)
_COMPILER_MODULES = (
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "torch._inductor.codecache",
    "torch._functorch._aot_autograd.autograd_cache",
    "torch._functorch._aot_autograd.runtime_wrappers",
)


# the parts of start_compiler this process has done (each is done once per process)
_STARTED: set[str] = set()


def start_compiler() -> dict[str, float]:
    """Do what the first Inductor compile of a process does once, before any frame; the seconds of each part done.

    ``imports_s``: importing Dynamo, Inductor and AOTAutograd's compile modules;
    ``cpu_isa_s``: Inductor's CPU capability probe (``cpu_vec_isa.pick_vec_isa``, which
    builds and runs small test programs once per process to learn which vector
    instructions the CPU has).  A part this process has done already (an earlier
    pass, a compile before it) took no time now and is left out, so an in-process warm
    pass has no start-up at all rather than parts of 0.00s.  A part this torch lacks is
    skipped; a part that fails is left to the compile, which then meets it as before.

    Inductor's compile-worker pool is left to torch: waiting here until it answers
    made two GPU cache tests on an H200 (torch 2.11) 50 s and 100 s slower, where
    torch starts it in the background and compiles meanwhile.
    """
    import importlib
    import sys
    import time
    import warnings

    parts: dict[str, float] = {}
    started = time.perf_counter()
    if "imports_s" not in _STARTED and not all(name in sys.modules for name in _COMPILER_MODULES):
        for name in _COMPILER_MODULES:
            # Importing Inductor warns torch's own deprecations (2.13: 14 of "torch.jit.script_method is
            # deprecated", from torch.utils.mkldnn): the plugin triggers the import, so they are not the
            # user's to see, and under -W error::DeprecationWarning they would fail the test in here.
            with contextlib.suppress(ImportError), warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", PendingDeprecationWarning)
                importlib.import_module(name)
        parts["imports_s"] = time.perf_counter() - started
    _STARTED.add("imports_s")
    started = time.perf_counter()
    with contextlib.suppress(Exception):
        from torch._inductor import cpu_vec_isa

        # torch caches the probe's answer for the process: a filled cache is a probe done already
        cache_info = getattr(cpu_vec_isa.valid_vec_isa_list, "cache_info", None)
        probed = "cpu_isa_s" in _STARTED or (cache_info is not None and cache_info().currsize > 0)
        _STARTED.add("cpu_isa_s")
        if not probed:
            cpu_vec_isa.pick_vec_isa()
            parts["cpu_isa_s"] = time.perf_counter() - started
    return {name: round(seconds, 4) for name, seconds in parts.items()}
