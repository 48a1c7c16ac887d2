"""GitHub-flavoured Markdown's building blocks, for text that comes from reports: escaped, wrapped, tabled.

Node ids, failure messages and env fields come from reports, which anyone can
write, so every piece of text is escaped for what Markdown would act on:

- plain text (``text``): the characters that open emphasis, links, HTML, tables
  or code are backslash-escaped, ``&`` too (an entity would render as its
  character), and a ``_`` between two letters or digits is left alone (GFM never
  reads it as emphasis, and ``max_recompiles`` stays readable in the raw text);
  a pair of backticks on one line stays a code span, as the plugin's messages use
  them around code, and a decorator (``@pytest.mark.max_recompiles(0)``) becomes
  one: GitHub would read ``@pytest`` as a mention of a user;
- code (``code``): a code span whose fence is longer than any run of backticks
  inside it;
- a table cell: ``|`` escaped as ``\\|`` inside code spans too, as GFM asks;
- a block of text shown as it is (``fenced``): a fence longer than any inside.

Lines stay within ``WIDTH`` (120) columns where the words allow it: paragraphs and
list items are wrapped at spaces outside code spans, and a table is padded into
aligned columns only when it fits (else its cells are separated by single
spaces, which renders the same); a page's tables are laid out alike.  Control characters are written as their
escapes (``text.terminal_safe``) and a newline inside a piece of text becomes a
space.  Nothing here imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .plain_text import terminal_safe

__all__ = ["MAX_BYTES", "WIDTH", "code", "fenced", "paragraph", "table", "table_fits", "text", "within_bytes"]

WIDTH = 120
# GitHub drops a job summary over 1 MiB whole (the job page then shows none of it); a page stays under this
MAX_BYTES = 1_000_000
# what CommonMark/GFM may act on in running text; "_" is handled apart (intraword is safe)
_SPECIAL = re.compile(r"([\\*\[\]<|~#&`])")
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# A code span the plugin's messages hold: backticks around text on one line.  Or a word GitHub would act on,
# made a code span whole (outside code it links and mentions nothing): one holding "://" (a URL its autolink
# extension links, whatever comes before the scheme), "www." or an "@" (a mention of a user, whose name may
# start with a digit, @0xcafe, or of a team; a decorator, @pytest.mark.max_recompiles(0), mentions "pytest";
# an e-mail address, which is linked and stays whole).
_CODE_SPAN = re.compile(r"`(?P<code>[^`\n]+)`|(?P<live>[^\s`]*(?:@|://|www\.)[^\s`]*)")
_OPENERS, _CLOSERS = "([{<\"'", ".,:;!?)]}>\"'"
_PAIRS = {")": "(", "]": "[", "}": "{"}
# a word that would open a list or a quote, or underline a heading, at the start of a line: never wrapped onto
# one, and escaped where a paragraph starts with it
_BLOCK_START = re.compile(r"^(?:[-+=]+|\d{1,9}[.)]|>.*)$")


def _one_line(value: object) -> str:
    return " ".join(terminal_safe(str(value)).split())


def _escape_plain(piece: str) -> str:
    piece = _SPECIAL.sub(r"\\\1", piece)
    return _UNDERSCORE.sub(r"\\_", piece)


def text(value: object) -> str:
    """Running text: one line, escaped, backtick pairs kept as code spans."""
    line = _one_line(value)
    pieces: list[str] = []
    spans: list[str] = []  # code spans with no text between them are one: two fences side by side are a longer one
    position = 0
    for match in _CODE_SPAN.finditer(line):
        start, end = match.span()
        if match["live"] is not None:
            start, end = _live_core(line, start, end)
        between = line[position:start]
        if between and spans:
            pieces.append(code("".join(spans)))
            spans = []
        pieces.append(_escape_plain(between))
        spans.append(match["code"] if match["code"] is not None else line[start:end])
        position = end
    if spans:
        pieces.append(code("".join(spans)))
    pieces.append(_escape_plain(line[position:]))
    return "".join(pieces)


def _live_core(line: str, start: int, end: int) -> tuple[int, int]:
    """The span of a live word without the punctuation around it (``(www.x.org),`` -> ``www.x.org``), which stays
    text; a closing bracket the word opened stays in it (``@pytest.mark.max_recompiles(0):``)."""
    word = line[start:end]
    head = len(word) - len(word.lstrip(_OPENERS))
    tail = len(word.rstrip(_CLOSERS))
    while (
        tail < len(word)
        and word[tail] in _PAIRS
        and word.count(_PAIRS[word[tail]], head, tail) > word.count(word[tail], head, tail)
    ):
        tail += 1
    core = word[head:tail]
    if not any(trigger in core for trigger in ("@", "://", "www.")):
        return start, end  # the punctuation is part of what GitHub would act on: the whole word
    return start + head, start + tail


def code(value: object) -> str:
    """A code span: the fence one backtick longer than any run inside; padded where the text starts or ends in one."""
    inside = _one_line(value)
    runs = [len(run) for run in re.findall(r"`+", inside)]
    fence = "`" * (max(runs, default=0) + 1)
    if inside.startswith("`") or inside.endswith("`") or (inside.startswith(" ") and inside.endswith(" ")):
        inside = f" {inside} "
    return f"{fence}{inside}{fence}" if inside else ""


def _cell(markdown: str) -> str:
    """A table cell: every ``|`` escaped, one a backslash precedes too.

    GFM splits cells at a pipe even inside a code span, and takes ``\\|`` off as a
    pipe before it reads the cell's inline text: a code span's literal ``\\|`` must
    be ``\\\\|`` in the cell, and running text's escaped pipe ``\\|`` reads the same
    as ``\\\\|`` (``\\|`` again once the pipe is taken off).
    """
    return markdown.replace("|", "\\|")


def table_fits(header: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH) -> bool:
    """Whether ``table(header, rows)`` padded into aligned columns fits ``width``."""
    cells = [[_cell(cell) or " " for cell in row] for row in [list(header), *rows]]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]
    return sum(widths) + 3 * len(widths) + 1 <= width


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH, *, aligned: bool | None = None
) -> list[str]:
    """A GFM table of cells already in Markdown (``text``, ``code``); aligned when it fits ``width``.

    ``aligned`` chooses for it: a page of several tables lays them all out alike
    (aligned only where every one fits, ``table_fits``).
    """
    cells = [[_cell(cell) or " " for cell in row] for row in [list(header), *rows]]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]
    if aligned is None:
        aligned = table_fits(header, rows, width)
    if not aligned:
        widths = [0] * len(widths)
    lines = []
    for number, row in enumerate(cells):
        lines.append("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |")
        if number == 0:
            lines.append("| " + " | ".join("-" * max(w, 3) for w in widths) + " |")
    return lines


def paragraph(markdown: str, width: int = WIDTH, *, first: str = "", indent: str = "") -> list[str]:
    """Markdown text wrapped at spaces into ``width`` columns: ``first`` before the first line, ``indent`` before the rest.

    A list item is ``paragraph(item, first="- ", indent="  ")``.  Code spans and escapes are never broken.
    """
    lines: list[str] = []
    current = first
    start = len(first)
    words = _words(markdown)
    if words and _BLOCK_START.match(words[0]):
        words[0] = re.sub(r"^(\d*)(\D)", r"\1\\\2", words[0])  # "- x" -> "\- x", "1. x" -> "1\. x", "> x" -> "\> x"
    for word in words:
        if len(current) > start and len(current) + 1 + len(word) > width and not _BLOCK_START.match(word):
            lines.append(current)
            current, start = indent + word, len(indent)
            continue
        current = f"{current} {word}" if len(current) > start else current + word
    lines.append(current)
    return [line.rstrip() for line in lines]


def _words(markdown: str) -> list[str]:
    """``markdown`` split at its spaces, but never inside a code span (a backtick run to the next run as long)."""
    words: list[str] = []
    current: list[str] = []
    position = 0
    while position < len(markdown):
        char = markdown[position]
        if char == "\\":  # an escape and what it escapes stay together
            current.append(markdown[position : position + 2])
            position += 2
        elif char == "`":
            fence = re.match(r"`+", markdown[position:]).group()  # type: ignore[union-attr]
            closing = re.compile(rf"(?<!`){fence}(?!`)").search(markdown, position + len(fence))
            end = closing.end() if closing is not None else position + len(fence)
            current.append(markdown[position:end])
            position = end
        elif char.isspace():
            if current:
                words.append("".join(current))
                current = []
            position += 1
        else:
            current.append(char)
            position += 1
    if current:
        words.append("".join(current))
    return words


def fenced(lines: Sequence[str], info: str = "text") -> list[str]:
    """Lines shown as they are, in a fenced code block whose fence no line inside can close."""
    safe = [terminal_safe(line) for line in lines]
    runs = [len(run) for line in safe for run in re.findall(r"`{3,}", line)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence + info, *safe, fence]


def within_bytes(markdown: str, limit: int = MAX_BYTES) -> str:
    """``markdown`` whole when it fits ``limit`` bytes; else cut at a block's end, with a line saying so.

    The page's first blocks (its title and verdict) are kept; the cut is at a blank
    line outside any fenced block, a ``<details>`` left open is closed, and the
    last line says how much was left out and where all of it is.
    """
    data = markdown.encode("utf-8")
    if len(data) <= limit:
        return markdown
    room = max(limit - 400, 0)  # the closing tags and the line that says so
    lines = data[:room].decode("utf-8", "ignore").split("\n")[:-1]  # the last line may be cut in two
    cut, fence, details = 0, "", 0
    open_details_at_cut = 0
    for number, line in enumerate(lines):
        opening = re.match(r"`{3,}", line)
        if not fence and opening:
            fence = opening.group()
        elif fence and line.startswith(fence) and not line.strip("`"):
            fence = ""
        elif not fence:
            # the page's own: a line of its own; report text's "<" is escaped ("\\<details>")
            details += line.startswith("<details>") - (line == "</details>")
            if not line:
                cut, open_details_at_cut = number, details
    kept = lines[:cut] + ["", "</details>"] * open_details_at_cut
    left_out = len(data) - len("\n".join(kept).encode("utf-8"))
    note = f"**... {left_out:,} more bytes left out**: GitHub shows at most 1 MiB; the report and the plain text hold it all"
    return "\n".join([*kept, "", note]) + "\n"
