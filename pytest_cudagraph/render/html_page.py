"""The parts of the HTML page of a report: its style sheet, node ids that wrap, tables, and a test's sections.

``show.render_html`` puts the parts in order; each part here turns one piece of a
record into markup.  Every string taken from the report goes through ``escape``;
a part that hands back markup built here marks it as ``Markup``, so a table puts
it in as it is and escapes everything else.

The page is read at any width from a laptop's to a wide screen's: tables shrink to
the page (cells wrap, figures do not), node ids break after ``/`` and ``::``, long
messages wrap in place, and nothing pushes the page sideways.

Nothing here imports torch.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from ..records.cold_warm import PASS_COUNTERS, PassPair, extra_keys_read_whole, pass_pairs
from ..records.key_diff import lookups_of
from ..records.report import as_int, limit_hit_count
from ..text import clip, count_noun, format_bytes, number
from .key_text import lookup_why, prominent
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
from .shard_text import describe_shard
from .summary import ATTENTION_OUTCOMES, HEADER, legend_lines, pool_figures, summary_row

CSS = """
*, *::before, *::after { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1320px; padding: 20px 24px 48px; color: #1d232a; background: #fff; }
h1 { font-size: 22px; margin: 4px 0 2px; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 28px 0 8px; }
h3 { font-size: 14px; margin: 16px 0 4px; color: #3b4652; }
.meta { color: #5b6670; margin: 0 0 6px; }
.verdict { font-weight: 600; margin: 12px 0 0; padding: 6px 12px; border-left: 4px solid #2e7d32;
           background: #f1f8f2; }
.verdict.bad { border-left-color: #c62828; background: #fdf1f1; }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(360px, 1fr)); gap: 0 40px; }
.facts > div { min-width: 0; }
table { border-collapse: collapse; margin: 6px 0 12px; max-width: 100%; }
th, td { text-align: left; padding: 3px 12px 3px 0; border-bottom: 1px solid #e3e7eb; vertical-align: top;
         overflow-wrap: anywhere; }
th { color: #5b6670; font-weight: 600; }
table.kv th { white-space: nowrap; }
td.num, th.num { text-align: right; }
.num, .nowrap { white-space: nowrap; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.small { font-size: 11.5px; color: #5b6670; }
table.tests { width: 100%; }
table.tests td { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
table.tests tr.has-headline td { border-bottom: none; }
table.tests tr.headline td { padding: 0 0 5px 14px; color: #8e1b1b; font-size: 12px; }
/* a zero-width block that fills its cell: a long headline wraps instead of widening every column it spans */
table.tests tr.headline div { width: 0; min-width: 100%; }
.path { color: #5b6670; }
/* in the overview the path is a line of its own above the test's name: names then line up */
table.tests .path { display: block; font-size: 11.5px; }
.arrow { color: #5b6670; }
section.test { border-top: 2px solid #e3e7eb; margin-top: 26px; }
section.test.attention { border-top-color: #c62828; }
section.test h2 { overflow-wrap: anywhere; }
section.test h2 .name { font-weight: 700; }
section.test h2 .path { font-weight: 400; }
.full-id { word-break: break-all; color: #5b6670; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font: 600 12px system-ui, sans-serif;
         color: #fff; background: #6c757d; vertical-align: middle; white-space: nowrap; }
.badge.passed { background: #2e7d32; } .badge.failed, .badge.error, .badge.crashed { background: #c62828; }
.badge.skipped { background: #8d6e00; } .badge.xfailed, .badge.xpassed { background: #5e35b1; }
.note { color: #5b6670; font-style: italic; }
.warn { color: #c62828; font-weight: 600; }
.failure { border-left: 4px solid #c62828; background: #fdf3f3; padding: 6px 12px; margin: 10px 0 14px; }
.failure-head { margin: 0 0 4px; font-weight: 600; color: #8e1b1b; }
pre { background: #f5f7f9; padding: 8px; margin: 4px 0 10px; font-size: 12px;
      white-space: pre-wrap; overflow-wrap: anywhere; }
.failure pre { background: none; padding: 0; margin: 0; font-size: 12.5px; line-height: 1.4; }
ul.reasons { padding-left: 20px; margin: 4px 0 10px; }
ul.reasons li { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; margin: 2px 0;
                white-space: pre-wrap; overflow-wrap: anywhere; }
table.passes caption { caption-side: top; text-align: left; padding: 0 0 4px; overflow-wrap: anywhere; }
table.passes th.pass { text-align: center; border-bottom: 2px solid #b8c0c8; color: #1d232a; }
table.passes .first { border-left: 1px solid #d3d9df; padding-left: 10px; }
table.passes td.na { color: #b8c0c8; }
table.passes tbody th, table.counters tbody th { white-space: nowrap; }
table.passes td.off { color: #c62828; font-weight: 700; }
details { margin: 8px 0 12px; }
details > summary { cursor: pointer; color: #3b4652; font-weight: 600; overflow-wrap: anywhere; }
svg.chart { display: block; margin: 6px 0 4px; max-width: 100%; height: auto; }
svg.chart text { font: 11px ui-monospace, Menlo, Consolas, monospace; fill: #1d232a; }
svg.chart .bar { fill: #4f7cac; } svg.chart .bar.largest { fill: #2c4f75; }
svg.chart .pool-line { stroke: #c62828; stroke-width: 2; }
svg.chart .largest-line { stroke: #1d232a; stroke-width: 1.5; stroke-dasharray: 5 3; }
svg.chart .bound-line { stroke: #7a7a7a; stroke-width: 1.5; stroke-dasharray: 2 2; }
svg.chart .axis { stroke: #b8c0c8; stroke-width: 1; }
p.legend-line { margin: 2px 0; }
.legend span { margin-right: 16px; font-size: 12px; }
@media (max-width: 1150px) {
  body { padding: 16px 16px 40px; }
  th, td { padding-right: 9px; }
  table.tests td { font-size: 12px; }
}
.swatch { display: inline-block; width: 18px; height: 3px; vertical-align: middle; margin-right: 4px; }
table.lookups td.why { overflow-wrap: anywhere; }
table.lookups tr.explained td { background: #fdf1f1; }
table.lookups tr.explained td.outcome { color: #c62828; font-weight: 700; }
table.lookups ul.reasons { margin: 0; padding-left: 16px; }
p.event { margin: 10px 0 2px; overflow-wrap: anywhere; }
table.guards td, table.ranks td { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
                                  font-size: 12.5px; }
table.guards td.unprinted { color: #8d6e00; }
table.regions tr.off td, table.ranks tr.off td { background: #fdf1f1; }
"""

# A failure's first line in the overview: enough to tell the failures apart, the whole message is below.
HEADLINE_WIDTH = 140


class Markup(str):
    """Markup built here from escaped parts: ``kv_table`` and friends put it in as it is."""


def escape(value: Any) -> str:
    """Report text as HTML text: ``None`` reads ``-``, everything else is ``str()`` and escaped."""
    return html.escape("-" if value is None else str(value), quote=True)


def _cell(value: Any) -> str:
    if isinstance(value, bool):  # a reader's word, not Python's True
        return "yes" if value else "no"
    return value if isinstance(value, Markup) else escape(value)


def section(record: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """``record[name]`` when it is a mapping, else an empty one (a report may hold anything)."""
    value = record.get(name)
    return value if isinstance(value, Mapping) else {}


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


# ----------------------------------------------------------------------------
# the run: environment and summary
# ----------------------------------------------------------------------------


def env_html(env: Mapping[str, Any]) -> str:
    if not env:
        return '<p class="note">The report has no environment block.</p>'
    return kv_table([(str(k), value_html(str(k), v)) for k, v in env.items()])


def _nonzero_counters(counts: Mapping[str, Any]) -> str:
    """``compiled 45, loaded 14``: the counters that moved (a zero says nothing among a dozen of them)."""
    shown = [f"{k} {v}" for k, v in counts.items() if not (isinstance(v, int) and v == 0)]
    return ", ".join(shown) or "all 0"


def summary_html(summary: Mapping[str, Any]) -> str:
    rows: list[tuple[str, Any]] = []
    outcomes = summary.get("outcomes")
    if isinstance(outcomes, Mapping):
        rows.append(("outcomes", ", ".join(f"{n} {o}" for o, n in outcomes.items()) or "none"))
    for key in (
        "tests",
        "graphs_captured",
        "recompiles",
        "recompile_limit_hits",
        "graph_breaks",
        "exitstatus",
        "complete",
        "not_run_count",
        "deselected",
    ):
        if key in summary:
            rows.append((key.replace("_", " "), summary[key]))
    reasons = summary.get("incomplete_reasons")
    if isinstance(reasons, list) and reasons:
        rows.append(("incomplete because", "; ".join(map(str, reasons))))
    selection = summary.get("selection")
    if isinstance(selection, Mapping) and selection:
        rows.append(("selection", " ".join(f"{flag} {expression!r}" for flag, expression in selection.items())))
    shard = summary.get("shard")
    if isinstance(shard, Mapping) and shard:
        rows.append(("shard", describe_shard(shard)))
    caches = summary.get("caches")
    note = ""
    if isinstance(caches, Mapping) and caches:
        for layer, counts in caches.items():
            if isinstance(counts, Mapping):
                rows.append((f"cache {layer}", _nonzero_counters(counts)))
        note = '<p class="note small">Cache counters of the whole run: cold and warm passes added up.</p>'
    return kv_table(rows) + note if rows else '<p class="note">The report has no summary block.</p>'


# ----------------------------------------------------------------------------
# the overview table
# ----------------------------------------------------------------------------


def _pool_cell(record: Mapping[str, Any]) -> Markup:
    """Pool / largest and the ratio on one line; the cuBLAS workspace and the set on a second, small one."""
    graphs = section(record, "graphs") or section(record, "piecewise")
    figures = pool_figures(graphs) if graphs else None
    if figures is None or (figures.pool is None and figures.largest is None):
        return Markup("-")
    first = f"{format_bytes(figures.pool, compact=True)} / {format_bytes(figures.largest, compact=True)}"
    second = []
    if figures.ratio is not None:
        first += f"  {figures.ratio:.2f}x"
        if figures.workspace:
            second.append(f"+{format_bytes(figures.workspace, compact=True)} cuBLAS")
        if figures.set_count > 1:
            second.append(f"set {figures.set_index + 1} of {figures.set_count}")
    cell = f'<span class="nowrap">{escape(first)}</span>'
    if second:
        cell += f'<br><span class="nowrap small">{escape(", ".join(second))}</span>'
    return Markup(cell)


def _cache_cell(text: str) -> Markup:
    """``1m 1s -> 1h`` on one line: a figure split over two lines reads as two figures."""
    cold, arrow, warm = text.partition(" -> ")
    if not arrow:
        return Markup(f'<span class="nowrap">{escape(text)}</span>')
    return Markup(f'<span class="nowrap">{escape(cold)} <span class="arrow">-&gt;</span> {escape(warm)}</span>')


def failure_headline(record: Mapping[str, Any]) -> str:
    """The first line of the test's failure message, clipped; empty when it has none."""
    message = section(record, "failure").get("message")
    return clip(message, HEADLINE_WIDTH, first_line=True) if isinstance(message, str) and message.strip() else ""


def overview_html(tests: list[tuple[str, Mapping[str, Any]]], anchors: Mapping[str, str]) -> str:
    """One row per test (the order given: failures first), a failure's first line under its row, a legend.

    The cells are the terminal summary's (``summary.summary_row``): a test with cold
    and warm passes shows cold -> warm, not the two added up.
    """
    head = "".join(f'<th class="nowrap">{escape(h)}</th>' for h in HEADER)
    body = []
    rows = []
    for nodeid, record in tests:
        cells = summary_row(nodeid, record)
        rows.append(cells)
        # cells[0] is the id clipped to NODEID_WIDTH: a 3000-character id must not widen the table
        shown = f'title="{escape(nodeid)}">{nodeid_html(cells[0])}'
        link = f'<a href="#{anchors[nodeid]}" {shown}</a>' if nodeid in anchors else f"<span {shown}</span>"
        headline = failure_headline(record)
        row = [link, badge(record.get("outcome", "?")), f'<span class="nowrap">{escape(cells[2])}</span>']
        row += [_pool_cell(record), f'<span class="nowrap">{escape(cells[4])}</span>']
        row += [_cache_cell(text) for text in cells[5:]]
        css = ' class="has-headline"' if headline else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
        if headline:
            body.append(f'<tr class="headline"><td colspan="{len(HEADER)}"><div>{escape(headline)}</div></td></tr>')
    table = f'<table class="tests"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    legend = "".join(f'<p class="small legend-line">{escape(line)}</p>' for line in legend_lines(rows))
    return table + legend


# ----------------------------------------------------------------------------
# a test's sections
# ----------------------------------------------------------------------------


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
            f'<p class="warn">Recompile limit hit {escape(hits)} time{"s" if hits != 1 else ""}: '
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


def _rest_table(value: Mapping[str, Any], drawn: tuple[str, ...]) -> str:
    rows = [(str(k), value_html(str(k), v)) for k, v in value.items() if k not in drawn]
    return kv_table(rows) if rows else ""


def _table(css: str, header: tuple[str, ...], rows: list[str], numeric: int = 0) -> str:
    """A table of rows built here; the last ``numeric`` columns' headers right-aligned."""
    num = ' class="num"'
    head = "".join(
        f"<th{num if index >= len(header) - numeric else ''}>{escape(name)}</th>" for index, name in enumerate(header)
    )
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


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
    parts.append(_rest_table(trees, drawn))
    rows = []
    for row in region_rows(trees):
        css = ' class="off"' if row[4] != "0" or (row[1] == row[2] == "0") else ""
        cells = f"<td>{escape(row[0])}</td>" + "".join(f'<td class="num">{escape(cell)}</td>' for cell in row[1:])
        rows.append(f"<tr{css}>{cells}</tr>")
    if rows:
        parts.append(_table("regions", REGION_HEADER, rows, numeric=4))
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
            f"{_table('cost', COST_HEADER, body, numeric=len(COST_HEADER))}</details>"
        )
    return "".join(parts)


def piecewise_html(piecewise: Mapping[str, Any]) -> str:
    """The piecewise figures, then each piece that ran without a graph and why, and the calls that replayed none."""
    parts = ["<h3>piecewise</h3>", _rest_table(piecewise, _PIECES_DRAWN), capture_cost_html(piecewise)]
    pieces = [piece for piece in piecewise.get("uncaptured") or [] if isinstance(piece, Mapping)]
    if pieces:
        parts.append(f"<p>Pieces that ran without a graph ({escape(len(pieces))}):</p>")
        rows = [f"<tr><td>{escape(p.get('piece'))}</td><td>{escape(p.get('reason'))}</td></tr>" for p in pieces]
        parts.append(_table("pieces", ("piece", "reason"), rows))
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
        parts.append(_table("ranks", RANK_HEADER, rows))
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


# -- compile caches ------------------------------------------------------------


def _seconds_text(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f} s" if value >= 100 else f"{value:.1f} s" if value >= 10 else f"{value:.2f} s"


def _off_a_pure_warm_start(layer: str, counter: str, value: int) -> bool:
    """What the compile_cache marker refuses on a warm pass: no hit, or any miss, save, bypass or Triton compile."""
    if layer == "triton":
        return counter == "compiled" and value > 0
    return value == 0 if counter == "hit" else value > 0


def _recorded_text(recorded: Any) -> str:
    if not isinstance(recorded, Mapping) or not recorded:
        return ""
    described = []
    for name, value in recorded.items():
        if isinstance(value, Mapping) and "dtype" in value:
            shape = value.get("shape")
            dims = "x".join(map(str, shape)) if isinstance(shape, list) else str(shape)
            described.append(f"{name} ({value.get('dtype')} {dims})")
        else:
            described.append(f"{name} ({json.dumps(value, default=str)})")
    return ", ".join(described)


def pass_pair_html(pair: PassPair) -> str:
    """One cold/warm pair: rows are the cache layers, columns the cold pass's counters, then the warm pass's."""
    layers = [layer for layer in PASS_COUNTERS if layer in pair.cold or layer in pair.warm]
    counters: list[str] = []
    for layer in layers:
        counters += [name for name, _ in PASS_COUNTERS[layer] if name not in counters]
    cold, warm = section(pair.source, "cold"), section(pair.source, "warm")
    caption = f"<b>{escape(pair.label)}</b>: cold pass {escape(_seconds_text(pair.cold_s))}"
    if isinstance(cold.get("process"), str):
        caption += f" in {escape(cold['process'])}"
    caption += f", warm pass {escape(_seconds_text(pair.warm_s))}"
    if pair.warm_process:
        caption += f" in {escape(pair.warm_process)}"
    head_counters = "".join(
        f'<th class="num{" first" if index == 0 else ""}">{escape(name)}</th>' for index, name in enumerate(counters)
    )
    head = (
        f'<tr><th rowspan="2">layer</th><th class="pass first" colspan="{len(counters)}">cold pass</th>'
        f'<th class="pass first" colspan="{len(counters)}">warm pass</th></tr><tr>{head_counters * 2}</tr>'
    )
    body = []
    off_seen = False
    for layer in layers:
        own = {name for name, _ in PASS_COUNTERS[layer]}
        cells = []
        for which, stats in (("cold", pair.cold), ("warm", pair.warm)):
            counts = stats.get(layer)
            for index, name in enumerate(counters):
                css = ["num"] + (["first"] if index == 0 else [])
                if name not in own:
                    cells.append(f'<td class="{" ".join(css + ["na"])}"></td>')
                    continue
                value = counts.get(name) if isinstance(counts, Mapping) else None
                title = ""
                if which == "warm" and value is not None and _off_a_pure_warm_start(layer, name, as_int(value)):
                    css.append("off")
                    title = ' title="not what a pure warm start shows"'
                    off_seen = True
                cells.append(f'<td class="{" ".join(css)}"{title}>{escape(value)}</td>')
        body.append(f"<tr><th>{escape(layer)}</th>{''.join(cells)}</tr>")
    parts = [
        f'<table class="passes"><caption>{caption}</caption><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
    ]
    notes = []
    if off_seen:
        notes.append(
            "red: not what a pure warm start shows (a pure one hits every layer, with no miss, save, "
            "bypass or Triton compile)"
        )
    recorded = _recorded_text(cold.get("recorded") or warm.get("recorded"))
    if recorded:
        notes.append(f"compared between the passes: {recorded}")
    cache_dir = warm.get("cache_dir") or cold.get("cache_dir")
    if cache_dir:
        notes.append(f"cache dir {cache_dir}")
    parts += [f'<p class="small">{escape(note)}</p>' for note in notes]
    parts.append(_why_not_cached(("cold pass", pair.cold), ("warm pass", pair.warm)))
    return "".join(parts)


def _why_not_cached(*passes: tuple[str, Mapping[str, Any]]) -> str:
    """Torch's bypass reasons and the layers a user turned off, per pass."""
    lines = []
    for label, stats in passes:
        reasons = stats.get("bypass_reasons")
        if isinstance(reasons, Mapping):
            for layer, items in reasons.items():
                for reason in items if isinstance(items, list) else [items]:
                    lines.append(f"bypass ({layer}{', ' + label if label else ''}): {reason}")
        disabled = stats.get("disabled")
        if isinstance(disabled, Mapping):
            lines += [f"turned off ({layer}{', ' + label if label else ''}): {why}" for layer, why in disabled.items()]
    return reasons_list(lines) if lines else ""


def counters_table(caches: Mapping[str, Any]) -> str:
    """A test's whole-life cache counters: rows are layers, the counters of the passes' tables, the rest as text."""
    layers = {layer: counts for layer, counts in caches.items() if isinstance(counts, Mapping)}
    layers = {layer: counts for layer, counts in layers.items() if layer not in ("bypass_reasons", "disabled")}
    if not layers:
        return ""
    counters: list[str] = []
    for layer in layers:
        counters += [name for name, _ in PASS_COUNTERS.get(layer, ()) if name not in counters]
    head = "<th>layer</th>" + "".join(f'<th class="num">{escape(name)}</th>' for name in counters) + "<th>other</th>"
    body = []
    for layer, counts in layers.items():
        own = [name for name, _ in PASS_COUNTERS.get(layer, ())]
        cells = "".join(
            f'<td class="num">{escape(counts.get(name))}</td>' if name in own else '<td class="num na"></td>'
            for name in counters
        )
        # Triton's listener, bundler and autotuner counters: only the ones that moved
        other = {k: v for k, v in counts.items() if k not in own}
        moved = {k: v for k, v in other.items() if not (isinstance(v, int) and v == 0)}
        other_text = _nonzero_counters(moved) if moved else "-"
        body.append(f'<tr><th>{escape(layer)}</th>{cells}<td class="small">{escape(other_text)}</td></tr>')
    table = f'<table class="counters"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return table + _why_not_cached(("", caches))


def caches_html(record: Mapping[str, Any]) -> str:
    """The cold/warm pairs as tables, then the test's whole-life counters (folded away when pairs tell the story)."""
    pairs = pass_pairs(record)
    caches = section(record, "caches")
    if not pairs:
        table = counters_table(caches)
        return "<h3>Compile caches</h3>" + table if table else ""
    parts = ["<h3>Compile caches: cold and warm passes</h3>"]
    for pair in pairs:
        parts.append(pass_pair_html(pair))
    whole = counters_table(caches)
    if whole:
        parts.append(
            "<details><summary>The test's whole-life counters (cold and warm passes added up)</summary>"
            f"{whole}</details>"
        )
    return "".join(parts)


def cache_keys_html(record: Mapping[str, Any]) -> str:
    """The test's cache lookups (``cache_keys``): layer, pass, graph, outcome, key, and why it missed.

    A miss or bypass with a reason (the components that differ from the cold pass,
    a bypass reason, a guard miss) is marked; the key shows its first 12
    characters, the whole key in its title.
    """
    lookups = lookups_of(record)
    if not lookups:
        return ""
    head = '<th>layer</th><th>pass</th><th class="num">graph</th><th>outcome</th><th>key</th><th>why</th>'
    body = []
    for lookup in lookups:
        why = lookup_why(lookup)
        items = list(lookup.explained)
        if items:
            against = f"compared with {lookup.compared_with}:" if lookup.compared_with else "compared:"
            rest = why[: len(why) - len(items)]
            cell = escape("; ".join(rest + [against])) + reasons_list(items)
        else:
            cell = escape("; ".join(why))
        key = f'<code title="{escape(lookup.key)}">{escape(lookup.key[:12])}</code>' if lookup.key else escape(None)
        css = ' class="explained"' if prominent(lookup) else ""
        body.append(
            f"<tr{css}><td>{escape(lookup.layer)}</td><td>{escape(lookup.pass_name)}</td>"
            f'<td class="num">{escape(lookup.graph)}</td><td class="outcome">{escape(lookup.outcome)}</td>'
            f'<td class="nowrap">{key}</td><td class="why">{cell}</td></tr>'
        )
    parts = [
        "<h3>Cache lookups</h3>",
        f'<table class="lookups"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>',
    ]
    note = section(record, "cache_keys").get("note")
    if isinstance(note, str) and note:
        parts.append(f'<p class="small">{escape(note)}</p>')
    return "".join(parts)


def extra_html(extra: Any) -> str:
    """What ``extra`` holds beyond the passes drawn as tables (``compile_cache``, ``cold_warm``), folded away.

    The rest is the plugin's notes (state put back after the test, objects it
    closed, the runs of a test joined from several workers): rarely the verdict.
    """
    if extra in (None, {}, []):
        return ""
    if not isinstance(extra, Mapping):
        return f"<details><summary>extra</summary>{json_block(extra)}</details>"
    drawn = extra_keys_read_whole({"extra": extra})
    rest = {str(k): v for k, v in extra.items() if k not in drawn}
    if not rest:
        return ""
    rows = [(key, value_html(key, value)) for key, value in rest.items()]
    return f"<details><summary>extra: {escape(', '.join(rest))}</summary>{kv_table(rows)}</details>"
