"""A test's sections of the HTML page: its failure, recompiles and graph breaks, what reduce-overhead cudagraphed,
the pieces of a piecewise run, the capture cost per size, and each rank of a multi-rank run.

Each section words its lines as ``show``'s text does (``record_text``).  Nothing
here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.report import as_int, limit_hit_count
from ..text import count_noun
from .html_parts import escape, reasons_list, record_section_html, rest_table, rows_table, section
from .record_text import (
    COST_HEADER,
    GUARD_HEADER,
    RANK_HEADER,
    REGION_HEADER,
    UNPRINTED_NOTE,
    break_site_text,
    cost_head,
    cost_rows,
    cost_sections,
    event_head,
    guard_row,
    limit_hit_text,
    rank_row,
    ranks_head,
    recompile_events,
    region_rows,
    regions_text,
    skip_text,
)
from .summary import ATTENTION_OUTCOMES

__all__ = [
    "capture_cost_html",
    "failure_html",
    "piecewise_html",
    "ranks_html",
    "recompile_events_html",
    "recompiles_html",
    "reduce_overhead_html",
    "section_html",
]


def failure_html(record: Mapping[str, Any]) -> str:
    """The failure message as pytest reported it (the plugin's own table and hints included), wrapped in place."""
    failure = section(record, "failure")
    message = failure.get("message")
    outcome = str(record.get("outcome", "?"))
    if not isinstance(message, str) or not message.strip():
        if outcome == "crashed":
            return '<p class="note">Its worker died while it ran: there is no failure message.</p>'
        if outcome in ATTENTION_OUTCOMES:
            return '<p class="note">The record holds no failure message.</p>'
        return ""
    when = failure.get("when")
    head = f"{outcome} in {when}" if isinstance(when, str) and when else outcome
    return (
        f'<div class="failure"><p class="failure-head">{escape(head)}</p>'
        f'<pre class="failure-message">{escape(message)}</pre></div>'
    )


def recompiles_html(rec: Mapping[str, Any]) -> str:
    """The recompiles: each with its call site and failed guards (``events``), else the reasons per function.

    A record older than ``events`` keeps its reasons per function; graph breaks show
    their sites (reason, where, the user's line that called) when the record has them.
    """
    events = recompile_events(rec)
    limit_events = [event for event in events if event.get("limit_hit") is not None]
    parts = [f"<h3>Recompiles: {escape(as_int(rec.get('count')))}</h3>"]
    hits = limit_hit_count(rec)
    if hits:
        parts.append(
            f'<p class="warn">Recompile limit hit {escape(count_noun(hits, "time"))}: '
            "Dynamo silently ran those frames eagerly.</p>"
        )
        if limit_events:
            parts.append(reasons_list([limit_hit_text(event) for event in limit_events]))
        elif isinstance(rec.get("limit_hits"), list):
            parts.append(reasons_list(rec["limit_hits"]))
    by_function = rec.get("by_function")
    if len(events) > len(limit_events):
        parts.append(recompile_events_html(events))
    elif isinstance(by_function, Mapping) and by_function:
        for function, entry in by_function.items():
            # {"count", "reasons", "limit_hits"} per function; older records held the reasons list
            reasons = entry.get("reasons") if isinstance(entry, Mapping) else entry
            count = f" ({count_noun(as_int(entry.get('count')), 'recompile')})" if isinstance(entry, Mapping) else ""
            parts.append(f'<p class="mono">{escape(function)}{escape(count)}</p>')
            parts.append(reasons_list(reasons))
    elif rec.get("reasons"):
        parts.append(reasons_list(rec["reasons"]))
    breaks = rec.get("graph_breaks")
    if isinstance(breaks, Mapping) and as_int(breaks.get("count")):
        parts.append(f"<p>Graph breaks: {escape(as_int(breaks.get('count')))}</p>")
        sites = [site for site in breaks.get("sites") or [] if isinstance(site, Mapping)]
        if sites:
            parts.append(reasons_list([break_site_text(site) for site in sites]))
        elif breaks.get("reasons"):
            parts.append(reasons_list(breaks["reasons"]))
    return "".join(parts)


def recompile_events_html(events: list[Mapping[str, Any]]) -> str:
    """Each recompile: ``recompile N of M: FUNCTION, called from FILE:LINE `CODE```, then a table of its failed guards.

    A guard torch did not print (it names only the first failing guard of an entry;
    the watch found the rest) is marked ``*``, with a footnote.
    """
    recompiles = [event for event in events if event.get("limit_hit") is None]
    parts = []
    unprinted = False
    for index, event in enumerate(recompiles, 1):
        parts.append(f'<p class="event mono">{escape(event_head(index, len(recompiles), event))}</p>')
        guards = [guard for guard in event.get("guards") or [] if isinstance(guard, Mapping)]
        if not guards:
            parts.append(reasons_list(event.get("reasons") or ["(no reason recorded)"]))
            continue
        body = []
        for guard in guards:
            (entry, text, expected, actual), printed = guard_row(guard, width=None)
            unprinted = unprinted or not printed
            title = f' title="{escape(guard["origin"])}"' if guard.get("origin") else ""
            css = "" if printed else ' class="unprinted"'
            body.append(
                f"<tr{css}><td>{escape(entry)}</td><td{title}>{escape(text)}</td>"
                f"<td>{escape(expected)}</td><td>{escape(actual)}</td></tr>"
            )
        head = "".join(f"<th>{escape(name)}</th>" for name in GUARD_HEADER)
        parts.append(f'<table class="guards"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')
    if unprinted:
        parts.append(f'<p class="small">* {escape(UNPRINTED_NOTE)}</p>')
    return "".join(parts)


# -- the sections drawn from plain data: reduce-overhead, piecewise, ranks -----------

# the reduce-overhead fields drawn as a line, a table of regions and a list of skips
_TREES_DRAWN = ("skipped", "regions", "regions_total", "regions_cudagraphed", "calls", "fraction_of_calls")
_PIECES_DRAWN = ("uncaptured", "uncaptured_calls", "per_size")


def section_html(name: str, value: Any) -> str:
    """A record's section the page has no fixed place for: reduce-overhead, piecewise and ranks drawn, the rest a table."""
    if isinstance(value, Mapping):
        if name == "reduce_overhead" and any(key in value for key in _TREES_DRAWN):
            return reduce_overhead_html(value)
        if name == "piecewise" and any(key in value for key in _PIECES_DRAWN):
            return piecewise_html(value)
        if name == "ranks" and isinstance(value.get("per_rank"), list):
            return ranks_html(value)
    return record_section_html(name, value)


def reduce_overhead_html(trees: Mapping[str, Any]) -> str:
    """How much got cudagraphed (regions, calls after warm-up), a row per region, then each skip on one line."""
    skipped = [skip for skip in trees.get("skipped") or [] if isinstance(skip, Mapping)]
    drawn = _TREES_DRAWN + (("skip_reasons",) if skipped else ())
    parts = ["<h3>reduce_overhead</h3>"]
    share = regions_text(trees)
    if share:
        css = "warn" if as_int(trees.get("regions_cudagraphed")) < as_int(trees.get("regions_total")) else ""
        parts.append(f'<p class="{css}">{escape(share)}</p>')
    elif "regions" in trees:
        parts.append('<p class="note">Regions not metered: this torch\'s cudagraph trees could not be counted.</p>')
    parts.append(rest_table(trees, drawn))
    rows = []
    for row in region_rows(trees):
        css = ' class="off"' if row[4] != "0" or (row[1] == row[2] == "0") else ""
        cells = f"<td>{escape(row[0])}</td>" + "".join(f'<td class="num">{escape(cell)}</td>' for cell in row[1:])
        rows.append(f"<tr{css}>{cells}</tr>")
    if rows:
        parts.append(rows_table("regions", REGION_HEADER, rows, numeric=4))
    if skipped:
        parts.append(f"<p>Skipped CUDA graphs ({escape(len(skipped))}):</p>")
        parts.append(reasons_list([skip_text(skip) for skip in skipped]))
        if trees.get("skip_reasons"):
            parts.append(
                f"<details><summary>torch's skip messages</summary>{reasons_list(trees['skip_reasons'])}</details>"
            )
    return "".join(parts)


def capture_cost_html(section: Mapping[str, Any], name: str = "capture") -> str:
    """Per capture run (the section, or each of its sets): a head line and, folded, its per-size table."""
    parts = []
    for label, run in cost_sections(section, name):
        rows = cost_rows(run)
        css = "warn" if run.get("outside_unreliable") else ""
        body = ["<tr>" + "".join(f'<td class="num">{escape(cell)}</td>' for cell in row) + "</tr>" for row in rows]
        parts.append(
            f'<p class="{css}">{escape(label)}: {escape(cost_head(run))}</p>'
            f"<details><summary>capture cost per size ({escape(len(rows))})</summary>"
            f"{rows_table('cost', COST_HEADER, body, numeric=len(COST_HEADER))}</details>"
        )
    return "".join(parts)


def piecewise_html(piecewise: Mapping[str, Any]) -> str:
    """The piecewise figures, then each piece that ran without a graph and why, and the calls that replayed none."""
    parts = ["<h3>piecewise</h3>", rest_table(piecewise, _PIECES_DRAWN), capture_cost_html(piecewise)]
    pieces = [piece for piece in piecewise.get("uncaptured") or [] if isinstance(piece, Mapping)]
    if pieces:
        parts.append(f"<p>Pieces that ran without a graph ({escape(len(pieces))}):</p>")
        rows = [f"<tr><td>{escape(p.get('piece'))}</td><td>{escape(p.get('reason'))}</td></tr>" for p in pieces]
        parts.append(rows_table("pieces", ("piece", "reason"), rows))
    calls = piecewise.get("uncaptured_calls")
    if isinstance(calls, Mapping) and calls:
        parts.append("<p>Calls that replayed no graph:</p>")
        parts.append(reasons_list([f"{count_noun(as_int(n), 'call')}: {reason}" for reason, n in calls.items()]))
    return "".join(parts)


# the rank and its max error are figures; pool / largest stays on one line
_RANK_CELL_CSS = {0: ' class="num"', 4: ' class="nowrap"', 5: ' class="num"'}


def _ranks_run_html(run: Mapping[str, Any]) -> str:
    parts = [f'<p class="mono">{escape(ranks_head(run))}</p>']
    rows = []
    for rank in run.get("per_rank") or []:
        if not isinstance(rank, Mapping):
            continue
        cells = rank_row(rank, width=None)
        css = ' class="off"' if cells[2] not in ("passed", "?") else ""
        tds = "".join(f"<td{_RANK_CELL_CSS.get(index, '')}>{escape(cell)}</td>" for index, cell in enumerate(cells))
        rows.append(f"<tr{css}>{tds}</tr>")
    if rows:
        parts.append(rows_table("ranks", RANK_HEADER, rows))
    message = run.get("message")
    if isinstance(message, str) and message.strip():
        parts.append(f"<details><summary>the run's message</summary><pre>{escape(message)}</pre></details>")
    return "".join(parts)


def ranks_html(ranks: Mapping[str, Any]) -> str:
    """A multi-rank test: world size and outcome, a row per rank (graphs, pool / largest, error, where it waited)."""
    runs = [run for run in ranks.get("runs") or [] if isinstance(run, Mapping)]
    if not runs:
        return "<h3>Ranks</h3>" + _ranks_run_html(ranks)
    parts = [f"<h3>Ranks: {escape(count_noun(len(runs), 'run'))}</h3>"]
    for index, run in enumerate(runs, 1):
        parts.append(f"<h3>run {index} of {len(runs)}</h3>" + _ranks_run_html(run))
    return "".join(parts)
