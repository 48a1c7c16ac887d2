"""The text of a recompile failure: the table of functions and reasons, the limit hits, what to try.

Every message the recompile watch raises is built here, from plain figures, so
that ``assert_at_most``, the refusal of a compile in a strict block and
``expect()`` read alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._compat import MARK_DYNAMIC_CALL
from .text import clip, format_table

MAX_REASONS_SHOWN = 12


def indent_continuation(text: str) -> str:
    return text.rstrip().replace("\n", "\n    ")


def recompile_table(by_function: Mapping[str, Any]) -> list[str]:
    """Function, recompiles and guard-failure reasons, one row per reason (``FunctionRecompiles`` values)."""
    rows = [("function", "recompiles", "guard failure reason")]
    for name, fn in by_function.items():
        if not fn.count:
            continue
        reasons = [clip(r, first_line=True) for r in fn.reasons] or ["(no reason recorded)"]
        if len(reasons) > MAX_REASONS_SHOWN:
            # each recompile lists one reason per cached entry, so the list grows
            # quadratically; the first ones name the change, the rest are in .reasons
            hidden = len(reasons) - MAX_REASONS_SHOWN
            reasons = reasons[:MAX_REASONS_SHOWN] + [
                f"... and {hidden} more (every reason is in .reasons and the report's recompiles.reasons)"
            ]
        rows.append((name, str(fn.count), reasons[0]))
        rows.extend(("", "", r) for r in reasons[1:])
    return format_table(rows, align="<>", indent="  ")


def _times(n: int) -> str:
    return f"{n} time{'s' if n != 1 else ''}"


def too_many_recompiles(
    n: int,
    count: int,
    by_function: Mapping[str, Any],
    limit_hits: Sequence[str],
    graph_breaks: Any,
    reasons: Sequence[str],
    limit_setting: str,
    context: str | None = None,
) -> str:
    """The failure of ``assert_at_most(n)``: the count against ``n``, the table, limit hits, graph breaks, hints."""
    where = f"{context}: " if context else ""
    if count > n:
        head = f"{where}Dynamo recompiled {_times(count)}, expected at most {n}"
    else:
        head = f"{where}Dynamo recompiled {_times(count)} (at most {n} allowed)"
    if limit_hits:
        head += f", and hit the recompile limit {_times(len(limit_hits))}"
    lines = [head + "."]
    if any(fn.count for fn in by_function.values()):
        lines += ["", *recompile_table(by_function)]
    if limit_hits:
        lines += [
            "",
            f"recompile limit hits (Dynamo fell back to eager silently; the limit is {limit_setting}):",
        ]
        lines += [f"  - {hit}" for hit in limit_hits]
    if graph_breaks.count:
        lines += ["", f"graph breaks (not recompiles): {graph_breaks.count}"]
        lines += [f"  - {clip(reason, first_line=True)} (x{times})" for reason, times in graph_breaks.by_reason.items()]
    lines += _what_to_try([*reasons, *limit_hits])
    return "\n".join(lines)


def compile_refused(function: str, reasons: Sequence[str], torch_said: str, when: str) -> str:
    """A compile Dynamo refused inside a strict block: the function, its guard failures, hints."""
    lines = [f"strict recompile check: {function} was compiled again {when}; Dynamo refused it."]
    if reasons:
        lines += ["guard failure(s):", *[f"  - {indent_continuation(r)}" for r in reasons]]
    else:
        lines.append(f"torch said: {clip(torch_said, first_line=True)}")
    hints = hints_for(list(reasons))
    if hints:
        lines += ["what to try:", *[f"  - {hint}" for hint in hints]]
    return "\n".join(lines)


def happened_inside(by_function: Mapping[str, Any], limit_hits: Sequence[str], reasons: Sequence[str]) -> list[str]:
    """What an ``expect()`` block saw, below its table: the recompiles, the limit hits, what to try."""
    lines: list[str] = []
    if any(fn.count for fn in by_function.values()):
        lines += ["", "recompiles inside the block:", *recompile_table(by_function)]
    if limit_hits:
        lines += ["", "recompile limit hits inside the block:", *[f"  - {hit}" for hit in limit_hits]]
    return lines + _what_to_try([*reasons, *limit_hits])


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
