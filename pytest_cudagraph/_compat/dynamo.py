"""Dynamo: recompile limits, refusing compiles, guard-failure reasons, logs, counters, tracing.

Everything imports torch lazily.  Versions are named where they differ (read in the
sources of 2.4, 2.6, 2.8, 2.11, 2.13 and 2.14).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import sys
import types
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch

# --------------------------------------------------------------------------
# Loading, resetting, counters
# --------------------------------------------------------------------------


# torch's structured-trace logger (torch._logging, 2.1+): it never propagates, and torch builds and
# writes its records (compile events, graphs, guards, as JSON payloads) whenever it has a handler
TORCH_TRACE_LOGGER = "torch.__trace"


def register_dynamo_loggers() -> None:
    """Import ``torch._dynamo``, which registers its TORCH_LOGS artifact loggers (2.4+)."""
    import torch._dynamo  # noqa: F401


def reset_dynamo() -> None:
    """``torch._dynamo.reset()``: drop every compiled entry, guard failure and automatic-dynamic mark.

    It does not clear ``torch._dynamo.utils.counters`` (2.4-2.14).
    """
    import torch._dynamo

    _remember_input_codes()
    torch._dynamo.reset()


def counter_values(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Current values of Dynamo's process-global counters, ``{(group, name): value}``.

    ``torch._dynamo.utils.counters`` is a ``defaultdict(Counter)`` (2.4-2.14) that only
    ever grows; a group nothing has bumped yet reads 0 and is not created by reading.
    """
    from torch._dynamo.utils import counters

    return {(group, name): int(counters[group][name]) if group in counters else 0 for group, name in pairs}


def counter_value(group: str, name: str) -> int:
    """One counter of ``counter_values()``: ``counters[group][name]``, 0 where never bumped."""
    return counter_values([(group, name)])[(group, name)]


def graph_break_counter() -> Any:
    """``counters["graph_break"]``: graph-break message -> times hit (2.4+; never reset by Dynamo)."""
    from torch._dynamo.utils import counters

    return counters["graph_break"]


# --------------------------------------------------------------------------
# The recompile limit
# --------------------------------------------------------------------------


def recompile_limit_name() -> str:
    """Name of Dynamo's per-code-object recompile limit config.

    ``recompile_limit`` from torch 2.8; ``cache_size_limit`` in 2.6 (and an alias later).
    """
    import torch._dynamo.config as dynamo_config

    return "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"


def recompile_limit_setting() -> str:
    """The recompile limit as a user sets it, for messages: ``torch._dynamo.config.recompile_limit``."""
    return f"torch._dynamo.config.{recompile_limit_name()}"


# the call a message advises for a dimension that varies (Dynamo has no public alias of it)
MARK_DYNAMIC_CALL = "torch._dynamo.mark_dynamic(x, dim)"


def recompile_limit() -> int:
    import torch._dynamo.config as dynamo_config

    return int(getattr(dynamo_config, recompile_limit_name()))


def recompile_limit_logger_names() -> tuple[str, ...]:
    """Loggers that carry the portable "hit config.recompile_limit" WARNING (all versions)."""
    return ("torch._dynamo.convert_frame",)


# --------------------------------------------------------------------------
# Recompile reasons: the log artifacts and guard_failures
# --------------------------------------------------------------------------

# Artifact names of Dynamo's "Recompiling function ..." log, and the loggers that
# carry it: "recompiles_verbose" takes over from "recompiles" when the user enabled
# it (2.4+ both).  The loggers are named "<module>.__<artifact>".
RECOMPILE_LOG_ARTIFACTS = ("recompiles", "recompiles_verbose")


def recompile_log_names() -> tuple[str, ...]:
    """Loggers that carry one DEBUG record per recompile (``torch._dynamo.guards``, 2.4+)."""
    return tuple(f"torch._dynamo.guards.__{artifact}" for artifact in RECOMPILE_LOG_ARTIFACTS)


# Dynamo's graph-break log: one DEBUG record per graph break while the artifact is on,
# "Graph break [...] in user code at FILE:LINE" then "Reason: ..." (2.6) or
# "Graph Break Reason: ..." (2.8+); repeats say "(details suppressed)" or "(user stack
# suppressed ...)" but are logged all the same.
GRAPH_BREAK_LOG_ARTIFACT = "graph_breaks"


def graph_break_log_names() -> tuple[str, ...]:
    """Loggers that carry one DEBUG record per graph break (``torch._dynamo.symbolic_convert``, 2.4+)."""
    return (f"torch._dynamo.symbolic_convert.__{GRAPH_BREAK_LOG_ARTIFACT}",)


def is_recompile_log(logger_name: str) -> bool:
    """Whether a log record's logger is one of ``recompile_log_names()``."""
    return logger_name in recompile_log_names()


def log_artifact_enabled(name: str) -> bool:
    """Whether a TORCH_LOGS artifact is on; Dynamo checks this, not the logger level."""
    from torch._logging._internal import log_state

    # torch leaves LogState.is_artifact_enabled unannotated; it answers a bool (name in its artifact set)
    is_artifact_enabled: Callable[[str], bool] = log_state.is_artifact_enabled
    return is_artifact_enabled(name)


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


# code object -> what wrapped_target() found for it; weak, so a dropped code object takes its entry with it
_WRAPPED_TARGETS: weakref.WeakKeyDictionary[types.CodeType, tuple[str, str, int] | int | None] = (
    weakref.WeakKeyDictionary()
)


def wrapped_target(name: str, filename: str, line: int) -> tuple[str, str, int] | int | None:
    """The function a decorator's wrapper stands for, when Dynamo compiled the wrapper.

    ``(name, filename, line)`` names a code object Dynamo was asked to compile
    (``torch._dynamo.convert_frame.input_codes``, 2.0+, emptied by ``reset()``).  When
    the live functions whose ``__code__`` it is carry ``__wrapped__`` (a
    ``functools.wraps`` decorator), ``inspect.unwrap`` of each gives its target:

    - exactly one distinct target: ``(target __qualname__, its file, its first line)``;
    - several (one decorator applied to many functions, all sharing the wrapper's
      code): their number, since which of them this compile was for is not known;
    - otherwise (no such code among Dynamo's, no function with ``__wrapped__``,
      torch._dynamo never imported): None, and the wrapper's own name stands.

    Only closures are looked at (a ``functools.wraps`` wrapper calls its target
    through a free variable), and each code object once: ``gc.get_referrers`` walks
    every tracked object.  Codes seen before a ``reset_dynamo()`` are still found
    (weakly).  Imports nothing: without ``torch._dynamo`` loaded there is nothing
    Dynamo compiled.
    """
    code = _input_codes().get((name, filename, line)) or _FORMER_INPUT_CODES.get((name, filename, line))
    if code is None or not code.co_freevars:
        return None
    if code not in _WRAPPED_TARGETS:
        _WRAPPED_TARGETS[code] = _unwrapped_target_of(code)
    return _WRAPPED_TARGETS[code]


# (name, filename, first line) -> a code object Dynamo was asked to compile before the last
# reset_dynamo(): the plugin resets between tests before it reads the test's compile times
_FORMER_INPUT_CODES: weakref.WeakValueDictionary[tuple[str, str, int], types.CodeType] = weakref.WeakValueDictionary()


def _input_codes() -> dict[tuple[str, str, int], types.CodeType]:
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    seen = getattr(getattr(convert_frame, "input_codes", None), "seen", None) or ()
    codes = (ref() for ref in list(seen))
    return {(code.co_name, code.co_filename, code.co_firstlineno): code for code in codes if code is not None}


def _remember_input_codes() -> None:
    _FORMER_INPUT_CODES.update(_input_codes())


def _unwrapped_target_of(code: types.CodeType) -> tuple[str, str, int] | int | None:
    targets: dict[int, Any] = {}
    for holder in gc.get_referrers(code):
        if isinstance(holder, types.FunctionType) and holder.__code__ is code and hasattr(holder, "__wrapped__"):
            try:
                target = inspect.unwrap(holder)
            except ValueError:  # a __wrapped__ cycle
                continue
            if target is not holder:
                targets[id(target)] = target
    if not targets:
        return None
    if len(targets) > 1:
        return len(targets)
    (target,) = targets.values()
    target_code = getattr(target, "__code__", None)
    if target_code is None:  # a builtin or a callable object: nothing to point at
        return None
    qualname = getattr(target, "__qualname__", None) or target_code.co_name
    return (str(qualname), target_code.co_filename, target_code.co_firstlineno)


# --------------------------------------------------------------------------
# Refusing compiles: error_on_recompile and the fail_on_recompile stance
# --------------------------------------------------------------------------


def has_fail_on_recompile_stance() -> bool:
    """``torch.compiler.set_stance("fail_on_recompile")`` exists (2.6+)."""
    import torch

    return hasattr(torch, "compiler") and hasattr(torch.compiler, "set_stance")


def error_on_recompile() -> contextlib.AbstractContextManager[None]:
    """Make the first recompile of any function raise ``torch._dynamo.exc.RecompileError`` (2.4+).

    First compiles pass; the error message holds the guard-failure reasons.
    """
    import torch._dynamo.config as dynamo_config

    # torch's config-module stub leaves patch() unannotated; it returns a ContextDecorator
    patched: contextlib.AbstractContextManager[None] = dynamo_config.patch(error_on_recompile=True)
    return patched


def fail_on_any_compile() -> contextlib.AbstractContextManager[None]:
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

        # set_stance() has no return annotation; it returns a context manager (and decorator) of the stance
        stance: contextlib.AbstractContextManager[None] = torch.compiler.set_stance("fail_on_recompile")
        return stance
    return error_on_recompile()


def compile_refusal_state() -> tuple[Any, bool]:
    """What decides now whether Dynamo refuses a compile: the compile stance and ``config.error_on_recompile``.

    The stance is ``torch._dynamo.eval_frame._stance`` (2.6-2.14.1; None where torch has
    none), a dataclass replaced on every ``set_stance``; ``torch._dynamo.reset()`` keeps
    both.  A block that refuses compiles compares this on leaving with what it was
    once the block had set its own: a body that set a stance or the flag inside and
    left it changed was not refused after that.
    """
    import torch._dynamo.config as dynamo_config
    from torch._dynamo import eval_frame

    return (getattr(eval_frame, "_stance", None), bool(dynamo_config.error_on_recompile))


def is_recompile_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is Dynamo refusing a (re)compile under error_on_recompile or the stance."""
    from torch._dynamo.exc import RecompileError

    if isinstance(exc, RecompileError):
        return True
    return isinstance(exc, RuntimeError) and "stance is 'fail_on_recompile'" in str(exc)


@functools.cache
def stance_refusal_names_the_frame() -> bool:
    """Whether the ``fail_on_recompile`` stance's error names the function it refused.

    Probed by handing the stance's callback (``eval_frame._callback_from_stance``,
    2.6-2.14) this very frame, which has no compiled entries and no tensors, so
    nothing is compiled or recorded:

    - 2.6: the callback raises ``RuntimeError("Detected recompile when torch.compile
      stance is 'fail_on_recompile'")`` for any frame, first compiles of helpers
      included, naming none: False (``fail_on_any_compile()`` then uses
      ``error_on_recompile``);
    - 2.8-2.14 (the 2.8-era rewrite): the callback looks at the frame, lets frames
      Dynamo would skip (and frames without tensors) through, and otherwise raises
      that RuntimeError with ``"function name: '...'"`` (plus the guard failures from
      2.11): True.

    Only that RuntimeError is taken as an answer; any other error propagates, so a
    ``no_compiles()`` block never quietly weakens from "no compile" to "no recompile".
    """
    import sys

    import torch
    from torch._dynamo import eval_frame

    choose = getattr(eval_frame, "_callback_from_stance", None)
    if choose is None or not has_fail_on_recompile_stance():
        return False

    def unused_backend(*args: Any, **kwargs: Any) -> None:
        return None

    with torch.compiler.set_stance("fail_on_recompile"):
        refuse = choose(unused_backend)
    try:
        refuse(sys._getframe(), None, None, None)
    except RuntimeError as exc:
        if "Detected recompile" not in str(exc):
            raise
        return "function name: 'stance_refusal_names_the_frame'" in str(exc)
    # It let this frame through (no tensors in it): it looks at frames, so it names them.
    return True


# --------------------------------------------------------------------------
# Tracing with Dynamo (piecewise): dynamic dims, its errors, backends, the trace's guards
# --------------------------------------------------------------------------


def mark_dynamic(tensor: torch.Tensor, dim: int) -> None:
    """``torch._dynamo.mark_dynamic``: trace ``dim`` of ``tensor`` as a symbol (2.4+)."""
    import torch._dynamo

    torch._dynamo.mark_dynamic(tensor, dim)


def backend_compiler_failed_type() -> type[BaseException]:
    """``torch._dynamo.exc.BackendCompilerFailed`` (2.4-2.14): a backend raised while compiling.

    The backend's own exception is its ``inner_exception``.  For an ``except`` clause:
    ``except compat.backend_compiler_failed_type() as exc:``.
    """
    from torch._dynamo.exc import BackendCompilerFailed

    return BackendCompilerFailed


def unsupported_type() -> type[BaseException]:
    """``torch._dynamo.exc.Unsupported`` (2.4-2.14): what Dynamo raises on a graph break under
    ``fullgraph=True``; ``UserError`` (``is_shape_specialization_error()``) is a subclass."""
    from torch._dynamo.exc import Unsupported

    return Unsupported


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


def lookup_backend(name: str) -> Any:
    """The compiler function registered under a ``torch.compile`` backend name (``torch._dynamo.lookup_backend``)."""
    from torch._dynamo import lookup_backend as lookup

    return lookup(name)


def tracing_shape_guards() -> list[Any]:
    """The guards of the ShapeEnv of the trace in progress (empty outside a trace).

    The trace's context is ``torch._guards.TracingContext.try_get()`` (2.4-2.14); its
    ``fake_mode.shape_env.guards`` are ``ShapeGuard`` objects with an ``expr``.
    """
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    shape_env = getattr(getattr(context, "fake_mode", None), "shape_env", None)
    return list(getattr(shape_env, "guards", None) or [])
