"""Render a run report as one self-contained HTML page (``pytest-cudagraph show R.json --html OUT.html``).

The page needs nothing but a browser: inline CSS, inline SVG, no JavaScript, no
fonts or images fetched from anywhere, so it can be attached to a CI run and opened
offline.  Every string taken from the report (node ids, guard-failure reasons,
failure messages, user ``env`` fields) is HTML-escaped; a report cannot inject markup.

What a reader needs first comes first: a verdict line, then the tests that failed,
errored, crashed or hit the recompile limit, each with its failure message (the
plugin's own table and hints), then the rest.  A test that ran cold and warm
passes shows them as a table per pair (``passes.pass_pairs``), not the counters
added up, which make a perfect warm start read "1 hit, 1 miss".  A test that
recorded cache lookups (``cache_keys``) gets a table of them, a miss or bypass with
a known reason (the components that differ from the cold pass) marked.  A test that
compiled gets its compile time per phase, a stacked bar and a table of seconds and
shares (cold -> warm for its passes); one that compiled nothing (a skipped test) none.
The run's summary shows its cache counters cold -> warm where tests ran passes.

For each test with CUDA graphs the page draws the invariant the plugin checks: one
bar per capture size showing that size's high-water mark (``graphs.graph_bytes``),
against two vertical lines, the shared pool (``graphs.pool_bytes``) and the largest
graph (``graphs.largest_graph_bytes``).  Graphs that share a pool well have a pool
line close to the largest-graph line; a pool line far to the right of every bar is
the smell (separate pools, outputs kept alive, smallest-first capture).

The page's style sheet lives in ``html_page``, its parts in ``html_parts``, ``html_run``,
``html_test``, ``html_caches`` and ``html_compile``.

The page reads the report's typed view (``records.loaded.LoadedReport``); where it
shows every field of a section (a section no type names, the fields of one beside
what is drawn, ``extra``), it reads the section as read, so nothing a report
carries is left off the page.  The cells it shares with the terminal summary are
drawn by ``summary``, which reads records as mappings (the live run's are not
checked), from each record as read.

Example::

    from pytest_cudagraph.records.loaded import read_report
    from pytest_cudagraph.render.show import render_html
    Path("run.html").write_text(render_html(read_report("run.json")), encoding="utf-8")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.json_values import number
from ..records.loaded import LoadedReport, RecordRead, given, is_set, typed_report
from ..records.output_paths import HTML_GENERATOR
from ..records.schema import Graphs, GraphSet, Summary
from .html_caches import cache_keys_html, caches_html, extra_html
from .html_compile import compile_time_html
from .html_page import CSS
from .html_parts import badge, escape, kv_table, nodeid_html
from .html_run import env_html, overview_html, summary_html
from .html_test import capture_cost_html, failure_html, recompiles_html, section_html
from .plain_text import clip_nodeid, format_bytes
from .summary import (
    disabled_layer_lines,
    first_use_lines,
    gpu_skip_lines,
    needs_attention,
    pool_figures,
    pool_text,
    totals_line,
)

__all__ = ["graph_bytes_by_size", "pool_chart_svg", "render_html"]

# chart geometry, in SVG user units (pixels)
_LABEL_W = 86
_BAR_AREA_W = 560
_VALUE_W = 120
_ROW_H = 18
_TOP = 22
_BOTTOM = 8
_CHAR_W = 7  # a generous width of one character of the labels' 11px monospace font


# ----------------------------------------------------------------------------
# the chart
# ----------------------------------------------------------------------------


def graph_bytes_by_size(graphs: GraphSet) -> list[tuple[int, float]] | None:
    """``graphs.graph_bytes`` as (size, bytes) sorted by size; None when the record has no per-size figures."""
    raw = given(graphs.graph_bytes)
    if not raw:
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


def pool_chart_svg(graphs: GraphSet, title: str = "") -> str:
    """An SVG bar chart: one bar per capture size (its high-water mark), pool and largest graph as lines.

    Returns a note instead of a chart when ``graphs`` has no ``graph_bytes``.
    """
    pairs = graph_bytes_by_size(graphs)
    if pairs is None:
        return (
            '<p class="note">No per-size chart: this record has no <code>graphs.graph_bytes</code> '
            "(per-size high-water marks).</p>"
        )
    pool = number(given(graphs.pool_bytes), finite=True)
    largest = number(given(graphs.largest_graph_bytes), finite=True)
    workspace = number(given(graphs.cublas_workspace_bytes), finite=True)
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
        f'aria-label="{escape(title or "graph memory per capture size")}">',
        f'<line class="axis" x1="{_LABEL_W}" y1="{_TOP - 4}" x2="{_LABEL_W}" y2="{height - _BOTTOM}"/>',
    ]
    for row, (size, value) in enumerate(pairs):
        y = _TOP + row * _ROW_H
        bar_w = max(x_of(value) - _LABEL_W, 0.5)
        css = "bar largest" if size == largest_size else "bar"
        parts.append(f'<text x="{_LABEL_W - 6}" y="{y + 12}" text-anchor="end">size {size}</text>')
        shown = escape(format_bytes(value, compact=True))
        parts.append(
            f'<rect class="{css}" data-size="{size}" x="{_LABEL_W}" y="{y + 2}" width="{bar_w:.1f}" '
            f'height="{_ROW_H - 5}"><title>size {size}: {shown} ({int(value)} bytes)</title></rect>'
        )
        parts.append(f'<text x="{_LABEL_W + bar_w + 6:.1f}" y="{y + 12}">{shown}</text>')
    for mark, css, label in (
        (largest, "largest-line", "largest"),
        (bound, "bound-line", "largest + cuBLAS workspace"),
        (pool, "pool-line", "pool"),
    ):
        if mark is None:
            continue
        x = x_of(mark)
        parts.append(
            f'<line class="{css}" x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" y2="{height - _BOTTOM}">'
            f"<title>{label}: {escape(format_bytes(mark, compact=True))} ({int(mark)} bytes)</title></line>"
        )
    named = ((largest, "largest"), (bound, "+cuBLAS"), (pool, "pool"))
    lines = sorted(((value, name) for value, name in named if value is not None), key=lambda item: item[0])
    parts += _line_labels(
        [(x_of(value), f"{name} {format_bytes(value, compact=True)}") for value, name in lines], width
    )
    parts.append("</svg>")
    return "".join(parts) + _chart_legend(bound is not None)


def _line_labels(labels: list[tuple[float, str]], width: int) -> list[str]:
    """The labels of the chart's lines, (x of the line, text) each from left to right, above the bars, kept apart.

    When the lines are close, each label is pushed right past the one before it,
    then, where that runs past the chart's right edge, the row pushed back left from the edge.
    """
    starts: list[float] = []
    previous_end = -1e9
    for x, label in labels:
        starts.append(max(x, previous_end + 4))
        previous_end = starts[-1] + _CHAR_W * len(label)
    right_edge = float(width)
    for index in reversed(range(len(labels))):
        starts[index] = max(min(starts[index], right_edge - _CHAR_W * len(labels[index][1])), 0.0)
        right_edge = starts[index] - 4
    return [
        f'<text x="{x:.1f}" y="{_TOP - 8}" text-anchor="start">{escape(label)}</text>'
        for x, (_, label) in zip(starts, labels)
    ]


def _chart_legend(with_bound: bool) -> str:
    """What the bars and lines are; the dotted line of largest + cuBLAS workspace only where the chart draws it."""
    return (
        '<div class="legend"><span><i class="swatch" style="background:#4f7cac"></i>per-size high-water mark</span>'
        '<span><i class="swatch" style="background:#c62828"></i>shared pool</span>'
        '<span><i class="swatch" style="background:#1d232a"></i>largest graph (dashed)</span>'
        + (
            '<span><i class="swatch" style="background:#7a7a7a"></i>largest graph + cuBLAS workspace (dotted)</span>'
            if with_bound
            else ""
        )
        + "</div>"
    )


# ----------------------------------------------------------------------------
# the page
# ----------------------------------------------------------------------------


def _graphs_html(graphs: Graphs, fields: Mapping[str, Any]) -> str:
    """The test's graphs: figures, capture cost, the pool chart (``fields``: the section as read, for the summary's figures)."""
    parts = ["<h3>CUDA graphs</h3>"]
    pool = number(given(graphs.pool_bytes), finite=True)
    largest = number(given(graphs.largest_graph_bytes), finite=True)
    rows: list[tuple[str, Any]] = [
        ("captured", given(graphs.captured)),
        ("sizes", ", ".join(map(str, given(graphs.sizes) or [])) or "-"),
        ("pool", format_bytes(pool, compact=True)),
        ("largest graph", format_bytes(largest, compact=True)),
    ]
    workspace = number(given(graphs.cublas_workspace_bytes), finite=True)
    if workspace:
        rows.append(("cuBLAS workspace (in the pool)", format_bytes(workspace, compact=True)))
    figures = pool_figures(fields)
    if figures.ratio is not None and figures.set_count > 1:
        # the merged maxima may come from different sets: only one set's own figures make a ratio
        rows.append(("worst set: pool / largest", pool_text(figures)))
    elif figures.ratio is not None:
        rows.append(("(pool - workspace) / largest", f"{figures.ratio:.2f}x"))
    for key, value in (("max_abs_err", graphs.max_abs_err), ("capture_s", graphs.capture_s)):
        if is_set(value):
            rows.append((key, value))
    parts.append(kv_table(rows))
    parts.append(capture_cost_html(graphs))
    sets = given(graphs.sets) or []
    if graph_bytes_by_size(graphs) is None and any(graph_bytes_by_size(s) for s in sets):
        for index, one in enumerate(sets):
            parts.append(f"<h3>graph set {index + 1} of {len(sets)}</h3>")
            parts.append(pool_chart_svg(one, f"graph set {index + 1}"))
    else:
        parts.append(pool_chart_svg(graphs))
    return "".join(parts)


# the sections a test's page draws itself; any other key of the record gets a table of its values
_DRAWN = (
    "outcome",
    "duration_s",
    "failure",
    "graphs",
    "recompiles",
    "caches",
    "cache_passes",  # drawn with the passes, from extra
    "cache_keys",
    "compile_time",
    "extra",
)
_SWEEPS = ("cache_sweeps", "bundle_cycle", "precompiled")  # drawn by html_caches.caches_html


def _test_html(nodeid: str, anchor: str, read: RecordRead, env: Mapping[str, Any]) -> str:
    typed, record = read  # the record's types, and the mapping it was read from (every section)
    outcome = typed.outcome
    shown = clip_nodeid(nodeid)
    css = "test attention" if needs_attention(record) else "test"
    parts = [
        f'<section class="{css}" id="{anchor}"><h2 title="{escape(nodeid)}">{nodeid_html(shown)} {badge(outcome)}</h2>'
    ]
    if shown != nodeid:  # the whole id once, wrapped, below the clipped heading
        parts.append(f'<p class="mono full-id">{escape(nodeid)}</p>')
    meta = [f"duration {escape(typed.duration_s)} s"] if is_set(typed.duration_s) else []
    skip_reason = given(typed.skip_reason)
    if skip_reason is not None:
        meta.append(f"skipped: {escape(skip_reason)}")
    if meta:
        parts.append(f'<p class="meta">{"; ".join(meta)}</p>')
    parts.append(failure_html(typed))
    graphs, graphs_fields = given(typed.graphs), record.get("graphs")
    if graphs is not None and graphs_fields:
        parts.append(_graphs_html(graphs, graphs_fields))
    recompiles = given(typed.recompiles)
    if recompiles is not None and record.get("recompiles"):
        parts.append(recompiles_html(recompiles))
    parts.append(caches_html(read))
    parts.append(cache_keys_html(typed))
    parts.append(compile_time_html(read, env))
    # every other section, those no type names included, as read
    for key, value in record.items():
        if key in _DRAWN + _SWEEPS or value in (None, {}, []) or (key == "skip_reason" and isinstance(value, str)):
            continue
        parts.append(section_html(str(key), value, typed))
    parts.append(extra_html(given(typed.extra)))
    parts.append("</section>")
    return "".join(parts)


def render_html(report: LoadedReport | Mapping[str, Any], title: str = "pytest-cudagraph report") -> str:
    """The report as one HTML page: a verdict, environment and summary, the tests (failures first), one section each.

    ``report`` is a ``read_report``; a report as a mapping (built in memory) is
    checked first (``typed_report``: ReportError naming a field of the wrong type).
    """
    loaded = typed_report(report, name="given to render_html")
    env = given(loaded.report.env) or {}
    reads = {nodeid: loaded.record(nodeid) for nodeid in loaded.tests}
    # the terminal summary's figures read records as mappings: each record as read
    records = {nodeid: read.data for nodeid, read in reads.items()}
    # failures first, each group in the run's order
    tests = sorted(reads.items(), key=lambda item: not needs_attention(item[1].data))
    anchors = {nodeid: f"t{index}" for index, (nodeid, _) in enumerate(tests)}
    torch_version = env.get("torch")
    created = given(loaded.report.created)
    subtitle = f"schema {loaded.report.schema}, written {'at an unknown time' if created is None else created}"
    if torch_version:
        subtitle += f", torch {torch_version}"
    summary = given(loaded.report.summary) or Summary()
    attention = any(needs_attention(record) for record in records.values())
    verdict = totals_line(records) if records else "no tests"
    if summary.complete is False:  # tests that never ran are no tests that passed
        verdict += "; the run is incomplete (see the summary)"
        attention = True
    # GPU tests skipped for want of a GPU or of --cudagraph: a CPU run is never taken for a GPU pass
    verdict_lines = [verdict, *gpu_skip_lines(records), *first_use_lines(records), *disabled_layer_lines(records)]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        HTML_GENERATOR,  # what tells a page `show --html` may write over
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f'<h1>{escape(title)}</h1><p class="meta">{escape(subtitle)}</p>',
        f'<p class="verdict{" bad" if attention else ""}">{"<br>".join(map(escape, verdict_lines))}</p>',
        '<div class="facts"><div><h2>Environment</h2>',
        env_html(env),
        "</div><div><h2>Summary</h2>",
        summary_html(summary, records),
        "</div></div>",
        "<h2>Tests</h2>",
        overview_html(tests, anchors) if tests else '<p class="note">The report has no tests.</p>',
    ]
    parts += [_test_html(nodeid, anchors[nodeid], read, env) for nodeid, read in tests]
    parts.append("</body></html>\n")
    return "\n".join(parts)
