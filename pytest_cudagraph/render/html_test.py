"""A test's sections of the HTML page: its failure, recompiles and graph breaks, what reduce-overhead cudagraphed,
the pieces of a piecewise run, the capture cost per size, and each rank of a multi-rank run.

Each section reads the record's typed sections (``records.schema``) and words its
lines as ``show``'s text does (``record_text``); a table of a section's other
fields is drawn from the section as read, so a field no type names still shows.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.loaded import given, is_set, section_or_empty
from ..records.report import as_int
from ..records.schema import (
    Failure,
    FunctionRecompiles,
    Graphs,
    ObservedGraphs,
    Piecewise,
    Ranks,
    RanksRun,
    RecompileEvent,
    Recompiles,
    ReduceOverhead,
    TestRecord,
)
from .html_parts import escape, reasons_list, record_section_html, rest_table, rows_table
from .plain_text import count_noun
from .record_text import (
    COST_HEADER,
    GUARD_HEADER,
    RANK_HEADER,
    REGION_HEADER,
    UNPRINTED_NOTE,
    break_site_text,
    break_sites,
    cost_head,
    cost_rows,
    cost_sections,
    event_head,
    guard_row,
    is_limit_hit,
    limit_hit_text,
    limit_hits_of,
    rank_row,
    ranks_head,
    recompile_events,
    region_rows,
    regions_text,
    skip_text,
    uncaptured_pieces,
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


def failure_html(record: TestRecord) -> str:
    """The failure message as pytest reported it (the plugin's own table and hints included), wrapped in place."""
    failure = section_or_empty(record.failure, Failure)
    message = given(failure.message)
    outcome = str(record.outcome)
    if not isinstance(message, str) or not message.strip():
        if outcome == "crashed":
            return '<p class="note">Its worker died while it ran: there is no failure message.</p>'
        if outcome in ATTENTION_OUTCOMES:
            return '<p class="note">The record holds no failure message.</p>'
        return ""
    when = given(failure.when)
    head = f"{outcome} in {when}" if when else outcome
    return (
        f'<div class="failure"><p class="failure-head">{escape(head)}</p>'
        f'<pre class="failure-message">{escape(message)}</pre></div>'
    )


def recompiles_html(rec: Recompiles) -> str:
    """The recompiles: each with its call site and failed guards (``events``), else the reasons per function.

    A record older than ``events`` keeps its reasons per function; graph breaks show
    their sites (reason, where, the user's line that called) when the record has them.
    """
    events = recompile_events(rec)
    limit_events = [event for event in events if is_limit_hit(event)]
    parts = [f"<h3>Recompiles: {escape(as_int(given(rec.count)))}</h3>"]
    hits = limit_hits_of(rec)
    if hits:
        parts.append(
            f'<p class="warn">Recompile limit hit {escape(count_noun(hits, "time"))}: '
            "Dynamo silently ran those frames eagerly.</p>"
        )
        if limit_events:
            parts.append(reasons_list([limit_hit_text(event) for event in limit_events]))
        elif isinstance(rec.limit_hits, list):
            parts.append(reasons_list(rec.limit_hits))
    by_function = given(rec.by_function)
    if len(events) > len(limit_events):
        parts.append(recompile_events_html(events))
    elif by_function:
        for function, entry in by_function.items():
            # a FunctionRecompiles per function; older records held the reasons list
            if isinstance(entry, FunctionRecompiles):
                reasons: Any = given(entry.reasons)
                count = f" ({count_noun(as_int(given(entry.count)), 'recompile')})"
            else:
                reasons, count = entry, ""
            parts.append(f'<p class="mono">{escape(function)}{escape(count)}</p>')
            parts.append(reasons_list(reasons))
    elif given(rec.reasons):
        parts.append(reasons_list(rec.reasons))
    breaks = given(rec.graph_breaks)
    if breaks is not None and as_int(given(breaks.count)):
        parts.append(f"<p>Graph breaks: {escape(as_int(given(breaks.count)))}</p>")
        sites = break_sites(rec)
        if sites:
            parts.append(reasons_list([break_site_text(site) for site in sites]))
        elif given(breaks.reasons):
            parts.append(reasons_list(breaks.reasons))
    return "".join(parts)


def recompile_events_html(events: list[RecompileEvent]) -> str:
    """Each recompile: ``recompile N of M: FUNCTION, called from FILE:LINE `CODE```, then a table of its failed guards.

    A guard torch did not print (it names only the first failing guard of an entry;
    the watch found the rest) is marked ``*``, with a footnote.
    """
    recompiles = [event for event in events if not is_limit_hit(event)]
    parts = []
    unprinted = False
    for index, event in enumerate(recompiles, 1):
        parts.append(f'<p class="event mono">{escape(event_head(index, len(recompiles), event))}</p>')
        guards = given(event.guards) or []
        if not guards:
            parts.append(reasons_list(given(event.reasons) or ["(no reason recorded)"]))
            continue
        body = []
        for guard in guards:
            (entry, text, expected, actual), printed = guard_row(guard, width=None)
            unprinted = unprinted or not printed
            origin = given(guard.origin)
            title = f' title="{escape(origin)}"' if origin else ""
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


# -- the sections drawn from their types: reduce-overhead, piecewise, ranks -----------

# the reduce-overhead fields drawn as a line, a table of regions and a list of skips
_TREES_DRAWN = ("skipped", "regions", "regions_total", "regions_cudagraphed", "calls", "fraction_of_calls")
_PIECES_DRAWN = ("uncaptured", "uncaptured_calls", "per_size")


def _holds_any(section: object, names: tuple[str, ...]) -> bool:
    """Whether the typed section holds any of the fields ``names`` (as ``name in section`` of its mapping)."""
    return any(is_set(getattr(section, name)) for name in names)


def section_html(name: str, value: Any, record: TestRecord) -> str:
    """A record's section the page has no fixed place for, ``value`` as read (every field, named or not).

    reduce-overhead, piecewise and ranks are drawn from ``record``'s typed sections,
    with a table of their other fields; any other section is a table of its values.
    """
    trees, piecewise, ranks = record.reduce_overhead, record.piecewise, record.ranks
    if isinstance(value, Mapping):
        if name == "reduce_overhead" and isinstance(trees, ReduceOverhead) and _holds_any(trees, _TREES_DRAWN):
            return reduce_overhead_html(trees, value)
        if name == "piecewise" and isinstance(piecewise, Piecewise) and _holds_any(piecewise, _PIECES_DRAWN):
            return piecewise_html(piecewise, value)
        if name == "ranks" and isinstance(ranks, Ranks) and given(ranks.per_rank) is not None:
            return ranks_html(ranks)
        if name == "observed_graphs" and isinstance(record.observed_graphs, ObservedGraphs):
            from .observed_text import observed_html

            return observed_html(record.observed_graphs, value)
    return record_section_html(name, value)


def reduce_overhead_html(trees: ReduceOverhead, fields: Mapping[str, Any]) -> str:
    """How much got cudagraphed (regions, calls after warm-up), a row per region, then each skip on one line.

    ``fields`` is the section as read: the fields not drawn are a table, those no type names included.
    """
    skipped = given(trees.skipped) or []
    drawn = _TREES_DRAWN + (("skip_reasons",) if skipped else ())
    parts = ["<h3>reduce_overhead</h3>"]
    share = regions_text(trees)
    if share:
        cudagraphed, total = as_int(given(trees.regions_cudagraphed)), as_int(given(trees.regions_total))
        css = "warn" if cudagraphed < total else ""
        parts.append(f'<p class="{css}">{escape(share)}</p>')
    elif is_set(trees.regions):
        parts.append('<p class="note">Regions not metered: this torch\'s cudagraph trees could not be counted.</p>')
    parts.append(rest_table(fields, drawn))
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
        skip_reasons = given(trees.skip_reasons)
        if skip_reasons:
            parts.append(f"<details><summary>torch's skip messages</summary>{reasons_list(skip_reasons)}</details>")
    return "".join(parts)


def capture_cost_html(section: Graphs | Piecewise, name: str = "capture") -> str:
    """Per capture run (the section, or each of its sets): a head line and, folded, its per-size table."""
    parts = []
    for label, run in cost_sections(section, name):
        rows = cost_rows(run)
        css = "warn" if given(run.outside_unreliable) else ""
        body = ["<tr>" + "".join(f'<td class="num">{escape(cell)}</td>' for cell in row) + "</tr>" for row in rows]
        parts.append(
            f'<p class="{css}">{escape(label)}: {escape(cost_head(run))}</p>'
            f"<details><summary>capture cost per size ({escape(len(rows))})</summary>"
            f"{rows_table('cost', COST_HEADER, body, numeric=len(COST_HEADER))}</details>"
        )
    return "".join(parts)


def piecewise_html(piecewise: Piecewise, fields: Mapping[str, Any]) -> str:
    """The piecewise figures, then each piece that ran without a graph and why, and the calls that replayed none.

    ``fields`` is the section as read: the figures not drawn are a table, those no type names included.
    """
    parts = ["<h3>piecewise</h3>", rest_table(fields, _PIECES_DRAWN), capture_cost_html(piecewise)]
    head, pieces = uncaptured_pieces(piecewise)
    if pieces:
        parts.append(f"<p>{escape(head)}:</p>")
        rows = [f"<tr><td>{escape(piece)}</td><td>{escape(reason)}</td></tr>" for piece, reason in pieces]
        parts.append(rows_table("pieces", ("piece", "reason"), rows))
    calls = given(piecewise.uncaptured_calls)
    if calls:
        parts.append("<p>Calls that replayed no graph:</p>")
        parts.append(reasons_list([f"{count_noun(as_int(n), 'call')}: {reason}" for reason, n in calls.items()]))
    return "".join(parts)


# the rank and its max error are figures; pool / largest stays on one line
_RANK_CELL_CSS = {0: ' class="num"', 4: ' class="nowrap"', 5: ' class="num"'}


def _ranks_run_html(run: RanksRun) -> str:
    parts = [f'<p class="mono">{escape(ranks_head(run))}</p>']
    rows = []
    for rank in given(run.per_rank) or ():
        cells = rank_row(rank, width=None)
        css = ' class="off"' if cells[2] not in ("passed", "?") else ""
        tds = "".join(f"<td{_RANK_CELL_CSS.get(index, '')}>{escape(cell)}</td>" for index, cell in enumerate(cells))
        rows.append(f"<tr{css}>{tds}</tr>")
    if rows:
        parts.append(rows_table("ranks", RANK_HEADER, rows))
    message = given(run.message)
    if isinstance(message, str) and message.strip():
        parts.append(f"<details><summary>the run's message</summary><pre>{escape(message)}</pre></details>")
    return "".join(parts)


def ranks_html(ranks: Ranks) -> str:
    """A multi-rank test: world size and outcome, a row per rank (graphs, pool / largest, error, where it waited)."""
    runs = given(ranks.runs) or []
    if not runs:
        return "<h3>Ranks</h3>" + _ranks_run_html(ranks)
    parts = [f"<h3>Ranks: {escape(count_noun(len(runs), 'run'))}</h3>"]
    for index, run in enumerate(runs, 1):
        parts.append(f"<h3>run {index} of {len(runs)}</h3>" + _ranks_run_html(run))
    return "".join(parts)
