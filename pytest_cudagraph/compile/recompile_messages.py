"""The text of a recompile failure: the table of functions and reasons, the limit hits, what to try.

Every message the recompile watch raises is built here, from plain figures, so
that ``assert_at_most``, the refusal of a compile in a strict block and
``expect()`` read alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .._compat import MARK_DYNAMIC_CALL
from ..render import record_text
from ..render.plain_text import clip

# guard rows a failure shows (the rest are in the report)
MAX_REASONS_SHOWN = record_text.MAX_GUARD_ROWS


def indent_continuation(text: str) -> str:
    return text.rstrip().replace("\n", "\n    ")


def recompile_table(events: Sequence[Any], watch_in_test: bool = True) -> list[str]:
    """Each recompile (``RecompileEvent`` values; limit hits left out): where it was called, then its failed guards.

    A recompile's head names the function and the user's line that called it; under
    it, one row per failing guard: the cached entry, the guard as Dynamo prints it,
    the value the entry expected and the one that came.  A guard torch did not print
    (it stops at an entry's first failing guard; the watch found the rest) is marked
    ``*``, explained at the end.  The same text as ``pytest-cudagraph show`` prints
    from a report (``record_text``).  ``watch_in_test``: the test holds the watch (the
    ``recompiles`` fixture, ``watch_recompiles``), so its ``.events`` are named too.
    """
    kept_in = ".events and the report's recompiles.events" if watch_in_test else "the report's recompiles.events"
    return record_text.recompile_table([event.to_json() for event in events], kept_in=kept_in)


def graph_break_lines(graph_breaks: Any) -> list[str]:
    """One line per graph-break site: the reason, times, where it broke, the user's line that called the function.

    Torch's counter reasons stand in where the log named no site (a torch that did not log it).
    """
    if not graph_breaks.sites:
        return [f"  - {clip(reason, first_line=True)} (x{times})" for reason, times in graph_breaks.by_reason.items()]
    return [f"  - {record_text.break_site_text(site.to_json())}" for site in graph_breaks.sites]


def _times(n: int) -> str:
    return f"{n} time{'s' if n != 1 else ''}"


def too_many_recompiles(
    n: int,
    count: int,
    events: Sequence[Any],
    limit_hits: Sequence[str],
    graph_breaks: Any,
    reasons: Sequence[str],
    limit_setting: str,
    context: str | None = None,
    watch_in_test: bool = True,
) -> str:
    """The failure of ``assert_at_most(n)``: the verdict, the table, limit hits, graph breaks, hints.

    The head says what happened first, then the first recompile's function and
    guard, then the check (``context``): pytest's one-line summary keeps only the
    start (``recompiled 1 time (max 0): <lambda> (test_x.py:12), tensor 'x' dtype
    mismatch (@pytest.mark.max_recompiles(0))``).
    """
    if limit_hits and count <= n:
        head = f"hit the recompile limit {_times(len(limit_hits))} (recompiled {_times(count)}, max {n})"
    else:
        head = f"recompiled {_times(count)} (max {n})"
        if limit_hits:
            head += f" and hit the recompile limit {_times(len(limit_hits))}"
    first = first_recompile_text(events) if count > n else None
    if first:
        head += f": {first}"
    lines = [head + (f" ({context})" if context else "")]
    if count:
        lines += ["", *recompile_table(events, watch_in_test)]
    if limit_hits:
        lines += [
            "",
            f"recompile limit hits (Dynamo fell back to eager silently; the limit is {limit_setting}):",
        ]
        lines += _limit_hit_lines(events, limit_hits)
    if graph_breaks.count:
        lines += ["", f"graph breaks (not recompiles): {graph_breaks.count}", *graph_break_lines(graph_breaks)]
    # the hints read every failed guard, those torch's reasons leave out included
    guards = [guard.guard for event in events for guard in event.guards]
    lines += _what_to_try([*reasons, *guards, *limit_hits])
    return "\n".join(lines)


def first_recompile_text(events: Sequence[Any]) -> str | None:
    """``<lambda> (test_x.py:12), tensor 'x' dtype mismatch``: the first recompile's function and failed guard."""
    event = next((event for event in events if event.limit_hit is None), None)
    if event is None:
        return None
    guards = [guard.guard for guard in event.guards if guard.guard]
    reason = guards[0] if guards else (event.reasons[0] if event.reasons else "")
    reason = clip(reason.partition(": ")[2] if re.match(r"\d+/\d+: ", reason) else reason, 80, first_line=True)
    return f"{event.function}, {reason}" if reason else event.function


def compile_refused(function: str, reasons: Sequence[str], torch_said: str, when: str, event: Any = None) -> str:
    """A compile Dynamo refused inside a strict block: the function, where it was called, its failed guards, hints."""
    lines = [f"strict recompile check: {function} was compiled again {when}; Dynamo refused it."]
    if event is not None and event.guards:
        lines += recompile_table([event])
    elif reasons:
        lines += ["guard failure(s):", *[f"  - {indent_continuation(r)}" for r in reasons]]
    else:
        lines.append(f"torch said: {clip(torch_said, first_line=True)}")
    hints = hints_for(list(reasons))
    if hints:
        lines += ["what to try:", *[f"  - {hint}" for hint in hints]]
    return "\n".join(lines)


def happened_inside(events: Sequence[Any], limit_hits: Sequence[str], reasons: Sequence[str]) -> list[str]:
    """What an ``expect()`` block saw, below its table: the recompiles, the limit hits, what to try."""
    lines: list[str] = []
    if any(event.limit_hit is None for event in events):
        lines += ["", "recompiles inside the block:", *recompile_table(events)]
    if limit_hits:
        lines += ["", "recompile limit hits inside the block:", *_limit_hit_lines(events, limit_hits)]
    guards = [guard.guard for event in events for guard in event.guards]
    return lines + _what_to_try([*reasons, *guards, *limit_hits])


def _limit_hit_lines(events: Sequence[Any], limit_hits: Sequence[str]) -> list[str]:
    """One line per limit hit, with the user's line that called the function when it is known."""
    sites = {event.limit_hit: event.call_site for event in events if event.limit_hit is not None}
    lines = []
    for hit in limit_hits:
        site = sites.get(hit)
        lines.append(f"  - {hit}" + (f"; called from {site.describe()}" if site is not None else ""))
    return lines


def _what_to_try(reasons: list[str]) -> list[str]:
    hints = hints_for(reasons)
    return ["", "what to try:", *[f"  - {hint}" for hint in hints]] if hints else []


HINTS = (
    (
        re.compile(r"size mismatch|rank mismatch|stride mismatch|\.size\(\)|\.stride\(\)"),
        f"a size changed: mark the varying dimension with {MARK_DYNAMIC_CALL} before the "
        "first call, or compile with dynamic=True",
    ),
    (re.compile(r"dtype mismatch"), "a dtype changed: cast inputs to one dtype, or expect one compile per dtype"),
    (re.compile(r"device mismatch"), "a device changed: keep the compiled function's inputs on one device"),
    (re.compile(r"requires_grad mismatch"), "requires_grad changed: call it consistently with or without gradients"),
    (
        re.compile(r"GLOBAL_STATE changed"),
        "global state changed (grad mode, autocast, ...): call the compiled function under the same "
        "torch.no_grad()/inference_mode()/autocast context every time",
    ),
    (
        re.compile(r"\.training\b"),
        "a module's training flag changed: call .eval() or .train() once, before the first call",
    ),
    (
        re.compile(r"___check_obj_id|ID_MATCH|id\("),
        "an object's identity changed (a global, closure or module attribute): keep the same object "
        "or pass it as a tensor argument",
    ),
    (
        re.compile(r"(?<![<>=!])==(?!=)|TYPE_MATCH|___check_type_id"),
        "a Python value or type Dynamo specialized on changed: pass it as a tensor, or expect one compile per value",
    ),
    (
        re.compile(r"hit config\.\w+"),
        "raise the limit only if every compile is intended; otherwise fix the guard that fails",
    ),
)


def hints_for(reasons: list[str]) -> list[str]:
    text = "\n".join(reasons)
    return [hint for pattern, hint in HINTS if pattern.search(text)]
