"""The terminal summary: one line per recorded test (it used the plugin, or compiled), under its file, and the report's path.

Example (``pytest docs/examples --cudagraph --cudagraph-report=r.json`` on a CPU)::

    test                                         outcome  graphs    recompiles  compile       fxgraph         aot
    docs/examples/test_compile_cache_cases.py
      test_warm_start_in_a_fresh_interpreter     passed   -         -           4.0s -> 2.5s  m=1 s=1 -> h=1  m=1 s=1 -> h=1
    docs/examples/test_piecewise_attention.py
      test_split_at_attention_on_any_device      passed   7 pieces  -           0.4s          -               -
    14 tests recorded: 8 passed, 6 skipped; 1 recompile; 0 graphs captured
    6 GPU tests skipped, not listed: no CUDA device (torch 2.13.0+cpu reports torch.cuda.is_available() == False)
    graphs: CUDA graphs captured (their batch sizes); recompiles: Dynamo recompiles
    ...
    report written to /tmp/r.json

The section fits the terminal's width (``section_width``: WIDTH, 120 columns, at
most), one line per test: a column empty (``-``) in every row is left out; where a
row would not fit, the pool cells take their compact form (``76.0M/42.0M 1.05x [1/3] +4.0M out``), then a test's name is shortened: its
parametrize id and class first, its function's name last; a file's line shortens its
directory, never the file's name.  Only where even that leaves a name too little
room are the pool and graphs cells broken over lines.  A skipped test that
measured nothing (a GPU test on a CPU runner) is counted under the table, not shown
as a row of dashes.  Counters are written ``h=1``, the letter first (``1h`` and
``1m 1s`` beside the compile times read as durations), only those that moved.

Failed tests (and recompile-limit hits in tests that did not pass) come first; a
limit hit in a test that passed is ``limit``, no alarm.  A test that ran a cold and
a warm pass (the ``compile_cache`` marker, ``cold_warm()``) shows both, cold -> warm,
instead of their sum.  The legend says what each column shown holds and explains
only the notations the table uses.  The HTML overview shares summary_row and clips
a node id at text.NODEID_WIDTH; a test with several GraphSets shows the set whose
pool ratio is worst.  Nothing here imports torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..records.cold_warm import disabled_layers, pass_pairs
from ..records.json_values import number
from ..records.report import as_int, limit_hit_count, summarize
from .compile_time_text import compile_time_cell
from .counter_text import LETTER_MEANING, cold_to_warm_text, counter_text, counts_text, letters_in
from .graph_mode_text import breakable_graphs_cell
from .plain_text import bytes_pair, clip_middle, clip_nodeid, count_noun, format_bytes, wrap_line, wrap_words
from .record_text import NOTABLE_OUTSIDE_BYTES, section

HEADER = ["test", "outcome", "graphs", "pool / largest", "recompiles", "compile", "fxgraph", "aot", "triton"]
POOL_COLUMN = HEADER.index("pool / largest")

# Beyond this many rows the table elides the middle; the report holds every test.
DEFAULT_MAX_ROWS = 40
# outcomes listed first: a test that failed, errored, or whose xdist worker died under it
ATTENTION_OUTCOMES = ("failed", "error", "crashed")
# outcomes whose recompile-limit hits are no alarm: the test passed, or failed as expected
QUIET_OUTCOMES = ("passed", "xfailed", "skipped")
# The plugin's own reasons for skipping a GPU test (collection.py, handles.py): a run where
# they skipped GPU tests says so in one line, so a CPU runner is never taken for a GPU pass.
GPU_SKIP_REASONS = ("needs --cudagraph", "no CUDA device")
# the terminal section's width: its table, and the lines under it
WIDTH = 120
LEGEND_WIDTH = WIDTH
# a terminal narrower than this gets the section this wide: a GPU run's seven columns need it
NARROWEST = 80
# a pool cell wider than this is broken over lines where the table would not fit
POOL_NARROWEST = 30
# a test's name is clipped to no fewer characters than this; the pool and graphs cells are broken first
NAME_NARROWEST = 28
# a shortened name: its parametrize id keeps this much before its class is clipped, at least "[...]",
# and a class clipped to fewer than SCOPE_NARROWEST characters is left out
PARAM_SHARE = 12
PARAM_NARROWEST = 5
SCOPE_NARROWEST = 6
# the cells broken over lines where the table would not fit otherwise, and the narrowest each may get
WRAPPED_COLUMNS = (("pool / largest", POOL_NARROWEST), ("graphs", 10))
# a cell that says nothing: a column of only these is left out of the terminal table
EMPTY_CELLS = ("-", "")
CACHE_COLUMNS = {"fxgraph": "fxgraph", "aot_autograd": "aot", "triton": "triton"}


def _layer_cell(record: Mapping[str, Any], layer: str) -> str:
    """A layer's counters in one notation: ``m=1 s=1 -> h=1`` for a cold and warm pass, ``h=1`` otherwise.

    Only the counters that moved are written; a layer where none moved (Triton on a
    CPU, where Inductor generates C++) is ``-``, so an empty column is left out.
    """
    pairs = pass_pairs(record)
    if pairs:  # cold and warm added up read like a failure: show each pass
        cell = cold_to_warm_text(layer, pairs)
        return "-" if cell == "0 -> 0" else cell
    counts = section(record, "caches").get(layer)
    if not isinstance(counts, Mapping) or not counts:
        return "-"
    if layer == "triton" and not ("compiled" in counts or "loaded" in counts):
        # the bundler's files, where no listener counted kernels
        files = (("bundler_saved_files", "s"), ("bundler_loaded_files", "l"))
        shown = [counter_text(letter, counts.get(name)) for name, letter in files]
        return " ".join(part for part in shown if not part.endswith("=0")) or "-"
    cell = counts_text(layer, counts)
    return "-" if cell == "0" else cell


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


def _ranks_cells(ranks: Mapping[str, Any], compact: bool = False) -> tuple[str, str]:
    """A multi-rank test: the graphs of every rank and the world size; the pool of the rank whose ratio is worst."""
    per_rank = [r for r in ranks.get("per_rank") or [] if isinstance(r, Mapping)]
    rank_graphs = [r["graphs"] for r in per_rank if isinstance(r.get("graphs"), Mapping)]
    captured = sum(as_int(graphs.get("captured")) for graphs in rank_graphs)
    text = f"{captured} ({count_noun(as_int(ranks.get('world_size')), 'rank')})"
    figures = [pool_figures(graphs) for graphs in rank_graphs]
    rated = [f for f in figures if f.ratio is not None]
    worst = max(rated, key=lambda f: f.ratio or 0.0) if rated else (figures[0] if figures else None)
    return text, pool_text(worst, compact=compact) if worst is not None else "-"


def _graphs_cells(record: Mapping[str, Any], compact: bool = False) -> tuple[str, str]:
    graphs = section(record, "graphs")
    piecewise = section(record, "piecewise")
    ranks = section(record, "ranks")
    if not graphs and not piecewise and ranks:
        return _ranks_cells(ranks, compact)
    observed = section(record, "observed_graphs")
    if not graphs and not piecewise and observed:  # the graphs the test body captured itself
        from .observed_text import observed_cells

        return observed_cells(observed)
    trees = section(record, "reduce_overhead")
    if not graphs and not piecewise and trees:
        return _trees_cell(trees), pool_text(PoolFigures(trees.get("pool_bytes"), None, None, None), compact=compact)
    if not graphs and not piecewise:
        return "-", "-"
    if graphs:
        sizes = _sizes_text(graphs.get("sizes"))
        full_text = f"{as_int(graphs.get('captured'))}" + (f" ({sizes})" if sizes else "")
        graph_text = breakable_graphs_cell(graphs) or full_text
    else:
        pieces = count_noun(as_int(piecewise.get("pieces")), "piece")
        captured = as_int(piecewise.get("graphs_captured"))
        graph_text = f"{pieces}, {count_noun(captured, 'graph')}" if captured else pieces
    return graph_text, pool_text(pool_figures(graphs or piecewise), compact=compact)


def pool_text(figures: PoolFigures, *, compact: bool = False) -> str:
    """``60.0M / 42.0M  1.43x``: pool / largest graph, the cuBLAS workspace, the ratio, and which set.

    ``compact`` is the form for a row that would not fit 120 columns otherwise:
    ``76.0M/42.0M 1.05x [1/3] +4.0M out`` (about half as wide), the cuBLAS workspace
    left to the ratio (the legend says it is taken out) and the report.
    """
    if figures.pool is None and figures.largest is None:
        return "-"
    if compact:
        return _compact_pool_text(figures)
    text = bytes_pair(figures.pool, figures.largest)
    if figures.ratio is None:
        return text + _outside_text(figures)
    # a shared pool should cost about the largest graph alone: a ratio well above 1 is the smell
    suffix = f" (+{format_bytes(figures.workspace, compact=True)} cuBLAS)" if figures.workspace else ""
    which = f" (set {figures.set_index + 1} of {figures.set_count})" if figures.set_count > 1 else ""
    return f"{text}{suffix}  {figures.ratio:.2f}x{which}{_outside_text(figures)}"


def _compact_pool_text(figures: PoolFigures) -> str:
    """``76.0M/42.0M 1.05x [1/3] +4.0M out``: the pool cell of a row short of room."""
    text = f"{format_bytes(figures.pool, compact=True)}/{format_bytes(figures.largest, compact=True)}"
    if figures.ratio is not None:
        text += f" {figures.ratio:.2f}x"
        if figures.set_count > 1:
            text += f" [{figures.set_index + 1}/{figures.set_count}]"
    if figures.outside_unreliable:
        return text + " ? out"
    if figures.outside is not None:
        text += f" +{format_bytes(max(0.0, figures.outside), compact=True)} out"
    return text


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
        # in a test that passed, the hit was expected (or nothing checked it): not an alarm
        text += " limit" if record.get("outcome") in QUIET_OUTCOMES else " LIMIT"
    breaks = rec.get("graph_breaks")
    if isinstance(breaks, Mapping) and as_int(breaks.get("count")):
        text += f" +{as_int(breaks.get('count'))}brk"
    return text


def summary_row(nodeid: str, record: Mapping[str, Any], *, compact_pool: bool = False) -> list[str]:
    """The row's cells, one per HEADER column; ``compact_pool``: the pool cell's compact form (``pool_text``)."""
    graphs, pool = _graphs_cells(record, compact_pool)
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
    """``14 tests recorded: 8 passed, 6 skipped; 1 recompile; 0 graphs captured``.

    The counts are of the tests the report records, those that used a marker or
    fixture of the plugin and those that compiled (pytest's own line counts every
    test); recompile-limit hits in tests that passed are said to be there.
    """
    totals = summarize(records)
    # pytest's words: "1 error", "2 errors"; "2 passed", "2 failed"
    outcomes = ", ".join(
        count_noun(n, outcome) if outcome == "error" else f"{n} {outcome}" for outcome, n in totals["outcomes"].items()
    )
    # a test that only compiled (torch.compile, no marker or fixture of the plugin) has a record too
    used = f"{count_noun(len(records), 'test')} recorded"
    recompiles = count_noun(totals["recompiles"], "recompile")
    hits = totals["recompile_limit_hits"]
    if hits:
        quiet = [
            limit_hit_count(section(record, "recompiles"))
            for record in records.values()
            if record.get("outcome") in QUIET_OUTCOMES and limit_hit_count(section(record, "recompiles"))
        ]
        tests = "a test that passed" if len(quiet) == 1 else "tests that passed"
        where = "" if not quiet else f", in {tests}" if sum(quiet) == hits else f", {sum(quiet)} in {tests}"
        recompiles += f" ({count_noun(hits, 'recompile-limit hit')}{where})"
    graphs = f"{count_noun(totals['graphs_captured'], 'graph')} captured"
    return f"{used}: {outcomes or 'none finished'}; {recompiles}; {graphs}"


def terminal_summary_lines(
    records: Mapping[str, Mapping[str, Any]],
    report_path: Path | None,
    *,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    report_error: str | None = None,
    width: int = WIDTH,
) -> list[str]:
    """The lines of the ``cudagraph`` section of pytest's terminal summary.

    One line per recorded test under a line naming its file (failed tests and tests
    that hit the recompile limit without passing first, so an elided table never
    hides them); a skipped test that measured nothing is left out and counted below
    (the GPU tests of a CPU runner).  Then a totals line, a legend of what the table
    shows, and where the report went (or why it could not be written).  Everything
    fits ``width`` columns (the terminal's, WIDTH at most) where the words allow.
    """
    lines: list[str] = []
    if records:
        ordered = sorted(records.items(), key=lambda item: (not needs_attention(item[1]), item[0]))
        listed = [(nodeid, summary_row(nodeid, record)) for nodeid, record in ordered]
        listed = [(nodeid, row) for nodeid, row in listed if not measured_nothing(records[nodeid], row)]
        hidden = 0
        if max_rows is not None and len(listed) > max_rows:
            hidden = len(listed) - max_rows
            listed = listed[:max_rows]
        rows = [row for _, row in listed]
        nodeids = [nodeid for nodeid, _ in listed]
        compact = [summary_row(nodeid, records[nodeid], compact_pool=True)[POOL_COLUMN] for nodeid in nodeids]
        rows = fitting_rows(rows, compact, nodeids, width)
        lines += table_lines(rows, nodeids, width)
        if hidden:
            lines.append(f"... {hidden} more tests (use -v for all of them, or see the report)")
        unlisted = len(records) - len(listed) - hidden
        below = [totals_line(records), *skip_lines(records, unlisted), *first_use_lines(records)]
        below += disabled_layer_lines(records) + legend_lines(rows, width)
        lines += [piece for line in below for piece in wrapped(line, width)]
    if report_error is not None:
        lines.append(report_error)
    elif report_path is not None:
        lines.append(f"report written to {report_path}")
    return lines


def section_width(terminal_columns: int) -> int:
    """The section's width in a terminal of ``terminal_columns``: the terminal's, within NARROWEST and WIDTH."""
    return max(NARROWEST, min(WIDTH, terminal_columns))


def measured_nothing(record: Mapping[str, Any], row: list[str]) -> bool:
    """A skipped test whose row is empty past its outcome: the lines under the table count it instead."""
    return record.get("outcome") == "skipped" and all(cell in EMPTY_CELLS for cell in row[2:])


def table_lines(rows: list[list[str]], nodeids: list[str] | None = None, width: int = WIDTH) -> list[str]:
    """The table of ``rows`` (as summary_row makes them) in ``width`` columns: one line per test, under its file.

    Columns empty in every row are left out, and the outcome column where every row
    passed (the totals line says so).  A test's name (its node id past the file) is
    shortened where the other columns leave it too little room (``fit_test_name``: the
    parametrize id and the class first); a function's name wider than its column gets
    a line of its own above its row's cells, whole.  Where even a name of
    NAME_NARROWEST would not fit (a GPU run's pool cells), the pool and graphs cells
    are broken over lines, and past that each name gets a line of its own.  ``nodeids`` (the rows' ids) put a
    line naming the file above each file's tests (its directory shortened to fit);
    without them the first cell is shown as it is.
    """
    if not rows:
        return []
    header, cells, files, widths = _layout(rows, nodeids)
    needed = min(widths[0], NAME_NARROWEST)  # a name shortened no further than this
    keep = [HEADER.index(name) for name in header]
    wrap = {keep.index(HEADER.index(name)): least for name, least in WRAPPED_COLUMNS if HEADER.index(name) in keep}
    for column, least in wrap.items():  # the widest first: the pool cell, then the graphs cell
        excess = needed + sum(widths[1:]) + 2 * (len(widths) - 1) - width
        if excess > 0:
            widths[column] = min(widths[column], max(least, len(header[column]), widths[column] - excess))
    room = width - sum(widths[1:]) - 2 * (len(widths) - 1)
    own_line = room < needed  # no room for a name even so: each name on a line of its own
    widths[0] = len(header[0]) if own_line else min(widths[0], room)
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(header, widths)).rstrip()]
    shown_file = None
    for file, row in zip(files, cells):
        if file is not None and file != shown_file:
            lines.append(fit_path(file, width))
            shown_file = file
        indent = "  " if row[0].startswith("  ") else ""
        name = row[0][len(indent) :]
        # a function's name is never clipped for the table: one too wide for the column gets a line of its own
        alone = own_line or len(indent) + len(_function_name(name)) > widths[0]
        name_width = width if alone else widths[0]
        if len(indent) + len(name) > name_width:
            name = fit_test_name(name, name_width - len(indent))
        if alone:
            lines.append(indent + name)
        pieces = [[""] if alone else [indent + name]]
        pieces += [wrap_words(cell, widths[c]) if c in wrap else [cell] for c, cell in enumerate(row) if c]
        for at in range(max(map(len, pieces))):
            line = [piece[at] if at < len(piece) else "" for piece in pieces]
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    return lines


def fitting_rows(
    rows: list[list[str]], compact_pools: list[str], nodeids: list[str] | None = None, width: int = WIDTH
) -> list[list[str]]:
    """``rows`` as they are where the names keep what tells them apart; else with their pool cells' compact form.

    What a name needs: its class and function whole and PARAM_SHARE characters of its
    parametrize id (NAME_NARROWEST at least): where the other columns leave less room
    than that, the pool cells, the widest, take their compact form.
    """
    if not rows:
        return rows
    _, cells, _, widths = _layout(rows, nodeids)
    essential = max(map(_essential_length, (row[0] for row in cells)))
    room = width - sum(widths[1:]) - 2 * (len(widths) - 1)
    if room >= min(widths[0], max(essential, NAME_NARROWEST)):
        return rows
    return [[*row[:POOL_COLUMN], pool, *row[POOL_COLUMN + 1 :]] for row, pool in zip(rows, compact_pools)]


def _function_name(name: str) -> str:
    """The function's name in a name cell (``Class::test_f[id]`` -> ``test_f``)."""
    bracket = name.find("[")  # a parametrize id opens at the first "[" (the id may hold "::")
    return (name[:bracket] if bracket > 0 else name).rpartition("::")[2]


def _essential_length(name: str) -> int:
    """How much of a name cell (indent, class, function, parametrize id) a row should show: the id to PARAM_SHARE."""
    bracket = name.find("[")
    return len(name) if bracket < 0 else bracket + min(len(name) - bracket, PARAM_SHARE)


def _layout(
    rows: list[list[str]], nodeids: list[str] | None
) -> tuple[list[str], list[list[str]], list[str | None], list[int]]:
    """The columns shown (header), their cells (a test's name under its file), each row's file, each column's width."""
    # the outcome column shows where outcomes differ; a table of passed tests says so in its totals line
    keep = [
        i
        for i in range(len(HEADER))
        if i == 0
        or (any(row[i] != "passed" for row in rows) if i == 1 else any(row[i] not in EMPTY_CELLS for row in rows))
    ]
    cells = [[row[i] for i in keep] for row in rows]
    files: list[str | None] = [None] * len(rows)
    for index, nodeid in enumerate(nodeids or []):
        path, sep, name = nodeid.partition("::")
        files[index], cells[index][0] = (path, "  " + name) if sep else (None, nodeid)
    header = [HEADER[i] for i in keep]
    widths = [max(len(header[c]), *(len(row[c]) for row in cells)) for c in range(len(keep))]
    return header, cells, files, widths


def fit_test_name(name: str, width: int) -> str:
    """A test's name past its file (``Class::test_f[id]``) in ``width``, its function's name whole where it fits.

    The parametrize id is clipped in the middle first (its end is where ids differ:
    ``[bf1...-bs16]``), down to PARAM_SHARE characters, then the class; past that the
    class goes, then the id down to ``[...]``.  Only a function's name that leaves no
    room for that (or is wider than ``width`` alone) is clipped, in the middle.
    """
    if len(name) <= width:
        return name
    bracket = name.find("[")  # a parametrize id opens at the first "[" (names have none; the id may hold "::")
    base, param = (name[:bracket], name[bracket:]) if bracket > 0 else (name, "")
    scope, colons, function = base.rpartition("::")
    scope += colons
    if len(function) > width:
        return clip_middle(name, width, head_share=0.6)
    budget = width - len(function)  # for the class and the id
    param_share = min(len(param), PARAM_SHARE)
    if len(scope) + param_share <= budget:
        return scope + function + clip_middle(param, budget - len(scope), head_share=0.3)
    if scope and budget - param_share >= SCOPE_NARROWEST:
        return clip_middle(scope, budget - param_share) + function + clip_middle(param, param_share, head_share=0.3)
    if param and budget >= min(len(param), PARAM_NARROWEST):
        return function + clip_middle(param, budget, head_share=0.3)
    if param:  # rows of one function differ only there: the id's end stays, the function is clipped for it
        param = clip_middle(param, min(len(param), PARAM_NARROWEST), head_share=0.3)
        return clip_middle(function, width - len(param), head_share=0.6) + param
    return function


def fit_path(path: str, width: int) -> str:
    """A file's path in ``width``: its directory clipped in the middle first, the file's name whole where it fits."""
    if len(path) <= width:
        return path
    directory, slash, file = path.rpartition("/")
    if not slash or len(file) + 6 > width:
        return clip_middle(path, width, head_share=0.3)
    return clip_middle(directory, width - len(file) - 1, head_share=0.5) + "/" + file


def wrapped(line: str, width: int = WIDTH) -> list[str]:
    """A line under the table in ``width`` columns: broken at spaces, the lines after the first indented by two."""
    return wrap_line(line, width)


def gpu_skip_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``12 GPU tests skipped: no CUDA device (...)``, one line per reason the plugin skipped GPU tests for."""
    counts: dict[str, int] = {}
    for record in records.values():
        reason = record.get("skip_reason")
        if record.get("outcome") == "skipped" and isinstance(reason, str) and reason.startswith(GPU_SKIP_REASONS):
            counts[reason] = counts.get(reason, 0) + 1
    return [f"{count_noun(n, 'GPU test')} skipped: {reason}" for reason, n in sorted(counts.items())]


def skip_lines(records: Mapping[str, Mapping[str, Any]], unlisted: int) -> list[str]:
    """The skipped tests the table leaves out: the GPU tests, one line per reason, then the others.

    ``6 GPU tests skipped, not listed: no CUDA device (...)``; ``2 other skipped
    tests measured nothing, not listed``.  ``unlisted`` is how many rows the table
    left out for having measured nothing.
    """
    lines = [line.replace(" skipped: ", " skipped, not listed: ", 1) for line in gpu_skip_lines(records)]
    gpu = sum(
        1
        for record in records.values()
        if record.get("outcome") == "skipped" and str(record.get("skip_reason", "")).startswith(GPU_SKIP_REASONS)
    )
    others = unlisted - gpu
    if others > 0:
        lines.append(f"{count_noun(others, 'other skipped test')} measured nothing, not listed")
    return lines


def disabled_layer_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per cache layer that was off in a cold/warm pair: in how many tests, why, and what was checked.

    With the FX-graph cache off nothing is left to check (AOTAutograd's entries are
    stored through it; the test fails saying so): one line for every layer, not a
    line per layer saying "the other layers were".
    """
    tests: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for nodeid, record in records.items():
        for pair in pass_pairs(record):
            off = disabled_layers(pair)
            if "fxgraph" in off:
                off = {"every": off["fxgraph"]}
            for layer, reason in off.items():
                if nodeid not in tests.setdefault(layer, []):
                    tests[layer].append(nodeid)
                why.setdefault(layer, reason)
    lines = []
    for layer, nodeids in sorted(tests.items()):
        where = f"{count_noun(len(nodeids), 'test')} ({why[layer]}; first: {nodeids[0]})"
        if layer == "every":
            fails = "the test fails" if len(nodeids) == 1 else "those tests fail"
            lines.append(f"every compile cache layer was off in {where}: no warm start to check, so {fails}")
        else:
            lines.append(f"{layer} cache disabled in {where}: not checked there, the other layers were")
    return lines


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


# the pool ratio in the legend's words, replaced by the first ratio the table shows
RATIO_EXAMPLE = "1.43x"
# what each column holds, for the legend's first part (the test and outcome columns need none)
COLUMN_MEANING = {
    "graphs": "graphs: CUDA graphs captured (their batch sizes)",
    "pool / largest": f"pool / largest: the shared pool and the largest graph alone, {RATIO_EXAMPLE} = (pool - cuBLAS) / largest",
    "recompiles": "recompiles: Dynamo recompiles",
    "compile": "compile: torch.compile seconds (Dynamo, AOTAutograd, Inductor)",
    "fxgraph": "fxgraph: Inductor's FX-graph cache",
    "aot": "aot: AOTAutograd's cache",
    "triton": "triton: Triton's kernels",
}


def legend_lines(rows: list[list[str]], width: int = LEGEND_WIDTH) -> list[str]:
    """What the table shows: each column kept, then the notations its cells use; nothing the table leaves out."""
    column = {name: index for index, name in enumerate(HEADER)}
    shown_columns = [name for name in HEADER[2:] if any(row[column[name]] not in EMPTY_CELLS for row in rows)]
    cache_cells = [row[column[name]] for row in rows for name in CACHE_COLUMNS.values()]
    letters = set().union(*map(letters_in, cache_cells)) if cache_cells else set()
    parts = [COLUMN_MEANING[name] for name in shown_columns if name in COLUMN_MEANING]
    # the ratio's example is one the table shows
    ratio = next((m[0] for row in rows if (m := re.search(r"\d+\.\d+x", row[column["pool / largest"]]))), None)
    parts = [part.replace(RATIO_EXAMPLE, ratio) if ratio else part for part in parts]
    shown = [letter for letter in LETTER_MEANING if letter in letters]
    if shown:
        meanings = ", ".join(f"{letter} {LETTER_MEANING[letter]}" for letter in shown)
        counted = [name for name in CACHE_COLUMNS.values() if any(letters_in(row[column[name]]) for row in rows)]
        parts.append(f"{', '.join(counted)}: {meanings} ({shown[0]}=2: 2 {LETTER_MEANING[shown[0]]})")
    arrows = [cell for name in ("compile", *CACHE_COLUMNS.values()) for cell in (row[column[name]] for row in rows)]
    if any("->" in cell for cell in arrows):
        parts.append("a -> b: the cold pass, then the warm pass")
    if "off" in cache_cells:
        parts.append(
            "off: a cache layer the user turned off (alone it is not checked; with every layer off the test fails)"
        )
    pools = [row[column["pool / largest"]] for row in rows]
    if any(re.search(r" \[\d+/\d+\]", cell) for cell in pools):
        parts.append("[i/n]: the figures of set i, the worst ratio of the test's n GraphSets")
    if any(cell.endswith((" outside", " out")) for cell in pools):
        compact = any(cell.endswith(" out") for cell in pools)
        parts.append(
            ("+4.0M out, " if compact else "")
            + "outside: device memory behind PyTorch's allocator that the graphs held (what their release gave "
            "back; where no release was read, what the captures took), first use apart; ? when other "
            "processes shared the GPU"
        )
    graph_cells = [row[column["graphs"]] for row in rows]
    if any(" obs" in cell for cell in graph_cells):
        parts.append("n obs: CUDA graphs the test body captured itself, observed (cudagraph(observe=True))")
    if any(" regions" in cell for cell in graph_cells):
        parts.append(
            "n/m regions, p% calls: reduce-overhead regions that ran as CUDA graphs, and the calls after warm-up"
        )
    if any(" piece" in cell for cell in graph_cells):
        parts.append("n pieces, m graphs: a model split into n pieces, and the graphs captured of them (if any)")
    recompile_cells = [row[column["recompiles"]] for row in rows]
    if any("LIMIT" in cell for cell in recompile_cells):
        parts.append("LIMIT: hit the recompile limit, so Dynamo ran frames eagerly")
    if any(cell.endswith(" limit") or " limit " in cell for cell in recompile_cells):
        parts.append("limit: hit the recompile limit in a test that passed (it expected the hit, or checked nothing)")
    if any("brk" in cell for cell in recompile_cells):
        parts.append("+Nbrk: N graph breaks")
    lines: list[str] = []
    for part in parts:  # one line while it stays readable, then one more
        if lines and len(lines[-1]) + len(part) + 2 <= width:
            lines[-1] += "; " + part
        else:
            lines.append(part)
    return lines


def needs_attention(record: Mapping[str, Any]) -> bool:
    """A failed, errored or crashed test, or one that hit the recompile limit and did not pass: listed first."""
    outcome = record.get("outcome")
    if outcome in ATTENTION_OUTCOMES:
        return True
    return outcome not in QUIET_OUTCOMES and bool(limit_hit_count(section(record, "recompiles")))
