"""The building blocks of the HTML page: escaping, node ids that wrap, tables, and a record's values as cells.

Every string taken from the report goes through ``escape``; a block that hands
back markup built here marks it as ``Markup``, so a table puts it in as it is and
escapes everything else.  Nothing here imports torch.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from ..records.json_values import number
from .plain_text import format_bytes

__all__ = [
    "Markup",
    "badge",
    "escape",
    "json_block",
    "kv_table",
    "nodeid_html",
    "nonzero_counters",
    "reasons_list",
    "record_section_html",
    "rest_table",
    "rows_table",
    "value_html",
]


class Markup(str):
    """Markup built here from escaped parts: ``kv_table`` and friends put it in as it is."""


def escape(value: Any) -> str:
    """Report text as HTML text: ``None`` reads ``-``, everything else is ``str()`` and escaped."""
    return html.escape("-" if value is None else str(value), quote=True)


def _cell(value: Any) -> str:
    if isinstance(value, bool):  # a reader's word, not Python's True
        return "yes" if value else "no"
    return value if isinstance(value, Markup) else escape(value)


def badge(outcome: Any) -> Markup:
    return Markup(f'<span class="badge {escape(outcome)}">{escape(outcome)}</span>')


# ----------------------------------------------------------------------------
# node ids
# ----------------------------------------------------------------------------

# where an id may break: after "/" and "::" (path, class, function), before "[" (the parameters),
# after "-" and "," (between parameter values), after "_" (between the words of a long test name)
_ID_BREAKS = re.compile(r"(?<=::)|(?<=/)|(?<=[-,_])|(?=\[)")


def nodeid_html(nodeid: str) -> Markup:
    """A node id that wraps where a reader expects it to: the path muted, the test name after it.

    The browser may break after ``/``, ``::`` and ``_``, before ``[`` and between
    parameter values; a token longer than the line still breaks anywhere (CSS
    ``overflow-wrap``).
    """
    path, separator, name = nodeid.partition("::")
    if not separator:
        return Markup(_breakable(nodeid))
    return Markup(
        f'<span class="path">{_breakable(path + separator)}</span><wbr><span class="name">{_breakable(name)}</span>'
    )


def _breakable(text: str) -> str:
    return "<wbr>".join(escape(piece) for piece in _ID_BREAKS.split(text) if piece)


# ----------------------------------------------------------------------------
# tables and values
# ----------------------------------------------------------------------------


def kv_table(rows: list[tuple[str, Any]]) -> str:
    """A two-column table: a label, and its value (text, or ``Markup``)."""
    body = "".join(f'<tr><th>{escape(label)}</th><td class="mono">{_cell(value)}</td></tr>' for label, value in rows)
    return f'<table class="kv">{body}</table>'


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _scalar_text(key: str, value: Any) -> str:
    # a figure named *_bytes reads better in MiB; the exact count stays on the page beside it
    if key.endswith("_bytes") and number(value, finite=True) is not None and not isinstance(value, str):
        return f"{format_bytes(value)} ({value})"
    return "-" if value is None else str(value)


def value_html(key: str, value: Any) -> str | Markup:
    """One value of a record for a table cell: a figure, a list, a small mapping, or JSON when it nests deeper."""
    if _is_scalar(value):
        return _scalar_text(key, value)
    if isinstance(value, Mapping) and value and all(_is_scalar(v) for v in value.values()):
        return Markup("<br>".join(f"{escape(k)} {escape(_scalar_text(str(k), v))}" for k, v in value.items()))
    if isinstance(value, list) and all(_is_scalar(v) for v in value):
        if any(isinstance(v, str) and ("\n" in v or len(v) > 60) for v in value):
            return Markup(reasons_list(value))
        return ", ".join(_scalar_text(key, v) for v in value) or "-"
    return Markup(json_block(value))


def json_block(value: Any) -> str:
    return f'<pre class="json">{escape(json.dumps(value, indent=2, default=str, sort_keys=True))}</pre>'


def reasons_list(items: Any) -> str:
    items = items if isinstance(items, list) else [items]
    return '<ul class="reasons">' + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"


def record_section_html(name: str, value: Any) -> str:
    """A record's section that has no drawing of its own (piecewise, reduce_overhead, placement, ...)."""
    if isinstance(value, Mapping):
        return f"<h3>{escape(name)}</h3>" + kv_table([(str(k), value_html(str(k), v)) for k, v in value.items()])
    return f"<h3>{escape(name)}</h3>" + kv_table([(name, value_html(name, value))])


def rest_table(value: Mapping[str, Any], drawn: tuple[str, ...]) -> str:
    """The fields of ``value`` not in ``drawn`` as a two-column table; empty when none is left."""
    rows = [(str(k), value_html(str(k), v)) for k, v in value.items() if k not in drawn]
    return kv_table(rows) if rows else ""


def rows_table(css: str, header: tuple[str, ...], rows: list[str], numeric: int = 0) -> str:
    """A table of rows built here; the last ``numeric`` columns' headers right-aligned."""
    num = ' class="num"'
    head = "".join(
        f"<th{num if index >= len(header) - numeric else ''}>{escape(name)}</th>" for index, name in enumerate(header)
    )
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def nonzero_counters(counts: Mapping[str, Any]) -> str:
    """``compiled 45, loaded 14``: the counters that moved (a zero says nothing among a dozen of them)."""
    shown = [f"{k} {v}" for k, v in counts.items() if not (isinstance(v, int) and v == 0)]
    return ", ".join(shown) or "all 0"
