"""The observed graphs of a test (``cudagraph(observe=True)``, ``observe_graphs()``) for people.

Per call site, its graphs in capture order with the pool's growth, the bytes
live after each capture, the memory behind the allocator, seconds and replays:
``show``'s text (``observed_lines``), the HTML page's section
(``observed_html``), and the summary's cells (``observed_cells``).  Reads the
typed section only; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.loaded import given
from ..records.report import as_int
from ..records.schema import ObservedGraph, ObservedGraphs
from .html_parts import escape, reasons_list, rest_table, rows_table
from .plain_text import count_noun, format_bytes, format_table, short_seconds, signed_bytes

__all__ = ["OBSERVED_HEADER", "observed_cells", "observed_head", "observed_html", "observed_lines", "observed_rows"]

OBSERVED_HEADER = ("#", "size", "pool", "pool after", "growth", "live", "behind allocator", "capture", "replays")
# the fields the page draws itself; the others are a table beside them
_DRAWN = ("sites", "graphs", "causes", "passed")


def _site_of(graph: ObservedGraph) -> str:
    site = given(graph.call_site)
    if site is None:
        return "an unknown line"
    return f"{given(site.file)}:{given(site.line)}"


def observed_head(section: ObservedGraphs) -> str:
    """``12 graphs observed at 2 call sites (wrapper); 3 pools, 60.0 MiB; 340 replays; failed: kept alive``."""
    sites = given(section.sites) or []
    captured = as_int(given(section.captured))
    text = f"{count_noun(captured, 'graph')} observed"
    if sites:
        text += f" at {count_noun(len(sites), 'call site')}"
    hooks = given(section.hooks)
    if hooks:
        text += f" ({hooks})"
    text += f"; {count_noun(as_int(given(section.pools)), 'pool')}, {format_bytes(given(section.pool_bytes))}"
    text += f"; {count_noun(as_int(given(section.replays)), 'replay')}"
    if as_int(given(section.failed)):
        text += f"; {as_int(given(section.failed))} failed"
    if as_int(given(section.alive_at_end)):
        text += (
            f"; {as_int(given(section.alive_at_end))} alive at the end "
            f"({format_bytes(given(section.alive_pool_bytes))})"
        )
    missing = given(section.missing_sizes)
    if missing:
        text += f"; sizes never captured: {missing}"
    causes = given(section.causes)
    if causes:
        text += f"; failed: {', '.join(causes)}"
    return text


def _pool_names(section: ObservedGraphs) -> dict[tuple[int, ...], str]:
    """``p1``, ``p2``, ...: each pool by its first graph's order."""
    pools = dict.fromkeys(tuple(given(graph.pool) or ()) for graph in given(section.graphs) or [])
    return {pool: f"p{number}" for number, pool in enumerate(pools, start=1)}


def observed_rows(section: ObservedGraphs, site: str) -> list[tuple[str, ...]]:
    """The graphs of one call site as table rows, in capture order."""
    rows: list[tuple[str, ...]] = []
    names = _pool_names(section)
    for graph in given(section.graphs) or []:
        if _site_of(graph) != site:
            continue
        failed = given(graph.failed)
        rows.append(
            (
                str(as_int(given(graph.index)) + 1),
                "-" if given(graph.size) is None else str(given(graph.size)),
                names.get(tuple(given(graph.pool) or ()), "?"),
                format_bytes(given(graph.pool_bytes_after)),
                signed_bytes(given(graph.growth_bytes)),
                format_bytes(given(graph.live_bytes)),
                signed_bytes(given(graph.behind_allocator_bytes)),
                "failed" if failed else short_seconds(given(graph.capture_s)),
                str(as_int(given(graph.replays))),
            )
        )
    return rows


def _sites(section: ObservedGraphs) -> list[str]:
    return list(dict.fromkeys(_site_of(graph) for graph in given(section.graphs) or []))


def observed_lines(section: ObservedGraphs) -> list[str]:
    """``show``: the head, then per call site its graphs' table, and each failed capture's reason."""
    if not as_int(given(section.captured)) and not given(section.causes):
        return []
    lines = [f"observed graphs: {observed_head(section)}"]
    for site in _sites(section):
        rows = observed_rows(section, site)
        lines.append(f"  {count_noun(len(rows), 'graph')} at {site}:")
        lines += ["    " + line for line in format_table([OBSERVED_HEADER, *rows], align=">>>>>>>>>")]
    for graph in given(section.graphs) or []:
        if given(graph.failed):
            lines.append(f"  - graph {as_int(given(graph.index)) + 1} at {_site_of(graph)}: {given(graph.failed)}")
    for error in given(section.errors) or []:
        lines.append(f"  - not observed: {error}")
    return lines


def observed_html(section: ObservedGraphs, fields: Mapping[str, Any]) -> str:
    """The page's section: the head, the figures not drawn, and per call site its graphs' table."""
    causes = given(section.causes)
    css = "warn" if causes else ""
    parts = ["<h3>observed graphs</h3>", f'<p class="{css}">{escape(observed_head(section))}</p>']
    parts.append(rest_table(fields, _DRAWN))
    for site in _sites(section):
        rows = observed_rows(section, site)
        body = ["<tr>" + "".join(f'<td class="num">{escape(cell)}</td>' for cell in row) + "</tr>" for row in rows]
        parts.append(f"<p>{escape(count_noun(len(rows), 'graph'))} at {escape(site)}:</p>")
        parts.append(rows_table("observed", OBSERVED_HEADER, body, numeric=len(OBSERVED_HEADER)))
    failed = [
        f"graph {as_int(given(g.index)) + 1} at {_site_of(g)}: {given(g.failed)}"
        for g in given(section.graphs) or []
        if given(g.failed)
    ]
    if failed:
        parts.append("<p>Failed captures:</p>" + reasons_list(failed))
    return "".join(parts)


def observed_cells(section: Mapping[str, Any]) -> tuple[str, str]:
    """The summary's graphs and pool cells of a test whose only graphs were observed: ``12 obs (1-512)``, ``60.0M``."""
    sizes = section.get("sizes")
    numbers = sorted(as_int(s) for s in sizes) if isinstance(sizes, list) else []
    span = ""
    if numbers:
        span = f" ({','.join(map(str, numbers))})" if len(numbers) <= 3 else f" ({numbers[0]}-{numbers[-1]})"
    graphs = f"{as_int(section.get('captured'))} obs{span}"
    pool = section.get("pool_bytes")
    pool_text = "-" if pool is None else format_bytes(pool, compact=True)
    pools = as_int(section.get("pools"))
    if pools > 1:
        pool_text += f" in {pools} pools"
    return graphs, pool_text
