"""Dynamo's recompile log, tapped and read: the records a recompile watch counts.

Dynamo logs one "Recompiling function ..." record per recompile on the
``recompiles`` artifact logger, synchronously, right after it appended that
recompile's reasons to its guard-failure table, and a WARNING when a function hits
the recompile limit.  :class:`DynamoLogTap` turns on just that artifact (never
torch's ``set_logs``, which would replace the user's TORCH_LOGS), keeps its
echo off the user's stderr unless they asked for it, hands each record to the
watch, and puts every logger back as it was.  The functions below read the parts
of a record the watch needs.
"""

from __future__ import annotations

import logging
import re
import textwrap
from collections.abc import Callable
from typing import Any

from .. import _compat as compat
from .call_site import relative_path
from .guard_failures import flat_reason

RECOMPILE_HEAD = re.compile(r"Recompiling function (?P<name>.+?) in (?P<file>.+):(?P<line>\d+)\s*\n")
LIMIT_HIT = re.compile(r"hit config\.(?P<limit>\w+) \((?P<value>\d+)\)")
LIMIT_FUNCTION = re.compile(r"function: '(?P<name>.+?)' \((?P<file>.+):(?P<line>\d+)\)")
GRAPH_BREAK_AT = re.compile(
    r"in user code at (?P<file>.+?):(?P<line>\d+)\n(?:Graph Break )?Reason: (?P<reason>.*?)(?:\nUser code traceback:|\Z)",
    re.S,
)
LIMIT_REASON = re.compile(r"last reason: (?P<reason>.*?)(?:\nTo log all recompilation reasons|\Z)", re.S)


def function_label(name: str, filename: str, line: int | str) -> str:
    """``"name (file:line)"``, the file relative to the working directory when inside it.

    Relative paths keep report keys equal between checkouts in different places.
    When the code object is a decorator's wrapper (``functools.wraps``, so it has
    ``__wrapped__``), what Dynamo compiled is the wrapper but the user wrote the
    target: the label names the target, ``"Model.forward (model.py:12)"``.  When the
    one wrapper's code stands for several functions (a decorator applied to many),
    which one this compile was for is not known: the wrapper keeps its own label
    and says so, ``"wrapper (deco.py:5, wrapping one of 3 functions)"``.  See
    ``compat.wrapped_target``.
    """
    target = compat.wrapped_target(name, filename, int(line)) if str(line).isdigit() else None
    if isinstance(target, tuple):
        name, filename, line = target
    elif isinstance(target, int):
        return f"{name} ({relative_path(filename)}:{line}, wrapping one of {target} functions)"
    return f"{name} ({relative_path(filename)}:{line})"


def recompiled_function(message: str) -> str:
    """The function a "Recompiling function ..." record names."""
    head = RECOMPILE_HEAD.search(message)
    return function_label(head["name"], head["file"], head["line"]) if head else "<unknown function>"


def recompiled_code(message: str) -> tuple[str, str, int] | None:
    """``(name, filename, first line)`` of the code object a "Recompiling function ..." record names."""
    head = RECOMPILE_HEAD.search(message)
    return (head["name"], head["file"], int(head["line"])) if head else None


def limit_hit_description(message: str) -> tuple[str, str]:
    """``(function, readable line)`` of a recompile-limit WARNING."""
    limit = LIMIT_HIT.search(message)
    where = LIMIT_FUNCTION.search(message)
    why = LIMIT_REASON.search(message)
    function = function_label(where["name"], where["file"], where["line"]) if where else "<unknown function>"
    # the reason's first line without Dynamo's comment and user stack
    reason = flat_reason(why["reason"]) if why and why["reason"].strip() else "unknown"
    text = (
        f"{function} hit config.{limit['limit']} ({limit['value']}); Dynamo then ran it eagerly "
        f"without compiling, silently; last reason: {reason}"
    )
    return function, text


def graph_break_description(message: str) -> tuple[str, str | None] | None:
    """``(reason, "file:line")`` of a graph-break record: one line of reason, where in the compiled code it broke.

    The reason is torch's first line with its explanation when it gives one:
    "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print` ...".
    """
    match = GRAPH_BREAK_AT.search(message)
    if match is None:
        return None
    lines = [line.strip() for line in match["reason"].strip().splitlines() if line.strip()]
    # 2.8+ opens with "Encountered graph break when attempting to trace CALL: ...:"
    if len(lines) > 1 and lines[0].startswith("Encountered graph break when attempting to trace"):
        lines = lines[1:]
    reason = lines[0] if lines else "unknown"
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), None)
    if explanation:
        reason = f"{reason.rstrip(':')}: {explanation.removeprefix('Explanation:').strip()}"
    return reason, f"{relative_path(match['file'])}:{match['line']}"


def reasons_from_message(message: str) -> list[str]:
    """The "- reason" lines of Dynamo's recompile message (used when guard_failures had none)."""
    _, _, tail = message.partition("guard failure(s):")
    reasons: list[str] = []
    for line in textwrap.dedent(tail).splitlines():
        stripped = line.strip()
        if stripped.startswith("- "):
            reasons.append(stripped[2:])
    return reasons


def function_from_refusal(message: str) -> str:
    """The function named by Dynamo's refusal to compile (error_on_recompile or the fail_on_recompile stance)."""
    head = RECOMPILE_HEAD.search(message)
    if head:
        return function_label(head["name"], head["file"], head["line"])
    stance = re.search(
        r"filename: '(?P<file>.+?)', function name: '(?P<name>.+?)', line number: (?P<line>\d+)", message
    )
    if stance:
        return function_label(stance["name"], stance["file"], stance["line"])
    return "a compiled function"


class _Handler(logging.Handler):
    def __init__(
        self,
        on_recompile: Callable[[str], None],
        on_limit_hit: Callable[[str], None],
        on_graph_break: Callable[[str], None] | None,
    ):
        super().__init__(level=logging.DEBUG)
        self.on_recompile = on_recompile
        self.on_limit_hit = on_limit_hit
        self.on_graph_break = on_graph_break

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a broken record must never break the user's compile
            return
        if compat.is_recompile_log(record.name):
            self.on_recompile(message)
        elif self.on_graph_break is not None and record.name in compat.graph_break_log_names():
            self.on_graph_break(message)
        elif record.levelno >= logging.WARNING and LIMIT_HIT.search(message):
            self.on_limit_hit(message)


class _KeptToTheTap(logging.Filter):
    """On a logger the tap turned on: every record to the taps, none on to anyone else's handler below ``shown_from``.

    A logger's filter runs before any handler is called, so the records the tap
    turned on reach neither torch's stderr handler nor pytest's capture and
    ``caplog`` (pytest 9.2 attaches those to every logger that does not propagate,
    at each test phase, so they cannot just be kept out of the logger's parents).
    Records the logger showed before the tap (``shown_from`` up) go on as before.
    A record it stops still reaches the handlers of watches nested in this one
    (they found the artifact on, and attached a handler).
    """

    def __init__(self, logger: logging.Logger, handler: logging.Handler, shown_from: int):
        super().__init__()
        self.logger = logger
        self.handler = handler
        self.shown_from = shown_from

    def filter(self, record: logging.LogRecord) -> bool:
        shown = record.levelno >= self.shown_from
        taps = [self.handler]
        if not shown:  # the logger's own handlers will not be called: the nested watches' taps are, here
            taps += [handler for handler in self.logger.handlers if isinstance(handler, _Handler)]
        for tap in taps:
            if record.levelno >= tap.level:
                tap.handle(record)
        return shown


class DynamoLogTap:
    """While attached, every recompile record, recompile-limit WARNING and graph-break record goes to its callback."""

    def __init__(
        self,
        on_recompile: Callable[[str], None],
        on_limit_hit: Callable[[str], None],
        on_graph_break: Callable[[str], None] | None = None,
    ):
        self._handler = _Handler(on_recompile, on_limit_hit, on_graph_break)
        self._tap_graph_breaks = on_graph_break is not None
        self._restore: list[Callable[[], Any]] = []

    def attach(self) -> None:
        """Attach the handlers and turn on the recompile artifact, remembering how to undo it."""
        try:
            user_asked = any(compat.log_artifact_enabled(a) for a in compat.RECOMPILE_LOG_ARTIFACTS)
            if not user_asked:
                # Dynamo formats the record only when the artifact is on.
                artifact = compat.RECOMPILE_LOG_ARTIFACTS[0]
                compat.set_log_artifact(artifact, True)
                self._restore.append(lambda: compat.set_log_artifact(artifact, False))
            for name in compat.recompile_log_names():
                # turned on here, the artifact's records were never the user's to see: all kept to the tap
                self._tap(logging.getLogger(name), logging.DEBUG, keep_off_stderr=not user_asked, hide_all=True)
            if self._tap_graph_breaks:
                self._turn_on(compat.GRAPH_BREAK_LOG_ARTIFACT, compat.graph_break_log_names())
            for name in compat.recompile_limit_logger_names():
                logger = logging.getLogger(name)
                # The user may have silenced Dynamo's warnings; the limit WARNING is still
                # needed, and kept from their stderr then.
                self._tap(logger, logging.WARNING, keep_off_stderr=not logger.isEnabledFor(logging.WARNING))
        except BaseException:
            self.detach()
            raise

    def _turn_on(self, artifact: str, logger_names: tuple[str, ...]) -> None:
        """Turn on one artifact unless the user did, tap its loggers, keep its echo off stderr unless asked."""
        user_asked = compat.log_artifact_enabled(artifact)
        if not user_asked:
            compat.set_log_artifact(artifact, True)
            self._restore.append(lambda: compat.set_log_artifact(artifact, False))
        for name in logger_names:
            self._tap(logging.getLogger(name), logging.DEBUG, keep_off_stderr=not user_asked, hide_all=True)

    def _tap(self, logger: logging.Logger, level: int, keep_off_stderr: bool, hide_all: bool = False) -> None:
        """Hand ``logger``'s records from ``level`` up to the tap.

        ``keep_off_stderr``: what the tap turned on stays the tap's (``_KeptToTheTap``):
        every record where ``hide_all`` (an artifact the user left off), else those
        below the level the logger showed before.
        """
        old_level, old_propagate = logger.level, logger.propagate
        kept: _KeptToTheTap | None = None
        if keep_off_stderr:
            shown_from = logging.CRITICAL + 1 if hide_all else logger.getEffectiveLevel()
            kept = _KeptToTheTap(logger, self._handler, shown_from)
            logger.addFilter(kept)
            logger.propagate = False
        else:
            logger.addHandler(self._handler)
        if not logger.isEnabledFor(level):
            logger.setLevel(level)

        def restore() -> None:
            if kept is not None:
                logger.removeFilter(kept)
            else:
                logger.removeHandler(self._handler)
            logger.setLevel(old_level)
            logger.propagate = old_propagate

        self._restore.append(restore)

    def add_undo(self, undo: Callable[[], Any]) -> None:
        """Something else to undo on detach (the watch's error_on_recompile patch)."""
        self._restore.append(undo)

    def detach(self) -> None:
        """Put everything back, in reverse order; the first error is raised after the rest is restored."""
        errors = []
        while self._restore:
            undo = self._restore.pop()
            try:
                undo()
            except Exception as exc:  # keep restoring the rest
                errors.append(exc)
        if errors:
            raise errors[0]
