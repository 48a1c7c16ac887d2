"""A test's compile time in a few characters, for the terminal table: ``3.2s``, or ``4.1s -> 0.3s`` cold -> warm.

Reads the report's record only (``compile_time`` and the passes under ``extra``).
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.cold_warm import pass_pairs


def seconds_text(value: float) -> str:
    """``12s``, ``3.2s``, ``45ms``, ``0s``: short, and never a 0 for a time that was not zero."""
    if value >= 10:
        return f"{value:.0f}s"
    if value >= 0.1:
        return f"{value:.1f}s"
    if value > 0:
        return f"{max(value * 1000, 1):.0f}ms"
    return "0s"


def _total(entry: Any) -> float | None:
    if not isinstance(entry, Mapping):
        return None
    total = entry.get("total_s")
    return float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None


def compile_time_cell(record: Mapping[str, Any]) -> str:
    """The compile-time column of one test: its cold -> warm passes when it ran some, else its total; ``-`` if none.

    Several pairs (the marker's and each ``cold_warm()``) are added up, cold with
    cold and warm with warm, as the cache columns do.
    """
    cold_sum = warm_sum = 0.0
    paired = False
    for pair in pass_pairs(record):
        cold = _total((pair.source.get("cold") or {}).get("compile_time"))
        warm = _total((pair.source.get("warm") or {}).get("compile_time"))
        if cold is not None and warm is not None:
            cold_sum, warm_sum, paired = cold_sum + cold, warm_sum + warm, True
    if paired:
        return f"{seconds_text(cold_sum)} -> {seconds_text(warm_sum)}"
    section = record.get("compile_time")
    total = _total(section)
    if total is None or (not total and not (section or {}).get("frames")):
        return "-"  # nothing was compiled
    return seconds_text(total)
