"""Render a run report as one self-contained HTML page (``pytest-cudagraph show R.json --html OUT.html``).

The page needs nothing but a browser: inline CSS, inline SVG, no JavaScript, no
fonts or images fetched from anywhere, so it can be attached to a CI run and opened
offline.  Every string taken from the report (node ids, guard-failure reasons,
user ``env`` fields) is HTML-escaped; a report cannot inject markup.

For each test with CUDA graphs the page draws the invariant the plugin checks: one
bar per capture size showing that size's high-water mark (``graphs.graph_bytes``),
against two vertical lines, the shared pool (``graphs.pool_bytes``) and the largest
graph (``graphs.largest_graph_bytes``).  Graphs that share a pool well have a pool
line close to the largest-graph line; a pool line far to the right of every bar is
the smell (separate pools, outputs kept alive, smallest-first capture).

Example::

    from pytest_cudagraph.report import load_report
    from pytest_cudagraph.show import render_html
    Path("run.html").write_text(render_html(load_report("run.json")), encoding="utf-8")
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from .report import as_int, limit_hit_count
from .summary import HEADER, pool_figures, pool_text, summary_row
from .text import clip_nodeid, format_bytes, number

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
       max-width: 1100px; padding: 0 16px; color: #1d232a; background: #fff; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 17px; margin-top: 28px; }
h3 { font-size: 14px; margin: 14px 0 4px; color: #3b4652; }
.meta { color: #5b6670; margin-top: 0; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #e3e7eb; vertical-align: top; }
th { color: #5b6670; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
section.test { border-top: 2px solid #e3e7eb; margin-top: 22px; }
section.test h2 { word-break: break-all; }
.full-id { word-break: break-all; color: #5b6670; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font-size: 12px; font-weight: 600;
         color: #fff; background: #6c757d; vertical-align: middle; }
.badge.passed { background: #2e7d32; } .badge.failed, .badge.error, .badge.crashed { background: #c62828; }
.badge.skipped { background: #8d6e00; } .badge.xfailed, .badge.xpassed { background: #5e35b1; }
.note { color: #5b6670; font-style: italic; }
.warn { color: #c62828; font-weight: 600; }
ul.reasons li { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; margin: 2px 0; }
pre { background: #f5f7f9; padding: 8px; overflow-x: auto; font-size: 12px; }
svg.chart { display: block; margin: 6px 0 4px; }
svg.chart text { font: 11px ui-monospace, Menlo, Consolas, monospace; fill: #1d232a; }
svg.chart .bar { fill: #4f7cac; } svg.chart .bar.largest { fill: #2c4f75; }
svg.chart .pool-line { stroke: #c62828; stroke-width: 2; }
svg.chart .largest-line { stroke: #1d232a; stroke-width: 1.5; stroke-dasharray: 5 3; }
svg.chart .bound-line { stroke: #7a7a7a; stroke-width: 1.5; stroke-dasharray: 2 2; }
svg.chart .axis { stroke: #b8c0c8; stroke-width: 1; }
.legend span { margin-right: 16px; font-size: 12px; }
.swatch { display: inline-block; width: 18px; height: 3px; vertical-align: middle; margin-right: 4px; }
"""

# chart geometry, in SVG user units (pixels)
_LABEL_W = 86
_BAR_AREA_W = 560
_VALUE_W = 120
_ROW_H = 18
_TOP = 22
_BOTTOM = 8


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value), quote=True)


def _section(record: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = record.get(name)
    return value if isinstance(value, Mapping) else {}


# ----------------------------------------------------------------------------
# the chart
# ----------------------------------------------------------------------------


def graph_bytes_by_size(graphs: Mapping[str, Any]) -> list[tuple[int, float]] | None:
    """``graphs.graph_bytes`` as (size, bytes) sorted by size; None when the record has no per-size figures."""
    raw = graphs.get("graph_bytes")
    if not isinstance(raw, Mapping) or not raw:
        return None
    pairs = []
    for size, value in raw.items():
        figure = number(value, finite=True)
        try:
            size_int = int(size)
        except (TypeError, ValueError):
            continue
        if figure is not None:
            pairs.append((size_int, figure))
    return sorted(pairs) or None


def pool_chart_svg(graphs: Mapping[str, Any], title: str = "") -> str:
    """An SVG bar chart: one bar per capture size (its high-water mark), pool and largest graph as lines.

    Returns a note instead of a chart when ``graphs`` has no ``graph_bytes``.
    """
    pairs = graph_bytes_by_size(graphs)
    if pairs is None:
        return (
            '<p class="note">No per-size chart: this record has no <code>graphs.graph_bytes</code> '
            "(per-size high-water marks).</p>"
        )
    pool = number(graphs.get("pool_bytes"), finite=True)
    largest = number(graphs.get("largest_graph_bytes"), finite=True)
    workspace = number(graphs.get("cublas_workspace_bytes"), finite=True)
    # The first capture puts the cuBLAS workspace into the pool; the per-size marks do
    # not hold it, so a well-shared pool sits near "largest + workspace", not "largest".
    bound = largest + workspace if largest is not None and workspace else None
    scale_max = max([b for _, b in pairs] + [v for v in (pool, largest, bound) if v is not None]) or 1.0
    largest_size = max(pairs, key=lambda p: p[1])[0]
    height = _TOP + _ROW_H * len(pairs) + _BOTTOM
    width = _LABEL_W + _BAR_AREA_W + _VALUE_W

    def x_of(value: float) -> float:
        return _LABEL_W + _BAR_AREA_W * value / scale_max

    parts = [
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_e(title or "graph memory per capture size")}">',
        f'<line class="axis" x1="{_LABEL_W}" y1="{_TOP - 4}" x2="{_LABEL_W}" y2="{height - _BOTTOM}"/>',
    ]
    for row, (size, value) in enumerate(pairs):
        y = _TOP + row * _ROW_H
        bar_w = max(x_of(value) - _LABEL_W, 0.5)
        css = "bar largest" if size == largest_size else "bar"
        parts.append(f'<text x="{_LABEL_W - 6}" y="{y + 12}" text-anchor="end">size {size}</text>')
        shown = _e(format_bytes(value, compact=True))
        parts.append(
            f'<rect class="{css}" data-size="{size}" x="{_LABEL_W}" y="{y + 2}" width="{bar_w:.1f}" '
            f'height="{_ROW_H - 5}"><title>size {size}: {shown} ({int(value)} bytes)</title></rect>'
        )
        parts.append(f'<text x="{_LABEL_W + bar_w + 6:.1f}" y="{y + 12}">{shown}</text>')
    for value, css, label in (
        (largest, "largest-line", "largest"),
        (bound, "bound-line", "largest + cuBLAS workspace"),
        (pool, "pool-line", "pool"),
    ):
        if value is None:
            continue
        x = x_of(value)
        parts.append(
            f'<line class="{css}" x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" y2="{height - _BOTTOM}">'
            f"<title>{label}: {_e(format_bytes(value, compact=True))} ({int(value)} bytes)</title></line>"
        )
    # labels of the two lines sit above the bars; when the lines are close, keep them apart
    labels = [(v, t) for v, t in ((largest, "largest"), (bound, "+cuBLAS"), (pool, "pool")) if v is not None]
    last_end = -1e9
    for value, text in sorted(labels, key=lambda p: p[0]):
        label = f"{text} {format_bytes(value, compact=True)}"
        # pushed right past the previous label, but never past the chart's right edge
        x = min(max(x_of(value), last_end + 4), width - 7 * len(label))
        parts.append(f'<text x="{x:.1f}" y="{_TOP - 8}" text-anchor="start">{_e(label)}</text>')
        last_end = x + 7 * len(label)
    parts.append("</svg>")
    legend = (
        '<div class="legend"><span><i class="swatch" style="background:#4f7cac"></i>per-size high-water mark</span>'
        '<span><i class="swatch" style="background:#c62828"></i>shared pool</span>'
        '<span><i class="swatch" style="background:#1d232a"></i>largest graph (dashed)</span>'
        + (
            '<span><i class="swatch" style="background:#7a7a7a"></i>largest graph + cuBLAS workspace (dotted)</span>'
            if bound is not None
            else ""
        )
        + "</div>"
    )
    return "".join(parts) + legend


# ----------------------------------------------------------------------------
# page parts
# ----------------------------------------------------------------------------


def _kv_table(rows: list[tuple[str, Any]]) -> str:
    body = "".join(f'<tr><th>{_e(k)}</th><td class="mono">{_e(v)}</td></tr>' for k, v in rows)
    return f"<table>{body}</table>"


def _env_html(env: Mapping[str, Any]) -> str:
    if not env:
        return '<p class="note">The report has no environment block.</p>'
    return _kv_table([(k, v) for k, v in env.items()])


def _summary_html(summary: Mapping[str, Any]) -> str:
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
    caches = summary.get("caches")
    if isinstance(caches, Mapping):
        for layer, counts in caches.items():
            if isinstance(counts, Mapping):
                rows.append((f"cache {layer}", ", ".join(f"{k} {v}" for k, v in counts.items())))
    return _kv_table(rows) if rows else ""


def _overview_html(tests: Mapping[str, Mapping[str, Any]], anchors: Mapping[str, str]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in HEADER)
    body = []
    for nodeid, record in tests.items():
        cells = summary_row(nodeid, record)
        # cells[0] is the id clipped to NODEID_WIDTH: a 3000-character id must not widen the table
        shown = f'title="{_e(nodeid)}">{_e(cells[0])}'
        first = f'<a href="#{anchors[nodeid]}" {shown}</a>' if nodeid in anchors else f"<span {shown}</span>"
        outcome = str(record.get("outcome", "?"))
        rest = "".join(f'<td class="mono">{_e(c)}</td>' for c in cells[2:])
        body.append(
            f'<tr><td class="mono">{first}</td><td><span class="badge {_e(outcome)}">{_e(outcome)}</span></td>{rest}</tr>'
        )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _graphs_html(graphs: Mapping[str, Any]) -> str:
    parts = ["<h3>CUDA graphs</h3>"]
    pool = number(graphs.get("pool_bytes"), finite=True)
    largest = number(graphs.get("largest_graph_bytes"), finite=True)
    rows: list[tuple[str, Any]] = [
        ("captured", graphs.get("captured")),
        ("sizes", ", ".join(map(str, graphs.get("sizes") or [])) or "-"),
        ("pool", format_bytes(pool, compact=True)),
        ("largest graph", format_bytes(largest, compact=True)),
    ]
    workspace = number(graphs.get("cublas_workspace_bytes"), finite=True)
    if workspace:
        rows.append(("cuBLAS workspace (in the pool)", format_bytes(workspace, compact=True)))
    figures = pool_figures(graphs)
    if figures.ratio is not None and figures.set_count > 1:
        # the merged maxima may come from different sets: only one set's own figures make a ratio
        rows.append(("worst set: pool / largest", pool_text(figures)))
    elif figures.ratio is not None:
        rows.append(("(pool - workspace) / largest", f"{figures.ratio:.2f}x"))
    for key in ("max_abs_err", "capture_s"):
        if key in graphs:
            rows.append((key, graphs[key]))
    parts.append(_kv_table(rows))
    sets = graphs.get("sets")
    if (
        graph_bytes_by_size(graphs) is None
        and isinstance(sets, list)
        and any(isinstance(s, Mapping) and graph_bytes_by_size(s) for s in sets)
    ):
        for index, one in enumerate(sets):
            if isinstance(one, Mapping):
                parts.append(f"<h3>graph set {index + 1} of {len(sets)}</h3>")
                parts.append(pool_chart_svg(one, f"graph set {index + 1}"))
    else:
        parts.append(pool_chart_svg(graphs))
    return "".join(parts)


def _recompiles_html(rec: Mapping[str, Any]) -> str:
    parts = [f"<h3>Recompiles: {_e(as_int(rec.get('count')))}</h3>"]
    hits = limit_hit_count(rec)
    if hits:
        parts.append(
            f'<p class="warn">Recompile limit hit {_e(hits)} times: Dynamo silently ran those frames eagerly.</p>'
        )
        if isinstance(rec.get("limit_hits"), list):
            parts.append('<ul class="reasons">' + "".join(f"<li>{_e(h)}</li>" for h in rec["limit_hits"]) + "</ul>")
    by_function = rec.get("by_function")
    if isinstance(by_function, Mapping) and by_function:
        for function, entry in by_function.items():
            # {"count", "reasons", "limit_hits"} per function; older records held the reasons list
            reasons = entry.get("reasons") if isinstance(entry, Mapping) else entry
            items = reasons if isinstance(reasons, list) else [reasons]
            count = f" ({as_int(entry.get('count'))} recompiles)" if isinstance(entry, Mapping) else ""
            parts.append(f'<p class="mono">{_e(function)}{_e(count)}</p>')
            parts.append('<ul class="reasons">' + "".join(f"<li>{_e(r)}</li>" for r in items) + "</ul>")
    elif rec.get("reasons"):
        parts.append('<ul class="reasons">' + "".join(f"<li>{_e(r)}</li>" for r in rec["reasons"]) + "</ul>")
    breaks = rec.get("graph_breaks")
    if isinstance(breaks, Mapping) and as_int(breaks.get("count")):
        parts.append(f"<p>Graph breaks: {_e(as_int(breaks.get('count')))}</p>")
        if breaks.get("reasons"):
            parts.append('<ul class="reasons">' + "".join(f"<li>{_e(r)}</li>" for r in breaks["reasons"]) + "</ul>")
    return "".join(parts)


def _caches_html(caches: Mapping[str, Any]) -> str:
    layers = {k: v for k, v in caches.items() if isinstance(v, Mapping)}
    if not layers:
        return ""
    keys: list[str] = []
    for counts in layers.values():
        keys += [k for k in counts if k not in keys]
    head = "<th>layer</th>" + "".join(f"<th>{_e(k)}</th>" for k in keys)
    body = "".join(
        f"<tr><th>{_e(layer)}</th>" + "".join(f'<td class="num">{_e(counts.get(k))}</td>' for k in keys) + "</tr>"
        for layer, counts in layers.items()
    )
    return f"<h3>Compile caches</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _json_block(title: str, value: Any) -> str:
    if isinstance(value, Mapping) and all(isinstance(v, (str, int, float, bool)) or v is None for v in value.values()):
        return f"<h3>{_e(title)}</h3>" + _kv_table(list(value.items()))
    text = json.dumps(value, indent=2, default=str, sort_keys=True)
    return f"<h3>{_e(title)}</h3><pre>{_e(text)}</pre>"


def _test_html(nodeid: str, anchor: str, record: Mapping[str, Any]) -> str:
    outcome = str(record.get("outcome", "?"))
    shown = clip_nodeid(nodeid)
    parts = [
        f'<section class="test" id="{anchor}"><h2 title="{_e(nodeid)}">{_e(shown)} '
        f'<span class="badge {_e(outcome)}">{_e(outcome)}</span></h2>'
    ]
    if shown != nodeid:  # the whole id once, wrapped, below the clipped heading
        parts.append(f'<p class="mono full-id">{_e(nodeid)}</p>')
    if "duration_s" in record:
        parts.append(f'<p class="meta">duration {_e(record["duration_s"])} s</p>')
    graphs = _section(record, "graphs")
    if graphs:
        parts.append(_graphs_html(graphs))
    rec = _section(record, "recompiles")
    if rec:
        parts.append(_recompiles_html(rec))
    caches = _section(record, "caches")
    if caches:
        parts.append(_caches_html(caches))
    for key, value in record.items():
        if key in ("outcome", "duration_s", "graphs", "recompiles", "caches") or value in (None, {}, []):
            continue
        parts.append(_json_block(key, value))
    parts.append("</section>")
    return "".join(parts)


def render_html(report: Mapping[str, Any], title: str = "pytest-cudagraph report") -> str:
    """The report as one HTML page: environment, summary, an overview table, and one section per test."""
    env = _section(report, "env")
    tests = {str(k): v for k, v in _section(report, "tests").items() if isinstance(v, Mapping)}
    anchors = {nodeid: f"t{index}" for index, nodeid in enumerate(tests)}
    torch_version = env.get("torch")
    subtitle = f"schema {report.get('schema')}, written {report.get('created', 'at an unknown time')}"
    if torch_version:
        subtitle += f", torch {torch_version}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f'<h1>{_e(title)}</h1><p class="meta">{_e(subtitle)}</p>',
        "<h2>Environment</h2>",
        _env_html(env),
        "<h2>Summary</h2>",
        _summary_html(_section(report, "summary")),
        "<h2>Tests</h2>",
        _overview_html(tests, anchors) if tests else '<p class="note">The report has no tests.</p>',
    ]
    parts += [_test_html(nodeid, anchors[nodeid], record) for nodeid, record in tests.items()]
    parts.append("</body></html>\n")
    return "\n".join(parts)
