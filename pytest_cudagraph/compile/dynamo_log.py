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
    assert limit is not None  # the tap keeps a WARNING as a limit hit only where LIMIT_HIT matches it
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
    """While attached, every recompile record, recompile-limit WARNING and graph-break record goes to its callback.

    A ``torch._logging.set_logs()`` while attached turns every artifact off and puts
    the loggers' levels and ``propagate`` flags back to torch's defaults: the tap
    then takes what that call set as the user's wish and applies itself again
    (``_compat.on_set_logs``), so the recompiles after it are counted too.  Where
    the artifact is off or a handler gone at :meth:`detach` all the same, ``lost_sight``
    says so in one sentence.
    """

    def __init__(
        self,
        on_recompile: Callable[[str], None],
        on_limit_hit: Callable[[str], None],
        on_graph_break: Callable[[str], None] | None = None,
    ):
        self._handler = _Handler(on_recompile, on_limit_hit, on_graph_break)
        self._tap_graph_breaks = on_graph_break is not None
        self._restore: list[Callable[[], Any]] = []
        self._taps: list[Any] = []
        # artifact -> whether the tap turned it on (and turns it off on detach)
        self._owned: dict[str, bool] = {}
        self._user_asked: dict[str, bool] = {}
        self._logs_sight: Any = None
        self.lost_sight: str | None = None

    def attach(self) -> None:
        """Attach the handlers and turn on the recompile artifact, remembering how to undo it."""
        self.lost_sight = None
        self._user_asked.clear()
        try:
            self._claim_artifacts()
            for name in compat.recompile_log_names():
                self._tap(logging.getLogger(name), logging.DEBUG, compat.RECOMPILE_LOG_ARTIFACTS[0])
            if self._tap_graph_breaks:
                for name in compat.graph_break_log_names():
                    self._tap(logging.getLogger(name), logging.DEBUG, compat.GRAPH_BREAK_LOG_ARTIFACT)
            for name in compat.recompile_limit_logger_names():
                logger = logging.getLogger(name)
                # The user may have silenced Dynamo's warnings; the limit WARNING is still
                # needed, and kept from their stderr then.
                self._add(compat.LoggerTap(logger, self._handler, logging.WARNING, _silenced(logger)))
            self._logs_sight = compat.on_set_logs(after=self._apply_again)
        except BaseException:
            self.detach()
            raise

    def _artifact_groups(self) -> list[tuple[str, ...]]:
        """The artifacts the tap needs, each group led by the one it turns on where the user has none on."""
        groups: list[tuple[str, ...]] = [compat.RECOMPILE_LOG_ARTIFACTS]
        if self._tap_graph_breaks:
            groups.append((compat.GRAPH_BREAK_LOG_ARTIFACT,))
        return groups

    def _claim_artifacts(self, emptied: bool = True) -> None:
        """Turn on each artifact the user has not (Dynamo formats a record only when it is on).

        After a ``set_logs()`` (``emptied``) an artifact that is on is the user's.
        After another re-initialisation of torch's logging, an artifact the tap had
        turned on and that is still on stays the tap's to turn off.
        """
        for group in self._artifact_groups():
            if not emptied and self._owned.get(group[0]) and compat.log_artifact_enabled(group[0]):
                continue
            user_asked = any(compat.log_artifact_enabled(a) for a in group)
            self._user_asked[group[0]] = user_asked
            if not user_asked:
                compat.set_log_artifact(group[0], True)
            self._owned[group[0]] = not user_asked

    def _tap(self, logger: logging.Logger, level: int, artifact: str) -> None:
        """Tap one artifact logger; its echo stays off stderr unless the user turned the artifact on.

        An artifact the tap turned on was never the user's to see: a filter hands its
        records to the tap and passes none on (``_KeptToTheTap``), so neither torch's
        stderr handler nor pytest's captured log and ``caplog`` show them, at any level.
        """
        if self._user_asked.get(artifact, False):
            self._add(compat.LoggerTap(logger, self._handler, level, lambda: False))
            return
        kept = _KeptToTheTap(logger, self._handler, logging.CRITICAL + 1)
        self._add(compat.LoggerTap(logger, None, level, lambda: True, log_filter=kept))

    def _add(self, tap: Any) -> None:
        self._taps.append(tap)
        tap.apply()

    def _apply_again(self, frame: Any) -> None:
        """After a ``set_logs()``: what it turned on is the user's; the rest is turned on again, and the taps applied."""
        self._claim_artifacts(emptied=compat.set_logs_emptied_artifacts(frame))
        for tap in self._taps:
            tap.apply()

    def add_undo(self, undo: Callable[[], Any]) -> None:
        """Something else to undo on detach (the watch's error_on_recompile patch)."""
        self._restore.append(undo)

    def _check_sight(self) -> None:
        if self.lost_sight is not None:
            return
        errors = self._logs_sight.errors if self._logs_sight is not None else []
        if errors:
            self.lost_sight = (
                f"recompiles after a torch._logging.set_logs() in the block could not be counted (tapping "
                f"Dynamo's log again failed: {errors[0]})"
            )
        elif not any(compat.log_artifact_enabled(a) for a in compat.RECOMPILE_LOG_ARTIFACTS):
            self.lost_sight = (
                "recompiles after Dynamo's recompiles log was turned off in the block by other means than "
                "torch._logging.set_logs() could not be counted"
            )
        elif not all(tap.intact() for tap in self._taps):
            self.lost_sight = (
                "recompiles after a handler of the watch was taken off Dynamo's loggers (or their records "
                "disabled) in the block could not be counted"
            )

    def detach(self) -> None:
        """Put everything back, in reverse order; the first error is raised after the rest is restored."""
        errors = []
        try:
            self._check_sight()
        except Exception as exc:  # raised after the rest is restored
            errors.append(exc)
        if self._logs_sight is not None:
            self._logs_sight.close()
            self._logs_sight = None
        while self._taps:
            try:
                self._taps.pop().restore()
            except Exception as exc:  # keep restoring the rest
                errors.append(exc)
        for artifact, owned in self._owned.items():
            if owned:
                try:
                    compat.set_log_artifact(artifact, False)
                except Exception as exc:
                    errors.append(exc)
        self._owned.clear()
        while self._restore:
            undo = self._restore.pop()
            try:
                undo()
            except Exception as exc:  # keep restoring the rest
                errors.append(exc)
        if errors:
            raise errors[0]


def _silenced(logger: logging.Logger) -> Callable[[], bool]:
    """Whether the logger would drop WARNINGs now: the tap's then stay off stderr."""
    return lambda: not logger.isEnabledFor(logging.WARNING)
