"""A shard of a split run in words: which shard, how it was split, and groups as few words.

Shared by the terminal section, ``show``, the HTML page and ``merge``'s messages.
``describe_shard`` reads a typed ``Shard``; the live run's terminal section hands
it the shard's fields as a mapping, which is typed on entry (the same types the
report is checked against), so one reading serves both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..records.loaded import given, typed_section
from .plain_text import count_noun

if TYPE_CHECKING:
    from ..records.schema import Shard

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


def describe_shard(shard: Shard | Mapping[str, Any]) -> str:
    """One line for the terminal and ``show``.

    ``shard 2 of 3 (pytest-split, duration_based_chunks, durations from .test_durations): 41 tests selected,
    82 deselected for the other shards``; a merged report's: ``merged from shards 1, 2, 3 of 3 (...)``, or
    ``merged from shards 1..2000 of 2000 (...)``.
    """
    from ..records.schema import Shard

    if not isinstance(shard, Shard):
        shard = typed_section(shard, Shard, (), name="shard")
    algorithm, durations_path, merged = given(shard.algorithm), given(shard.durations_path), given(shard.merged)
    how = ", ".join(
        ["pytest-split"]
        + ([str(algorithm)] if algorithm else [])
        + ([f"durations from {durations_path}"] if durations_path else [])
        # a shard without a durations file was split by an equal estimate per test
        + (["no durations file"] if not durations_path and merged is None else [])
    )
    if merged is not None:
        which = f"merged from shards {groups_text(merged)} of {given(shard.splits)}"
    else:
        which = f"shard {given(shard.group)} of {given(shard.splits)}"
    counts = []
    selected, deselected = given(shard.selected), given(shard.deselected)
    if selected is not None:
        counts.append(f"{count_noun(selected, 'test')} selected")
    if deselected is not None:
        counts.append(f"{deselected} deselected for the other shards")
    return f"{which} ({how})" + (f": {', '.join(counts)}" if counts else "")
