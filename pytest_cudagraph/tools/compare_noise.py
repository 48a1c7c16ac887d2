"""What ``compare`` does not count as a change, and how it pairs several graph sets of one test.

Two runs of one build differ in figures no reader should act on (``within_noise``):
a ratio of timings, a replay error within the numerics tolerance, memory that
depends on what ran before in the process.  A test with several GraphSets has one
record per set (``graphs.sets``); two runs' sets pair up by their capture sizes and
order (``graph_set_key``), so each set is compared with its partner, wherever it
came in the test.  Plain data in, plain data out: no torch, no pytest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..records.comparison import list_of, mapping_of  # importable from here too: compare's readers use them
from ..records.json_values import number
from ..records.loaded import RecordRead, given, section_or_empty
from ..records.report import as_int
from ..records.schema import Graphs
from ..render.plain_text import MIB

if TYPE_CHECKING:
    from ..records.schema import CaptureCost, GraphSet, TestRecord

__all__ = [
    "CAPTURE_PAGES_BYTES",
    "ORDER_DEPENDENT_FIGURES",
    "ORDER_DEPENDENT_NOISE_BYTES",
    "both_released",
    "graph_set_key",
    "graph_sets",
    "keyed_set_data",
    "keyed_sets",
    "list_of",
    "mapping_of",
    "unpaired_set_notes",
    "within_noise",
]


# Figures that depend on what ran before in the process, not on the graphs: the warm-ups'
# first use (kernels loaded, library handles), and the allocator's growth, which counts
# blocks the warm-ups left cached only where no earlier test had left them.  A reordered
# run of one build moves them between tests: no rule reads them, and a move up to
# ORDER_DEPENDENT_NOISE_BYTES is noise (a process's first use on an H200 is about 160 MiB,
# 480 MiB with CUDA_MODULE_LOADING=EAGER); a larger one is still a change to look at.
ORDER_DEPENDENT_FIGURES = frozenset({"first_use_bytes", "outside_pool_bytes", "allocator_outside_pool_bytes"})
ORDER_DEPENDENT_NOISE_BYTES = 512 * MIB
# The first graphs of a process take a few 2 MiB driver pages behind the allocator that
# the release does not give back (later graphs reuse them): 8 MiB for 51 sizes on an H200.
# Where both runs read what the release gave back, the captures' own figure may move by
# this much with the test order.
CAPTURE_PAGES_BYTES = 16 * MIB


def both_released(base: CaptureCost | None, new: CaptureCost | None) -> bool:
    """Both sections read what their release gave back (``held_behind_allocator_bytes``)."""
    return all(
        section is not None and given(section.held_behind_allocator_bytes) is not None for section in (base, new)
    )


def within_noise(
    metric: str,
    base: Any,
    new: Any,
    *,
    numerics_growth: float,
    numerics_floor: float,
    memory_floor: float,
    released: bool = False,
) -> bool:
    """A difference no rule flags and no reader should act on: timings, replay errors within tolerance, and the like.

    - a ratio of timings (``compile_time_ratio``): timings are only compared as
      medians of several runs (the time rules);
    - a replay error within the numerics rule's tolerance, both ways
      (``max(a, b) <= min(a, b) * (1 + numerics_growth) + numerics_floor``): two runs
      draw other random inputs;
    - a memory figure that depends on what ran before in the process
      (``ORDER_DEPENDENT_FIGURES``) moved by no more than ``ORDER_DEPENDENT_NOISE_BYTES``,
      or another one by no more than ``memory_floor`` (the driver's and the
      allocator's 2 MiB pages); where both runs read their release (``released``),
      the captures' own figure by no more than ``CAPTURE_PAGES_BYTES``.
    """
    leaf = metric.rsplit(".", 1)[-1]
    before, after = number(base, finite=True), number(new, finite=True)
    if before is None or after is None or isinstance(base, bool) or isinstance(new, bool):
        return False
    if leaf.endswith("_ratio"):
        return True
    if leaf.endswith("_err"):
        low, high = sorted((abs(before), abs(after)))
        return high <= low * (1 + numerics_growth) + numerics_floor
    if leaf.endswith("_bytes"):
        if leaf in ORDER_DEPENDENT_FIGURES:
            return abs(after - before) <= ORDER_DEPENDENT_NOISE_BYTES
        if leaf == "behind_allocator_bytes" and released:
            return abs(after - before) <= CAPTURE_PAGES_BYTES
        return abs(after - before) <= memory_floor
    return False


def graph_sets(record: TestRecord) -> list[GraphSet]:
    return list(given(section_or_empty(record.graphs, Graphs).sets) or ())


def graph_set_key(one: GraphSet) -> str:
    """A set's name in a comparison: its capture sizes and order, ``set[1,2,4,8 largest_first]``.

    Two runs' sets pair up by it: the same capture sizes captured in the same order
    are the same set, wherever it came in the test.  Long size lists are named by
    their ends, count and a digest.
    """
    sizes = [str(as_int(size)) for size in given(one.sizes) or ()]
    order = str(given(one.order) or "?")
    # negative controls of the same sizes (pool="separate", keep_outputs=True) are sets of their own
    if given(one.pool) not in (None, "shared"):
        order += f" pool={one.pool}"
    if given(one.keep_outputs):
        order += " keep_outputs"
    if len(sizes) <= 8:
        text = ",".join(sizes)
    else:
        digest = hashlib.sha256(",".join(sizes).encode()).hexdigest()[:6]
        text = f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes, {digest})"
    return f"set[{text} {order}]"


def keyed_sets(record: TestRecord) -> dict[str, GraphSet]:
    """A test's graph sets by ``graph_set_key`` (a second set of the same key gets ``#2``); none for a single set."""
    sets = graph_sets(record)
    return dict(zip(_set_keys(sets), sets)) if len(sets) >= 2 else {}


def keyed_set_data(record: RecordRead) -> dict[str, Mapping[str, Any]]:
    """``keyed_sets``, each set as the report holds it: every field, those no type names included."""
    sets = graph_sets(record.typed)
    if len(sets) < 2:
        return {}
    return dict(zip(_set_keys(sets), record.data["graphs"]["sets"]))


def _set_keys(sets: list[GraphSet]) -> list[str]:
    keys: dict[str, None] = {}
    for one in sets:
        key = graph_set_key(one)
        n = 2
        while key in keys:
            key = f"{graph_set_key(one)}#{n}"
            n += 1
        keys[key] = None
    return list(keys)


def unpaired_set_notes(base: TestRecord, new: TestRecord) -> list[str]:
    """One sentence where the two runs' graph sets do not pair up: which, and what was compared instead."""
    base_sets, new_sets = keyed_sets(base), keyed_sets(new)
    if set(base_sets) == set(new_sets):  # paired, or a single set on both sides
        return []
    only_base = [key for key in base_sets if key not in new_sets]
    only_new = [key for key in new_sets if key not in base_sets]
    parts = []
    if only_base:
        parts.append(f"{', '.join(only_base)} of the base has no partner")
    if only_new:
        parts.append(f"{', '.join(only_new)} of the new run has no partner")
    if not base_sets or not new_sets:
        parts.append("the other run captured one graph set or none")
    return [
        f"graph sets pair up by capture sizes and order, and these do not: {'; '.join(parts)}; the test's overall "
        f"figures (largest pool, largest graph, worst error, graphs captured) were compared instead"
    ]
