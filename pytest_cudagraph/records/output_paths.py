"""What an output of the plugin may be written over: only what the plugin wrote there before.

Every path the plugin writes (the run's report, ``merge -o``, ``startup
--report``, the HTML page of ``show --html``, the durations file of ``durations
-o``, the job summary it appends to) is given by a user, and a slip gives it a
file of something else: ``pytest --cudagraph-report test_q.py`` (the value
forgotten, so pytest takes the module as the report's path) ran the module and
replaced it with JSON.  One rule guards them all, checked before anything runs:

- a path that does not exist, an empty file (``mktemp``), or no regular file at
  all (``/dev/null``, a FIFO, ``/dev/stdout``: written into) may be written;
- an existing regular file may be replaced only if it reads as the same kind of
  output (``OUTPUT_KINDS``): a report of this plugin, its HTML page, pytest-split's
  durations; anything else (a test module, a config, a user's notes) is refused;
- the plugin layer refuses, besides, a path the run collects or was given to
  collect, whatever it holds (``plugin/startup.py``).

A refusal is one sentence naming the path, what it is, and the fix.  Reads at
most a few megabytes; imports no torch.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["DURATIONS", "HTML_GENERATOR", "HTML_PAGE", "OUTPUT_KINDS", "REPORT", "foreign_file", "refusal"]

REPORT, HTML_PAGE, DURATIONS = "report", "HTML page", "durations file"
# a JSON file is parsed to tell what it is only up to this size; a larger one is told by its first bytes
_PARSED_BYTES = 64 * 2**20
_HEAD_BYTES = 8192
_REPORT_HEAD = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"pytest-cudagraph/')
HTML_GENERATOR = '<meta name="generator" content="pytest-cudagraph">'


def _is_report(head: bytes, whole: Callable[[], object]) -> bool:
    if _REPORT_HEAD.match(head):
        return True
    data = whole()  # a report reformatted (jq -S puts "schema" later)
    return isinstance(data, dict) and str(data.get("schema", "")).startswith("pytest-cudagraph/")


def _is_html_page(head: bytes, whole: Callable[[], object]) -> bool:
    return HTML_GENERATOR.encode() in head or b"<title>pytest-cudagraph" in head


def _is_durations(head: bytes, whole: Callable[[], object]) -> bool:
    data = whole()
    return isinstance(data, dict) and all(
        isinstance(value, (int, float)) and not isinstance(value, bool) for value in data.values()
    )


# each kind of output, and how a file of that kind is told
OUTPUT_KINDS: dict[str, Callable[[bytes, Callable[[], object]], bool]] = {
    REPORT: _is_report,
    HTML_PAGE: _is_html_page,
    DURATIONS: _is_durations,
}


def foreign_file(path: str | os.PathLike[str], kind: str) -> str | None:
    """What the existing regular file at ``path`` is, if it is not a ``kind`` (``"a file that is not a report"``);
    None where writing a ``kind`` there loses nothing of another kind's."""
    try:
        info = os.stat(path)
    except OSError:
        return None  # nothing there yet (or a dangling link: a new file is made)
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return None
    try:
        with open(path, "rb") as file:
            head = file.read(_HEAD_BYTES)
    except OSError:
        return None  # unreadable: the write itself says what is wrong

    def whole() -> object:
        if info.st_size > _PARSED_BYTES:
            return None
        try:
            return json.loads(Path(path).read_bytes())
        except (OSError, ValueError, RecursionError):
            return None

    if OUTPUT_KINDS[kind](head, whole):
        return None
    what = "a Python module" if str(path).endswith(".py") else "a file"
    return f"{what} that is not a {_kind_words(kind)}"


def _kind_words(kind: str) -> str:
    return {REPORT: "pytest-cudagraph report", HTML_PAGE: "pytest-cudagraph HTML page"}.get(
        kind, f"pytest-split {kind}"
    )


def refusal(given: str, path: str | os.PathLike[str], kind: str, fix: str) -> str | None:
    """The one sentence that refuses writing a ``kind`` over a file of another kind; None where it may be written.

    ``given``: the option as the user wrote it (``--cudagraph-report=test_q.py``, ``--html page.py``); ``fix``:
    the command with a path of its own.
    """
    foreign = foreign_file(path, kind)
    if foreign is None:
        return None
    return f"{given} is {foreign}, which writing the {kind} would replace; give the {kind} a path of its own: {fix}"
