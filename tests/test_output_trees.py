"""The paired walk of two output trees, shared by the replay-vs-eager and the cold-vs-warm comparisons."""

from __future__ import annotations

import copy

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.caches.outputs import cold_warm_differences
from pytest_cudagraph.graphs.numerics import compare_tensor_trees
from pytest_cudagraph.graphs.output_trees import LeafPair, StructureMismatch, paired_leaves

# leaves far apart, so that tolerances and bitwise equality agree on every pair of them (no NaN:
# the cold/warm check holds NaN equal to NaN, the replay check fails it)
_TENSORS = (torch.zeros(2), torch.ones(2), torch.arange(3.0), torch.ones(2, dtype=torch.int64))
leaves = st.one_of(
    st.sampled_from(range(len(_TENSORS))).map(lambda i: _TENSORS[i].clone()),
    st.integers(-3, 3),
    st.none(),
    st.sampled_from(["a", "b"]),
)
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["x", "y", "z"]), children, max_size=3),
    ),
    max_leaves=8,
)


def _reordered(tree):
    """The same tree with every mapping's keys in reverse order and every list a tuple: the same structure."""
    if isinstance(tree, dict):
        return {key: _reordered(tree[key]) for key in reversed(list(tree))}
    if isinstance(tree, (list, tuple)):
        return tuple(_reordered(item) for item in tree)
    return tree.clone() if isinstance(tree, torch.Tensor) else copy.copy(tree)


@settings(max_examples=150, deadline=None)
@given(trees, trees, st.booleans())
def test_both_comparisons_give_the_same_verdict_on_random_trees(actual, other, same):
    expected = _reordered(actual) if same else other
    structure_differs = any(isinstance(item, StructureMismatch) for item in paired_leaves(actual, expected))
    cold_warm_fails = bool(cold_warm_differences("output", actual, expected))
    replay = compare_tensor_trees(actual, expected)
    replay_fails = not all(comparison.passed for comparison in replay)
    assert cold_warm_fails == replay_fails
    if same:
        assert not structure_differs and not cold_warm_fails
    if structure_differs:
        assert cold_warm_fails
        assert [c.problem.split(":")[0] for c in replay] == ["the outputs differ in structure"]


def test_the_walk_pairs_leaves_in_order_and_stops_where_the_structure_parts():
    t = torch.ones(1)
    items = list(paired_leaves((t, {"a": 1, "b": [2, 3]}), [t, {"b": [2], "a": 1}]))
    assert [type(item) for item in items] == [LeafPair, LeafPair, StructureMismatch]
    assert [item.path for item in items] == ["output[0]", "output[1]['a']", "output[1]['b']"]
    assert items[2].kind == "length"
    assert [(m.kind, m.path) for m in paired_leaves({"a": t}, {"b": t}, "y")] == [("keys", "y")]
    assert [(m.kind, m.path) for m in paired_leaves([t], t, "y")] == [("shape", "y")]


def test_each_caller_keeps_its_own_words_for_a_structure_that_parts():
    t = torch.ones(1)
    assert cold_warm_differences("y", [t, t], [t]) == ["y: 2 items on the cold pass, 1 on the warm pass"]
    assert cold_warm_differences("y", {"a": t}, {"b": t}) == ["y: keys ['a'] on the cold pass, ['b'] on the warm pass"]
    assert cold_warm_differences("y", [t], t) == ["y: a tensor on one pass, list on the other"]
    assert cold_warm_differences("y", [1], 1) == ["y: [1] on the cold pass, 1 on the warm pass"]
    (only,) = compare_tensor_trees([t, t], [t])
    assert only.problem == "the outputs differ in structure: ['output[0]', 'output[1]'] vs ['output[0]']"
