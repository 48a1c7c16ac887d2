"""The HTML page's style sheet, and the index of its parts (``show.render_html`` puts them in order).

The parts live by job:

- ``html_parts``: escaping, node ids that wrap, tables, a record's values as cells;
- ``html_run``: the run's environment and summary, the overview table of its tests;
- ``html_test``: a test's failure, recompiles, reduce-overhead, piecewise, capture cost and ranks;
- ``html_caches``: a test's cold/warm pairs, cache counters, cache lookups and ``extra``;
- ``html_compile``: a test's compile time per phase, cold -> warm for its passes;
- ``show``: the page's frame, its pool chart and graphs section.

Every name the parts module had is still importable from here.

The page is read at any width from a laptop's to a wide screen's: tables shrink to
the page (cells wrap, figures do not), node ids break after ``/`` and ``::``, long
messages wrap in place, and nothing pushes the page sideways.

Nothing here imports torch.
"""

from __future__ import annotations

from .html_caches import cache_keys_html, caches_html, counters_table, extra_html, pass_pair_html
from .html_compile import compile_time_html, phase_label
from .html_parts import (
    Markup,
    badge,
    escape,
    json_block,
    kv_table,
    nodeid_html,
    reasons_list,
    record_section_html,
    value_html,
)
from .html_run import HEADLINE_WIDTH, env_html, failure_headline, overview_html, summary_html
from .html_test import (
    capture_cost_html,
    failure_html,
    piecewise_html,
    ranks_html,
    recompile_events_html,
    recompiles_html,
    reduce_overhead_html,
    section_html,
)
from .record_text import section

__all__ = [
    "CSS",
    "HEADLINE_WIDTH",
    "Markup",
    "badge",
    "cache_keys_html",
    "caches_html",
    "capture_cost_html",
    "compile_time_html",
    "counters_table",
    "env_html",
    "escape",
    "extra_html",
    "failure_headline",
    "failure_html",
    "json_block",
    "kv_table",
    "nodeid_html",
    "overview_html",
    "pass_pair_html",
    "phase_label",
    "piecewise_html",
    "ranks_html",
    "reasons_list",
    "recompile_events_html",
    "recompiles_html",
    "record_section_html",
    "reduce_overhead_html",
    "section",
    "section_html",
    "summary_html",
    "value_html",
]

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
/* on a narrow window the overview scrolls sideways, and the test's id keeps a readable column instead of
   wrapping a few letters a line: measured at 720 px wide, it took 2 to 4 characters a line */
.wide { overflow-x: auto; }
@media (max-width: 900px) { table.tests td:first-child { min-width: 26ch; } }
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
.ct-head { margin: 8px 0 2px; overflow-wrap: anywhere; }
.ct-bars { margin: 4px 0 2px; max-width: 760px; }
.ct-row { display: flex; align-items: center; gap: 8px; margin: 3px 0; }
.ct-label { flex: none; width: 8.5em; text-align: right; font: 12px ui-monospace, Menlo, Consolas, monospace; }
.ct-track { flex: 1 1 auto; min-width: 0; }
.ct-bar { display: flex; height: 12px; background: #e3e7eb; }
.ct-bar span { display: block; flex: none; height: 100%; }
.ph-dynamo { background: #4f7cac; } .ph-aot { background: #d08c00; } .ph-inductor { background: #2e7d32; }
.legend .swatch.ph-dynamo, .legend .swatch.ph-aot, .legend .swatch.ph-inductor { height: 10px; width: 12px; }
.ct-meter { display: inline-block; width: 56px; height: 8px; margin-right: 6px; background: #eef1f4;
            vertical-align: middle; }
.ct-meter span { display: block; height: 100%; background: #7b97b8; }
table.phases tr.sub th { padding-left: 14px; font-weight: 400; }
table.phases tr.unspent th, table.phases tr.unspent td { color: #5b6670; font-style: italic; }
table.phases tr.total th, table.phases tr.total td { border-top: 2px solid #b8c0c8; font-weight: 600; }
table.phases td.share { white-space: nowrap; }
"""
