"""``compare``'s rules: their names, their limits and the defaults of those, and ``--fail-on``'s parsing.

What each rule flags is in ``pytest_cudagraph.tools.compare``'s docstring; how it
judges, in ``compare_verdicts``.  Plain data: no torch, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import MisuseError
from ..records.comparison import COMPARISON_SCHEMA, NOTHING_COMPARED_RULE
from ..render.plain_text import MIB
from .instructions import DEFAULT_INSTRUCTIONS_THRESHOLD

__all__ = [
    "ALL_RULES",
    "COMPARISON_SCHEMA",
    "COST_RULES",
    "DEFAULT_INSTRUCTIONS_THRESHOLD",
    "DEFAULT_MEMORY_FLOOR_BYTES",
    "DEFAULT_MEMORY_THRESHOLD",
    "DEFAULT_NUMERICS_FLOOR",
    "DEFAULT_NUMERICS_GROWTH",
    "DEFAULT_POOL_THRESHOLD",
    "DEFAULT_RULES",
    "DEFAULT_TIME_FLOOR_S",
    "DEFAULT_TIME_THRESHOLD",
    "FAILING",
    "INCOMPLETE_RULE",
    "Flag",
    "Limits",
    "NOTHING_COMPARED_RULE",
    "OPTIONAL_RULES",
    "PASSING",
    "POOL_MIN_GROWTH_BYTES",
    "TIME_RULES",
    "parse_rules",
]

DEFAULT_RULES = ("outcome", "skipped", "recompiles", "recompile-limit", "cache-miss", "graphs", "pool", "numerics")
# the costs: noise-aware time rules on startup reports, and graph memory beyond the pool
TIME_RULES = ("compile-time", "capture-time", "startup-time")
COST_RULES = (*TIME_RULES, "graph-memory", "compile-instructions")
OPTIONAL_RULES = ("graph-breaks", "vanished", *COST_RULES)
ALL_RULES = DEFAULT_RULES + OPTIONAL_RULES

DEFAULT_POOL_THRESHOLD = 0.10
# The allocator hands out small-pool segments of 2 MiB: a smaller growth is rounding, not a regression.
POOL_MIN_GROWTH_BYTES = 2 * MIB
DEFAULT_NUMERICS_GROWTH = 1.0
DEFAULT_NUMERICS_FLOOR = 1e-6
# Two startup runs of one build on one machine differ by up to ~10 % in their medians
# (CPU frequency, page cache, other jobs); 20 % and 1 s keep them apart from a change
# worth acting on (torch 2.8 -> 2.9 took vLLM's cold start from 118 s to 160 s, +36 %).
DEFAULT_TIME_THRESHOLD = 0.20
DEFAULT_TIME_FLOOR_S = 1.0
DEFAULT_MEMORY_THRESHOLD = 0.10
# one small allocator segment, as for the pool rule
DEFAULT_MEMORY_FLOOR_BYTES = 2 * MIB

PASSING = ("passed", "xfailed")
FAILING = ("failed", "error", "crashed")
# Not a --fail-on rule: always on (see the docstring of pytest_cudagraph.tools.compare).
INCOMPLETE_RULE = "incomplete"


def parse_rules(values: Iterable[str] | None) -> tuple[str, ...]:
    """``--fail-on`` values (comma-separated, repeatable; ``all``, ``default``, ``none``) -> rule names.

    Raises ValueError naming the unknown rule and listing the known ones.
    """
    if values is None:
        return DEFAULT_RULES
    chosen: list[str] = []
    for value in values:
        for name in (part.strip() for part in str(value).split(",")):
            if not name:
                continue
            if name == "all":
                expanded: tuple[str, ...] = ALL_RULES
            elif name == "default":
                expanded = DEFAULT_RULES
            elif name == "none":
                expanded = ()
            elif name in ALL_RULES:
                expanded = (name,)
            else:
                raise ValueError(
                    f"unknown rule {name!r} for --fail-on; choose from {', '.join(ALL_RULES)}, all, default or none"
                )
            chosen.extend(r for r in expanded if r not in chosen)
    return tuple(chosen)


@dataclass(frozen=True)
class Limits:
    """The rules' limits, as ``compare_reports`` was given them (see the docstring of tools.compare)."""

    pool_threshold: float
    numerics_growth: float
    numerics_floor: float
    time_threshold: float = DEFAULT_TIME_THRESHOLD
    time_floor: float = DEFAULT_TIME_FLOOR_S
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    memory_floor: float = DEFAULT_MEMORY_FLOOR_BYTES
    instructions_threshold: float = DEFAULT_INSTRUCTIONS_THRESHOLD

    def __post_init__(self) -> None:
        # NaN compares false with every growth and infinity allows any: either turns its rule off
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < math.inf:
                raise MisuseError(
                    f"compare_reports({name}={value!r}): a limit must be a finite number >= 0, or the rule it "
                    f"bounds never fires; give one such as {getattr(_DEFAULTS, name)!r}"
                )

    def settings(self) -> dict[str, Any]:
        """The comparison's ``settings`` (its JSON): the limits, the floors named with their unit."""
        names = {"time_floor": "time_floor_s", "memory_floor": "memory_floor_bytes"}
        return {names.get(name, name): value for name, value in asdict(self).items()}


_DEFAULTS = Limits(DEFAULT_POOL_THRESHOLD, DEFAULT_NUMERICS_GROWTH, DEFAULT_NUMERICS_FLOOR)

# flag(rule, message, *metrics): the rule fired for this test, on these table metrics
Flag = Callable[..., None]
