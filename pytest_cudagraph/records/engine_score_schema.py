"""The observed graphs' engine scores in the record: ``check_estimate()`` and ``check_coverage()`` (part of ``schema``).

``schema.ObservedGraphs`` holds them under ``estimates`` and ``coverage``: part of
the report's one definition, kept in a module of their own.  An estimate score sets
an engine's graph-memory estimate beside what its graphs hold; a coverage score
says which batch sizes replayed a graph, and the padding of each
(``graphs/observe_scores.py``).
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from .fields import Count, Flag, Measure, Null, Section, Sizes


class EstimateScoreSection(Section):
    """``check_estimate()``: the engine's graph-memory estimate against what its graphs hold."""

    estimate_bytes: Measure | UnsetType = UNSET
    measured_bytes: Measure | UnsetType = UNSET
    # estimate / measured; null for a nonzero estimate of graphs that hold nothing
    ratio: Measure | Null | UnsetType = UNSET
    within: Measure | UnsetType = UNSET
    passed: Flag | UnsetType = UNSET
    workspace_bytes: Measure | UnsetType = UNSET
    largest_graph_bytes: Measure | Null | UnsetType = UNSET
    sum_over_sizes_bytes: Measure | Null | UnsetType = UNSET


class CoverageSection(Section):
    """``check_coverage()``: which batches replayed a graph, and the padding of each."""

    batches: Count | UnsetType = UNSET
    replay_ratio: Measure | UnsetType = UNSET
    eager_batches: Sizes | UnsetType = UNSET
    max_padding: Count | Null | UnsetType = UNSET
    over_padded: Sizes | UnsetType = UNSET
    passed: Flag | UnsetType = UNSET
    # batch (as a string) -> rows padded, null where the replayed graph's size is not known
    padding: dict[str, Count | None] | UnsetType = UNSET
