"""A test record's where-and-why sections as text: recompiles with their failed guards, graph-break sites,
what reduce-overhead left out, pieces that ran without a graph, and each rank of a multi-rank run.

Everything here reads the report's JSON form (``RecompileEvent.to_json()`` and the
like), so ``pytest-cudagraph show`` prints a report the way the failure printed the
test, and the HTML page words each line the same.  A report may hold anything: a
field of the wrong type reads as absent.

Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..records.json_values import list_of, mapping_of
from ..records.report import as_int
from ..text import (
    MIB,
    bytes_pair,
    clip,
    clip_nodeid,
    count_noun,
    format_bytes,
    format_table,
    number,
    short_seconds,
    signed_bytes,
)

__all__ = [
    "MAX_GUARD_ROWS",
    "UNPRINTED_NOTE",
    "break_site_text",
    "call_site_text",
    "detail_lines",
    "event_head",
    "guard_row",
    "limit_hit_text",
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
]

MAX_GUARD_ROWS = 12
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


def call_site_text(site: Any, code_width: int = 80) -> str:
    """``tests/test_model.py:42 `return f(x)```: the user's line (``CallSite.describe``); empty when unknown.

    A long line is clipped inside its backticks, so the place stays whole and the quote closed.
    """
    site = mapping_of(site)
    if not site.get("file"):
        return ""
    label = f"{site['file']}:{site.get('line', '?')}"
    return f"{label} `{clip(site['code'], code_width)}`" if site.get("code") else label


def recompile_events(recompiles: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The section's ``events`` (recompiles and limit hits, in order); empty for a report older than them."""
    return [event for event in list_of(recompiles.get("events")) if isinstance(event, Mapping)]


def event_head(number_: int, total: int, event: Mapping[str, Any]) -> str:
    """``recompile 2 of 3: forward (model.py:12), called from tests/test_x.py:10 `model(x)```."""
    site = call_site_text(event.get("call_site"))
    called = f", called from {site}" if site else ""
    return f"recompile {number_} of {total}: {_text(event.get('function')) or '?'}{called}"


def limit_hit_text(event: Mapping[str, Any]) -> str:
    """A limit hit: torch's readable line, and the user's line that called the function when known."""
    site = call_site_text(event.get("call_site"))
    return _text(event.get("limit_hit")) + (f"; called from {site}" if site else "")


def guard_row(guard: Mapping[str, Any], width: int | None = 80) -> tuple[tuple[str, str, str, str], bool]:
    """One failed guard as (entry, guard, expected, actual), and whether torch printed it (else marked ``*``)."""
    printed = guard.get("reported_by_torch") is not False
    text = _text(guard.get("guard"))
    expected, actual = _text(guard.get("expected")) or "-", _text(guard.get("actual")) or "-"
    if width is not None:
        text, expected, actual = clip(text, width), clip(expected, 30), clip(actual, 30)
    return (_text(guard.get("entry")), text + ("" if printed else " *"), expected, actual), printed


def recompile_table(
    events: Sequence[Mapping[str, Any]], indent: str = "  ", kept_in: str = "the report's recompiles.events"
) -> list[str]:
    """Each recompile (limit hits left out): where it was called, then its failed guards, as the failure prints it.

    ``events`` are ``RecompileEvent.to_json()`` values.  At most ``MAX_GUARD_ROWS``
    guard rows (each recompile fails one guard per cached entry, so the rows grow
    quadratically; the first ones name the change), the rest counted and said to be
    in ``kept_in``; a guard torch did not print is marked ``*``, explained at the end.
    An event with no parsed guard shows its reasons.
    """
    lines: list[str] = []
    shown = hidden = 0
    unprinted = False
    recompiles = [event for event in events if event.get("limit_hit") is None]
    for index, event in enumerate(recompiles, 1):
        guards = [g for g in list_of(event.get("guards")) if isinstance(g, Mapping)]
        if shown >= MAX_GUARD_ROWS:
            hidden += max(1, len(guards))
            continue
        lines.append(f"{indent}{event_head(index, len(recompiles), event)}")
        if not guards:
            reasons = [clip(r, 140) for r in list_of(event.get("reasons"))]
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
        lines += format_table(rows, indent=indent + "  ")
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


def _recompile_lines(recompiles: Mapping[str, Any]) -> list[str]:
    events = recompile_events(recompiles)
    lines: list[str] = []
    if any(event.get("limit_hit") is None for event in events):
        lines += [f"recompiles: {as_int(recompiles.get('count'))}", *recompile_table(events)]
    hits = [event for event in events if event.get("limit_hit") is not None]
    if hits:
        lines += ["recompile limit hits (Dynamo ran those frames eagerly):"]
        lines += [f"  - {limit_hit_text(event)}" for event in hits]
    sites = [s for s in list_of(mapping_of(recompiles.get("graph_breaks")).get("sites")) if isinstance(s, Mapping)]
    if sites:
        count = as_int(mapping_of(recompiles.get("graph_breaks")).get("count"))
        lines += [f"graph breaks (not recompiles): {count}", *[f"  - {break_site_text(s)}" for s in sites]]
    return lines


# ----------------------------------------------------------------------------
# reduce-overhead
# ----------------------------------------------------------------------------


def skip_text(skip: Mapping[str, Any]) -> str:
    """``mutated inputs (1 instances), argument 'x', in step, at model.py:30 `x.add_(1)```: one skip."""
    parts = [_text(skip.get("reason")) or "?"]
    arguments = [str(a) for a in list_of(skip.get("arguments"))]
    if arguments:
        parts.append(f"{'argument' if len(arguments) == 1 else 'arguments'} {', '.join(map(repr, arguments))}")
    if skip.get("function"):
        parts.append(f"in {skip['function']}")
    if skip.get("location"):
        parts.append(f"at {skip['location']}" + (f" `{skip['code']}`" if skip.get("code") else ""))
    return ", ".join(parts)


def regions_text(trees: Mapping[str, Any]) -> str:
    """``2/3 regions ran as CUDA graphs; 85% of calls after warm-up (17 of 20)``; empty when not metered."""
    total = trees.get("regions_total")
    if not isinstance(total, int) or isinstance(total, bool):
        return ""
    text = f"{as_int(trees.get('regions_cudagraphed'))}/{total} regions ran as CUDA graphs"
    calls = mapping_of(trees.get("calls"))
    share = number(trees.get("fraction_of_calls"), finite=True)
    if share is not None:
        graphs = as_int(calls.get("replayed")) + as_int(calls.get("recorded"))
        counted = graphs + as_int(calls.get("without_graph"))
        text += f"; {share:.0%} of calls after warm-up" + (f" ({graphs} of {counted})" if counted else "")
    return text


def region_rows(trees: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """One row per region: its name, then its calls replayed, recorded, warm-up and without a graph."""
    rows = []
    for name, calls in mapping_of(trees.get("regions")).items():
        calls = mapping_of(calls)
        kinds = ("replayed", "recorded", "warmup", "without_graph")
        rows.append((str(name), *(str(as_int(calls.get(kind))) for kind in kinds)))
    return rows  # type: ignore[return-value]


def reduce_overhead_lines(trees: Mapping[str, Any]) -> list[str]:
    """How much reduce-overhead cudagraphed, its regions' calls, and each skip; empty for an older record."""
    lines = []
    share = regions_text(trees)
    if share:
        lines.append(f"reduce-overhead: {share}")
        rows = region_rows(trees)
        if rows:
            lines += format_table([REGION_HEADER, *rows], align="<>>>>", indent="  ")
    skipped = [skip for skip in list_of(trees.get("skipped")) if isinstance(skip, Mapping)]
    if skipped:
        lines += ["reduce-overhead skipped CUDA graphs:", *[f"  - {skip_text(skip)}" for skip in skipped]]
    return lines


# ----------------------------------------------------------------------------
# piecewise
# ----------------------------------------------------------------------------


def pieces_lines(piecewise: Mapping[str, Any]) -> list[str]:
    """Every piece that runs without a graph and why, then the calls that replayed none, by reason."""
    pieces = [p for p in list_of(piecewise.get("uncaptured")) if isinstance(p, Mapping)]
    calls = {str(k): as_int(v) for k, v in mapping_of(piecewise.get("uncaptured_calls")).items()}
    lines = []
    if pieces:
        lines.append(f"piecewise: {count_noun(len(pieces), 'piece')} ran without a graph:")
        lines += [f"  - {_text(p.get('piece')) or '?'}: {_text(p.get('reason'))}" for p in pieces]
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


def cost_rows(section: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """A ``graphs`` or ``piecewise`` section's ``per_size`` as table rows, in capture order."""
    rows = [row for row in list_of(section.get("per_size")) if isinstance(row, Mapping)]
    return [
        (
            str(as_int(row.get("order")) + 1),
            _text(row.get("size")),
            short_seconds(row.get("warmup_s")),
            short_seconds(row.get("capture_s")),
            signed_bytes(row.get("pool_bytes")),
            signed_bytes(row.get("allocator_outside_pool_bytes")),
            signed_bytes(row.get("first_use_bytes")),
            signed_bytes(row.get("behind_allocator_bytes")),
        )
        for row in sorted(rows, key=lambda r: as_int(r.get("order")))
    ]


def cost_head(section: Mapping[str, Any]) -> str:
    """``51 sizes captured in 1.23 s (warm-up 0.80 s); outside the pool: 4.0 MiB behind the allocator, ...``."""
    sizes = len(list_of(section.get("per_size")))
    capture, warmup = number(section.get("capture_s"), finite=True), number(section.get("warmup_s"), finite=True)
    text = f"{count_noun(sizes, 'size')} captured"
    if capture is not None:
        text += f" in {capture:.3f} s" + (f" (warm-up {warmup:.3f} s)" if warmup is not None else "")
    behind = number(section.get("behind_allocator_bytes"), finite=True)
    allocator = number(section.get("allocator_outside_pool_bytes"), finite=True)
    first_use = number(section.get("first_use_bytes"), finite=True)
    held = number(section.get("held_behind_allocator_bytes"), finite=True)
    if section.get("outside_unreliable"):
        return f"{text}; memory outside the pool not vouched for: {_text(section.get('outside_unreliable'))}"
    if behind is not None:
        text += f"; outside the pool: {format_bytes(max(0.0, behind))} behind the allocator"
        if held is not None:
            text += f" ({format_bytes(held)} of it given back on release)"
        if allocator is not None:
            text += f", {format_bytes(max(0.0, allocator))} in the allocator"
    if first_use is not None and first_use >= NOTABLE_OUTSIDE_BYTES:
        text += f"; first use (warm-ups, behind the allocator): {format_bytes(max(0.0, first_use))}"
    return text


def cost_sections(section: Mapping[str, Any], name: str) -> list[tuple[str, Mapping[str, Any]]]:
    """``(label, section)`` per capture run: the section itself, or each of its ``sets``."""
    sets = [one for one in list_of(section.get("sets")) if isinstance(one, Mapping)]
    if not sets:
        return [(name, section)] if list_of(section.get("per_size")) else []
    return [(f"{name} set {i + 1} of {len(sets)}", one) for i, one in enumerate(sets) if list_of(one.get("per_size"))]


def cost_lines(section: Mapping[str, Any], name: str) -> list[str]:
    """``show``: each capture run's head, and each size that took memory behind the allocator."""
    lines = []
    for label, run in cost_sections(section, name):
        lines.append(f"{label}: {cost_head(run)}")
        for row in list_of(run.get("per_size")):
            if not isinstance(row, Mapping) or run.get("outside_unreliable"):
                continue
            for key, what in (("first_use_bytes", "first use"), ("behind_allocator_bytes", "behind the allocator")):
                figure = number(row.get(key), finite=True)
                if figure is not None and figure >= NOTABLE_OUTSIDE_BYTES:
                    lines.append(f"  - batch size {_text(row.get('size'))}: {format_bytes(figure)} {what}")
    return lines


# ----------------------------------------------------------------------------
# ranks
# ----------------------------------------------------------------------------


def ranks_head(ranks: Mapping[str, Any]) -> str:
    """``world size 2 (nccl): failed, first failure rank 1, 12.3 s (timeout 300 s)``."""
    head = f"world size {as_int(ranks.get('world_size'))}"
    if ranks.get("backend"):
        head += f" ({ranks['backend']})"
    head += f": {_text(ranks.get('outcome')) or '?'}"
    first = ranks.get("first_failure")
    if isinstance(first, int) and not isinstance(first, bool):
        head += f", first failure rank {first}"
    duration, timeout = number(ranks.get("duration_s"), finite=True), number(ranks.get("timeout_s"), finite=True)
    if duration is not None:
        head += f", {duration:g} s"
    if timeout is not None:
        head += f" (timeout {timeout:g} s)"
    return head


def _rank_where(rank: Mapping[str, Any]) -> str:
    error = mapping_of(rank.get("error"))
    if error:
        text = f"{error.get('type') or 'error'}: {error.get('message') or ''}".rstrip(": ")
        return text + (f" (at {error['where']})" if error.get("where") else "")
    if rank.get("waiting_at"):
        return f"waiting {rank['waiting_at']}"
    code = rank.get("exitcode")
    if rank.get("outcome") in ("crashed", "timeout", "aborted") and rank.get("stage"):
        exited = f", exit code {code}" if isinstance(code, int) and code else ""
        return f"while {rank['stage']}{exited}"
    return ""


def rank_row(rank: Mapping[str, Any], width: int | None = 100) -> tuple[str, ...]:
    """One rank: rank, device, outcome, graphs captured, pool / largest, max error, where it waited or failed."""
    graphs = mapping_of(rank.get("graphs"))
    captured = str(as_int(graphs.get("captured"))) if graphs else "-"
    sizes = [str(s) for s in list_of(graphs.get("sizes"))]
    if graphs and sizes:
        captured += f" ({', '.join(sizes)})"
    pool = number(graphs.get("pool_bytes"), finite=True)
    largest = number(graphs.get("largest_graph_bytes"), finite=True)
    memory = bytes_pair(pool, largest) if pool is not None or largest is not None else "-"
    error = number(graphs.get("max_abs_err"), finite=True)
    where = _rank_where(rank)
    return (
        _text(rank.get("rank")),
        _text(rank.get("device")) or "-",
        _text(rank.get("outcome")) or "?",
        captured,
        memory,
        f"{error:.3g}" if error is not None else "-",
        (clip(where, width) if width is not None else where) or "-",
    )


def _ranks_run_lines(ranks: Mapping[str, Any], indent: str) -> list[str]:
    per_rank = [rank for rank in list_of(ranks.get("per_rank")) if isinstance(rank, Mapping)]
    lines = [f"{indent}{ranks_head(ranks)}"]
    if per_rank:
        lines += format_table([RANK_HEADER, *map(rank_row, per_rank)], align=">", indent=indent + "  ")
    return lines


def ranks_lines(ranks: Mapping[str, Any]) -> list[str]:
    """A multi-rank test: the world size and outcome, a row per rank; each run of a test that ran several."""
    runs = [run for run in list_of(ranks.get("runs")) if isinstance(run, Mapping)]
    if not runs:
        return ["ranks: " + ranks_head(ranks), *_ranks_run_lines(ranks, "")[1:]]
    lines = [f"ranks: {count_noun(len(runs), 'run')}; all told {ranks_head(ranks)}"]
    for index, run in enumerate(runs, 1):
        lines.append(f"  run {index} of {len(runs)}:")
        lines += _ranks_run_lines(run, "    ")
    return lines


# ----------------------------------------------------------------------------
# a report
# ----------------------------------------------------------------------------


def _record_lines(record: Mapping[str, Any]) -> list[str]:
    lines = _recompile_lines(mapping_of(record.get("recompiles")))
    lines += reduce_overhead_lines(mapping_of(record.get("reduce_overhead")))
    lines += pieces_lines(mapping_of(record.get("piecewise")))
    for name in ("graphs", "piecewise"):
        lines += cost_lines(mapping_of(record.get(name)), name)
    ranks = mapping_of(record.get("ranks"))
    if ranks:
        lines += ranks_lines(ranks)
    return lines


def detail_lines(report: Mapping[str, Any]) -> list[str]:
    """``pytest-cudagraph show``'s section of where and why, per test that records any; empty when none does."""
    lines: list[str] = []
    for nodeid, record in mapping_of(report.get("tests")).items():
        if not isinstance(record, Mapping):
            continue
        own = _record_lines(record)
        if own:
            lines += ["", clip_nodeid(str(nodeid)), *[f"  {line}" for line in own]]
    return (
        ["", "where and why (recompiles, graph breaks, reduce-overhead, pieces, capture cost, ranks)", *lines]
        if lines
        else []
    )
