"""A test's failure in one line: what a CI annotation and the job summary's list of failures say.

The plugin's failure messages are several lines: a headline, then the problems one
per line, tables, what to try.  One line keeps the headline (without pytest's
``Failed:`` and the exception's module path), the first problem where the headline
only counts them, and for a recompile check the first failed guard::

    @pytest.mark.max_recompiles(0): Dynamo recompiled 1 time, expected at most 0. First: 0/0: tensor 'x' dtype
    mismatch. expected Float, actual Double

Reads a record as the report holds it (a mapping); nothing here imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .plain_text import clip

__all__ = ["CAUSE_WIDTH", "crash_line", "failure_cause", "failure_rule", "failure_site"]

# a cause longer than this is cut: one line is the point, the report keeps the whole message
CAUSE_WIDTH = 300
# "pytest_cudagraph.errors.StaleGraphError: ..." -> "StaleGraphError: ..."
_MODULE_PATH = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*: )")
# a problem listed right under the headline (not after a blank line: "what to try"): "  - fxgraph: no hit"
_BULLET = re.compile(r"^\s+- (?P<text>\S.*)$")
_RECOMPILE_RULES = ("max_recompiles", "recompiles")
# the probe's directory a compile_cache headline names: the message keeps it, one line has no room for it
_CACHE_DIR = re.compile(r"; cache dir \S+")
# the exception's name before the verdict: "InvariantViolation: pool check ..." (pytest's -r line has no room for it)
_EXCEPTION_NAME = re.compile(r"^[A-Z][A-Za-z]*(?:Error|Violation|Exception): ")


def _failure(record: Mapping[str, Any]) -> Mapping[str, Any]:
    failure = record.get("failure")
    return failure if isinstance(failure, Mapping) else {}


def failure_rule(record: Mapping[str, Any]) -> str | None:
    """The plugin's check that failed the test (``max_recompiles``, ``capture``, ...); None for the test's own failure."""
    rule = _failure(record).get("rule")
    return rule if isinstance(rule, str) and rule else None


def failure_site(record: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(file, line)`` of the user's line the failure points at, where the plugin found one."""
    failure = _failure(record)
    file, line = failure.get("file"), failure.get("line")
    if isinstance(file, str) and file and isinstance(line, int) and not isinstance(line, bool) and line > 0:
        return file, line
    return None


def failure_cause(record: Mapping[str, Any], width: int = CAUSE_WIDTH) -> str:
    """The failure in one line of at most ``width`` characters; ``""`` for a record that did not fail."""
    message = _failure(record).get("message")
    if not isinstance(message, str) or not message.strip():
        return ""
    lines = message.strip().splitlines()
    head = _headline(lines[0])
    listed = lines[1 : next((i for i, line in enumerate(lines) if i and not line.strip()), len(lines))]
    at = next((i for i, line in enumerate(listed) if _BULLET.match(line)), len(listed))
    bullet = listed[at].strip()[2:] if at < len(listed) else None
    if bullet is not None and bullet.endswith(":"):  # it introduces the lines under it: the fact is there
        bullet = f"{bullet} {_nested_fact(listed[at:])}".rstrip()
    if bullet is not None and bullet not in head:
        head = f"{head} {bullet}" if head.endswith(".") else f"{head.rstrip(':')}: {bullet}"
    if failure_rule(record) in _RECOMPILE_RULES:
        first = _first_recompile_reason(record)
        if first and first not in head:
            head = f"{head} First: {first}" if head.endswith(".") else f"{head}; first: {first}"
    return clip(head, width)


def crash_line(record: Mapping[str, Any]) -> str:
    """The one line for pytest's ``-r`` summary: the cause's first words first, the check's name moved to the end.

    The exception's name goes too (``InvariantViolation:``): the test's failure section shows it.

    pytest prints it after the test's id, cut to the terminal's width (80 columns in
    most CI logs): ``the traced graph differs between the cold and the warm pass
    (@pytest.mark.compile_cache(mode='inprocess')): ... a constant: 1.0 -> 2.0`` reads
    ``the traced graph differs between the cold and the warm pass: ... a constant: 1.0
    -> 2.0 (@pytest.mark.compile_cache(mode='inprocess'))``.
    """
    cause = failure_cause(record, width=10**6)
    head = _headline(cause and str(_failure(record)["message"]).strip().splitlines()[0])
    check = _closing_parenthetical(head)
    if check and cause != head and cause.startswith(head):
        cause = f"{cause[: len(head) - len(check)]}{cause[len(head) :]}{check}"
    return clip(_EXCEPTION_NAME.sub("", cause), CAUSE_WIDTH)


def _headline(line: str) -> str:
    """A message's first line without pytest's ``Failed:``, the exception's module path, and the probe's directory."""
    return _CACHE_DIR.sub("", _MODULE_PATH.sub("", line.strip().removeprefix("Failed: ").strip()))


def _closing_parenthetical(text: str) -> str:
    """The parenthesised part that ends ``text`` (`` (@pytest.mark.x(0))``), with the space before it; else ``""``."""
    if not text.endswith(")"):
        return ""
    depth = 0
    for at in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[at], 0)
        if depth == 0:
            return text[at - 1 :] if at > 0 and text[at - 1] == " " else ""
    return ""


def _nested_fact(lines: list[str]) -> str:
    """What a problem ending on a colon introduces, from the lines indented under it: the fact to fix.

    A changed graph's code (``- mul = sin * 1.0``, ``+ mul = sin * 2.0``, ``a constant:
    1.0 -> 2.0``) is told by its summary line where there is one, else by its first
    removed and added lines.
    """
    depth = len(lines[0]) - len(lines[0].lstrip())
    nested = []
    for line in lines[1:]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        nested.append(line.strip())
    facts = [line for line in nested if not line.startswith(("- ", "+ ", "... "))]
    if facts:
        return "; ".join(facts)
    changed = [next((line[2:] for line in nested if line.startswith(sign)), "") for sign in ("- ", "+ ")]
    return " -> ".join(f"`{line}`" for line in changed if line)


def _first_recompile_reason(record: Mapping[str, Any]) -> str | None:
    """The first failed guard the record holds: a limit hit's first (the reason the check fails), else a recompile's."""
    recompiles = record.get("recompiles")
    if not isinstance(recompiles, Mapping):
        return None
    events = [event for event in recompiles.get("events") or () if isinstance(event, Mapping)]
    for wanted in (lambda event: event.get("limit_hit"), lambda event: True):
        for event in events:
            reasons = event.get("reasons")
            if wanted(event) and isinstance(reasons, list) and reasons and isinstance(reasons[0], str):
                return reasons[0]
    reasons = recompiles.get("reasons")
    return reasons[0] if isinstance(reasons, list) and reasons and isinstance(reasons[0], str) else None
