"""GitHub Actions' workflow commands: an ``::error`` line, escaped by GitHub's rules.

GitHub reads a line of a step's output that starts with ``::error`` as an
annotation (``::error file=F,line=L,title=T::MESSAGE``) and shows it on the
diff at that line.  A command is one line, so its text is escaped as the Actions
runner unescapes it (its ``CommandEscaping``):

- in the message: ``%`` as ``%25``, ``\\r`` as ``%0D``, ``\\n`` as ``%0A``;
- in a property (``file``, ``title``): those, and ``:`` as ``%3A``, ``,`` as ``%2C``.

``%`` goes first, so an escape already in the text stays text.  A message is cut
(``MESSAGE_WIDTH``) before it is escaped, so no escape is ever cut in two, and any
other control character is written as its escape (``\\x1b``: ``text.terminal_safe``),
as everything the plugin prints from a record.

The runner reads every line of the log, so report text printed at the start of a
line (a wrapped skip reason, a forged node id) would be a command too
(``::add-mask::REGRESSION`` hides the verdict).  ``inert_lines`` makes every line
the plugin prints plain, but its own annotations.  Nothing here imports torch.
"""

from __future__ import annotations

import re

from .plain_text import clip_middle, terminal_safe

__all__ = ["MESSAGE_WIDTH", "TITLE_WIDTH", "error_command", "escape_data", "escape_property", "inert_lines"]

# GitHub shows an annotation's message whole, but a log line of megabytes helps no one
MESSAGE_WIDTH = 4000
TITLE_WIDTH = 200


# The runner trims a line's leading white space before it looks for "::"; its older form "##[command]" is read
# anywhere in a line.
_COMMAND_START = re.compile(r"^([^\S\r\n]*)(?=::)", re.MULTILINE)
_OLD_COMMAND = "##["


def inert_lines(text: str) -> str:
    """``text`` with no line GitHub's runner would take as a workflow command.

    A line that starts with ``::`` (after white space) gets a backslash before it,
    and ``##[`` becomes ``#\\#[``: visible, and in Markdown, where a backslash escapes
    punctuation, the line renders as it was.  Every line the plugin prints goes
    through it but its own annotations (``error_command``).
    """
    return _COMMAND_START.sub(r"\1\\", text).replace(_OLD_COMMAND, "#\\#[")


def escape_data(text: str) -> str:
    """A command's message: ``%``, carriage return and newline escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value: as a message, and ``:`` and ``,`` escaped too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def error_command(message: str, *, file: str | None = None, line: int | None = None, title: str | None = None) -> str:
    """``::error file=...,line=...,title=...::message``: the properties given, in that order, escaped."""
    properties = []
    if file:
        properties.append(f"file={terminal_safe(escape_property(file))}")
        if line is not None and line > 0:
            properties.append(f"line={int(line)}")
    if title:
        properties.append(f"title={terminal_safe(escape_property(clip_middle(title, TITLE_WIDTH)))}")
    body = terminal_safe(escape_data(clip_middle(message, MESSAGE_WIDTH)))
    return f"::error {','.join(properties)}::{body}" if properties else f"::error::{body}"
