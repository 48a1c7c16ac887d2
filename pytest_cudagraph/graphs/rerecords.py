"""Re-recordings of reduce-overhead: a function recorded again at every new input shape.

Cudagraph trees record one CUDA graph per distinct input shape of a compiled
function (a dynamic-shape graph too: one per value of its size arguments), so a
function called with ever new batch sizes records a graph at every call: the
capture costs time and pool memory each time, and torch only warns once it has
seen more than 8 sizes (``cudagraph_dynamic_shape_warn_limit``, pytorch#162696).

A *re-recording* here is a recording of a shape the function had not been recorded
with, made while an earlier recording of the same function exists: a function
recorded at 12 shapes re-recorded 11 times.  A recording of a shape seen before
(after a tree reset, or on another path of the tree) is a recording, not a
re-recording.

Everything here is a plain function of the recording events, ``(function,
shape)`` pairs in the order they happened, so the counting is tested without a GPU;
``TreeWatch`` (``reduce_overhead``) collects the events from the cudagraph trees
(``_compat.TreeCallMeter``).  Imports no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import _compat as compat
from ..render.plain_text import count_noun

__all__ = ["FunctionRerecords", "count_rerecords", "rerecord_failure", "rerecord_remedy", "shape_text"]

# what to try, once: the graphs per shape are the trees' design, not a bug of the function
_REMEDY = (
    "each new input shape records one more CUDA graph (torch warns after 8, pytorch#162696); "
    "{mark_dynamic}(x, dim) saves the recompile per shape but the trees still record a graph per "
    "size, so pad the varying dimension up to a few bucket sizes (as vLLM's capture sizes do), or limit the "
    "recorded sizes ({capture_sizes})"
)


def shape_text(shape: Any) -> str:
    """A recorded shape in words: ``(4, 16)`` for one input, ``(4, 16), (4,)`` for several, a string as it is."""
    if isinstance(shape, str):
        return shape
    if isinstance(shape, tuple) and shape and all(isinstance(s, tuple) for s in shape):
        return ", ".join(_dims(s) for s in shape)
    if isinstance(shape, tuple):
        return _dims(shape)
    return str(shape)


def _dims(dims: tuple) -> str:
    return "(" + ", ".join(str(d) for d in dims) + (",)" if len(dims) == 1 else ")")


def rerecord_remedy() -> str:
    """What to try against re-recording, with torch's names for dynamic dims and the recorded sizes."""
    return _REMEDY.format(**compat.RERECORD_REMEDY_NAMES)


@dataclass(frozen=True)
class FunctionRerecords:
    """One function's recordings: the shapes in the order first recorded, and how often each was recorded."""

    function: str
    shapes: tuple[str, ...] = ()
    per_shape: Mapping[str, int] = field(default_factory=dict)

    @property
    def recordings(self) -> int:
        return sum(self.per_shape.values())

    @property
    def rerecords(self) -> int:
        """New shapes recorded after the first: the re-recordings."""
        return max(0, len(self.shapes) - 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "recordings": self.recordings,
            "rerecords": self.rerecords,
            "shapes": list(self.shapes),
            "per_shape": dict(self.per_shape),
        }


def count_rerecords(events: Iterable[tuple[str, Any]]) -> dict[str, FunctionRerecords]:
    """Per function, its re-recordings, from recording events ``(function, shape)`` in the order they happened.

    Example::

        counts = count_rerecords([("f", (1, 8)), ("f", (2, 8)), ("f", (1, 8))])
        counts["f"].rerecords      # 1: shape (2, 8) recorded while (1, 8) was
        counts["f"].recordings     # 3
    """
    shapes: dict[str, dict[str, int]] = {}
    for function, shape in events:
        seen = shapes.setdefault(str(function), {})
        text = shape_text(shape)
        seen[text] = seen.get(text, 0) + 1
    return {name: FunctionRerecords(name, tuple(seen), dict(seen)) for name, seen in shapes.items()}


def rerecord_failure(
    counts: Mapping[str, FunctionRerecords] | None,
    max_rerecords: int,
    context: str | None = None,
    lost_sight: str | None = None,
) -> str | None:
    """The failure of ``max_rerecords``: every function that re-recorded more often, its shapes in order; else None.

    ``counts`` None means the re-recordings could not be counted (this torch's trees
    could not be metered), which is a failure too: a limit nobody counted is no check.
    ``lost_sight`` (``ReduceOverheadResult.lost_sight``) is what the watch could not
    see after a line of the block: the limit is not vouched for then either, and
    the failure says so first.
    """
    where = f"{context}: " if context else ""
    if lost_sight is not None:
        lost = f"{where}{lost_sight}, so max_rerecords={max_rerecords} is not vouched for after it."
        rest = rerecord_failure(counts, max_rerecords, context)
        return lost if rest is None else f"{lost}\n{rest}"
    if counts is None:
        return (
            f"{where}the re-recordings of reduce-overhead could not be counted with this torch (its cudagraph "
            f"trees could not be metered), so max_rerecords={max_rerecords} checks nothing; drop the option or "
            f"use a torch whose trees the plugin reads (2.6 and newer)"
        )
    over = [c for c in counts.values() if c.rerecords > max_rerecords]
    if not over:
        return None
    lines = []
    for c in over:
        lines.append(
            f"{where}reduce-overhead re-recorded {c.function} {count_noun(c.rerecords, 'time')} (more than "
            f"max_rerecords={max_rerecords}): {count_noun(len(c.shapes), 'shape')} in the order recorded: "
            f"{'; '.join(c.shapes)}."
        )
    lines.append(f"What to try: {rerecord_remedy()}.")
    return "\n".join(lines)
