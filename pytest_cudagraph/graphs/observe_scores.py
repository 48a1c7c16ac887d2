"""Two scores of an engine's own graphs: its graph-memory estimate, and which batch sizes replay a graph.

Both are pure: the figures come from the observed captures (``observe_verdict``)
and from replay counts the recorder took while the engine ran, so they are tested
on recorded figures without a GPU, and on real engines in ``tests/gpu``.

**The estimate** (``EstimateScore``).  An engine budgets memory for its graphs
before it captures them (vLLM's KV-cache sizing, SGLang's ``mem_fraction_static``,
TensorRT-LLM's per-graph guess).  What the graphs hold is the peak of the pool or
pools they were captured into: graphs that share one pool cost about the largest
of them, not their sum, and the cuBLAS workspace a capture's first matmul on its
stream allocates sits in that pool too, memory the engine must budget.  The score
sets the engine's figure beside the measured peak and beside the two figures a
wrong estimate usually comes from: the sum over sizes (each graph budgeted on its
own, the largest graph's bytes per batch row times each size where the graphs
share a pool and so show no cost of their own) and the peak without the workspace.

**Coverage** (``Coverage``).  An engine serves every batch size up to its maximum
by replaying the graph of the smallest captured size that holds the batch; a batch
above every captured size, or one the engine's ladder leaves out, runs eager (or
piecewise) silently.  Coverage calls the engine once per batch and counts the graph
replays during the call: a call that replayed none ran eager; one that replayed a
graph captured for a size far above the batch paid for the padding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..render.plain_text import count_noun, format_bytes

__all__ = ["BatchReplay", "Coverage", "EstimateScore", "batch_ranges", "measure_coverage"]


@dataclass(frozen=True)
class EstimateScore:
    """An engine's graph-memory estimate against what its graphs hold.

    ``measured_bytes``: the peak of the pools the graphs were captured into
    (``ObservedGraphs.pool_peak_bytes``), ``workspace_bytes`` the cuBLAS workspace
    inside them; ``largest_graph_bytes`` the most one capture grew its pool (the
    workspace it allocated apart); ``sum_over_sizes_bytes`` what budgeting every
    graph on its own says; ``within`` the tolerance, a fraction either way.
    """

    estimate_bytes: int
    measured_bytes: int
    workspace_bytes: int
    largest_graph_bytes: int | None
    sum_over_sizes_bytes: int | None
    graphs: int
    pools: int
    within: float

    @property
    def ratio(self) -> float:
        """estimate / measured; infinite for a nonzero estimate of graphs that hold nothing."""
        if self.measured_bytes == 0:
            return 1.0 if self.estimate_bytes == 0 else float("inf")
        return self.estimate_bytes / self.measured_bytes

    @property
    def passed(self) -> bool:
        return abs(self.ratio - 1.0) <= self.within + 1e-12

    def diagnosis(self) -> str | None:
        """What the estimate most likely did wrong, where one of the usual mistakes matches it."""
        if self.passed:
            return None
        near = self.within or 0.05
        summed = self.sum_over_sizes_bytes
        largest = self.largest_graph_bytes
        # per-size budgets summed: by batch size, or the largest graph's cost once per graph
        candidates = [summed]
        if largest:
            candidates += [largest * self.graphs, largest * self.graphs + self.workspace_bytes]
        if self.graphs > 1 and any(c and abs(self.estimate_bytes / c - 1.0) <= near for c in candidates):
            return (
                f"the estimate is about the sum over sizes: the {self.graphs} graphs share "
                f"{count_noun(self.pools, 'pool')}, where they cost about the largest of them, not their sum"
            )
        without = self.measured_bytes - self.workspace_bytes
        if self.workspace_bytes and without > 0 and abs(self.estimate_bytes / without - 1.0) <= near:
            return (
                f"the estimate is about the peak without cuBLAS's workspace: the {format_bytes(self.workspace_bytes)} "
                f"a capture's first matmul on its stream allocates sits in the pool, and the engine must budget it"
            )
        return None

    def lines(self) -> list[str]:
        """The figures, one per line: estimate, measured peak and ratio, workspace, largest graph, sum over sizes."""
        percent = (self.ratio - 1.0) * 100.0
        ratio = "inf" if self.ratio == float("inf") else f"{self.ratio:.2f}x"
        lines = [
            f"estimate: {format_bytes(self.estimate_bytes)}",
            f"measured peak: {format_bytes(self.measured_bytes)}, the peak of the "
            f"{count_noun(self.pools, 'pool')} the {count_noun(self.graphs, 'graph')} were captured into "
            f"(ratio {ratio}, {percent:+.0f}%; allowed {self.within * 100:.0f}% either way)",
            f"of which cuBLAS's workspace: {format_bytes(self.workspace_bytes)}",
            f"largest single graph: {format_bytes(self.largest_graph_bytes)}",
            f"sum over sizes: {format_bytes(self.sum_over_sizes_bytes)} (every graph budgeted on its own, the "
            f"workspace once)",
        ]
        return lines

    def message(self, context: str = "") -> str:
        """The failure: the verdict with the size of the error, the figures, and the likely mistake."""
        prefix = f"{context}: " if context else ""
        over = "over" if self.ratio > 1.0 else "under"
        head = (
            f"{prefix}graph-memory estimate {format_bytes(self.estimate_bytes)} is {over} what the graphs hold, "
            f"{format_bytes(self.measured_bytes)}, by more than {self.within * 100:.0f}%"
        )
        diagnosis = self.diagnosis()
        if diagnosis:
            head += f": {diagnosis}"
        return "\n".join([head + ".", *(f"  {line}" for line in self.lines())])

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate_bytes": self.estimate_bytes,
            "measured_bytes": self.measured_bytes,
            "ratio": None if self.ratio == float("inf") else round(self.ratio, 6),
            "within": self.within,
            "passed": self.passed,
            "workspace_bytes": self.workspace_bytes,
            "largest_graph_bytes": self.largest_graph_bytes,
            "sum_over_sizes_bytes": self.sum_over_sizes_bytes,
        }


@dataclass(frozen=True)
class BatchReplay:
    """One call of the engine at ``batch``: how many graph replays it made, and the sizes of those graphs.

    ``graph_sizes`` holds the size of each graph it replayed that was captured while
    observed and whose size could be seen; ``unknown`` counts the replays of graphs
    whose size is not known (captured before the observation, or with inputs the
    capturing function did not hold in a local variable).
    """

    batch: int
    replays: int
    graph_sizes: tuple[int, ...] = ()
    unknown: int = 0

    @property
    def padding(self) -> int | None:
        """The rows the engine padded the batch by: the largest replayed graph's size less the batch."""
        return max(self.graph_sizes) - self.batch if self.graph_sizes else None


@dataclass(frozen=True)
class Coverage:
    """Which batches replayed a graph, and at what padding: the verdict of ``check_coverage``."""

    calls: tuple[BatchReplay, ...]
    max_padding: int | None = None

    @property
    def eager(self) -> list[int]:
        return [c.batch for c in self.calls if c.replays == 0]

    @property
    def over_padded(self) -> list[BatchReplay]:
        limit = self.max_padding
        if limit is None:
            return []
        return [c for c in self.calls if c.padding is not None and c.padding > limit]

    @property
    def replay_ratio(self) -> float:
        """The calls that replayed a graph over all calls."""
        return sum(1 for c in self.calls if c.replays) / len(self.calls) if self.calls else 0.0

    @property
    def passed(self) -> bool:
        return not self.eager and not self.over_padded

    def causes(self) -> list[str]:
        found = []
        if self.eager:
            found.append(f"batches {batch_ranges(self.eager)} ran eager: no graph replayed")
        over = self.over_padded
        if over:
            shown = "; ".join(
                f"batch {c.batch} replayed the graph of size {max(c.graph_sizes)} (padding {c.padding})"
                for c in over[:6]
            )
            more = f"; and {len(over) - 6} more" if len(over) > 6 else ""
            found.append(f"{count_noun(len(over), 'batch', 'batches')} padded by more than {self.max_padding} rows: "
                         f"{shown}{more}")  # fmt: skip
        return found

    def summary(self) -> str:
        """``48 of 64 batches replayed a graph (75%); padding 0 to 15 rows``."""
        replayed = sum(1 for c in self.calls if c.replays)
        paddings = [c.padding for c in self.calls if c.padding is not None]
        text = f"{replayed} of {count_noun(len(self.calls), 'batch', 'batches')} replayed a graph ({self.replay_ratio:.0%})"
        if paddings:
            text += f"; padding {min(paddings)} to {max(paddings)} rows"
        unknown = sum(1 for c in self.calls if c.unknown and not c.graph_sizes)
        if unknown:
            text += (
                f"; {count_noun(unknown, 'batch', 'batches')} replayed graphs of unknown size (captured before the "
                f"observation, or with inputs in no local variable): padding not judged"
            )
        return text

    def message(self, context: str = "") -> str:
        prefix = f"{context}: " if context else ""
        causes = self.causes()
        lines = [f"{prefix}batch-size coverage: {causes[0]}." if causes else f"{prefix}batch-size coverage passed."]
        lines.extend(f"  also: {cause}." for cause in causes[1:])
        lines.append(f"  {self.summary()}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": len(self.calls),
            "replay_ratio": round(self.replay_ratio, 6),
            "eager_batches": self.eager,
            "max_padding": self.max_padding,
            "over_padded": [c.batch for c in self.over_padded],
            "passed": self.passed,
            "padding": {str(c.batch): c.padding for c in self.calls},
        }


def batch_ranges(batches: Iterable[int]) -> str:
    """``[1, 2, 3, 5, 33, 34, 35]`` -> ``1-3, 5, 33-35``."""
    ordered = sorted(set(batches))
    runs: list[tuple[int, int]] = []
    for batch in ordered:
        if runs and batch == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], batch)
        else:
            runs.append((batch, batch))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def sum_over_sizes(growths: Sequence[tuple[int | None, int | None]]) -> int | None:
    """What budgeting every graph on its own says, from each graph's ``(size, own bytes)``.

    A graph captured into a pool that grew for it has its own bytes; a graph that
    reused a shared pool's blocks shows none, and is budgeted at the largest
    measured graph's bytes per batch row times its size (a linear extrapolation,
    as per-size budgeting does), or at the largest graph's bytes where sizes are
    not known.
    """
    measured = [(size, own) for size, own in growths if own]
    if not measured:
        return None
    size_of_largest, largest = max(measured, key=lambda pair: pair[1] or 0)
    total = 0
    for size, own in growths:
        if own:
            total += own
        elif size and size_of_largest:
            total += round((largest or 0) * size / size_of_largest)
        else:
            total += largest or 0
    return total


def measure_coverage(
    call: Callable[[Any], Any],
    batches: Sequence[int],
    make_input: Callable[[int], Any],
    replay_counts: Callable[[], tuple[Counter[int], int]],
    sizes: Callable[[], dict[int, int | None]],
    max_padding: int | None,
) -> Coverage:
    """Call ``call(make_input(batch))`` per batch and count the replays across each call.

    ``replay_counts()`` gives the replays so far per capture index and of graphs
    not seen captured; ``sizes()`` each capture's size by index.  The input is
    made before the counts are read, so replays made while building it (an
    engine's own warm-up) do not count for the batch.
    """
    calls = []
    for batch in batches:
        argument = make_input(batch)
        before, unseen_before = replay_counts()
        call(argument)
        after, unseen_after = replay_counts()
        replayed = after - before
        size_of = sizes()
        graph_sizes = tuple(sorted({s for i in replayed if (s := size_of.get(i)) is not None}))
        unseen = unseen_after - unseen_before
        unknown = unseen + sum(n for i, n in replayed.items() if size_of.get(i) is None)
        calls.append(BatchReplay(batch, sum(replayed.values()) + unseen, graph_sizes, unknown))
    return Coverage(tuple(calls), max_padding)
