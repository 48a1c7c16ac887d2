"""The run's parts of the HTML page: its environment, its summary, and the overview table of its tests.

Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.cold_warm import PASS_COUNTERS, added_up, disabled_layers, pass_pairs
from ..records.loaded import RecordRead, filled, given, is_set
from ..records.report import as_int
from ..records.schema import Failure, Summary, TestRecord
from .html_parts import Markup, badge, escape, kv_table, nodeid_html, nonzero_counters, value_html
from .plain_text import bytes_pair, clip, count_noun, format_bytes
from .record_text import section
from .shard_text import describe_shard
from .summary import HEADER, legend_lines, pool_figures, summary_row

__all__ = ["HEADLINE_WIDTH", "env_html", "failure_headline", "overview_html", "summary_html"]

# A failure's first line in the overview: enough to tell the failures apart, the whole message is below.
HEADLINE_WIDTH = 140


# ----------------------------------------------------------------------------
# the run: environment and summary
# ----------------------------------------------------------------------------


def env_html(env: Mapping[str, Any]) -> str:
    if not env:
        return '<p class="note">The report has no environment block.</p>'
    return kv_table([(str(k), value_html(str(k), v)) for k, v in env.items()])


def summary_html(summary: Summary, records: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The run's summary block; its cache counters cold -> warm where tests ran passes (``records`` given).

    ``records`` are the tests' records as read: their passes live under ``extra``,
    which the types leave open, and their counters are added up whole.
    """
    rows: list[tuple[str, Any]] = []
    outcomes = given(summary.outcomes)
    if outcomes is not None:
        rows.append(("outcomes", ", ".join(f"{n} {o}" for o, n in outcomes.items()) or "none"))
    for key, value in (
        ("tests", summary.tests),
        ("graphs_captured", summary.graphs_captured),
        ("recompiles", summary.recompiles),
        ("recompile_limit_hits", summary.recompile_limit_hits),
        ("graph_breaks", summary.graph_breaks),
        ("exitstatus", summary.exitstatus),
        ("complete", summary.complete),
        ("not_run_count", summary.not_run_count),
        ("deselected", summary.deselected),
    ):
        if is_set(value):
            rows.append((key.replace("_", " "), value))
    reasons = given(summary.incomplete_reasons)
    if reasons:
        rows.append(("incomplete because", "; ".join(map(str, reasons))))
    selection = given(summary.selection)
    if selection:
        rows.append(("selection", " ".join(f"{flag} {expression!r}" for flag, expression in selection.items())))
    shard = filled(summary.shard)
    if shard is not None:
        rows.append(("shard", describe_shard(shard)))
    caches = given(summary.caches)
    note = ""
    if caches:
        cache_rows, note = _cache_rows(caches, records or {})
        rows += cache_rows
    return kv_table(rows) + note if rows else '<p class="note">The report has no summary block.</p>'


def _counts_words(layer: str, counts: Mapping[str, Any] | None) -> str:
    """``miss 1, saved 1``: a pass's counters of one layer that moved, in words; ``0`` when none did."""
    if not isinstance(counts, Mapping):
        return "-"
    shown = [
        f"{name} {as_int(counts.get(name))}" for name, _ in PASS_COUNTERS.get(layer, ()) if as_int(counts.get(name))
    ]
    return ", ".join(shown) or "0"


def _cache_rows(
    caches: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]
) -> tuple[list[tuple[str, Any]], str]:
    """The run's cache counters: cold -> warm over the tests' passes, the other tests' counters added up.

    ``summary.caches`` adds each test's whole-life counters, a passing warm start's
    cold miss and warm hit included, which reads "hit 1, miss 1" like a failure.
    Where no test ran passes, the summary's counters are shown as they are.
    """
    layers = [str(layer) for layer, counts in caches.items() if isinstance(counts, Mapping)]
    paired = {nodeid: pass_pairs(record) for nodeid, record in records.items()}
    pairs = [pair for found in paired.values() for pair in found]
    rows: list[tuple[str, Any]] = []
    if not pairs:
        rows += [(f"cache {layer}", nonzero_counters(caches[layer])) for layer in layers]
        return rows, '<p class="note small">Cache counters of the whole run: its tests\' counters added up.</p>'
    others = [section(record, "caches") for nodeid, record in records.items() if not paired[nodeid]]
    others_counted = False
    for layer in layers:
        cold = added_up([pair.cold for pair in pairs if layer in pair.cold]).get(layer)
        warm = added_up([pair.warm for pair in pairs if layer in pair.warm]).get(layer)
        if cold is None and warm is None:
            text = escape("-")
        elif all(layer in disabled_layers(pair) for pair in pairs):
            text = escape("off")
        else:
            # the line may break after the arrow, never inside a pass's counts: at 1024 px the two passes
            # of a layer that bypassed did not fit one line of the summary's half of the page
            text = (
                f'<span class="nowrap">{escape(_counts_words(layer, cold))} <span class="arrow">-&gt;</span></span> '
                f'<span class="nowrap">{escape(_counts_words(layer, warm))}</span>'
            )
        rest = added_up([{layer: counts[layer]} for counts in others if isinstance(counts.get(layer), Mapping)])
        if rest.get(layer) and any(rest[layer].values()):
            text += f'<br><span class="small">other tests: {escape(nonzero_counters(rest[layer]))}</span>'
            others_counted = True
        rows.append((f"cache {layer}", Markup(text)))
    tests = sum(1 for found in paired.values() if found)
    note = (
        f'<p class="note small">Cache counters: cold pass -&gt; warm pass, added up over the '
        f"{escape(count_noun(tests, 'test'))} with cold and warm passes (a passing warm start reads miss -&gt; hit)"
        + ("; the other tests' counters added up under them" if others_counted else "")
        + ".</p>"
    )
    return rows, note


# ----------------------------------------------------------------------------
# the overview table
# ----------------------------------------------------------------------------


def _pool_cell(record: Mapping[str, Any]) -> Markup:
    """Pool / largest and the ratio on one line; the cuBLAS workspace and the set on a second, small one.

    The figures are the terminal summary's (``pool_figures``), from the record as read.
    """
    graphs = section(record, "graphs") or section(record, "piecewise")
    figures = pool_figures(graphs) if graphs else None
    if figures is None or (figures.pool is None and figures.largest is None):
        return Markup("-")
    first = bytes_pair(figures.pool, figures.largest)
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
    """``m=1 s=1 -> h=1`` on one line: a figure split over two lines reads as two figures."""
    cold, arrow, warm = text.partition(" -> ")
    if not arrow:
        return Markup(f'<span class="nowrap">{escape(text)}</span>')
    return Markup(f'<span class="nowrap">{escape(cold)} <span class="arrow">-&gt;</span> {escape(warm)}</span>')


def failure_headline(record: TestRecord) -> str:
    """The first line of the test's failure message, clipped; empty when it has none."""
    message = given(record.failure.message) if isinstance(record.failure, Failure) else None
    return clip(message, HEADLINE_WIDTH, first_line=True) if message and message.strip() else ""


def overview_html(tests: list[tuple[str, RecordRead]], anchors: Mapping[str, str]) -> str:
    """One row per test (the order given: failures first), a failure's first line under its row, a legend.

    The cells are the terminal summary's (``summary.summary_row``, which draws the
    live run's records, unchecked, as mappings: it is handed each record as read): a
    test with cold and warm passes shows cold -> warm, not the two added up.
    """
    head = "".join(f'<th class="nowrap">{escape(h)}</th>' for h in HEADER)
    body = []
    rows = []
    for nodeid, (typed, record) in tests:
        cells = summary_row(nodeid, record)
        rows.append(cells)
        # cells[0] is the id clipped to NODEID_WIDTH: a 3000-character id must not widen the table
        shown = f'title="{escape(nodeid)}">{nodeid_html(cells[0])}'
        link = f'<a href="#{anchors[nodeid]}" {shown}</a>' if nodeid in anchors else f"<span {shown}</span>"
        headline = failure_headline(typed)
        row = [link, badge(typed.outcome), f'<span class="nowrap">{escape(cells[2])}</span>']
        row += [_pool_cell(record), f'<span class="nowrap">{escape(cells[4])}</span>']
        row += [_cache_cell(text) for text in cells[5:]]
        css = ' class="has-headline"' if headline else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
        if headline:
            body.append(f'<tr class="headline"><td colspan="{len(HEADER)}"><div>{escape(headline)}</div></td></tr>')
    table = f'<div class="wide"><table class="tests"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
    legend = "".join(f'<p class="small legend-line">{escape(line)}</p>' for line in legend_lines(rows))
    return table + legend
