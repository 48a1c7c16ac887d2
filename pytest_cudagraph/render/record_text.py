"""A test record's where-and-why sections as text: recompiles with their failed guards, graph-break sites,
what reduce-overhead left out, pieces that ran without a graph, and each rank of a multi-rank run.

Everything here reads a record's typed sections (``records.schema``: a
``RecompileEvent``, a ``ReduceOverhead``, ...), so ``pytest-cudagraph show`` prints
a report the way the failure printed the test, and the HTML page words each line
the same.  Graph-break sites are the one part the types leave open (``sites`` is
any JSON): they are read as mappings, a field of another type reading as absent.

The live run calls two functions here, with the library's ``to_json()`` values:
``recompile_table`` (a recompile failure's table) types each event on entry
(``typed_section``: the types are the contract ``to_json()`` is checked against),
and ``break_site_text`` reads a site's mapping as it does for a loaded report.

Nothing here imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..records.json_values import mapping_of, number
from ..records.loaded import LoadedReport, filled, given, section_or_empty, typed_report, typed_section
from ..records.report import as_int
from .plain_text import (
    MIB,
    bytes_pair,
    clip,
    clip_nodeid,
    count_noun,
    fit_table,
    format_bytes,
    format_table,
    short_seconds,
    signed_bytes,
    wrap_lines,
)

if TYPE_CHECKING:
    from msgspec import UnsetType

    from ..records.schema import (
        CallSite,
        CaptureCost,
        CudagraphSkip,
        FailedGuard,
        Graphs,
        Piecewise,
        Rank,
        Ranks,
        RanksRun,
        RecompileEvent,
        Recompiles,
        ReduceOverhead,
        TestRecord,
    )

__all__ = [
    "MAX_GUARD_ROWS",
    "SHOW_WIDTH",
    "UNPRINTED_NOTE",
    "break_site_text",
    "break_sites",
    "call_site_text",
    "detail_lines",
    "event_head",
    "guard_row",
    "is_limit_hit",
    "limit_hit_text",
    "limit_hits_of",
    "pieces_lines",
    "rank_row",
    "ranks_head",
    "ranks_lines",
    "recompile_events",
    "recompile_table",
    "reduce_overhead_lines",
    "region_rows",
    "regions_text",
    "section",
    "skip_text",
    "uncaptured_pieces",
]

MAX_GUARD_ROWS = 12
# the width of show's text, as of the terminal summary's section
SHOW_WIDTH = 120
UNPRINTED_NOTE = "not in torch's message, which names only the first failing guard of an entry"
GUARD_HEADER = ("entry", "failed guard", "expected", "actual")
REGION_HEADER = ("region", "replayed", "recorded", "warm-up", "without graph")
RANK_HEADER = ("rank", "device", "outcome", "graphs", "pool / largest", "max error", "waiting at / error")


def section(record: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """``record[name]`` when it is a mapping, else an empty one (a report may hold anything)."""
    return mapping_of(record.get(name))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


# ----------------------------------------------------------------------------
# recompiles
# ----------------------------------------------------------------------------


def call_site_text(site: CallSite | Mapping[str, Any] | None | UnsetType, code_width: int = 80) -> str:
    """``tests/test_model.py:42 `return f(x)```: the user's line (``CallSite.describe``); empty when unknown.

    ``site`` is a typed ``CallSite`` (a recompile's), or the mapping a graph-break
    site holds (sites are any JSON).  A long line loses its trailing comment first
    (the call is what places it), then is clipped inside its backticks, so the
    place stays whole and the quote closed.
    """
    if isinstance(site, Mapping):
        file, line, code = site.get("file"), site.get("line", "?"), site.get("code")
    else:
        typed = given(site)
        if typed is None:
            return ""
        file, line, code = given(typed.file), given(typed.line), given(typed.code)
        line = "?" if line is None else line
    if not file:
        return ""
    label = f"{file}:{line}"
    if code and len(" ".join(str(code).split())) > code_width:
        code = without_comment(str(code)) or code
    return f"{label} `{clip(code, code_width)}`" if code else label


def without_comment(code: str) -> str:
    """One line of Python without its trailing ``# comment`` (a ``#`` inside a string stays); as it was if unreadable."""
    import io
    import tokenize

    line = code.strip()
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                return line[: token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement: its brackets open at the end
        pass
    return code


def recompile_events(recompiles: Recompiles) -> list[RecompileEvent]:
    """The section's ``events`` (recompiles and limit hits, in order); empty for a report older than them."""
    return list(given(recompiles.events) or ())


def event_head(number_: int, total: int, event: RecompileEvent) -> str:
    """``recompile 2 of 3: forward (model.py:12), called from tests/test_x.py:10 `model(x)```."""
    site = call_site_text(event.call_site)
    called = f", called from {site}" if site else ""
    return f"recompile {number_} of {total}: {_text(given(event.function)) or '?'}{called}"


def limit_hit_text(event: RecompileEvent) -> str:
    """A limit hit: torch's readable line, and the user's line that called the function when known."""
    site = call_site_text(event.call_site)
    return _text(given(event.limit_hit)) + (f"; called from {site}" if site else "")


def limit_hits_of(recompiles: Recompiles) -> int:
    """How many recompile-limit hits the section records (a list of them, or an older plugin's count)."""
    hits = given(recompiles.limit_hits)
    return len(hits) if isinstance(hits, list) else as_int(hits)


def is_limit_hit(event: RecompileEvent) -> bool:
    """Whether the event is a recompile-limit hit (Dynamo gave up on the frame), not a recompile."""
    return given(event.limit_hit) is not None


def guard_row(guard: FailedGuard, width: int | None = 80) -> tuple[tuple[str, str, str, str], bool]:
    """One failed guard as (entry, guard, expected, actual), and whether torch printed it (else marked ``*``)."""
    printed = given(guard.reported_by_torch) is not False
    text = _text(given(guard.guard))
    expected, actual = _text(given(guard.expected)) or "-", _text(given(guard.actual)) or "-"
    if width is not None:
        text, expected, actual = clip(text, width), clip(expected, 30), clip(actual, 30)
    return (_text(given(guard.entry)), text + ("" if printed else " *"), expected, actual), printed


def _typed_events(events: Sequence[RecompileEvent | Mapping[str, Any]]) -> list[RecompileEvent]:
    """The events as their type: the live run hands ``RecompileEvent.to_json()`` mappings, checked here."""
    from ..records.schema import RecompileEvent

    return [
        event if isinstance(event, RecompileEvent) else typed_section(event, RecompileEvent, ("events", index))
        for index, event in enumerate(events)
    ]


def recompile_table(
    events: Sequence[RecompileEvent | Mapping[str, Any]],
    indent: str = "  ",
    kept_in: str = "the report's recompiles.events",
    width: int | None = None,
) -> list[str]:
    """Each recompile (limit hits left out): where it was called, then its failed guards, as the failure prints it.

    ``events`` are a report's typed events, or the live run's ``RecompileEvent.to_json()``
    values (typed here).  At most ``MAX_GUARD_ROWS``
    guard rows (each recompile fails one guard per cached entry, so the rows grow
    quadratically; the first ones name the change), the rest counted and said to be
    in ``kept_in``; a guard torch did not print is marked ``*``, explained at the end.
    An event with no parsed guard shows its reasons.  With ``width``, each guard
    table is fitted to it (``fit_table``, the guard broken at its spaces).
    """
    lines: list[str] = []
    shown = hidden = 0
    unprinted = False
    recompiles = [event for event in _typed_events(events) if not is_limit_hit(event)]
    for index, event in enumerate(recompiles, 1):
        guards = given(event.guards) or []
        if shown >= MAX_GUARD_ROWS:
            hidden += max(1, len(guards))
            continue
        lines.append(f"{indent}{event_head(index, len(recompiles), event)}")
        if not guards:
            reasons = [clip(r, 140) for r in given(event.reasons) or ()]
            lines += [f"{indent}  - {r}" for r in reasons] or [f"{indent}  (no reason recorded)"]
            continue
        rows = [GUARD_HEADER]
        for guard in guards:
            if shown >= MAX_GUARD_ROWS:
                hidden += 1
                continue
            shown += 1
            row, printed = guard_row(guard)
            unprinted = unprinted or not printed
            rows.append(row)
        if width is None:
            lines += format_table(rows, indent=indent + "  ")
        else:
            inner = indent + "  "
            lines += [inner + line for line in fit_table(rows, width - len(inner), wrap={1: 24, 2: 10, 3: 10})]
    if hidden:
        lines.append(f"{indent}... and {hidden} more failed guards (all are in {kept_in})")
    if unprinted:
        lines.append(f"{indent}* {UNPRINTED_NOTE}")
    return lines


def break_site_text(site: Mapping[str, Any]) -> str:
    """``REASON (x2) at model.py:30 `print(x)`, called from tests/test_x.py:10 `f(x)```: one graph-break site."""
    location = _text(site.get("location"))
    code = _text(site.get("code"))
    where = f" at {location}" + (f" `{clip(code, 60)}`" if code else "") if location else ""
    called = call_site_text(site.get("call_site"), code_width=60)
    called = f", called from {called}" if called else ""
    return f"{clip(_text(site.get('reason')), 140)} (x{as_int(site.get('count', 1))}){where}{called}"


def break_sites(recompiles: Recompiles) -> list[Mapping[str, Any]]:
    """The graph-break sites the section records (any JSON: the mappings among them)."""
    breaks = given(recompiles.graph_breaks)
    sites = given(breaks.sites) if breaks is not None else None
    return [site for site in sites or () if isinstance(site, Mapping)]


def _recompile_lines(recompiles: Recompiles, width: int) -> list[str]:
    events = recompile_events(recompiles)
    lines: list[str] = []
    if not all(map(is_limit_hit, events)):
        lines += [f"recompiles: {as_int(given(recompiles.count))}", *recompile_table(events, width=width)]
    hits = [event for event in events if is_limit_hit(event)]
    if hits:
        lines += ["recompile limit hits (Dynamo ran those frames eagerly):"]
        lines += [f"  - {limit_hit_text(event)}" for event in hits]
    sites = break_sites(recompiles)
    if sites:
        breaks = given(recompiles.graph_breaks)
        count = as_int(given(breaks.count)) if breaks is not None else 0
        lines += [f"graph breaks (not recompiles): {count}", *[f"  - {break_site_text(s)}" for s in sites]]
    return lines


# ----------------------------------------------------------------------------
# reduce-overhead
# ----------------------------------------------------------------------------


def skip_text(skip: CudagraphSkip) -> str:
    """``mutated inputs (1 instances), argument 'x', in step, at model.py:30 `x.add_(1)```: one skip."""
    parts = [_text(given(skip.reason)) or "?"]
    arguments = [str(a) for a in given(skip.arguments) or ()]
    if arguments:
        parts.append(f"{'argument' if len(arguments) == 1 else 'arguments'} {', '.join(map(repr, arguments))}")
    function, location, code = given(skip.function), given(skip.location), given(skip.code)
    if function:
        parts.append(f"in {function}")
    if location:
        parts.append(f"at {location}" + (f" `{code}`" if code else ""))
    return ", ".join(parts)


# a region's calls by what they did, in the table's order
_REGION_CALLS = ("replayed", "recorded", "warmup", "without_graph")


def regions_text(trees: ReduceOverhead) -> str:
    """``2/3 regions ran as CUDA graphs; 85% of calls after warm-up (17 of 20)``; empty when not metered."""
    total = given(trees.regions_total)
    if total is None:
        return ""
    text = f"{as_int(given(trees.regions_cudagraphed))}/{total} regions ran as CUDA graphs"
    replayed, recorded, _, without_graph = (as_int(n) for n in _calls_of(given(trees.calls) or {}))
    share = number(given(trees.fraction_of_calls), finite=True)
    if share is not None:
        graphs = replayed + recorded
        counted = graphs + without_graph
        text += f"; {share:.0%} of calls after warm-up" + (f" ({graphs} of {counted})" if counted else "")
    return text


def _calls_of(calls: Mapping[str, int]) -> tuple[int | None, ...]:
    """Calls replayed, recorded, in warm-up and without a graph (None where the counts leave one out)."""
    return tuple(calls.get(kind) for kind in _REGION_CALLS)


def region_rows(trees: ReduceOverhead) -> list[tuple[str, str, str, str, str]]:
    """One row per region: its name, then its calls replayed, recorded, warm-up and without a graph."""
    rows = []
    for name, calls in (given(trees.regions) or {}).items():
        rows.append((str(name), *(str(as_int(n)) for n in _calls_of(calls))))
    return rows  # type: ignore[return-value]


def reduce_overhead_lines(trees: ReduceOverhead) -> list[str]:
    """How much reduce-overhead cudagraphed, its regions' calls, and each skip; empty for an older record."""
    lines = []
    share = regions_text(trees)
    if share:
        lines.append(f"reduce-overhead: {share}")
        rows = region_rows(trees)
        if rows:
            lines += format_table([REGION_HEADER, *rows], align="<>>>>", indent="  ")
    skipped = given(trees.skipped) or []
    if skipped:
        lines += ["reduce-overhead skipped CUDA graphs:", *[f"  - {skip_text(skip)}" for skip in skipped]]
    return lines


# ----------------------------------------------------------------------------
# piecewise
# ----------------------------------------------------------------------------


# how the split words a splitting op's piece; where no graph was captured there is no "between the graphs"
_BETWEEN = re.compile(r":? *runs eagerly between the (?:graphs|partitions)$")


def _piece_index(name: str) -> int | None:
    """``submod_3`` -> 3: a piece's place in the split (its name's trailing number); None for another name."""
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else None


def uncaptured_pieces(piecewise: Piecewise) -> tuple[str, list[tuple[str, str]]]:
    """The head and (piece, reason) rows of the pieces that ran without a graph, in the split's order.

    The split records its splitting ops' pieces first and the capturable ones after;
    they are shown by their index (``submod_0``, ``submod_1``, ...), those without
    one last.  A run that captured no graph (a CPU run) says that all of them ran
    eagerly, no graphs captured, and no piece is said to run "between the graphs".
    """
    pieces = given(piecewise.uncaptured) or []
    named = [(_text(given(p.piece)) or "?", _text(given(p.reason))) for p in pieces]
    named.sort(key=lambda row: (_piece_index(row[0]) is None, _piece_index(row[0]) or 0))
    captured = given(piecewise.graphs_captured)
    if captured is not None and as_int(captured) == 0:
        rows = [(piece, _BETWEEN.sub("", reason) or "ran eagerly") for piece, reason in named]
        return f"{count_noun(len(named), 'piece')} ran eagerly, no graphs captured", rows
    return f"{count_noun(len(named), 'piece')} ran without a graph", named


def pieces_lines(piecewise: Piecewise) -> list[str]:
    """Every piece that runs without a graph and why, then the calls that replayed none, by reason."""
    calls = {str(k): as_int(v) for k, v in (given(piecewise.uncaptured_calls) or {}).items()}
    lines = []
    head, pieces = uncaptured_pieces(piecewise)
    if pieces:
        lines.append(f"piecewise: {head}:")
        lines += [f"  - {piece}: {reason}" for piece, reason in pieces]
    if calls:
        lines.append("piecewise calls that replayed no graph:")
        lines += [f"  - {count_noun(n, 'call')}: {reason}" for reason, n in calls.items()]
    return lines


# ----------------------------------------------------------------------------
# capture cost
# ----------------------------------------------------------------------------

COST_HEADER = ("#", "size", "warm-up", "capture", "pool", "allocator", "first use", "behind allocator")
# a figure behind the allocator this large is worth a line of its own (one driver page is rounding)
NOTABLE_OUTSIDE_BYTES = 2 * MIB


def cost_rows(section: CaptureCost) -> list[tuple[str, ...]]:
    """A ``graphs`` or ``piecewise`` section's ``per_size`` as table rows, in capture order."""
    rows = given(section.per_size) or []
    return [
        (
            str(as_int(given(row.order)) + 1),
            _text(given(row.size)),
            short_seconds(given(row.warmup_s)),
            short_seconds(given(row.capture_s)),
            signed_bytes(given(row.pool_bytes)),
            signed_bytes(given(row.allocator_outside_pool_bytes)),
            signed_bytes(given(row.first_use_bytes)),
            signed_bytes(given(row.behind_allocator_bytes)),
        )
        for row in sorted(rows, key=lambda r: as_int(given(r.order)))
    ]


def _figure(value: Any) -> float | None:
    return number(given(value), finite=True)


def cost_head(section: CaptureCost) -> str:
    """``51 sizes captured in 1.23 s (warm-up 0.80 s); outside the pool: 4.0 MiB behind the allocator, ...``."""
    sizes = len(given(section.per_size) or ())
    # a graph set's capture_s is its own field; a CaptureCost names none (it is the sets' base)
    capture, warmup = _figure(getattr(section, "capture_s", None)), _figure(section.warmup_s)
    text = f"{count_noun(sizes, 'size')} captured"
    if capture is not None:
        text += f" in {capture:.3f} s" + (f" (warm-up {warmup:.3f} s)" if warmup is not None else "")
    behind = _figure(section.behind_allocator_bytes)
    allocator = _figure(section.allocator_outside_pool_bytes)
    first_use = _figure(section.first_use_bytes)
    held = _figure(section.held_behind_allocator_bytes)
    unreliable = given(section.outside_unreliable)
    if unreliable:
        return f"{text}; memory outside the pool not vouched for: {_text(unreliable)}"
    if behind is not None:
        text += f"; outside the pool: {format_bytes(max(0.0, behind))} behind the allocator"
        if held is not None:
            text += f" ({format_bytes(held)} of it given back on release)"
        if allocator is not None:
            text += f", {format_bytes(max(0.0, allocator))} in the allocator"
    if first_use is not None and first_use >= NOTABLE_OUTSIDE_BYTES:
        text += f"; first use (warm-ups, behind the allocator): {format_bytes(max(0.0, first_use))}"
    return text


def cost_sections(section: Graphs | Piecewise, name: str) -> list[tuple[str, CaptureCost]]:
    """``(label, section)`` per capture run: the section itself, or each of its ``sets``."""
    sets: Sequence[CaptureCost] = given(section.sets) or []
    if not sets:
        return [(name, section)] if given(section.per_size) else []
    return [(f"{name} set {i + 1} of {len(sets)}", one) for i, one in enumerate(sets) if given(one.per_size)]


def cost_lines(section: Graphs | Piecewise, name: str) -> list[str]:
    """``show``: each capture run's head, and each size that took memory behind the allocator."""
    lines = []
    for label, run in cost_sections(section, name):
        lines.append(f"{label}: {cost_head(run)}")
        if given(run.outside_unreliable):
            continue
        for row in given(run.per_size) or ():
            for value, what in (
                (row.first_use_bytes, "first use"),
                (row.behind_allocator_bytes, "behind the allocator"),
            ):
                figure = _figure(value)
                if figure is not None and figure >= NOTABLE_OUTSIDE_BYTES:
                    lines.append(f"  - batch size {_text(given(row.size))}: {format_bytes(figure)} {what}")
    return lines


# ----------------------------------------------------------------------------
# ranks
# ----------------------------------------------------------------------------


def ranks_head(ranks: RanksRun) -> str:
    """``world size 2 (nccl): failed, first failure rank 1, 12.3 s (timeout 300 s)``."""
    head = f"world size {as_int(given(ranks.world_size))}"
    backend = given(ranks.backend)
    if backend:
        head += f" ({backend})"
    head += f": {_text(given(ranks.outcome)) or '?'}"
    first = given(ranks.first_failure)
    if first is not None:
        head += f", first failure rank {first}"
    duration, timeout = _figure(ranks.duration_s), _figure(ranks.timeout_s)
    if duration is not None:
        head += f", {duration:g} s"
    if timeout is not None:
        head += f" (timeout {timeout:g} s)"
    return head


def _rank_where(rank: Rank) -> str:
    error = filled(rank.error) if rank.error is not None else None
    if error is not None:
        text = f"{given(error.type) or 'error'}: {given(error.message) or ''}".rstrip(": ")
        where = given(error.where)
        return text + (f" (at {where})" if where else "")
    waiting_at, stage, code = given(rank.waiting_at), given(rank.stage), given(rank.exitcode)
    if waiting_at:
        return f"waiting {waiting_at}"
    if given(rank.outcome) in ("crashed", "timeout", "aborted") and stage:
        exited = f", exit code {code}" if code else ""
        return f"while {stage}{exited}"
    return ""


def rank_row(rank: Rank, width: int | None = 100) -> tuple[str, ...]:
    """One rank: rank, device, outcome, graphs captured, pool / largest, max error, where it waited or failed."""
    from ..records.schema import Graphs

    has_graphs = filled(rank.graphs) is not None
    graphs = section_or_empty(rank.graphs, Graphs)
    captured = str(as_int(given(graphs.captured))) if has_graphs else "-"
    sizes = [str(s) for s in given(graphs.sizes) or ()]
    if has_graphs and sizes:
        captured += f" ({', '.join(sizes)})"
    pool = _figure(graphs.pool_bytes)
    largest = _figure(graphs.largest_graph_bytes)
    memory = bytes_pair(pool, largest) if pool is not None or largest is not None else "-"
    error = _figure(graphs.max_abs_err)
    where = _rank_where(rank)
    return (
        _text(given(rank.rank)),
        _text(given(rank.device)) or "-",
        _text(given(rank.outcome)) or "?",
        captured,
        memory,
        f"{error:.3g}" if error is not None else "-",
        (clip(where, width) if width is not None else where) or "-",
    )


def _ranks_run_lines(ranks: RanksRun, indent: str, width: int | None) -> list[str]:
    per_rank = given(ranks.per_rank) or []
    lines = [f"{indent}{ranks_head(ranks)}"]
    if not per_rank:
        return lines
    if width is None:
        lines += format_table([RANK_HEADER, *map(rank_row, per_rank)], align=">", indent=indent + "  ")
    else:
        # the rank's words (where it waited, its error) are broken over lines, not clipped
        rows = [RANK_HEADER, *(rank_row(rank, None) for rank in per_rank)]
        lines += [indent + "  " + line for line in fit_table(rows, width - len(indent) - 2, wrap={3: 10, 6: 24})]
    return lines


def ranks_lines(ranks: Ranks, width: int | None = None) -> list[str]:
    """A multi-rank test: the world size and outcome, a row per rank; each run of a test that ran several.

    With ``width``, each table of ranks is fitted to it (``fit_table``).
    """
    runs = given(ranks.runs) or []
    if not runs:
        return ["ranks: " + ranks_head(ranks), *_ranks_run_lines(ranks, "", width)[1:]]
    lines = [f"ranks: {count_noun(len(runs), 'run')}; all told {ranks_head(ranks)}"]
    for index, run in enumerate(runs, 1):
        lines.append(f"  run {index} of {len(runs)}:")
        lines += _ranks_run_lines(run, "    ", width)
    return lines


# ----------------------------------------------------------------------------
# a report
# ----------------------------------------------------------------------------


def _record_lines(typed: TestRecord, record: Mapping[str, Any], width: int) -> list[str]:
    """The where-and-why lines of one test (``typed``; ``record``, the mapping it was read from), tables in ``width``."""
    from ..records import schema

    piecewise = section_or_empty(typed.piecewise, schema.Piecewise)
    lines = _recompile_lines(section_or_empty(typed.recompiles, schema.Recompiles), width)
    lines += reduce_overhead_lines(section_or_empty(typed.reduce_overhead, schema.ReduceOverhead))
    from .observed_text import observed_lines

    lines += observed_lines(section_or_empty(typed.observed_graphs, schema.ObservedGraphs))
    lines += pieces_lines(piecewise)
    lines += cost_lines(section_or_empty(typed.graphs, schema.Graphs), "graphs")
    lines += cost_lines(piecewise, "piecewise")
    ranks = filled(typed.ranks)
    if ranks is not None:
        lines += ranks_lines(ranks, width)
    if isinstance(typed.cache_sweeps, list):
        from .sweep_text import sweep_lines

        lines += [line for sweep in typed.cache_sweeps for line in sweep_lines(sweep)]
    if isinstance(typed.bundle_cycle, list) or isinstance(typed.precompiled, list):
        from .bundle_text import bundle_cycle_lines, precompiled_lines

        lines += [line for cycle in typed.bundle_cycle or [] for line in bundle_cycle_lines(cycle)]
        lines += [line for check in typed.precompiled or [] for line in precompiled_lines(check)]
    return lines


def detail_lines(report: LoadedReport | Mapping[str, Any], width: int = SHOW_WIDTH) -> list[str]:
    """``pytest-cudagraph show``'s section of where and why, per test that records any; empty when none does.

    The lines fit ``width``: tables are fitted, the other lines broken at spaces
    (``wrap_line``: the lines after the first indented two further).  A report as a
    mapping (built in memory) is checked first (``typed_report``).
    """
    loaded = typed_report(report, name="given to detail_lines")
    lines: list[str] = []
    for nodeid, record in loaded.tests.items():
        own = _record_lines(record, loaded.record_data(nodeid), width - 2)
        if own:
            lines += ["", clip_nodeid(str(nodeid)), *wrap_lines([f"  {line}" for line in own], width)]
    return (
        ["", "where and why (recompiles, graph breaks, reduce-overhead, pieces, capture cost, ranks)", *lines]
        if lines
        else []
    )
