"""Breakable graphs in words: the summary's graphs cell, ``N graphs (K segments)``.

A breakable set (``capture_graphs(..., break_at=...)``) captures each size as a
chain of graphs with eager ops between; its record carries ``segments``, the
graphs of every chain, beside ``captured``, the sizes.  A test's graphs cell then
shows both: ``8 graphs (40 segments)``, where a full graph counts as one segment.
Reads records only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.report import as_int


def _sets(graphs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    given = graphs.get("sets")
    if isinstance(given, list) and given:
        return [s for s in given if isinstance(s, Mapping)]
    return [graphs]


def segment_count(graphs: Mapping[str, Any]) -> int | None:
    """The graphs of every set, a breakable set's segments and a full set's one graph a size; None without a breakable set."""
    sets = _sets(graphs)
    if not any("segments" in s for s in sets):
        return None
    return sum(as_int(s.get("segments")) if "segments" in s else as_int(s.get("captured")) for s in sets)


def breakable_graphs_cell(graphs: Mapping[str, Any]) -> str | None:
    """``N graphs (K segments)`` for a test with a breakable set; None for full graphs only (the usual cell)."""
    segments = segment_count(graphs)
    if segments is None:
        return None
    captured = as_int(graphs.get("captured"))
    return f"{captured} graph{'s' if captured != 1 else ''} ({segments} segment{'s' if segments != 1 else ''})"
