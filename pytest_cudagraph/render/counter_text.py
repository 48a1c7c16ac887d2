"""A pass's cache counters in a few characters: ``m=1 s=1 -> h=1``, and the legend of their letters.

Counters are written ``letter=count`` (``m=1 s=1``, one miss and one save): a
count before its letter (``1m 1s``, ``1h``) reads as a duration beside the compile
times.  The passes and their counters are ``records.cold_warm``'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..records.cold_warm import PASS_COUNTERS, PassPair, added_up, disabled_layers
from ..records.report import as_int

__all__ = ["LETTER_MEANING", "cold_to_warm_text", "counter_text", "counts_text", "letters_in"]

LETTER_MEANING = {
    "h": "hits",
    "m": "misses",
    "s": "saves",
    "b": "bypasses",
    "c": "Triton kernels compiled",
    "l": "Triton kernels loaded",
}


# a counter as a cell writes it: its letter, "=", its count
_COUNTER = re.compile(r"\b([a-z])=\d")


def counter_text(letter: str, count: Any) -> str:
    """One counter for a narrow cell: ``h=1`` (the letter first: ``1h`` would read as an hour)."""
    return f"{letter}={as_int(count)}"


def counts_text(layer: str, counts: Mapping[str, Any] | None) -> str:
    """A pass's counters of one layer, the non-zero ones only: ``h=1``, ``m=1 s=1``; ``0`` when all are zero."""
    if not isinstance(counts, Mapping):
        return "-"
    shown = [counter_text(letter, counts.get(name)) for name, letter in PASS_COUNTERS.get(layer, ())]
    return " ".join(part for part in shown if not part.endswith("=0")) or "0"


def letters_in(text: str) -> set[str]:
    """The counter letters a cell uses (for a legend that explains only what the table shows)."""
    return {letter for letter in _COUNTER.findall(text) if letter in LETTER_MEANING}


def cold_to_warm_text(layer: str, pairs: list[PassPair]) -> str:
    """``m=1 s=1 -> h=1``: the layer's counters in the cold pass(es), then in the warm pass(es)."""
    if not pairs or not any(layer in pair.cold or layer in pair.warm for pair in pairs):
        return "-"
    if all(layer in disabled_layers(pair) for pair in pairs):
        return "off"  # turned off by the user: not checked, the other layers were
    cold = added_up([pair.cold for pair in pairs]).get(layer)
    warm = added_up([pair.warm for pair in pairs]).get(layer)
    return f"{counts_text(layer, cold)} -> {counts_text(layer, warm)}"
