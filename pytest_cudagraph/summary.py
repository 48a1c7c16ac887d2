"""The terminal summary: one compact row per test that used the plugin, and the report's path.

Example (``pytest --cudagraph --cudagraph-report=run.json``)::

    test                         outcome  graphs     pool / largest        recompiles  fxgraph  aot    triton
    tests/test_mlp.py::test_rec  failed   -          -                     9 LIMIT     -        -      -
    tests/test_mlp.py::test_mlp  passed   4 (1-8)    60.0M / 42.0M  1.43x  0           0h/1m    0h/1m  3c/0l
    1 failed, 1 passed; 4 graphs captured; 9 recompiles (1 recompile-limit hits)
    cache columns: h hits / m misses / b bypasses; triton: c compiled / l loaded (s/l: bundler files)
    report written to /ci/run.json

Failed tests and recompile-limit hits come first.  A node id longer than
text.NODEID_WIDTH is clipped in the middle (the report keeps it whole), and a test
with several GraphSets shows the set whose pool ratio is worst.  Nothing here
imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .report import as_int, limit_hit_count, summarize
from .text import clip_nodeid, format_bytes, format_table

HEADER = ["test", "outcome", "graphs", "pool / largest", "recompiles", "fxgraph", "aot", "triton"]

# Beyond this many rows the table elides the middle; the report holds every test.
DEFAULT_MAX_ROWS = 40
# outcomes listed first: a test that failed, errored, or whose xdist worker died under it
ATTENTION_OUTCOMES = ("failed", "error", "crashed")


def _section(record: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = record.get(name)
    return value if isinstance(value, Mapping) else {}


def _layer_cell(record: Mapping[str, Any], layer: str) -> str:
    counts = _section(record, "caches").get(layer)
    if not isinstance(counts, Mapping) or not counts:
        return "-"
    if layer == "triton":
        if "compiled" in counts or "loaded" in counts:
            return f"{as_int(counts.get('compiled'))}c/{as_int(counts.get('loaded'))}l"
        if "bundler_saved_files" in counts or "bundler_loaded_files" in counts:
            return f"{as_int(counts.get('bundler_saved_files'))}s/{as_int(counts.get('bundler_loaded_files'))}l"
        return "-"
    cell = f"{as_int(counts.get('hit'))}h/{as_int(counts.get('miss'))}m"
    if as_int(counts.get("bypass")):
        cell += f"/{as_int(counts.get('bypass'))}b"
    return cell


def _sizes_text(sizes: Any) -> str:
    if not isinstance(sizes, (list, tuple)) or not sizes:
        return ""
    numbers = sorted(as_int(s) for s in sizes)
    if len(numbers) <= 3:
        return ",".join(map(str, numbers))
    return f"{numbers[0]}-{numbers[-1]}"


@dataclass(frozen=True)
class PoolFigures:
    """One pool's figures and the ratio the pool check is about: (pool - cuBLAS workspace) / largest graph.

    ``set_index`` (0-based) and ``set_count`` say which of a test's several GraphSets
    the figures are from; ``set_count`` is 1 for a test with one.
    """

    pool: Any
    largest: Any
    workspace: Any
    ratio: float | None
    set_index: int = 0
    set_count: int = 1


def pool_figures(graphs: Mapping[str, Any]) -> PoolFigures:
    """The pool figures to show for a ``graphs`` (or ``piecewise``) section.

    With several GraphSets (``sets``), those of the set whose ratio is worst: the
    merged record's pool, largest graph and workspace are maxima that may come from
    three different sets, and no ratio of them is one the pool check ever saw.
    """
    sets = graphs.get("sets") if isinstance(graphs.get("sets"), list) else []
    rated = [(index, figures) for index, figures in enumerate(map(_own_figures, sets)) if figures.ratio is not None]
    if rated:
        index, worst = max(rated, key=lambda item: item[1].ratio)
        return PoolFigures(worst.pool, worst.largest, worst.workspace, worst.ratio, index, len(sets))
    merged = _own_figures(graphs)
    if sets:  # maxima of several sets: show them, but no ratio of them
        return PoolFigures(merged.pool, merged.largest, merged.workspace, None, 0, len(sets))
    return merged


def _own_figures(source: Any) -> PoolFigures:
    if not isinstance(source, Mapping):
        return PoolFigures(None, None, None, None)
    pool, largest = source.get("pool_bytes"), source.get("largest_graph_bytes")
    # The first capture puts the cuBLAS workspace (32 MiB on an H200) into the pool;
    # the largest graph's own mark does not hold it, so leave it out of the ratio.
    workspace = source.get("cublas_workspace_bytes") or 0
    try:
        ratio: float | None = (float(pool) - float(workspace)) / float(largest)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        ratio = None
    if ratio is not None and not math.isfinite(ratio):
        ratio = None
    return PoolFigures(pool, largest, workspace, ratio)


def _graphs_cells(record: Mapping[str, Any]) -> tuple[str, str]:
    graphs = _section(record, "graphs")
    piecewise = _section(record, "piecewise")
    if not graphs and not piecewise:
        return "-", "-"
    if graphs:
        sizes = _sizes_text(graphs.get("sizes"))
        graph_text = f"{as_int(graphs.get('captured'))}" + (f" ({sizes})" if sizes else "")
    else:
        graph_text = f"{as_int(piecewise.get('graphs_captured'))} pw/{as_int(piecewise.get('pieces'))}p"
    return graph_text, pool_text(pool_figures(graphs or piecewise))


def pool_text(figures: PoolFigures) -> str:
    """``60.0M / 42.0M  1.43x``: pool / largest graph, the cuBLAS workspace, the ratio, and which set."""
    if figures.pool is None and figures.largest is None:
        return "-"
    text = f"{format_bytes(figures.pool, compact=True)} / {format_bytes(figures.largest, compact=True)}"
    if figures.ratio is None:
        return text
    # a shared pool should cost about the largest graph alone: a ratio well above 1 is the smell
    suffix = f" (+{format_bytes(figures.workspace, compact=True)} cuBLAS)" if figures.workspace else ""
    which = f" (set {figures.set_index + 1} of {figures.set_count})" if figures.set_count > 1 else ""
    return f"{text}{suffix}  {figures.ratio:.2f}x{which}"


def _recompiles_cell(record: Mapping[str, Any]) -> str:
    rec = _section(record, "recompiles")
    if not rec:
        return "-"
    text = str(as_int(rec.get("count")))
    if limit_hit_count(rec):
        text += " LIMIT"
    breaks = rec.get("graph_breaks")
    if isinstance(breaks, Mapping) and as_int(breaks.get("count")):
        text += f" +{as_int(breaks.get('count'))}brk"
    return text


def summary_row(nodeid: str, record: Mapping[str, Any]) -> list[str]:
    graphs, pool = _graphs_cells(record)
    return [
        clip_nodeid(nodeid),
        str(record.get("outcome", "?")),
        graphs,
        pool,
        _recompiles_cell(record),
        _layer_cell(record, "fxgraph"),
        _layer_cell(record, "aot_autograd"),
        _layer_cell(record, "triton"),
    ]


def totals_line(records: Mapping[str, Mapping[str, Any]]) -> str:
    totals = summarize(records)
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in totals["outcomes"].items())
    parts = [outcomes or "no tests", f"{totals['graphs_captured']} graphs captured"]
    recompiles = f"{totals['recompiles']} recompiles"
    if totals["recompile_limit_hits"]:
        recompiles += f" ({totals['recompile_limit_hits']} recompile-limit hits)"
    parts.append(recompiles)
    return "; ".join(parts)


def terminal_summary_lines(
    records: Mapping[str, Mapping[str, Any]],
    report_path: Path | None,
    *,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    report_error: str | None = None,
) -> list[str]:
    """The lines of the ``cudagraph`` section of pytest's terminal summary.

    One row per recorded test (failed tests and tests that hit the recompile limit
    first, so an elided table never hides them), a totals line, a legend, and where
    the report went (or why it could not be written).
    """
    lines: list[str] = []
    if records:
        ordered = sorted(records.items(), key=lambda item: (not _needs_attention(item[1]), item[0]))
        rows = [summary_row(nodeid, record) for nodeid, record in ordered]
        hidden = 0
        if max_rows is not None and len(rows) > max_rows:
            hidden = len(rows) - max_rows
            rows = rows[:max_rows]
        lines += format_table([HEADER] + rows)
        if hidden:
            lines.append(f"... {hidden} more tests (use -v for all of them, or see the report)")
        lines.append(totals_line(records))
        lines.append(
            "cache columns: h hits / m misses / b bypasses; triton: c compiled / l loaded (s/l: bundler files)"
        )
    if report_error is not None:
        lines.append(report_error)
    elif report_path is not None:
        lines.append(f"report written to {report_path}")
    return lines


def _needs_attention(record: Mapping[str, Any]) -> bool:
    return record.get("outcome") in ATTENTION_OUTCOMES or bool(limit_hit_count(_section(record, "recompiles")))
