"""The one place that knows how torch and Triton versions differ.

Callers ask for a capability (``recompile_limit_name()``), never for a version
number.  Each function finds the capability by probing what the installed torch
actually has, and the docstring records which versions differ and how (see
TORCH_NOTES.md in the design notes).  Everything imports torch lazily.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator


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


def stance_fails_first_compile() -> bool:
    """In 2.6 the fail_on_recompile stance also refuses a frame's *first* compile.

    From 2.8 only real recompiles raise.  There is no attribute to probe for this
    behaviour, so it is decided by version here, in the one place allowed to.
    """
    return torch_version() < (2, 8)


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


@contextlib.contextmanager
def caches_enabled() -> Iterator[None]:
    """Turn on the FX-graph and AOTAutograd caches for the block (2.6 has AOTAutograd's off)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    patches = [inductor_config.patch(fx_graph_cache=True)]
    if hasattr(functorch_config, "enable_autograd_cache"):
        patches.append(functorch_config.patch(enable_autograd_cache=True))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


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
    """Refuse every Dynamo compile inside the block (the warm-up is over).

    ``torch.compiler.set_stance("fail_on_recompile")`` where it exists (2.6+; its
    message carries the guard-failure reasons from 2.11); there it refuses a frame's
    first compile too.  Before 2.6, ``error_on_recompile`` refuses recompiles only.
    """
    if has_fail_on_recompile_stance():
        import torch

        return torch.compiler.set_stance("fail_on_recompile")
    return error_on_recompile()


def recompile_refusal_types() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "Dynamo refused to recompile": RecompileError, or the stance's RuntimeError."""
    from torch._dynamo.exc import RecompileError

    return (RecompileError, RuntimeError)


def is_recompile_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is Dynamo refusing a (re)compile under error_on_recompile or the stance."""
    from torch._dynamo.exc import RecompileError

    if isinstance(exc, RecompileError):
        return True
    return isinstance(exc, RuntimeError) and "stance is 'fail_on_recompile'" in str(exc)
