"""``compare``'s bundle verdict: a Mega-Cache bundle of a test's ``bundle_cycle`` that holds less than before.

Two runs of a ``compile_cache.bundle_cycle()`` test are paired cycle by cycle (by
function and extension).  Under the ``cache-miss`` rule a cycle is flagged where a
bundle holds fewer artifacts of a layer than the base run's same bundle, or where
the second bundle lost more of what the first held.  Counts are compared, not keys:
a new torch or config changes every key while a whole bundle keeps its counts.
Plain data: no torch, no pytest.
"""

from __future__ import annotations

from ..records.bundle_schema import BundleCycle
from ..records.schema import TestRecord
from ..render.bundle_text import typed_list
from ..render.plain_text import count_noun
from .compare_rules import Flag

__all__ = ["bundle_rules"]


def _cycles(record: TestRecord) -> dict[tuple[str, str], BundleCycle]:
    return {(str(c.function), str(c.extend)): c for c in typed_list(record.bundle_cycle, BundleCycle)}


def _counts(cycle: BundleCycle) -> dict[tuple[str, str], int]:
    """(bundle, layer) -> artifacts the bundle holds, as a load reads it."""
    out = {}
    for name, bundle in (cycle.bundles or {}).items() if isinstance(cycle.bundles, dict) else ():
        for layer, held in (bundle.layers or {}).items() if isinstance(bundle.layers, dict) else ():
            out[(name, layer)] = held.count if isinstance(held.count, int) else 0
    return out


def _lost(cycle: BundleCycle) -> int:
    return sum(len(keys) for keys in cycle.lost.values()) if isinstance(cycle.lost, dict) else 0


def bundle_rules(base: TestRecord, new: TestRecord, flag: Flag) -> None:
    """cache-miss: a bundle that holds fewer artifacts of a layer than the base run's, or lost more between saves."""
    base_cycles = _cycles(base)
    for pair, cycle in _cycles(new).items():
        before = base_cycles.get(pair)
        if before is None:
            continue
        label = f"bundle cycle of {pair[0]}"
        held_before = _counts(before)
        for (bundle, layer), count in sorted(held_before.items()):
            now = _counts(cycle).get((bundle, layer), 0)
            if now < count:
                flag(
                    "cache-miss",
                    f"{label}: the {bundle} bundle holds {count_noun(now, layer + ' artifact')}, {count} before",
                    f"bundle_cycle.{bundle}.{layer}",
                )
        if _lost(cycle) > _lost(before):
            flag(
                "cache-miss",
                f"{label}: the second bundle lacks {count_noun(_lost(cycle), 'artifact')} the first held, "
                f"{_lost(before)} before",
                "bundle_cycle.lost",
            )
