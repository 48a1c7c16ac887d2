"""Resets of torch's compile and logging state inside a watched block, seen and answered.

A test body may undo, halfway through a watch, what the watch installed:

* ``torch._dynamo.reset()`` (``torch.compiler.reset()`` calls it by that name; read
  in 2.13 and 2.14.1) empties Dynamo's callback lists (``callback_handler.clear()``,
  where a tree watch's CUDAGRAPH_RECORDING callback lives), its guard-failure table
  and its table of compiled codes, and shuts down this thread's cudagraph trees
  (2.13: where CUDA is available; 2.14: where CUDA was initialised), so the next
  tree manager numbers its functions from 0 again.  It keeps Dynamo's ``counters``,
  the compilation metrics, the logging state, configs, the compile stance and
  class attributes (the tree call meter's patches).
* ``torch._logging.set_logs(...)`` forgets every TORCH_LOGS setting (the artifacts a
  watch turned on with them) and re-initialises torch's loggers (``_init_logs``):
  levels and ``propagate`` flags go back to torch's defaults; handlers and filters
  that are not torch's own stay.

While at least one watch subscribes, ``torch._dynamo.reset`` and
``torch._logging._internal._init_logs`` (what every ``set_logs`` call ends in,
however ``set_logs`` was imported) are wrapped, and each subscriber is called
around them with the frame that called them (from which the library finds the
user's line).  The wrapper is taken off when the last subscriber leaves, unless
something wrapped the function again over it: then it stays in that chain and
passes calls straight through.  A reset reached by another name (a ``reset``
imported from ``torch._dynamo`` before the watch began, ``callback_handler.clear()``
itself) is not seen, so each watch also checks that what it installed is still
there, and says it lost sight where it is not.

:class:`LoggerTap` is a handler on one of torch's loggers with the level and
propagation it needs, applied again after each ``set_logs`` and put back as the
last ``set_logs`` left it.

Nothing here imports torch until a subscription is made.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["LoggerTap", "ResetSubscription", "on_dynamo_reset", "on_set_logs", "set_logs_emptied_artifacts"]

# called with the frame that called the wrapped function (None where there is none)
FrameCallback = Callable[[Any], None]


class ResetSubscription:
    """One watch's callbacks around a wrapped torch function; :meth:`close` ends them.

    ``errors``: what a callback raised (``"TypeError: ..."``), one entry each time.
    The user's call goes on regardless; a watch reads this and says it lost sight.
    ``calls``: how often the wrapped function ran while subscribed.
    """

    def __init__(self, wrap: _Wrap, before: FrameCallback | None, after: FrameCallback | None):
        self._wrap = wrap
        self.before = before
        self.after = after
        self.errors: list[str] = []
        self.calls = 0

    def _call(self, callback: FrameCallback | None, frame: FrameType | None) -> None:
        if callback is None:
            return
        try:
            callback(frame)
        except Exception as exc:  # the user's reset must not break over a watch: the watch reads `errors`
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._wrap.unsubscribe(self)


class _Wrap:
    """One module function of torch, wrapped while anyone subscribes."""

    def __init__(self, module_name: str, name: str, prelude: Callable[[], None] | None = None):
        self.module_name = module_name
        self.name = name
        # run before the function, whoever subscribes
        self.prelude = prelude
        self.lock = threading.RLock()
        self.subscribers: list[ResetSubscription] = []
        self.original: Any = None
        self.wrapper: Any = None

    def subscribe(self, before: FrameCallback | None, after: FrameCallback | None) -> ResetSubscription | None:
        with self.lock:
            if self.wrapper is None and not self._install():
                return None
            subscription = ResetSubscription(self, before, after)
            self.subscribers.append(subscription)
            return subscription

    def unsubscribe(self, subscription: ResetSubscription) -> None:
        with self.lock:
            self.subscribers = [s for s in self.subscribers if s is not subscription]
            self.take_off()

    def take_off(self) -> None:
        """Put the function back where nobody subscribes and the wrapper is still the module's."""
        with self.lock:
            if self.subscribers or self.wrapper is None:
                return
            module = sys.modules.get(self.module_name)
            if module is not None and module.__dict__.get(self.name) is self.wrapper:
                setattr(module, self.name, self.original)
                self.original = self.wrapper = None
            # else something wrapped it again over ours: ours stays in that chain, passes calls through,
            # and takes itself off at its first call once it is the module's again

    def _install(self) -> bool:
        try:
            module = importlib.import_module(self.module_name)
        except ImportError:
            return False
        original = module.__dict__.get(self.name)
        if not callable(original):
            return False
        wrap = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if wrap.wrapper is not wrapper:  # an earlier install, left in someone else's chain
                return original(*args, **kwargs)
            subscribers = list(wrap.subscribers)
            if not subscribers:
                wrap.take_off()
                return original(*args, **kwargs)
            frame = sys._getframe(1)
            try:
                if wrap.prelude is not None:
                    try:
                        wrap.prelude()
                    except Exception:  # only names are at stake (a label naming a wrapper), never a count
                        pass
                for subscription in subscribers:
                    subscription.calls += 1
                    subscription._call(subscription.before, frame)
                try:
                    return original(*args, **kwargs)
                finally:
                    for subscription in subscribers:
                        subscription._call(subscription.after, frame)
            finally:
                del frame  # no reference cycle through the caller's locals

        setattr(module, self.name, wrapper)
        self.original, self.wrapper = original, wrapper
        return True


def _remember_compiled_codes() -> None:
    # so that a function label still names a decorator's target after the body's own reset,
    # as it does after the plugin's reset_dynamo()
    from .dynamo import _remember_input_codes

    _remember_input_codes()


_DYNAMO_RESET = _Wrap("torch._dynamo", "reset", prelude=_remember_compiled_codes)
_INIT_LOGS = _Wrap("torch._logging._internal", "_init_logs")


def on_dynamo_reset(
    before: FrameCallback | None = None, after: FrameCallback | None = None
) -> ResetSubscription | None:
    """Call ``before(frame)`` and ``after(frame)`` around each ``torch._dynamo.reset()`` until ``close()``.

    ``frame`` is the frame that called ``reset`` (``torch.compiler.reset``'s own,
    for a call through it).  ``after`` runs even where the reset raised.  None where
    this torch has no ``torch._dynamo.reset`` to wrap.
    """
    return _DYNAMO_RESET.subscribe(before, after)


def on_set_logs(after: FrameCallback) -> ResetSubscription | None:
    """Call ``after(frame)`` right after each ``torch._logging.set_logs()`` re-initialises torch's loggers.

    Wraps ``torch._logging._internal._init_logs``, which ``set_logs`` calls last
    (2.4-2.14.1; a ``set_logs`` ignored because ``TORCH_LOGS`` is set calls nothing).
    None where this torch has no such function.
    """
    return _INIT_LOGS.subscribe(None, after)


def set_logs_emptied_artifacts(frame: Any) -> bool:
    """Whether the re-initialisation called from ``frame`` (an :func:`on_set_logs` callback's) was a ``set_logs()``.

    ``set_logs`` empties the artifact set and turns on only what it was given before
    it calls ``_init_logs`` (from its nested ``_set_logs``, 2.4-2.14.1), so an artifact
    on after it is the caller's wish.  torch's other callers of ``_init_logs``
    (``torch.testing._internal.logging_utils``) keep the artifact set or replace it.
    """
    internal = sys.modules.get("torch._logging._internal")
    code = getattr(frame, "f_code", None)
    if internal is None or code is None:
        return False
    return code.co_filename == getattr(internal, "__file__", None) and code.co_name in ("set_logs", "_set_logs")


class LoggerTap:
    """A handler (or filter) on one of torch's loggers, the level it needs, and its echo kept off stderr where asked.

    :meth:`apply` remembers the logger's level and ``propagate`` flag as they are
    now, adds the handler or filter (once), lowers the level to ``level`` where the logger
    would drop such records, and stops propagation where ``keep_off_stderr()``
    (asked before the level is touched) says so.  :meth:`restore` takes the handler
    off and puts back what :meth:`apply` found.  After a ``torch._logging.set_logs()``
    (see :func:`on_set_logs`) each logger torch registers (its logs, artifact and
    child loggers, the trace logger) has the level and flag that call gave it:
    :meth:`apply` then takes those as the ones to put back; on a logger torch does
    not reset, what it found the first time stands.
    """

    def __init__(
        self,
        logger: logging.Logger,
        handler: logging.Handler | None,
        level: int,
        keep_off_stderr: Callable[[], bool] | None = None,
        log_filter: logging.Filter | None = None,
    ):
        self.logger = logger
        self.handler = handler
        self.level = level
        self.keep_off_stderr = keep_off_stderr
        self.log_filter = log_filter
        # (level, propagate) as found before the tap, or as the last set_logs() left them
        self._found: tuple[int, bool] | None = None

    def apply(self) -> None:
        logger = self.logger
        keep_off = self.keep_off_stderr() if self.keep_off_stderr is not None else False
        if self._found is None or _set_by_torch_logging(logger.name):
            self._found = (logger.level, logger.propagate)
        if self.handler is not None and self.handler not in logger.handlers:
            logger.addHandler(self.handler)
        if self.log_filter is not None and self.log_filter not in logger.filters:
            logger.addFilter(self.log_filter)
        if not logger.isEnabledFor(self.level):
            logger.setLevel(self.level)
        if keep_off:
            logger.propagate = False

    def intact(self) -> bool:
        """Whether the handler (or filter) is still on the logger and gets records of its level."""
        on = self.handler in self.logger.handlers if self.handler is not None else True
        if self.log_filter is not None:
            on = on and self.log_filter in self.logger.filters
        return on and self.logger.isEnabledFor(self.level)

    def untapped_level(self) -> int:
        """The level the logger would pass records at without the tap: its own as found, else its parent's."""
        found = self._found[0] if self._found is not None else self.logger.level
        if found != logging.NOTSET or self.logger.parent is None:
            return found
        return self.logger.parent.getEffectiveLevel()

    def restore(self) -> None:
        if self.handler is not None:
            self.logger.removeHandler(self.handler)
        if self.log_filter is not None:
            self.logger.removeFilter(self.log_filter)
        if self._found is not None:
            level, propagate = self._found
            self.logger.setLevel(level)
            self.logger.propagate = propagate
            self._found = None


def _set_by_torch_logging(name: str) -> bool:
    """Whether ``set_logs()`` sets this logger's level and ``propagate`` (``_reset_logs``/``_init_logs``, 2.4-2.14.1)."""
    internal = sys.modules.get("torch._logging._internal")
    registry = getattr(internal, "log_registry", None)
    if registry is None:
        return False
    if name == getattr(getattr(internal, "trace_log", None), "name", None):
        return True
    for names in ("get_log_qnames", "get_artifact_log_qnames", "get_child_log_qnames"):
        read = getattr(registry, names, None)
        if callable(read) and name in read():
            return True
    return False
