"""The terminal summary: one compact row per test that used the plugin, and the report's path.

Example (``pytest --cudagraph --cudagraph-report=run.json``)::

    test                         outcome  graphs   pool / largest       recompiles  compile      fxgraph         aot             triton
    tests/test_mlp.py::test_rec  failed   -        -                    9 LIMIT     0.4s         -               -               -
    tests/test_mlp.py::test_mlp  passed   4 (1-8)  60.0M / 42.0M  1.43x  0           3.1s         h=0 m=1         h=0 m=1         c=3 l=0
    tests/test_mlp.py::test_warm passed   -        -                    0           16s -> 64ms  m=1 s=1 -> h=1  m=1 s=1 -> h=1  c=3 -> 0
    1 failed, 2 passed; 4 graphs captured; 9 recompiles (1 recompile-limit hit)
    3 GPU tests skipped: no CUDA device (torch 2.13.0+cpu reports torch.cuda.is_available() == False)
    caches: counts of h hits, m misses, s saves, c Triton kernels compiled, l Triton kernels loaded (m=2: 2 misses); ...
    report written to /ci/run.json

The section fits WIDTH (120) columns: a column empty (``-``) in every row is left
out, a test id too long for what the other columns leave goes on a line of its own
with its row's cells on the next line, a pool cell too wide is broken over lines,
and the lines below the table are wrapped.  Counters are written ``h=1``, the letter
first: ``1h`` and ``1m 1s`` beside the compile times read as durations.

Failed tests and recompile-limit hits come first.  A test that ran a cold and a
warm pass (the ``compile_cache`` marker, ``cold_warm()``) shows both, cold -> warm,
instead of their sum.  The legend explains only what the table shows.  A node id
longer than the width is clipped in the middle (the report keeps it whole; the
HTML overview, which shares summary_row, clips at text.NODEID_WIDTH), and a test with several GraphSets shows the set whose pool ratio is
worst.  Nothing here imports torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..records.cold_warm import disabled_layers, pass_pairs
from ..records.report import as_int, limit_hit_count, summarize
from ..text import bytes_pair, clip_nodeid, count_noun, fit_table, format_bytes, number, wrap_words
from .compile_time_text import compile_time_cell
from .counter_text import LETTER_MEANING, cold_to_warm_text, counter_text, letters_in
from .graph_mode_text import breakable_graphs_cell
from .record_text import NOTABLE_OUTSIDE_BYTES, section

HEADER = ["test", "outcome", "graphs", "pool / largest", "recompiles", "compile", "fxgraph", "aot", "triton"]

# Beyond this many rows the table elides the middle; the report holds every test.
DEFAULT_MAX_ROWS = 40
# outcomes listed first: a test that failed, errored, or whose xdist worker died under it
ATTENTION_OUTCOMES = ("failed", "error", "crashed")
# The plugin's own reasons for skipping a GPU test (collection.py, handles.py): a run where
# they skipped GPU tests says so in one line, so a CPU runner is never taken for a GPU pass.
GPU_SKIP_REASONS = ("needs --cudagraph", "no CUDA device")
# the terminal section's width: its table, and the lines under it
WIDTH = 120
LEGEND_WIDTH = WIDTH
# a pool cell wider than this is broken over lines where the table would not fit
POOL_NARROWEST = 30
# a cell that says nothing: a column of only these is left out of the terminal table
EMPTY_CELLS = ("-", "")
CACHE_COLUMNS = {"fxgraph": "fxgraph", "aot_autograd": "aot", "triton": "triton"}


def _layer_cell(record: Mapping[str, Any], layer: str) -> str:
    pairs = pass_pairs(record)
    if pairs:  # cold and warm added up read like a failure: show each pass
        return cold_to_warm_text(layer, pairs)
    counts = section(record, "caches").get(layer)
    if not isinstance(counts, Mapping) or not counts:
        return "-"
    if layer == "triton":
        if "compiled" in counts or "loaded" in counts:
            return f"{counter_text('c', counts.get('compiled'))} {counter_text('l', counts.get('loaded'))}"
        if "bundler_saved_files" in counts or "bundler_loaded_files" in counts:
            saved, loaded = counts.get("bundler_saved_files"), counts.get("bundler_loaded_files")
            return f"{counter_text('s', saved)} {counter_text('l', loaded)}"
        return "-"
    cell = f"{counter_text('h', counts.get('hit'))} {counter_text('m', counts.get('miss'))}"
    if as_int(counts.get("bypass")):
        cell += f" {counter_text('b', counts.get('bypass'))}"
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
    # device memory the capture took behind PyTorch's allocator; None where not measured
    outside: Any = None
    outside_unreliable: bool = False


def pool_figures(graphs: Mapping[str, Any]) -> PoolFigures:
    """The pool figures to show for a ``graphs`` (or ``piecewise``) section.

    With several GraphSets (``sets``), those of the set whose ratio is worst: the
    merged record's pool, largest graph and workspace are maxima that may come from
    three different sets, and no ratio of them is one the pool check ever saw.
    """
    given = graphs.get("sets")
    sets: list[Any] = given if isinstance(given, list) else []
    rated = [(index, figures) for index, figures in enumerate(map(_own_figures, sets)) if figures.ratio is not None]
    if rated:
        index, worst = max(rated, key=lambda item: item[1].ratio or 0.0)  # every ratio here is a number
        return replace(worst, set_index=index, set_count=len(sets))
    merged = _own_figures(graphs)
    if sets:  # maxima of several sets: show them, but no ratio of them
        return replace(merged, ratio=None, set_count=len(sets))
    return merged


def _own_figures(source: Any) -> PoolFigures:
    if not isinstance(source, Mapping):
        return PoolFigures(None, None, None, None)
    pool: Any = source.get("pool_bytes")
    largest: Any = source.get("largest_graph_bytes")
    # The first capture puts the cuBLAS workspace (32 MiB on an H200) into the pool;
    # the largest graph's own mark does not hold it, so leave it out of the ratio.
    workspace = source.get("cublas_workspace_bytes") or 0
    try:
        ratio: float | None = (float(pool) - float(workspace)) / float(largest)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        ratio = None
    if ratio is not None and not math.isfinite(ratio):
        ratio = None
    # what the release gave back, where the set was released: that does not depend on what ran before
    held = source.get("held_behind_allocator_bytes")
    outside = number(held if held is not None else source.get("behind_allocator_bytes"), finite=True)
    return PoolFigures(
        pool, largest, workspace, ratio, outside=outside, outside_unreliable=bool(source.get("outside_unreliable"))
    )


def _trees_cell(trees: Mapping[str, Any]) -> str:
    """Reduce-overhead: graphs recorded, and how much ran as graphs: ``2 (2/3 regions, 67% calls)``."""
    text = str(as_int(trees.get("recordings")))
    total = trees.get("regions_total")
    if isinstance(total, int) and total:
        share = number(trees.get("fraction_of_calls"))
        calls = f", {share:.0%} calls" if share is not None else ""
        text += f" ({as_int(trees.get('regions_cudagraphed'))}/{total} regions{calls})"
    elif as_int(trees.get("skips")):
        text += f" ({count_noun(as_int(trees.get('skips')), 'skip')})"
    return text


def _ranks_cells(ranks: Mapping[str, Any]) -> tuple[str, str]:
    """A multi-rank test: the graphs of every rank and the world size; the pool of the rank whose ratio is worst."""
    per_rank = [r for r in ranks.get("per_rank") or [] if isinstance(r, Mapping)]
    rank_graphs = [r["graphs"] for r in per_rank if isinstance(r.get("graphs"), Mapping)]
    captured = sum(as_int(graphs.get("captured")) for graphs in rank_graphs)
    text = f"{captured} ({count_noun(as_int(ranks.get('world_size')), 'rank')})"
    figures = [pool_figures(graphs) for graphs in rank_graphs]
    rated = [f for f in figures if f.ratio is not None]
    worst = max(rated, key=lambda f: f.ratio or 0.0) if rated else (figures[0] if figures else None)
    return text, pool_text(worst) if worst is not None else "-"


def _graphs_cells(record: Mapping[str, Any]) -> tuple[str, str]:
    graphs = section(record, "graphs")
    piecewise = section(record, "piecewise")
    ranks = section(record, "ranks")
    if not graphs and not piecewise and ranks:
        return _ranks_cells(ranks)
    observed = section(record, "observed_graphs")
    if not graphs and not piecewise and observed:  # the graphs the test body captured itself
        from .observed_text import observed_cells

        return observed_cells(observed)
    trees = section(record, "reduce_overhead")
    if not graphs and not piecewise and trees:
        return _trees_cell(trees), pool_text(PoolFigures(trees.get("pool_bytes"), None, None, None))
    if not graphs and not piecewise:
        return "-", "-"
    if graphs:
        sizes = _sizes_text(graphs.get("sizes"))
        full_text = f"{as_int(graphs.get('captured'))}" + (f" ({sizes})" if sizes else "")
        graph_text = breakable_graphs_cell(graphs) or full_text
    else:
        pieces = count_noun(as_int(piecewise.get("pieces")), "piece")
        graph_text = f"{as_int(piecewise.get('graphs_captured'))} ({pieces})"
    return graph_text, pool_text(pool_figures(graphs or piecewise))


def pool_text(figures: PoolFigures) -> str:
    """``60.0M / 42.0M  1.43x``: pool / largest graph, the cuBLAS workspace, the ratio, and which set."""
    if figures.pool is None and figures.largest is None:
        return "-"
    text = bytes_pair(figures.pool, figures.largest)
    if figures.ratio is None:
        return text + _outside_text(figures)
    # a shared pool should cost about the largest graph alone: a ratio well above 1 is the smell
    suffix = f" (+{format_bytes(figures.workspace, compact=True)} cuBLAS)" if figures.workspace else ""
    which = f" (set {figures.set_index + 1} of {figures.set_count})" if figures.set_count > 1 else ""
    return f"{text}{suffix}  {figures.ratio:.2f}x{which}{_outside_text(figures)}"


def _outside_text(figures: PoolFigures) -> str:
    """``, 4.0M outside``: what the capture took behind the allocator; ``?`` when the GPU was shared."""
    if figures.outside_unreliable:
        return ", ? outside"
    if figures.outside is None:
        return ""
    return f", {format_bytes(max(0.0, figures.outside), compact=True)} outside"


def _recompiles_cell(record: Mapping[str, Any]) -> str:
    rec = section(record, "recompiles")
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
        compile_time_cell(record),
        _layer_cell(record, "fxgraph"),
        _layer_cell(record, "aot_autograd"),
        _layer_cell(record, "triton"),
    ]


def totals_line(records: Mapping[str, Mapping[str, Any]]) -> str:
    totals = summarize(records)
    # pytest's words: "1 error", "2 errors"; "2 passed", "2 failed"
    outcomes = ", ".join(
        count_noun(n, outcome) if outcome == "error" else f"{n} {outcome}" for outcome, n in totals["outcomes"].items()
    )
    parts = [outcomes or "no tests", f"{count_noun(totals['graphs_captured'], 'graph')} captured"]
    recompiles = count_noun(totals["recompiles"], "recompile")
    if totals["recompile_limit_hits"]:
        recompiles += f" ({count_noun(totals['recompile_limit_hits'], 'recompile-limit hit')})"
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
        ordered = sorted(records.items(), key=lambda item: (not needs_attention(item[1]), item[0]))
        # an id too long for its row gets a line of its own: the whole width, not summary_row's clip
        rows = [[clip_nodeid(nodeid, WIDTH), *summary_row(nodeid, record)[1:]] for nodeid, record in ordered]
        hidden = 0
        if max_rows is not None and len(rows) > max_rows:
            hidden = len(rows) - max_rows
            rows = rows[:max_rows]
        lines += table_lines(rows)
        if hidden:
            lines.append(f"... {hidden} more tests (use -v for all of them, or see the report)")
        below = [totals_line(records), *gpu_skip_lines(records), *first_use_lines(records)]
        below += disabled_layer_lines(records) + legend_lines(rows)
        lines += [piece for line in below for piece in wrapped(line)]
    if report_error is not None:
        lines.append(report_error)
    elif report_path is not None:
        lines.append(f"report written to {report_path}")
    return lines


def table_lines(rows: list[list[str]]) -> list[str]:
    """The table of ``rows`` (as summary_row makes them) in WIDTH columns, without the columns empty in every row.

    The test and outcome columns always stay; a test id too long for the room the
    other columns leave goes on a line of its own (``text.fit_table``).
    """
    keep = [i for i in range(len(HEADER)) if i < 2 or any(row[i] not in EMPTY_CELLS for row in rows)]
    table = [[row[i] for i in keep] for row in [HEADER, *rows]]
    pool = keep.index(HEADER.index("pool / largest")) if HEADER.index("pool / largest") in keep else None
    return fit_table(table, WIDTH, wrap={pool: POOL_NARROWEST} if pool is not None else None)


def wrapped(line: str) -> list[str]:
    """A line under the table in WIDTH columns: broken at spaces, the lines after the first indented by two."""
    first, *rest = wrap_words(line, WIDTH - 2) if len(line) > WIDTH else [line]
    return [first, *("  " + piece for piece in rest)]


def gpu_skip_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``12 GPU tests skipped: no CUDA device (...)``, one line per reason the plugin skipped GPU tests for."""
    counts: dict[str, int] = {}
    for record in records.values():
        reason = record.get("skip_reason")
        if record.get("outcome") == "skipped" and isinstance(reason, str) and reason.startswith(GPU_SKIP_REASONS):
            counts[reason] = counts.get(reason, 0) + 1
    return [f"{count_noun(n, 'GPU test')} skipped: {reason}" for reason, n in sorted(counts.items())]


def disabled_layer_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per cache layer that was off in a cold/warm pair: in how many tests, why, and that the rest was checked."""
    tests: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for nodeid, record in records.items():
        for pair in pass_pairs(record):
            for layer, reason in disabled_layers(pair).items():
                if nodeid not in tests.setdefault(layer, []):
                    tests[layer].append(nodeid)
                why.setdefault(layer, reason)
    return [
        f"{layer} cache disabled in {count_noun(len(nodeids), 'test')} ({why[layer]}; first: {nodeids[0]}): "
        f"not checked there, the other layers were"
        for layer, nodeids in sorted(tests.items())
    ]


def first_use_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line: the device memory the warm-ups took behind the allocator, a one-time cost kept apart from the graphs'.

    Summed over the tests' capture runs (their warm-ups do not overlap); runs on a
    shared GPU are left out, as no figure of theirs is vouched for.
    """
    total, largest, where = 0.0, 0.0, ""
    for nodeid, record in records.items():
        for name in ("graphs", "piecewise"):
            run = record.get(name)
            if not isinstance(run, Mapping) or run.get("outside_unreliable"):
                continue
            figure = number(run.get("first_use_bytes"), finite=True)
            if figure is None or figure <= 0:
                continue
            total += figure
            if figure > largest:
                largest, where = figure, nodeid
    if total < NOTABLE_OUTSIDE_BYTES:  # one driver page is rounding, not worth a line
        return []
    return [
        f"first use: {format_bytes(total)} of device memory behind PyTorch's allocator in the warm-ups (kernels "
        f"loaded on first use, library handles and buffers set up on a first call): a one-time cost of the "
        f"process, not the graphs' memory; most in {where} ({format_bytes(largest)})"
    ]


def legend_lines(rows: list[list[str]]) -> list[str]:
    """What the table's abbreviations mean: only those that appear in ``rows`` (rows as summary_row makes them)."""
    column = {name: index for index, name in enumerate(HEADER)}
    cache_cells = [row[column[name]] for row in rows for name in CACHE_COLUMNS.values()]
    letters = set().union(*map(letters_in, cache_cells)) if cache_cells else set()
    parts = []
    shown = [letter for letter in LETTER_MEANING if letter in letters]
    if shown:
        meanings = ", ".join(f"{letter} {LETTER_MEANING[letter]}" for letter in shown)
        parts.append(f"caches: counts of {meanings} ({shown[0]}=2: 2 {LETTER_MEANING[shown[0]]})")
    if any("->" in cell for cell in cache_cells):
        parts.append("a -> b: the cold pass, then the warm pass")
    if "off" in cache_cells:
        parts.append("off: a cache layer turned off by the user, not checked (the other layers were)")
    pools = [row[column["pool / largest"]] for row in rows]
    if any(re.search(r"\d\.\d\dx", cell) for cell in pools):
        parts.append("pool / largest: the shared pool and the largest graph alone, 1.43x = (pool - cuBLAS) / largest")
    if any(cell.endswith(" outside") for cell in pools):
        parts.append(
            "outside: device memory behind PyTorch's allocator that the graphs held (what their release gave "
            "back; where no release was read, what the captures took), first use apart; ? when other "
            "processes shared the GPU"
        )
    if any("->" in row[column["compile"]] for row in rows):
        parts.append("compile: torch.compile seconds (Dynamo, AOTAutograd, Inductor), cold -> warm where both ran")
    if any(" obs" in row[column["graphs"]] for row in rows):
        parts.append("n obs: CUDA graphs the test body captured itself, observed (cudagraph(observe=True))")
    if any(" regions" in row[column["graphs"]] for row in rows):
        parts.append(
            "n/m regions, p% calls: reduce-overhead regions that ran as CUDA graphs, and the calls after warm-up"
        )
    recompile_cells = [row[column["recompiles"]] for row in rows]
    if any("LIMIT" in cell for cell in recompile_cells):
        parts.append("LIMIT: hit the recompile limit, so Dynamo ran frames eagerly")
    if any("brk" in cell for cell in recompile_cells):
        parts.append("+Nbrk: N graph breaks")
    lines: list[str] = []
    for part in parts:  # one line while it stays readable, then one more
        if lines and len(lines[-1]) + len(part) + 2 <= LEGEND_WIDTH:
            lines[-1] += "; " + part
        else:
            lines.append(part)
    return lines


def needs_attention(record: Mapping[str, Any]) -> bool:
    """A failed, errored or crashed test, or one that hit the recompile limit: listed first wherever tests are."""
    return record.get("outcome") in ATTENTION_OUTCOMES or bool(limit_hit_count(section(record, "recompiles")))
