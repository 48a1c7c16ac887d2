"""The one place that knows how torch and Triton versions differ.

Callers ask for a capability (``recompile_limit_name()``), never for a version
number.  Each function finds the capability by probing what the installed torch
actually has, and the docstring records which versions differ and how (see
TORCH_NOTES.md in the design notes).  Everything imports torch lazily.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any


def torch_version() -> tuple[int, int]:
    """(major, minor) of the installed torch, for messages and reports only."""
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


# --------------------------------------------------------------------------
# Dynamo: recompile limit
# --------------------------------------------------------------------------


def recompile_limit_name() -> str:
    """Name of Dynamo's per-code-object recompile limit config.

    ``recompile_limit`` from torch 2.8; ``cache_size_limit`` in 2.6 (and an alias later).
    """
    import torch._dynamo.config as dynamo_config

    return "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"


def recompile_limit() -> int:
    import torch._dynamo.config as dynamo_config

    return int(getattr(dynamo_config, recompile_limit_name()))


def fail_on_recompile_limit_flag() -> str | None:
    """Config name that makes a recompile-limit hit raise instead of falling back to eager.

    ``fail_on_recompile_limit_hit`` from 2.8, ``fail_on_cache_limit_hit`` in 2.6.
    """
    import torch._dynamo.config as dynamo_config

    for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
        if hasattr(dynamo_config, name):
            return name
    return None


def has_fail_on_recompile_stance() -> bool:
    """``torch.compiler.set_stance("fail_on_recompile")`` exists (2.6+)."""
    import torch

    return hasattr(torch, "compiler") and hasattr(torch.compiler, "set_stance")


def recompile_limit_logger_names() -> tuple[str, ...]:
    """Loggers that carry the portable "hit config.recompile_limit" WARNING (all versions)."""
    return ("torch._dynamo.convert_frame",)


# --------------------------------------------------------------------------
# Inductor / AOTAutograd caches
# --------------------------------------------------------------------------


def force_disable_caches_owner() -> Any:
    """The config module holding ``force_disable_caches``.

    ``torch.compiler.config`` from 2.11 (Inductor keeps an alias); ``torch._inductor.config`` before.
    """
    import torch

    compiler_config = getattr(getattr(torch, "compiler", None), "config", None)
    if compiler_config is not None and hasattr(compiler_config, "force_disable_caches"):
        return compiler_config
    import torch._inductor.config as inductor_config

    return inductor_config


def caches_force_disabled() -> bool:
    return bool(getattr(force_disable_caches_owner(), "force_disable_caches", False))


def fx_graph_cache_enabled() -> bool:
    import torch._inductor.config as inductor_config

    return bool(getattr(inductor_config, "fx_graph_cache", False))


def autograd_cache_enabled() -> bool:
    """AOTAutograd's cache: off by default in 2.6, on from 2.8."""
    import torch._functorch.config as functorch_config

    return bool(getattr(functorch_config, "enable_autograd_cache", False))


def inductor_cache_dir() -> str:
    """Inductor's current cache directory (``runtime.cache_dir_utils`` in 2.6+)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:  # pragma: no cover - torch < 2.6 layout
        from torch._inductor.runtime.runtime_utils import cache_dir
    return cache_dir()


def clear_in_memory_compile_caches() -> None:
    """Forget every compiled artifact held in memory so that only the disk can answer.

    ``torch._dynamo.reset()`` drops Dynamo's code caches; Inductor keeps in-memory
    caches of loaded modules and the FX-graph cache's own memo, cleared by
    ``torch._inductor.utils.clear_caches`` (or ``clear_inductor_caches``) where present.
    """
    import torch._dynamo
    import torch._inductor.utils as inductor_utils

    torch._dynamo.reset()
    for name in ("clear_caches", "clear_inductor_caches"):
        clear = getattr(inductor_utils, name, None)
        if callable(clear):
            clear()
            break


def env_cache_overrides() -> dict[str, str]:
    """Environment variables set by the user that disable or redirect the caches."""
    names = (
        "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
        "TORCHINDUCTOR_FX_GRAPH_CACHE",
        "TORCHINDUCTOR_AUTOGRAD_CACHE",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
    )
    return {name: os.environ[name] for name in names if name in os.environ}


# --------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def no_cuda_skip_reason() -> str:
    """The one skip reason of a GPU test on a machine where torch sees no CUDA device."""
    import torch

    return f"no CUDA device (torch {torch.__version__} reports torch.cuda.is_available() == False)"


def accelerator_error_types() -> tuple[type[BaseException], ...]:
    """Errors a failed CUDA call raises: ``torch.AcceleratorError`` (2.8+) or RuntimeError."""
    import torch

    accel = getattr(torch, "AcceleratorError", None)
    return (accel, RuntimeError) if isinstance(accel, type) else (RuntimeError,)


# --------------------------------------------------------------------------
# Dynamo: recompile watching (recompiles.py)
# --------------------------------------------------------------------------

# Artifact names of Dynamo's "Recompiling function ..." log, and the loggers that
# carry it: "recompiles_verbose" takes over from "recompiles" when the user enabled
# it (2.4+ both).  The loggers are named "<module>.__<artifact>".
RECOMPILE_LOG_ARTIFACTS = ("recompiles", "recompiles_verbose")


def recompile_log_names() -> tuple[str, ...]:
    """Loggers that carry one DEBUG record per recompile (``torch._dynamo.guards``, 2.4+)."""
    return tuple(f"torch._dynamo.guards.__{artifact}" for artifact in RECOMPILE_LOG_ARTIFACTS)


def log_artifact_enabled(name: str) -> bool:
    """Whether a TORCH_LOGS artifact is on; Dynamo checks this, not the logger level."""
    from torch._logging._internal import log_state

    return log_state.is_artifact_enabled(name)


def set_log_artifact(name: str, enabled: bool) -> None:
    """Turn one TORCH_LOGS artifact on or off without touching the rest of the logging state.

    ``torch._logging.set_logs`` would replace every other TORCH_LOGS setting, so the
    artifact set of ``torch._logging._internal.log_state`` (2.4+) is edited directly.
    """
    from torch._logging._internal import log_state

    if enabled:
        log_state.enable_artifact(name)
    else:
        log_state.artifact_names.discard(name)


def guard_failures_table() -> Any:
    """Dynamo's ``guard_failures``: original code object -> list of reason strings (2.4+).

    Filled on every recompile whatever the logging settings, and cleared by
    ``torch._dynamo.reset()``.  Strings carry a ``"frame/compile: "`` prefix from 2.6.
    """
    from torch._dynamo.utils import guard_failures

    return guard_failures


def graph_break_counter() -> Any:
    """``counters["graph_break"]``: graph-break message -> times hit (2.4+; never reset by Dynamo)."""
    from torch._dynamo.utils import counters

    return counters["graph_break"]


def error_on_recompile() -> contextlib.AbstractContextManager:
    """Make the first recompile of any function raise ``torch._dynamo.exc.RecompileError`` (2.4+).

    First compiles pass; the error message holds the guard-failure reasons.
    """
    import torch._dynamo.config as dynamo_config

    return dynamo_config.patch(error_on_recompile=True)


def fail_on_any_compile() -> contextlib.AbstractContextManager:
    """Refuse Dynamo compiles inside the block (the warm-up is over).

    ``torch.compiler.set_stance("fail_on_recompile")`` where its refusal names the
    refused function (``stance_refusal_names_the_frame()``; its message carries the
    guard-failure reasons from 2.11); there it refuses a frame's first compile too.
    Elsewhere ``error_on_recompile``, which refuses recompiles only, naming the
    function and the reasons: the 2.6 stance names nothing, records no reasons, and
    also refuses frames Dynamo would have skipped (any frame it has not seen yet).
    """
    if has_fail_on_recompile_stance() and stance_refusal_names_the_frame():
        import torch

        return torch.compiler.set_stance("fail_on_recompile")
    return error_on_recompile()


def is_recompile_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is Dynamo refusing a (re)compile under error_on_recompile or the stance."""
    from torch._dynamo.exc import RecompileError

    if isinstance(exc, RecompileError):
        return True
    return isinstance(exc, RuntimeError) and "stance is 'fail_on_recompile'" in str(exc)


# --------------------------------------------------------------------------
# CUDA graph capture, graph pools and cudagraph trees (capture.py, memory.py, trees.py)
# --------------------------------------------------------------------------


def memory_snapshot_segments(pool_id: tuple[int, int] | None = None) -> list[dict]:
    """Allocator segments, restricted to ``pool_id``'s where the torch can filter itself.

    ``memory_snapshot(mempool_id=)`` exists from 2.8 and ``include_traces=`` from
    2.13; older versions return every segment (callers always filter by
    ``segment_pool_id`` too, so the answer is the same, only slower).
    """
    import inspect

    import torch

    params = inspect.signature(torch.cuda.memory_snapshot).parameters
    kwargs: dict[str, Any] = {}
    if "include_traces" in params:
        kwargs["include_traces"] = False
    if pool_id is not None and "mempool_id" in params:
        kwargs["mempool_id"] = tuple(pool_id)
    return list(torch.cuda.memory_snapshot(**kwargs))


def graph_capture_begin(graph: Any, pool: Any, capture_error_mode: str) -> None:
    """``CUDAGraph.capture_begin`` with a pool; its keyword set grew (check_input_liveness 2.13)."""
    graph.capture_begin(pool, capture_error_mode=capture_error_mode)


def abandon_capture_pool(device: int, pool_id: tuple[int, int], end_allocation: bool) -> None:
    """Undo what a capture that never ended did to the allocator's pool bookkeeping.

    ``capture_begin`` registers the pool for allocation and takes a reference on it;
    when ``capture_end`` raises before ``endAllocateToPool`` the pool stays
    "recording" forever (the next capture into it fails with "already recording to
    mempool_id") and it is never freed.  ``_cuda_endAllocateToPool`` and
    ``_cuda_releasePool`` are the bindings ``torch.cuda.MemPool`` uses (2.6+).
    """
    import torch

    if end_allocation:
        try:
            torch._C._cuda_endAllocateToPool(device, tuple(pool_id))
        except RuntimeError:
            pass  # capture_end got far enough to end it itself
    release = getattr(torch._C, "_cuda_releasePool", None)
    if release is not None:
        release(device, tuple(pool_id))


def clear_cublas_workspaces() -> bool:
    """Free cuBLAS/cuBLASLt workspaces so the next matmul allocates a fresh one.

    Cleared before a first capture the workspace is allocated inside the graph's
    pool (as Inductor's cudagraph trees do), so no later ``clear`` elsewhere can
    hand memory a graph still uses to other tensors.  Present in every supported
    torch; returns False where it is not.
    """
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    clear()
    return True


def non_owning_alias(tensor: Any) -> Any:
    """A tensor viewing ``tensor``'s memory without keeping it allocated.

    This is vLLM's "weak ref" output: the graph keeps writing there on replay while
    the allocator may hand the block to a later capture in the same pool.  Built the
    way Inductor's cudagraph trees rebuild outputs (``_construct_storage_from_data_pointer``).
    """
    import torch

    storage = tensor.untyped_storage()
    alias_storage = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), tensor.device, storage.nbytes())
    alias = torch.empty((0,), dtype=tensor.dtype, device=tensor.device)
    alias.set_(alias_storage, tensor.storage_offset(), tensor.shape, tensor.stride())
    return alias


def cudagraph_skip_logger_names() -> tuple[str, ...]:
    """Loggers that carry reduce-overhead's "skipping cudagraphs due to ..." WARNING.

    ``torch._inductor.cudagraph_utils.__cudagraphs`` from 2.11,
    ``...__perf_hints`` in 2.4-2.8; both are listed, one of them stays silent.
    """
    return (
        "torch._inductor.cudagraph_utils.__cudagraphs",
        "torch._inductor.cudagraph_utils.__perf_hints",
    )


def watch_cudagraph_recordings(callback: Any) -> Any | None:
    """Call ``callback()`` each time cudagraph trees record a graph; returns an undo function.

    Uses Dynamo's start callbacks with ``CallbackTrigger.CUDAGRAPH_RECORDING`` (2.8+);
    returns None where that trigger does not exist (callers then count tree nodes).
    """
    import torch._dynamo

    try:
        from torch._dynamo.callback import CallbackTrigger
    except ImportError:
        return None
    trigger = getattr(CallbackTrigger, "CUDAGRAPH_RECORDING", None)
    handler = getattr(torch._dynamo, "callback_handler", None)
    if trigger is None or handler is None:
        return None

    def on_start(args: Any) -> None:
        if getattr(args, "callback_trigger", None) == trigger:
            callback()

    handler.register_start_callback(on_start)
    return lambda: handler.remove_start_callback(on_start)


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
# Compile caches across runs (caches.py): flags, bypass loggers, Triton hooks,
# portable cache artifacts, forwarding config to a child interpreter
# --------------------------------------------------------------------------

# (report layer, config module, flag, environment variables that set it) of each on-disk cache layer
_CACHE_LAYER_FLAGS = (
    (
        "fxgraph",
        "torch._inductor.config",
        "fx_graph_cache",
        ("TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT"),
    ),
    ("aot_autograd", "torch._functorch.config", "enable_autograd_cache", ("TORCHINDUCTOR_AUTOGRAD_CACHE",)),
)


def _who_set_flag(module: Any, flag: str, env_names: tuple[str, ...]) -> str | None:
    """Who gave a cache flag its value: ``"NAME=value"`` (environment), ``"set in code"``, or None (torch's default).

    torch's ``ConfigModule`` keeps, per entry, the value set in code (``user_override``:
    a plain attribute in 2.6, a ``ContextVar`` from the 2.8-era rewrite, unset until
    someone assigns or patches the flag) and, from that rewrite on, the environment's
    forcing value (``env_value_force``), which wins over code.  In 2.6 the environment
    variable is read into the entry's *default* at import (``fx_graph_cache = environ
    .get("TORCHINDUCTOR_FX_GRAPH_CACHE", "1") == "1"``), so there a variable that is
    present at all is the user's choice.  An entry this torch lays out otherwise
    answers ``"set by this torch in a way it does not say"``: never taken for a default.
    """
    import contextvars

    from torch.utils._config_module import _UNSET_SENTINEL

    present = [name for name in env_names if name in os.environ]
    env_text = ", ".join(f"{name}={os.environ[name]}" for name in present)
    entry = getattr(module, "_config", {}).get(flag)
    if entry is None or not hasattr(entry, "user_override"):
        return env_text or "set by this torch in a way it does not say"
    if getattr(entry, "env_value_force", _UNSET_SENTINEL) is not _UNSET_SENTINEL:
        return env_text or f"{env_names[0]}, read when torch was imported"
    override = entry.user_override
    if isinstance(override, contextvars.ContextVar):
        override = override.get()
    if override is not _UNSET_SENTINEL:
        return "set in code"
    return env_text or None


def cache_layers_off_by_user() -> dict[str, str]:
    """Cache layers (``"fxgraph"``, ``"aot_autograd"``) the user turned off, with why, e.g.

    ``{"aot_autograd": "torch._functorch.config.enable_autograd_cache is False (set in code)"}``.

    A flag that is off because this torch leaves it off by default (AOTAutograd's in
    2.6; both are on from 2.8) is not here: ``enable_default_off_caches()`` may turn it on.
    """
    import importlib

    off = {}
    for layer, module_name, flag, env_names in _CACHE_LAYER_FLAGS:
        module = importlib.import_module(module_name)
        if not hasattr(module, flag) or getattr(module, flag):
            continue
        who = _who_set_flag(module, flag, env_names)
        if who is not None:
            off[layer] = f"{module_name}.{flag} is False ({who})"
    return off


def cache_disabled_reasons() -> list[str]:
    """Why the FX-graph / AOTAutograd disk caches cannot all answer in this process (empty: they can).

    ``force_disable_caches`` lives in ``torch.compiler.config`` from 2.11 and in
    ``torch._inductor.config`` before; a layer turned off by the user, by its
    environment variable or in code, counts as disabled.  A flag that is merely off
    by default (AOTAutograd's cache in 2.6) is not a reason: ``enable_default_off_caches()``
    turns it on.
    """
    reasons = []
    owner = force_disable_caches_owner()
    if getattr(owner, "force_disable_caches", False):
        env = os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES")
        where = f"TORCHINDUCTOR_FORCE_DISABLE_CACHES={env}" if env else "set in code"
        reasons.append(f"{owner.__name__}.force_disable_caches is True ({where})")
    reasons.extend(cache_layers_off_by_user().values())
    return reasons


def enable_default_off_caches() -> contextlib.AbstractContextManager:
    """Turn on, for the block, the cache layers this torch leaves off by default and nobody set.

    The FX-graph cache is on by default in every supported torch; AOTAutograd's is
    off by default in 2.6 and on from 2.8.  A layer the user turned off, by its environment variable or in
    code (``config.patch(enable_autograd_cache=False)``, ``fx_graph_cache = False``),
    stays off: a probe measures the configuration the user runs, and reports the
    layer as off by the user (``cache_layers_off_by_user()``) instead of hiding it.
    """
    import importlib

    stack = contextlib.ExitStack()
    for _layer, module_name, flag, env_names in _CACHE_LAYER_FLAGS:
        module = importlib.import_module(module_name)
        if hasattr(module, flag) and not getattr(module, flag) and _who_set_flag(module, flag, env_names) is None:
            stack.enter_context(module.patch(**{flag: True}))
    return stack


@contextlib.contextmanager
def counting_fx_graph_cache_writes(counts: dict[str, int], key: str = "fxgraph_written") -> Iterator[None]:
    """Count, in ``counts[key]``, every entry Inductor writes into its local FX-graph cache in the block.

    torch keeps no counter of these writes that every supported version bumps: 2.13
    and 2.14 call ``cache_stats.put("LocalFxGraphCache")`` after a save (not after
    loading mega-cache artifacts), the 2.7-era ``FxGraphCache._write_to_local_cache``
    has no counter, and 2.6 writes inline in ``FxGraphCache._save_graph``.  All of
    them write the entry with ``torch._inductor.codecache.write_atomic``, looked up as
    a module global at call time, to a file under ``FxGraphCache._get_tmp_dir()``
    (``<cache dir>/fxgraph``).  So the write itself is counted: the function is
    wrapped for the block and put back on exit.  Entries deleted later
    (``FxGraphCache.clear()``) stay counted.
    """
    from torch._inductor import codecache

    original = codecache.write_atomic

    def counting_write_atomic(path_: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(path_, *args, **kwargs)
        try:
            fx_dir = os.path.abspath(codecache.FxGraphCache._get_tmp_dir())
            if os.path.abspath(str(path_)).startswith(fx_dir + os.sep):
                counts[key] = counts.get(key, 0) + 1
        except Exception:  # a layout this torch does not have: not counted, never breaks the write
            pass
        return result

    codecache.write_atomic = counting_write_atomic
    try:
        yield
    finally:
        # Put back only our own wrapper: whoever wrapped it after us undoes theirs.
        if codecache.write_atomic is counting_write_atomic:
            codecache.write_atomic = original


def cache_bypass_loggers() -> dict[str, tuple[str, str]]:
    """Logger name -> (cache layer, message prefix) of the INFO records that give bypass reasons.

    ``"Bypassing FX Graph Cache because '%s'"`` on ``torch._inductor.codecache``
    (2.6-2.13) and ``"Bypassing autograd cache due to: %s"`` on
    ``torch._functorch._aot_autograd.autograd_cache`` (2.8+; 2.6 logs it only for a
    bypass found when saving, at WARNING, and otherwise just bumps
    ``autograd_cache_bypass``, keeping the reason to its structured trace).
    """
    return {
        "torch._inductor.codecache": ("fxgraph", "Bypassing FX Graph Cache"),
        "torch._functorch._aot_autograd.autograd_cache": ("aot_autograd", "Bypassing autograd cache"),
    }


def triton_compilation_knobs() -> Any | None:
    """Triton's ``knobs.compilation`` when it has the compile ``listener`` slot (Triton 3.4+, torch 2.8+).

    The listener is called inside ``triton.compile()`` with ``cache_hit=``; Triton 3.0-3.3
    have no such slot (None here: count new kernel directories instead).  Triton is
    imported only where a CUDA device makes Inductor use it.
    """
    import importlib.util

    if importlib.util.find_spec("triton") is None or not cuda_available():
        return None
    try:
        import triton
    except Exception:  # a broken Triton install must not break a CPU-side check
        return None
    compilation = getattr(getattr(triton, "knobs", None), "compilation", None)
    if compilation is None or not hasattr(compilation, "listener"):
        return None
    return compilation


def has_portable_cache_artifacts() -> bool:
    """``torch.compiler.save_cache_artifacts``/``load_cache_artifacts`` exist (2.7+)."""
    import torch

    compiler = getattr(torch, "compiler", None)
    return hasattr(compiler, "save_cache_artifacts") and hasattr(compiler, "load_cache_artifacts")


@contextlib.contextmanager
def fresh_cache_artifact_recording() -> Iterator[None]:
    """Record the mega-cache artifacts of the block only, then put back what was recorded before.

    ``CacheArtifactManager.with_fresh_cache`` exists in 2.13; older versions only have
    ``clear()``, which also drops what the user recorded (unavoidable there).
    """
    from torch.compiler._cache import CacheArtifactManager

    fresh = getattr(CacheArtifactManager, "with_fresh_cache", None)
    if fresh is not None:
        with fresh():
            yield
        return
    CacheArtifactManager.clear()
    try:
        yield
    finally:
        CacheArtifactManager.clear()


def save_cache_artifacts() -> bytes | None:
    import torch

    saved = torch.compiler.save_cache_artifacts()
    return None if saved is None else saved[0]


def load_cache_artifacts(blob: bytes) -> None:
    import torch

    torch.compiler.load_cache_artifacts(blob)


_FORWARDED_CONFIG_MODULES = ("torch._inductor.config", "torch._functorch.config")


def changed_compile_config() -> dict[str, dict[str, Any]]:
    """Inductor and functorch config entries that differ from their defaults and can be pickled.

    A child interpreter given these computes the same cache keys as this process.
    ``ConfigModule._get_dict(skip_default=True)`` is the one export that leaves out
    defaults in 2.6-2.13; unpicklable values (a lambda pass) are left out, since they
    make the graph uncacheable anyway.
    """
    import importlib
    import pickle

    out: dict[str, dict[str, Any]] = {}
    for module_name in _FORWARDED_CONFIG_MODULES:
        module = importlib.import_module(module_name)
        get_dict = getattr(module, "_get_dict", None)
        if get_dict is None:
            continue
        try:
            changed = get_dict(skip_default=True)
        except TypeError:  # an older signature without skip_default
            continue
        kept = {}
        for key, value in changed.items():
            try:
                pickle.dumps(value)
            except Exception:
                continue
            kept[key] = value
        out[module_name] = kept
    return out


def applied_compile_config(config: dict[str, dict[str, Any]]) -> contextlib.AbstractContextManager:
    """Patch the modules named in ``changed_compile_config()`` output for the block."""
    import importlib

    stack = contextlib.ExitStack()
    for module_name, values in config.items():
        module = importlib.import_module(module_name)
        known = {k: v for k, v in values.items() if hasattr(module, k)}
        if known:
            stack.enter_context(module.patch(known))
    return stack


# --------------------------------------------------------------------------
# Piecewise graphs: Inductor's graph partition at custom ops (piecewise.py)
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
        inductor_utils.set_customized_partition_wrappers(previous)


# --------------------------------------------------------------------------
# Dynamo: strict blocks (recompiles.py RecompileWatch.strict)
# --------------------------------------------------------------------------


@functools.cache
def stance_refusal_names_the_frame() -> bool:
    """Whether the ``fail_on_recompile`` stance's error names the function it refused.

    From the 2.8-era rewrite the stance's callback looks at the frame: it lets frames
    Dynamo would skip through and says ``"function name: '...'"`` (plus the guard
    failures from 2.11).  The 2.6 callback raises a bare "Detected recompile ..." for
    any frame, first compiles of helpers included.  Probed by handing the callback
    this very frame, which has no compiled entries, so nothing is compiled or recorded.
    """
    import sys

    import torch
    from torch._dynamo import eval_frame

    choose = getattr(eval_frame, "_callback_from_stance", None)
    if choose is None or not has_fail_on_recompile_stance():
        return False

    def unused_backend(*args: Any, **kwargs: Any) -> None:
        return None

    try:
        with torch.compiler.set_stance("fail_on_recompile"):
            refuse = choose(unused_backend)
        refuse(sys._getframe(), None, None, None)
    except RuntimeError as exc:
        return "function name: 'stance_refusal_names_the_frame'" in str(exc)
    except Exception:  # a callback shape we do not know: use error_on_recompile
        return False
    # It let this frame through (no tensors in it): it looks at frames, so it names them.
    return True


# --------------------------------------------------------------------------
# Piecewise graphs: why a fullgraph trace failed (piecewise.py)
# --------------------------------------------------------------------------


def is_shape_specialization_error(exc: BaseException) -> bool:
    """Whether a Dynamo trace error says a dimension marked dynamic was specialized.

    That is a ``torch._dynamo.exc.UserError`` of type ``CONSTRAINT_VIOLATION`` or
    ``DYNAMIC_DIM`` (2.6-2.13).  Every other ``UserError`` under ``fullgraph=True`` is a
    graph break: 2.6 raises ``UserError(DYNAMIC_CONTROL_FLOW)`` ("Dynamic control flow is
    not supported ...") for a branch on a tensor's value, where 2.8+ raise a plain
    ``Unsupported`` graph break.
    """
    from torch._dynamo.exc import UserError, UserErrorType

    kinds = {getattr(UserErrorType, name, None) for name in ("CONSTRAINT_VIOLATION", "DYNAMIC_DIM")}
    return isinstance(exc, UserError) and getattr(exc, "error_type", None) in kinds - {None}


# --------------------------------------------------------------------------
# Global torch state a plugin test must leave as it found it (isolation.py)
# --------------------------------------------------------------------------


def compile_stance() -> Any | None:
    """The active ``torch.compiler.set_stance`` setting, or None where torch has no stances.

    ``set_stance`` (2.6+) keeps the setting in ``torch._dynamo.eval_frame._stance``,
    a small dataclass replaced on every change; a test that calls ``set_stance``
    without its context manager leaves it changed for every later test.
    """
    from torch._dynamo import eval_frame

    return getattr(eval_frame, "_stance", None)


def restore_compile_stance(stance: Any) -> None:
    from torch._dynamo import eval_frame

    if stance is not None and getattr(eval_frame, "_stance", None) is not stance:
        eval_frame._set_stance(stance)


def default_device_setting() -> Any | None:
    """What ``torch.set_default_device`` was last given (a ``torch.device``), or None if unset.

    ``torch.get_default_device()`` answers ``cpu`` both when nothing was set and after
    ``set_default_device("cpu")``; the two differ (the second installs a function mode
    that slows every torch call), so the setting itself is read: the 2.6-2.14 home is
    ``torch._GLOBAL_DEVICE_CONTEXT.device_context``.
    """
    import torch

    context = getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)
    return getattr(context, "device", None)


def dynamo_cache_entry_counts() -> dict[int, int]:
    """Compiled entries per code object Dynamo has seen: ``{id(code): entries}``.

    Dynamo keeps the code objects it processed in ``convert_frame.input_codes`` (weak
    references) and their compiled entries on the code object itself; both are read
    the same way in 2.6-2.14.  A change in this map between two points means something
    was compiled, recompiled or reset in between.
    """
    from torch._dynamo import convert_frame, eval_frame

    counts: dict[int, int] = {}
    for ref in list(convert_frame.input_codes.seen):
        code = ref()
        if code is not None:
            counts[id(code)] = len(eval_frame._debug_get_cache_entry_list(code))
    return counts


# --------------------------------------------------------------------------
# Devices: pinning xdist workers (devices.py)
# --------------------------------------------------------------------------


def cuda_device_count() -> int:
    """How many CUDA devices this process sees, counted without initialising CUDA where possible.

    ``torch.cuda.device_count()`` asks NVML first (2.1+) and honours
    ``CUDA_VISIBLE_DEVICES``, so a later change of that variable still takes effect;
    only where NVML fails does it fall back to the CUDA runtime, which then fixes
    the set of visible devices for the life of the process.
    """
    import torch

    return int(torch.cuda.device_count())
