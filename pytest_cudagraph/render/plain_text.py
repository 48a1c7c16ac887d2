"""Text for people: tables, byte sizes, seconds and clipped ids, one helper per job.

The terminal summary, ``compare``, ``show`` and the library's failure messages all
print through these, so a pool reads the same everywhere::

    format_table([["test", "pool"], ["t::a", format_bytes(62914560, compact=True)]])
        -> ["test  pool", "t::a  60.0M"]
    format_bytes(62914560)        -> "60.0 MiB"     (1536 -> "1.5 KiB", 12 -> "12 B", None -> "-")
    bytes_pair(62914560, None)    -> "60.0M / -"    (a pool and its largest graph, in a narrow column)
    clip("a  long\\nreason", 10)   -> "a long ..."
    clip_nodeid(a_3000_char_id)   -> "tests/test_model.py::test_decode[xxx...xxx-bs16]"
    terminal_safe("t\x1b[8m")     -> "t\\x1b[8m"   (a report's text cannot drive the terminal)

Pure string work: no torch, no pytest; of the package only ``records.json_values``. The library's
failure messages use it too, which is why the library may import render/. A report's
numbers are read by ``records.json_values.number``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..records.json_values import number

__all__ = [
    "KIB",
    "MIB",
    "NODEID_WIDTH",
    "bytes_pair",
    "clip",
    "clip_middle",
    "clip_nodeid",
    "count_noun",
    "fit_table",
    "format_bytes",
    "format_table",
    "terminal_safe",
    "wrap_line",
    "wrap_lines",
    "wrap_words",
]

KIB = 1024
MIB = 1024 * 1024
# the command a line may end with, which wrap_line keeps whole on a line of its own
COMMAND = "pytest-cudagraph "
# A parametrize id can be thousands of characters long; one such id must not widen every row.
NODEID_WIDTH = 100


# ----------------------------------------------------------------------------
# counts
# ----------------------------------------------------------------------------


def count_noun(count: int, singular: str, plural: str | None = None) -> str:
    """``1 recompile``, ``2 recompiles``, ``1 recompile-limit hit``; ``plural`` where adding "s" is wrong."""
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


# ----------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------


def format_table(rows: Sequence[Sequence[str]], *, align: str = "", indent: str = "") -> list[str]:
    """Columns two spaces apart, one line per row, no trailing spaces; the first row is usually the header.

    ``align`` holds one character per column, ``<`` (left, the default for columns it
    does not reach) or ``>`` (right, for figures); ``indent`` starts every line::

        format_table([["size", "pool"], ["8", "60.0 MiB"]], align=">>")  ->  ["size      pool", "   8  60.0 MiB"]
    """
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = [i < len(align) and align[i] == ">" for i in range(len(widths))]
    return [
        (indent + "  ".join(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right))).rstrip()
        for row in rows
    ]


def fit_table(rows: Sequence[Sequence[str]], width: int, *, wrap: Mapping[int, int] | None = None) -> list[str]:
    """``format_table``'s table in at most ``width`` columns where the cells allow it.

    A cell of a column in ``wrap`` (column -> the narrowest it may get; never the
    first column) is broken over lines at its spaces (``wrap_words``), the widest such
    column first, where the table would not fit otherwise.  A first cell too long for what the other columns leave it (a test id) goes
    on a line of its own, whole, and the row's other cells on the next line under
    their headers (every row's, where most rows need it)::

        fit_table([["test", "outcome"], ["t.py::test_a", "passed"], ["t.py::test_" + 20 * "b", "failed"]], 21)
            -> ["test          outcome", "t.py::test_a  passed", "t.py::test_bbbbbbbbbbbbbbbbbbbb", "              failed"]
    """
    if not rows:
        return []
    natural = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    # first the ids on their rows, with the first column a third of the width or what it needs where less
    widths = _narrowed(rows, natural, wrap or {}, min(natural[0], max(len(rows[0][0]), width // 3)), width)
    room = width - sum(widths[1:]) - 2 * (len(widths) - 1)
    fitting = [len(row[0]) for row in rows[1:] if len(row[0]) <= room]
    if 2 * len(fitting) < len(rows) - 1:
        # most rows need a line of their own for their id: all get one (the table reads alike),
        # and the other columns are narrowed only as far as the header's first cell needs
        widths, fitting = _narrowed(rows, natural, wrap or {}, len(rows[0][0]), width), []
    widths[0] = max([len(rows[0][0]), *fitting])
    lines: list[str] = []
    for row in rows:
        if len(row[0]) > widths[0]:
            lines.append(row[0].rstrip())
            row = ["", *row[1:]]
        pieces = [
            wrap_words(cell, w) if i and i in (wrap or {}) else [cell] for i, (cell, w) in enumerate(zip(row, widths))
        ]
        for line in range(max(map(len, pieces))):
            cells = [piece[line] if line < len(piece) else "" for piece in pieces]
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip())
    return lines


def _narrowed(
    rows: Sequence[Sequence[str]], natural: list[int], wrap: Mapping[int, int], first: int, width: int
) -> list[int]:
    """The columns' widths with the ``wrap`` columns narrowed, widest first, until ``first`` and the rest fit."""
    widths = list(natural)
    for column, narrowest in sorted(wrap.items(), key=lambda item: -natural[item[0]]):
        excess = first + sum(widths[1:]) + 2 * (len(widths) - 1) - width
        if excess > 0 and column > 0:
            narrowest = max(narrowest, len(rows[0][column]))
            widths[column] = max(widths[column] - excess, min(widths[column], narrowest))
    return widths


def wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces (a word longer than ``width`` alone).

    Text that fits is one line, as it is (its double spaces kept).
    """
    if len(text) <= width:
        return [text]
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def wrap_line(line: str, width: int) -> list[str]:
    """A line of prose in ``width`` columns: broken at spaces, the lines after the first indented two past its own.

    A word longer than the width (a node id, a path) stays whole on a line of its own,
    and so does a ``pytest-cudagraph`` command that ends the line, to be copied whole::

        wrap_line("  same: torch 2.13, python 3.11", 20) -> ["  same: torch 2.13,", "    python 3.11"]
    """
    if len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    text, command = line[len(indent) :], ""
    at = text.find(COMMAND)
    # a command that ends the line, not one named in a sentence (which goes on, or ends with a full stop)
    if at > 0 and not re.search(r"[.,;] |\.$", text[at:]):
        text, command = text[:at].rstrip(), text[at:]
    room = max(width - len(indent) - 2, 1)
    pieces = wrap_words(text, room)
    if len(pieces) > 1 and " " not in pieces[-1] and " " in pieces[-2].strip():
        # no word alone on the last line: the one before it comes down too
        before, _, word = pieces[-2].rpartition(" ")
        if len(word) + 1 + len(pieces[-1]) <= room:
            pieces[-2:] = [before, f"{word} {pieces[-1]}"]
    first, *rest = pieces
    return [indent + first, *(indent + "  " + piece for piece in [*rest, *([command] if command else [])])]


def wrap_lines(lines: Sequence[str], width: int) -> list[str]:
    """Every line of ``lines`` through ``wrap_line``: prose in ``width`` columns (tables are fitted before)."""
    return [piece for line in lines for piece in wrap_line(line, width)]


# ----------------------------------------------------------------------------
# numbers and bytes
# ----------------------------------------------------------------------------


def format_bytes(value: Any, *, compact: bool = False) -> str:
    """Bytes for people: ``62914560`` -> ``"60.0 MiB"``, ``1536`` -> ``"1.5 KiB"``, ``12`` -> ``"12 B"``.

    MiB from 1 MiB up (a pool of 5 GiB reads ``5120.0 MiB``, comparable with the
    figures beside it), KiB below it, so a small figure never shows as ``0.0``.
    ``compact=True`` is for the narrow columns of the terminal summary: ``60.0M``,
    ``1.5K``, ``12B``.  ``-`` when unknown; NaN and infinities as ``nan``, ``inf``
    (see ``number``); a value that is no number as it is.
    """
    amount = number(value)
    if amount is None:
        return "-" if value is None or isinstance(value, bool) else str(value)
    if not math.isfinite(amount):
        return str(amount)
    space, suffix = ("", "") if compact else (" ", "iB")
    if abs(amount) >= MIB:
        return f"{amount / MIB:.1f}{space}M{suffix}"
    if abs(amount) >= KIB:
        return f"{amount / KIB:.1f}{space}K{suffix}"
    return f"{amount:.0f}{space}B"


def bytes_pair(first: Any, second: Any) -> str:
    """Two byte figures for a narrow column, a pool and its largest graph: ``60.0M / 42.0M``; ``-`` for one unknown."""
    return f"{format_bytes(first, compact=True)} / {format_bytes(second, compact=True)}"


def signed_bytes(value: Any) -> str:
    """A change in bytes for a narrow column: ``+64.0M``, ``-2.0M``, ``0``; ``-`` when unknown."""
    amount = number(value, finite=True)
    if amount is None:
        return "-"
    if amount == 0:
        return "0"
    return ("+" if amount > 0 else "-") + format_bytes(abs(amount), compact=True)


def short_seconds(value: Any) -> str:
    """Seconds for a narrow column: ``12.0ms`` below a second, ``1.25s`` from there; ``-`` when unknown."""
    amount = number(value, finite=True)
    if amount is None:
        return "-"
    return f"{amount * 1000:.1f}ms" if amount < 1 else f"{amount:.2f}s"


# ----------------------------------------------------------------------------
# clipping
# ----------------------------------------------------------------------------


def clip(text: Any, width: int = 160, *, first_line: bool = False) -> str:
    """``text`` on one line, at most ``width`` characters, ending in "..." when cut.

    Whitespace runs (newlines included) become one space; with ``first_line`` only
    the first line is kept, as it is (a message's headline, a guard-failure reason).
    """
    text = str(text)
    if first_line:
        lines = text.strip().splitlines()
        text = lines[0] if lines else ""
    else:
        text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def clip_middle(text: str, width: int, head_share: float = 0.5) -> str:
    """``text`` cut to ``width`` with "..." in the middle: ``head_share`` of what is kept from the start."""
    if len(text) <= width:
        return text
    keep = max(width - 3, 2)
    head = min(max(int(keep * head_share), 1), keep - 1)
    return text[:head] + "..." + text[len(text) - (keep - head) :]


def clip_nodeid(nodeid: str, width: int = NODEID_WIDTH) -> str:
    """``nodeid`` cut to ``width`` characters with "..." in the middle of what identifies it least.

    The function name and the end of the parametrize id stay visible (the end is
    where ids differ: ``test_decode[...-bs16]``), then the start of the path::

        tests/test_model.py::test_decode[xxxx(3000)xxxx-bs16]  ->  tests/test_model.py::test_decode[xxx...xxx-bs16]
    """
    if len(nodeid) <= width:
        return nodeid
    # the parametrize id opens at the first "[" after the path (names have none; the id may hold "::")
    name_end = nodeid.find("[", max(nodeid.find("::"), 0))
    base, param = (nodeid[:name_end], nodeid[name_end:]) if name_end > 0 else (nodeid, "")
    function = base[base.rfind("::") + 2 :] if "::" in base else ""
    # the parameter id gets what the path and name leave over, but never less than a third of the width
    param_text = clip_middle(param, max(width - len(base), width // 3), head_share=0.3)
    room = width - len(param_text)
    if len(base) <= room:
        return base + param_text
    if function and len(function) + 10 <= room:  # "tests/...py::f": where the function lives, shortened
        path = base[: len(base) - len(function) - 2]
        return clip_middle(path, room - len(function) - 2, head_share=0.4) + "::" + function + param_text
    return clip_middle(nodeid, width, head_share=0.3)


# ----------------------------------------------------------------------------
# terminal output
# ----------------------------------------------------------------------------

# What a terminal acts on rather than prints: the C0 controls but newline and tab (ESC starts the
# sequences that colour, hide, move the cursor or set the window title; a carriage return rewrites
# the line), DEL, the C1 controls (U+009B is a one-character ESC [), and the bidirectional overrides
# and isolates that reorder what is shown.
_TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on written as its escape (``\\x1b``, ``\\u202e``).

    Node ids, failure messages and env fields come from reports, which anyone can
    write: printed raw, ``\\x1b[8m`` would hide the lines after it (a REGRESSION
    verdict among them) and ``\\r`` overwrite a line.  Newlines and tabs stay.
    """
    if _TERMINAL_CONTROL.search(text) is None:
        return text
    return _TERMINAL_CONTROL.sub(_escaped, text)


def expected_changes(
    what: str, expected: Mapping[str, int], before: Mapping[str, int], after: Mapping[str, int], order: Sequence[str]
) -> list[str]:
    """The head and table of an ``expect(**deltas)`` failure: per figure, before, after, expected and actual change.

    ``what`` names the checker (``"RecompileWatch.expect()"``); the head says what
    changed and what was expected (``count +1 (expected +0) in the block of
    RecompileWatch.expect(count=0)``); only the figures in ``expected`` are
    shown, in ``order``, the ones that differ marked.
    """
    names = [name for name in order if name in expected]
    wrong = [name for name in names if after[name] - before[name] != expected[name]]
    # what happened first, then what was expected: pytest's one-line summary keeps only the start
    happened = ", ".join(f"{name} {after[name] - before[name]:+d} (expected {expected[name]:+d})" for name in wrong)
    call = f"{what.removesuffix('()')}({', '.join(f'{name}={expected[name]}' for name in names)})"
    head = f"{happened} in the block of {call}"
    rows = [("figure", "before", "after", "expected change", "change", "")]
    for name in names:
        was, now = before[name], after[name]
        mark = "<- differs" if name in wrong else ""
        rows.append((name, str(was), str(now), f"{expected[name]:+d}", f"{now - was:+d}", mark))
    return [head, "", *format_table(rows, align="<>>>>", indent="  ")]
