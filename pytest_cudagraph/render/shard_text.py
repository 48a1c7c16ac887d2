"""A shard of a split run in words: which shard, how it was split, and groups as few words.

Shared by the terminal section, ``show``, the HTML page and ``merge``'s messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..text import count_noun

# groups, ranges of them, or shard files named in one message at most; the rest are counted
NAMED_LIMIT = 6


def groups_text(groups: Sequence[int]) -> str:
    """Sorted distinct groups as few words: ``1, 2, 3``, ``1..2000``, ``1, 3, 5..9``, at most a few pieces."""
    runs: list[tuple[int, int]] = []
    for group in sorted(set(groups)):
        if runs and group == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], group)
        else:
            runs.append((group, group))
    return ranges_text(runs, sum(last - start + 1 for start, last in runs))


def ranges_text(runs: Sequence[tuple[int, int]], count: int, last: str = ",") -> str:
    """``2..1000000``, ``2, 4 and 7``; a run of more than three groups as ``start..last``; past NAMED_LIMIT
    pieces, ``, ... (N in all)``."""
    pieces: list[str] = []
    for start, end in runs:
        if end - start >= 3:
            pieces.append(f"{start}..{end}")
        else:
            pieces.extend(str(group) for group in range(start, end + 1))
        if len(pieces) > NAMED_LIMIT:
            return ", ".join(pieces[:NAMED_LIMIT]) + f", ... ({count} in all)"
    if last == "and" and len(pieces) > 1:
        return ", ".join(pieces[:-1]) + f" and {pieces[-1]}"
    return ", ".join(pieces)


def describe_shard(shard: Mapping[str, Any]) -> str:
    """One line for the terminal and ``show``.

    ``shard 2 of 3 (pytest-split, duration_based_chunks, durations from .test_durations): 41 tests selected,
    82 deselected for the other shards``; a merged report's: ``merged from shards 1, 2, 3 of 3 (...)``, or
    ``merged from shards 1..2000 of 2000 (...)``.
    """
    how = ", ".join(
        ["pytest-split"]
        + ([str(shard["algorithm"])] if shard.get("algorithm") else [])
        + ([f"durations from {shard['durations_path']}"] if shard.get("durations_path") else [])
        # a shard without a durations file was split by an equal estimate per test
        + (["no durations file"] if not shard.get("durations_path") and "merged" not in shard else [])
    )
    if "merged" in shard:
        merged = shard["merged"] if isinstance(shard["merged"], (list, tuple)) else []
        which = f"merged from shards {groups_text([g for g in merged if type(g) is int])} of {shard.get('splits')}"
    else:
        which = f"shard {shard.get('group')} of {shard.get('splits')}"
    counts = []
    if isinstance(shard.get("selected"), int):
        counts.append(f"{count_noun(shard['selected'], 'test')} selected")
    if isinstance(shard.get("deselected"), int):
        counts.append(f"{shard['deselected']} deselected for the other shards")
    return f"{which} ({how})" + (f": {', '.join(counts)}" if counts else "")
