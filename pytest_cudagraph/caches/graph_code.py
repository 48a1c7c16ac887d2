"""How two passes' traced graphs differ: the changed lines of their code, and a constant that changed.

A warm pass whose graph differs from the cold pass's (a value the body computes
anew in each pass, baked into the graph as a constant) misses every cache layer,
and the cache key only says that the ``gm`` component's hash changed.  The code
behind that hash (``CacheLookup.graph_code``: AOTAutograd's is the graph Dynamo
traced, in the user's own operations) says what changed::

    -    mul = sin * 1.0
    +    mul = sin * 2.0
    a constant: 1.0 -> 2.0

Imports no torch.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from .lookups import CacheLookup

__all__ = ["GraphChange", "graph_change"]

# changed lines shown; the rest are counted
SHOWN_LINES = 8
# an FX line's clean-up tail: "mul = sin * 2.0;  sin = None" reads "mul = sin * 2.0"
_CLEANUP = re.compile(r";\s+[\w\s=,]*= None\s*$")
# lines of GraphModule's text that are no code of the graph
_BOILERPLATE = re.compile(r"^\s*(#.*|\w+\(\)|)$")
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?|-?inf|nan")
_PREFERRED_LAYERS = ("aot_autograd", "fxgraph")  # AOTAutograd's code is the graph Dynamo traced


class GraphChange:
    """The changed lines of one graph's code, cold -> warm, and the constants that changed in them."""

    def __init__(self, layer: str, graph: int, removed: list[str], added: list[str]):
        self.layer, self.graph = layer, graph
        self.removed, self.added = removed, added

    def lines(self) -> list[str]:
        """``-`` the cold pass's lines, ``+`` the warm pass's (SHOWN_LINES at most), then the constants that changed."""
        changed = [f"- {line}" for line in self.removed] + [f"+ {line}" for line in self.added]
        shown = changed[:SHOWN_LINES]
        if len(changed) > SHOWN_LINES:
            shown.append(f"... and {len(changed) - SHOWN_LINES} more changed lines")
        constants = self.constants()
        if constants:
            shown.append("a constant: " + "; ".join(f"{a} -> {b}" for a, b in constants))
        return shown

    def constants(self) -> list[tuple[str, str]]:
        """``(cold, warm)`` numbers of line pairs that differ in their numbers alone (``sin * 1.0`` / ``sin * 2.0``)."""
        out = []
        for old, new in zip(self.removed, self.added):
            if _NUMBER.sub("#", old) != _NUMBER.sub("#", new):
                continue
            out += [(a, b) for a, b in zip(_NUMBER.findall(old), _NUMBER.findall(new)) if a != b]
        return out


def _code_lines(code: str) -> list[str]:
    return [_CLEANUP.sub("", line).rstrip() for line in code.splitlines() if not _BOILERPLATE.match(line)]


def graph_change(pairs: Sequence[tuple[CacheLookup, CacheLookup]]) -> GraphChange | None:
    """How the code differs between the first (cold, warm) pair of lookups that both kept it, AOTAutograd's first.

    None where no pair kept its code on both sides (a warm pass in a fresh
    interpreter of an older plugin, a torch that gave no components) or the code
    is the same once FX's clean-up tails are left out.
    """
    ranked = sorted(
        pairs, key=lambda pair: _PREFERRED_LAYERS.index(pair[1].layer) if pair[1].layer in _PREFERRED_LAYERS else 2
    )
    for cold, warm in ranked:
        if cold.graph_code is None or warm.graph_code is None:
            continue
        removed: list[str] = []
        added: list[str] = []
        for line in difflib.unified_diff(_code_lines(cold.graph_code), _code_lines(warm.graph_code), n=0, lineterm=""):
            if line.startswith(("---", "+++", "@@")):
                continue
            (removed if line.startswith("-") else added).append(line[1:].strip())
        if removed or added:
            return GraphChange(warm.layer, warm.graph, removed, added)
    return None
