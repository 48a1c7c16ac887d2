"""Cache bundles and precompiled artifacts as text and HTML: ``show``'s lines and the page's tables.

A bundle cycle (``compile_cache.bundle_cycle()``, ``records.schema.BundleCycle``)
shows one row per bundle (its size and each layer's artifacts and bytes), one line
of counters per step, what the second bundle lost, and its problems; a precompiled
check (``records.schema.Precompiled``) shows its sizes, the load pass's counters and
what each changed input gave.

Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from ..records.bundle_schema import BundleCycle, BundleStep, Precompiled, StepCounters
from .html_parts import escape, rows_table
from .plain_text import format_bytes, format_table

__all__ = ["bundle_cycle_lines", "bundles_html", "precompiled_lines", "typed_list"]

_Typed = TypeVar("_Typed")
# the layers in the order a reader looks for them; others follow
_LAYER_ORDER = ("fxgraph", "aot_autograd", "triton", "autotune", "pgo", "precompile")


def typed_list(value: Any, kind: type[_Typed]) -> list[_Typed]:
    """A record's list section (dicts, or typed already) as ``kind`` each; an entry of another shape is left out."""
    import msgspec

    if not isinstance(value, list):
        return []
    out: list[_Typed] = []
    for entry in value:
        if isinstance(entry, kind):
            out.append(entry)
            continue
        try:
            out.append(msgspec.convert(entry, kind))
        except msgspec.ValidationError:
            continue
    return out


def _layers(cycle: BundleCycle) -> list[str]:
    seen: set[str] = set()
    for bundle in (cycle.bundles or {}).values() if isinstance(cycle.bundles, dict) else ():
        seen.update(bundle.layers if isinstance(bundle.layers, dict) else {})
    return [layer for layer in _LAYER_ORDER if layer in seen] + sorted(seen - set(_LAYER_ORDER))


def _bundle_rows(cycle: BundleCycle) -> list[list[str]]:
    layers = _layers(cycle)
    rows = [["bundle", "size", *layers]]
    for name, bundle in (cycle.bundles or {}).items() if isinstance(cycle.bundles, dict) else ():
        held = bundle.layers if isinstance(bundle.layers, dict) else {}
        cells = []
        for layer in layers:
            one = held.get(layer)
            cells.append(f"{one.count} ({format_bytes(one.bytes)})" if one is not None else "0")
        saves = f", {bundle.saves} saves" if isinstance(bundle.saves, int) and bundle.saves > 1 else ""
        rows.append([name + saves, format_bytes(bundle.size_bytes), *cells])
    return rows


def _step_text(name: str, step: BundleStep) -> str:
    stats = step.stats if isinstance(step.stats, StepCounters) else None
    parts = []
    for layer in ("fxgraph", "aot_autograd", "triton"):
        counters = getattr(stats, layer, None)
        if not isinstance(counters, dict):
            continue
        moved = [
            f"{counter} {counters[counter]}"
            for counter in ("hit", "miss", "saved", "compiled", "loaded")
            if counters.get(counter)
        ]
        if moved:
            parts.append(f"{layer} {', '.join(moved)}")
    return f"{name}: {'; '.join(parts) or 'no cache activity'}"


def _lost_text(lost: Any) -> str:
    if not isinstance(lost, dict) or not lost:
        return ""
    return "; ".join(
        f"{layer} {len(keys)} ({', '.join(str(k)[:12] for k in keys[:4])})" for layer, keys in lost.items()
    )


def bundle_cycle_lines(cycle: BundleCycle) -> list[str]:
    """A cycle for ``show``: its head (passed or failed), the bundles' table, each step's counters, losses, problems."""
    verdict = "passed" if cycle.passed is True else "FAILED" if cycle.passed is False else "not judged"
    head = f"bundle cycle of {cycle.function}, extended by {cycle.extend} (torch {cycle.torch}): {verdict}"
    lines = [head, *format_table(_bundle_rows(cycle), indent="  ")]
    steps = cycle.steps if isinstance(cycle.steps, dict) else {}
    lines += [f"  {_step_text(name, step)}" for name, step in steps.items()]
    lost = _lost_text(cycle.lost)
    if lost:
        lines.append(f"  the second bundle lacks what the first held: {lost}")
    if isinstance(cycle.note, str):
        lines.append(f"  note: {cycle.note}")
    lines += [f"  - {problem}" for problem in cycle.problems or []] if isinstance(cycle.problems, list) else []
    return lines


def precompiled_lines(check: Precompiled) -> list[str]:
    """A precompiled check for ``show``: sizes, the load pass's counters, each changed input's outcome."""
    verdict = "passed" if check.passed is True else "FAILED" if check.passed is False else "not judged"
    lines = [
        f"precompiled {check.function} (torch {check.torch}): {verdict}; python_code "
        f"{format_bytes(check.code_bytes)}, cache {format_bytes(check.cache_bytes)}, "
        f"{check.kernel_binaries_built} kernel binaries built on load"
    ]
    steps = check.steps if isinstance(check.steps, dict) else {}
    lines += [f"  {_step_text(name, step)}" for name, step in steps.items()]
    changed = check.changed if isinstance(check.changed, dict) else {}
    for name, seen in changed.items():
        message = f": {seen.message}" if isinstance(seen.message, str) and seen.message else ""
        lines.append(f"  changed {name}: {seen.outcome}{message}")
    unchecked = check.unchecked if isinstance(check.unchecked, dict) else {}
    lines += [f"  changed {name}: not checked: {why}" for name, why in unchecked.items()]
    return lines


def bundles_html(record: Mapping[str, Any]) -> str:
    """The test's bundle cycles and precompiled checks: a table of bundles per cycle, each step's counters."""
    parts = []
    for cycle in typed_list(record.get("bundle_cycle"), BundleCycle):
        lines = bundle_cycle_lines(cycle)
        table = _bundle_rows(cycle)
        rows = ["<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in table[1:]]
        details = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[len(table) + 1 :])
        parts.append(f"<h3>{escape(lines[0])}</h3>{rows_table('lookups', tuple(table[0]), rows)}<ul>{details}</ul>")
    for check in typed_list(record.get("precompiled"), Precompiled):
        lines = precompiled_lines(check)
        details = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:])
        parts.append(f"<h3>{escape(lines[0])}</h3><ul>{details}</ul>")
    return "".join(parts)
