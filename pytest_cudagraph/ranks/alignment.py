"""The ranks' captured collectives aligned before the first replay: a digest per size exchanged, a mismatch named.

Every rank's graph for a size holds the collectives its capture issued; a replay
re-launches them, and each waits for the same collective on every other rank.
Graphs whose collectives differ across ranks (one more all-reduce on one rank,
another count, another order) hang at the first replay until the watchdog's
timeout.  So after capturing, before any replay, each rank publishes a digest of
each size's sequence (``payload``) through the launcher's store, an exchange
outside the graphs and the process group (a collective here could pair up with
one that a rank issued alone); every rank reads every rank's and runs the same
comparison (``first_misalignment``), so on a mismatch they all fail at once with
the same message (``misalignment_message``), naming the size, each rank's
sequence, the first collective that differs and the user's line that issued it.

Two sequences per size are compared: the collective *calls* the capture
dispatched (kind, dtype, element count, group, reduction: exact), and the NCCL
*kernels* read back from the graph (kind, dtype, reduction; no count), which also
see a communicator driven past the dispatcher.  Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvariantViolation
from ..graphs.collectives import Collective

__all__ = [
    "CollectivesMisaligned",
    "Misalignment",
    "SizeCollectives",
    "collective_text",
    "digest",
    "first_misalignment",
    "from_payload",
    "misaligned",
    "misalignment_message",
    "payload",
]

# the entries of a sequence shown around its first difference
SHOWN_AROUND = 3
# per source: what one entry is called, where it comes from, and what the per-rank listing is
SOURCES = {
    "calls": ("call", "that the captured function issued", "the calls per rank"),
    "kernels": ("NCCL kernel", "in the graphs", "the NCCL kernels per rank"),
}


class CollectivesMisaligned(InvariantViolation):
    """The ranks' graphs for one size hold different collectives; raised on every rank before the first replay."""


@dataclass(frozen=True)
class SizeCollectives:
    """One size's collectives on one rank: the ``calls`` its capture issued and the graph's ``kernels`` (None: unread)."""

    size: int
    calls: tuple[Collective, ...]
    kernels: tuple[Collective, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        kernels = None if self.kernels is None else [c.to_json() for c in self.kernels]
        return {"size": self.size, "calls": [c.to_json() for c in self.calls], "kernels": kernels}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SizeCollectives:
        kernels = data["kernels"]
        return cls(
            size=int(data["size"]),
            calls=tuple(Collective.from_json(c) for c in data["calls"]),
            kernels=None if kernels is None else tuple(Collective.from_json(c) for c in kernels),
        )


def _signatures(collectives: Sequence[Collective] | None) -> list[list[Any]] | None:
    return None if collectives is None else [list(c.signature) for c in collectives]


def digest(sizes: Sequence[SizeCollectives]) -> str:
    """A hash of what must match across ranks: the sizes in capture order and each one's sequences, call sites left out."""
    canonical = [[s.size, _signatures(s.calls), _signatures(s.kernels)] for s in sizes]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()


def payload(sizes: Sequence[SizeCollectives]) -> bytes:
    """What a rank publishes: the digest, and the sequences for the message should the digests differ."""
    return json.dumps({"digest": digest(sizes), "sizes": [s.to_json() for s in sizes]}).encode()


def from_payload(data: bytes) -> tuple[str, list[SizeCollectives]]:
    """``(digest, sizes)`` of a rank's published payload."""
    decoded = json.loads(data)
    return str(decoded["digest"]), [SizeCollectives.from_json(entry) for entry in decoded["sizes"]]


def misaligned(published: Mapping[int, bytes], world_size: int) -> str | None:
    """The message every rank raises for the ranks' published payloads, or None where they align.

    Equal digests align at once.  Digests can also differ where the comparison finds
    nothing: a rank that could not read its graph's kernels (None) against ranks
    that could; the ranks then agree in all that every rank could read.
    """
    decoded = {rank: from_payload(data) for rank, data in published.items()}
    if len({found_digest for found_digest, _ in decoded.values()}) == 1:
        return None
    found = first_misalignment({rank: sizes for rank, (_, sizes) in decoded.items()})
    return None if found is None else misalignment_message(found, world_size)


@dataclass(frozen=True)
class Misalignment:
    """Where the ranks first differ: the ``size`` (None: the ranks captured different sizes), the source, the position.

    ``sequences`` maps each rank to its sequence of that source at that size;
    ``index`` is the position of the first collective that differs (0-based).
    ``captured_sizes`` maps each rank to the sizes it captured, in order.
    """

    size: int | None
    source: str
    index: int
    sequences: Mapping[int, tuple[Collective, ...]]
    captured_sizes: Mapping[int, tuple[int, ...]]


def _first_difference(sequences: Mapping[int, tuple[Collective, ...]]) -> int | None:
    longest = max(len(s) for s in sequences.values())
    for index in range(longest):
        seen = {s[index].signature if index < len(s) else None for s in sequences.values()}
        if len(seen) > 1:
            return index
    return None


def first_misalignment(by_rank: Mapping[int, Sequence[SizeCollectives]]) -> Misalignment | None:
    """The first place the ranks' collectives differ, or None where they all match.

    Sizes are compared in capture order; at each size the issued calls first,
    then the graph's NCCL kernels where every rank could read them.
    """
    ranks = sorted(by_rank)
    captured = {r: tuple(s.size for s in by_rank[r]) for r in ranks}
    if len(set(captured.values())) > 1:
        return Misalignment(None, "sizes", 0, {}, captured)
    for position, size in enumerate(captured[ranks[0]]):
        at_size = {r: by_rank[r][position] for r in ranks}
        calls = {r: tuple(s.calls) for r, s in at_size.items()}
        index = _first_difference(calls)
        if index is not None:
            return Misalignment(size, "calls", index, calls, captured)
        if all(s.kernels is not None for s in at_size.values()):
            kernels = {r: tuple(s.kernels or ()) for r, s in at_size.items()}
            index = _first_difference(kernels)
            if index is not None:
                return Misalignment(size, "kernels", index, kernels, captured)
    return None


def collective_text(collective: Collective | None) -> str:
    """``all_reduce of 2048 float32 (sum, group 0)``; ``nothing`` for a missing one."""
    if collective is None:
        return "nothing"
    what = collective.kind
    if collective.count is not None or collective.dtype is not None:
        amount = " ".join(str(v) for v in (collective.count, collective.dtype) if v is not None)
        what += f" of {amount}"
    details = [d for d in (collective.reduce, None if collective.group is None else f"group {collective.group}") if d]
    if details:
        what += f" ({', '.join(details)})"
    return what


def _sequence_text(sequence: tuple[Collective, ...], index: int) -> str:
    if not sequence:
        return "no collective"
    start = max(0, index - SHOWN_AROUND)
    end = min(len(sequence), index + SHOWN_AROUND + 1)
    shown = [f"#{i + 1} {collective_text(sequence[i])}" for i in range(start, end)]
    if start > 0:
        shown.insert(0, f"({start} before)")
    if end < len(sequence):
        shown.append(f"({len(sequence) - end} more)")
    count = f"{len(sequence)} collective" + ("s" if len(sequence) != 1 else "")
    return f"{count}: " + ", ".join(shown)


def misalignment_message(found: Misalignment, world_size: int) -> str:
    """The sentence every rank raises: size, each rank's sequence, the first difference and the user's line."""
    remedy = (
        "every rank must issue the same collectives, with the same sizes and in the same order, inside the "
        "captured function (a branch on the rank that adds or skips one is the usual cause); replaying these "
        "graphs would wait forever, so they were not replayed; to skip this check, "
        "give @pytest.mark.cudagraph(align_collectives=False)"
    )
    if found.size is None:
        listed = "; ".join(f"rank {r}: {list(s)}" for r, s in sorted(found.captured_sizes.items()))
        return f"the {world_size} ranks captured different batch sizes ({listed}); capture the same sizes on every rank"
    index = found.index
    at_index = {r: (s[index] if index < len(s) else None) for r, s in found.sequences.items()}
    differing = ", ".join(f"rank {r} has {collective_text(c)}" for r, c in sorted(at_index.items()))
    sites = sorted({f"rank {r} issued it at {c.where}" for r, c in at_index.items() if c is not None and c.where})
    listed = "; ".join(f"rank {r}, {_sequence_text(s, index)}" for r, s in sorted(found.sequences.items()))
    entry, origin, per_rank = SOURCES[found.source]
    return (
        f"the ranks' CUDA graphs for batch size {found.size} hold different collectives, found before "
        f"the first replay: {entry} #{index + 1} {origin} differs: {differing}"
        + (f" ({'; '.join(sites)})" if sites else "")
        + f"; {per_rank}: {listed}; {remedy}"
    )
