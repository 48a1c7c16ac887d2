"""The on-disk compile caches: their flags, counters, bypass logs, writes, Triton's kernels, artifacts.

Inductor's FX-graph cache, AOTAutograd's cache (stored through it) and Triton's
kernel cache; who turned a layer off; the names of torch's cache counters; how to
count what a run wrote; the mega-cache artifacts; forwarding cache-key config to a
child interpreter.  Every cache lookup's key and components: ``cache_lookups``.
Everything imports torch and Triton lazily.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .cuda import cuda_available

# --------------------------------------------------------------------------
# What answers from memory, and what turns the disk caches off
# --------------------------------------------------------------------------


# Names a user acts on, for messages: the class a custom Inductor pass must subclass to
# be cacheable, and the config modules whose values go into the cache keys (2.6-2.14).
CUSTOM_GRAPH_PASS_CLASS = "torch._inductor.custom_graph_pass.CustomGraphPass"
CACHE_KEY_CONFIG_MODULES = ("torch._inductor.config", "torch._functorch.config")


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


# --------------------------------------------------------------------------
# Which layers are on, and who said so
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


def enable_default_off_caches() -> contextlib.ExitStack:
    """Turn on, for the block, the cache layers this torch leaves off by default and nobody set.

    The FX-graph cache is on by default in every supported torch; AOTAutograd's is
    off by default in 2.6 and on from 2.8.  A layer the user turned off, by its environment variable or in
    code (``config.patch(enable_autograd_cache=False)``, ``fx_graph_cache = False``),
    stays off: a probe measures the configuration the user runs, and reports the
    layer as off by the user (``cache_layers_off_by_user()``) instead of hiding it.

    A layer turned on here gets the companion settings torch derives from its flag
    at import (``_DEFAULT_OFF_COMPANIONS``), where nobody set them: the
    configuration ``TORCHINDUCTOR_AUTOGRAD_CACHE=1`` would have given.
    """
    import importlib

    stack = contextlib.ExitStack()
    for _layer, module_name, flag, env_names in _CACHE_LAYER_FLAGS:
        module = importlib.import_module(module_name)
        if hasattr(module, flag) and not getattr(module, flag) and _who_set_flag(module, flag, env_names) is None:
            stack.enter_context(_set_leaving_unset(module, flag, True))
            for companion, value in _DEFAULT_OFF_COMPANIONS.get((module_name, flag), ()):
                if (
                    hasattr(module, companion)
                    and getattr(module, companion) != value
                    and _who_set_flag(module, companion, ()) is None
                ):
                    stack.enter_context(_set_leaving_unset(module, companion, value))
    return stack


# (config module, cache flag) -> ((setting, value with the cache on), ...): settings whose
# default torch derives from a default-off cache flag when its config module is imported.
# 2.6: ``view_replay_for_aliased_outputs = not is_fbcode() and not enable_autograd_cache``
# ("View replay is currently not compatible with AOTAutogradCache, since FunctionalTensors
# are not serializable"); left on, every graph with an output aliasing an input (``a.t()``)
# bypasses the cache ("Cannot cache a graph with functional tensor").  From 2.8 the cache
# is on by default (and 2.14 has no such bypass), so nothing here applies there.
_DEFAULT_OFF_COMPANIONS: dict[tuple[str, str], tuple[tuple[str, Any], ...]] = {
    ("torch._functorch.config", "enable_autograd_cache"): (("view_replay_for_aliased_outputs", False),),
}


@contextlib.contextmanager
def _set_leaving_unset(module: Any, flag: str, value: Any) -> Iterator[None]:
    """``module.patch(flag=value)`` for the block, then the entry as it was, unset state included.

    ``ConfigModule.patch`` puts back the prior *value* on exit, by assignment
    (2.6-2.14), so a flag nobody had set is left "set in code" afterwards: in 2.6,
    where AOTAutograd's cache is off by default, every later probe would report it
    as the user's choice and refuse.  So the entry's own ``user_override`` (a plain
    attribute in 2.6, a ``ContextVar`` from the 2.8-era rewrite) is put back after
    the prior value was assigned (which marks the config's hash dirty).  An entry
    this torch lays out otherwise gets plain ``patch`` semantics.
    """
    import contextvars

    entry = getattr(module, "_config", {}).get(flag)
    if entry is None or not hasattr(entry, "user_override"):
        with module.patch(**{flag: value}):
            yield
        return
    override = entry.user_override
    is_var = isinstance(override, contextvars.ContextVar)
    prior_override = override.get() if is_var else override
    prior_value = getattr(module, flag)
    setattr(module, flag, value)
    try:
        yield
    finally:
        setattr(module, flag, prior_value)
        if is_var:
            entry.user_override.set(prior_override)
        else:
            entry.user_override = prior_override


# --------------------------------------------------------------------------
# What a run did: entries written, bypass reasons, Triton compiles
# --------------------------------------------------------------------------


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
    # looked up before wrapping: a torch without it fails here, loudly, instead of
    # silently counting no saves (the very miss this counter exists to catch)
    fx_graph_dir = codecache.FxGraphCache._get_tmp_dir

    def counting_write_atomic(path_: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(path_, *args, **kwargs)
        if os.path.abspath(str(path_)).startswith(os.path.abspath(fx_graph_dir()) + os.sep):
            counts[key] = counts.get(key, 0) + 1
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


# --------------------------------------------------------------------------
# Portable cache artifacts, and the config a child interpreter needs for the same keys
# --------------------------------------------------------------------------


def has_portable_cache_artifacts() -> bool:
    """``torch.compiler.save_cache_artifacts``/``load_cache_artifacts`` exist (2.7+)."""
    import torch

    compiler = getattr(torch, "compiler", None)
    return hasattr(compiler, "save_cache_artifacts") and hasattr(compiler, "load_cache_artifacts")


def portable_cache_artifacts_missing() -> str | None:
    """What this torch lacks to move a cache as portable artifacts (for a message); None if nothing."""
    if has_portable_cache_artifacts():
        return None
    return "torch.compiler.save_cache_artifacts (torch 2.7 and newer)"


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


def applied_compile_config(config: dict[str, dict[str, Any]]) -> contextlib.ExitStack:
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
# torch's cache counters and Triton's kernel directories (counters.py)
# --------------------------------------------------------------------------

# report layer -> report key -> (counter group, counter name) in torch._dynamo.utils.counters.
# fxgraph_cache_* (2.4+); autograd_cache_* (2.6+, guard_miss 2.6+); Inductor's Triton
# bundler: save_kernel/read_and_emit_kernel (2.6+, they count files, not kernels),
# the static autotuner counters (2.8+).  A counter this torch lacks reads 0.
_CACHE_COUNTERS: dict[str, dict[str, tuple[str, str]]] = {
    "fxgraph": {
        "hit": ("inductor", "fxgraph_cache_hit"),
        "miss": ("inductor", "fxgraph_cache_miss"),
        "bypass": ("inductor", "fxgraph_cache_bypass"),
    },
    "aot_autograd": {
        "hit": ("aot_autograd", "autograd_cache_hit"),
        "miss": ("aot_autograd", "autograd_cache_miss"),
        "bypass": ("aot_autograd", "autograd_cache_bypass"),
        "saved": ("aot_autograd", "autograd_cache_saved"),
        "guard_miss": ("aot_autograd", "autograd_cache_guard_miss"),
    },
    "triton": {
        "bundler_saved_files": ("inductor", "triton_bundler_save_kernel"),
        "bundler_loaded_files": ("inductor", "triton_bundler_read_and_emit_kernel"),
        "static_autotuners_saved": ("inductor", "triton_bundler_save_static_autotuner"),
        "static_autotuners_loaded": ("inductor", "triton_bundler_load_static_autotuner"),
    },
}


def cache_counter_names() -> dict[str, dict[str, tuple[str, str]]]:
    """Report layer -> report key -> ``(group, name)`` of torch's counter for it (a fresh copy)."""
    return {layer: dict(keys) for layer, keys in _CACHE_COUNTERS.items()}


def triton_kernel_dirs(cache_dirs: Iterable[Path]) -> frozenset[str]:
    """The per-kernel directories in the given Triton cache directories.

    Triton writes one directory per compiled kernel (named by its hash: hex in 3.0,
    base64 in 3.2, base32 from 3.3, so names are not interpreted).  Inductor's
    default layout adds a ``<device>/`` level (``<inductor dir>/triton/0/<hash>``),
    which is looked through.  A directory that appears between two snapshots is a
    kernel Triton compiled, unless Inductor's bundler emitted it from an FX-cache entry.
    """
    found: set[str] = set()
    for base in cache_dirs:
        try:
            children = [c for c in Path(base).iterdir() if c.is_dir()]
        except OSError:
            continue  # not created yet: no kernel compiled there
        for child in children:
            if child.name.isdigit():
                try:
                    found.update(str(k) for k in child.iterdir() if _is_kernel_dir(k))
                except OSError:
                    pass
            elif _is_kernel_dir(child):
                found.add(str(child))
    return frozenset(found)


def _is_kernel_dir(path: Path) -> bool:
    """A compiled kernel's directory holds its ``__grp__<name>.json`` group file.

    Triton also caches its driver helpers (``cuda_utils.so``) and launcher stubs
    (``__triton_launcher.so``) in hash directories of the same cache; a fresh
    interpreter builds those again on first use (seen on an H200 with Triton 3.6),
    and they are not kernels.
    """
    try:
        return path.is_dir() and any(f.startswith("__grp__") for f in os.listdir(path))
    except OSError:
        return False
