"""Replay-vs-reference comparison: tolerances, the worst element, NaN, the message."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.graphs.numerics import (
    STATIC_CONTROL_FLOW_HINT,
    compare_tensor_trees,
    compare_tensors,
    default_tolerances,
    max_abs_error,
    replay_mismatch_message,
    resolve_tolerances,
)
from pytest_cudagraph.strategies import shapes


def test_default_tolerances_follow_the_dtype():
    assert default_tolerances(torch.float32) == (1.3e-6, 1e-5)
    assert default_tolerances(torch.bfloat16) == (1.6e-2, 1e-5)
    assert default_tolerances(torch.float16) == (1e-3, 1e-5)
    assert default_tolerances(torch.int32) == (0.0, 0.0)
    assert default_tolerances(torch.bool) == (0.0, 0.0)
    assert resolve_tolerances(torch.bfloat16, None, 0.5) == (1.6e-2, 0.5)
    assert resolve_tolerances(torch.float32, 0, None) == (0.0, 1e-5)


@settings(max_examples=40, deadline=None)
@given(shape=shapes(min_dims=1, max_dims=3, max_side=9), data=st.data())
def test_the_worst_element_is_found_where_it_was_put(shape, data):
    expected = torch.randn(*shape, dtype=torch.float64).float()
    numel = expected.numel()
    flat = data.draw(st.integers(0, numel - 1), label="flat index")
    actual = expected.clone()
    actual.view(-1)[flat] += 0.5
    result = compare_tensors(actual, expected)
    assert not result.passed
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))
    assert result.worst_index == index
    assert result.mismatches == 1 and result.numel == numel
    assert result.actual_value == pytest.approx(float(actual.view(-1)[flat]))
    assert result.expected_value == pytest.approx(float(expected.view(-1)[flat]))
    assert result.max_abs_err == pytest.approx(0.5, rel=1e-5)


def test_values_within_tolerance_pass_and_report_their_error():
    expected = torch.ones(4, 4)
    actual = expected + 1e-6
    result = compare_tensors(actual, expected)
    assert result.passed and 0 < result.max_abs_err < 1e-5


@pytest.mark.parametrize("where", ["actual", "expected", "both"])
def test_nan_never_passes(where):
    expected = torch.zeros(3, 3)
    actual = torch.zeros(3, 3)
    if where in ("actual", "both"):
        actual[1, 2] = math.nan
    if where in ("expected", "both"):
        expected[1, 2] = math.nan
    result = compare_tensors(actual, expected, rtol=1.0, atol=1.0)
    assert not result.passed
    assert result.worst_index == (1, 2) and result.nan_count == 1
    assert "NaN never passes" in result.describe()
    assert math.isnan(max_abs_error([result]))


def test_equal_infinities_pass_and_opposite_ones_fail():
    expected = torch.tensor([math.inf, -math.inf, 1.0])
    assert compare_tensors(expected.clone(), expected).passed
    flipped = torch.tensor([-math.inf, -math.inf, 1.0])
    assert not compare_tensors(flipped, expected).passed


def test_bfloat16_gets_its_looser_tolerance_and_integers_are_exact():
    expected = torch.full((8,), 3.0, dtype=torch.bfloat16)
    assert compare_tensors(expected + 0.015, expected).passed  # one bf16 step at 3.0
    assert not compare_tensors(expected + 0.25, expected).passed
    ints = torch.arange(5)
    assert compare_tensors(ints.clone(), ints).passed
    off = ints.clone()
    off[3] += 1
    result = compare_tensors(off, ints)
    assert not result.passed and result.worst_index == (3,)


def test_structural_differences_are_problems_not_crashes():
    a = torch.zeros(2, 3)
    assert "shape (2, 3) differs" in compare_tensors(a, torch.zeros(3, 2)).describe()
    assert "dtype torch.float32 differs" in compare_tensors(a, a.double()).describe()
    results = compare_tensor_trees((a, a), [a])
    assert not results[0].passed and "structure" in results[0].problem


def test_nested_outputs_are_compared_leaf_by_leaf_with_paths():
    good = torch.ones(2)
    bad = torch.ones(2) * 2
    results = compare_tensor_trees({"logits": good, "aux": [good, bad]}, {"logits": good, "aux": [good, good]})
    failed = [r for r in results if not r.passed]
    assert [r.path for r in failed] == ["output['aux'][1]"]


def test_mismatch_message_is_a_small_report():
    expected = torch.zeros(4, 8)
    actual = expected.clone()
    actual[2, 5] = 0.75
    comparison = compare_tensors(actual, expected, rtol=1e-6, atol=1e-5, path="output[0]")
    text = replay_mismatch_message(comparison, size=16, trial=1, trials=3)
    assert text.startswith("replay of batch size 16 differs from eager on trial 2 of 3, output[0]:")
    assert "index (2, 5)" in text and "replay 0.75" in text and "eager 0" in text
    assert "abs error 0.75" in text and "1 of 32 elements" in text
    assert STATIC_CONTROL_FLOW_HINT in text and "static control flow" in text


def test_a_mismatch_with_a_known_cause_ends_with_it_instead_of_the_hint():
    expected = torch.zeros(4)
    comparison = compare_tensors(expected + 1, expected, rtol=1e-6, atol=1e-5, path="output")
    text = replay_mismatch_message(comparison, size=8, trial=0, trials=2, cause="It raced.")
    assert text.startswith("replay of batch size 8 differs from eager on trial 1 of 2, output:")
    assert text.endswith(". It raced.") and STATIC_CONTROL_FLOW_HINT not in text


# -- DeferredComparisons: the same verdicts, read back at once ---------------------------------

_SPECIAL = st.sampled_from([0.0, 1.0, -2.5, 1e-7, math.inf, -math.inf, math.nan])


@st.composite
def _output_pairs(draw):
    """A replay-like output and a reference that differs from it in a few elements (or structurally)."""
    shape = draw(shapes(min_dims=0, max_dims=3, max_side=6), label="shape")
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.complex64]))
    base = torch.randn(tuple(shape), dtype=torch.float64)
    if dtype == torch.complex64:
        expected = torch.complex(base, base.flip(-1) if base.dim() else base).to(dtype)
    else:
        expected = (base * 10).to(dtype)
    actual = expected.clone()
    for _ in range(draw(st.integers(0, 3), label="changes")):
        if actual.numel() == 0:
            break
        flat = draw(st.integers(0, actual.numel() - 1))
        value = draw(_SPECIAL) if dtype.is_floating_point or dtype.is_complex else draw(st.integers(-5, 5))
        actual.view(-1)[flat] = value
    kind = draw(st.sampled_from(["tensor", "tuple", "dict", "shape", "dtype", "scalar"]), label="kind")
    if kind == "tuple":
        return (actual, actual.sum(-1) if actual.dim() else actual), (
            expected,
            expected.sum(-1) if expected.dim() else expected,
        )
    if kind == "dict":
        return {"logits": actual, "step": 3}, {"logits": expected, "step": draw(st.sampled_from([3, 4]))}
    if kind == "shape":
        return actual.reshape(-1), expected.reshape(1, -1)
    if kind == "dtype" and dtype != torch.float64:
        return actual, expected.to(torch.float64)
    if kind == "scalar":
        return (actual, 1), (expected, None)
    return actual, expected


@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(_output_pairs(), min_size=1, max_size=4), rtol=st.sampled_from([None, 0.0, 1e-3]))
def test_deferred_comparisons_give_the_verdicts_of_comparing_one_at_a_time(pairs, rtol):
    from pytest_cudagraph.graphs.numerics import DeferredComparisons

    pending = DeferredComparisons()
    for index, (actual, expected) in enumerate(pairs):
        pending.add(index, actual, expected, rtol, None)
    results = pending.results()
    assert [key for key, _ in results] == list(range(len(pairs)))
    for (_, deferred), (actual, expected) in zip(results, pairs):
        direct = compare_tensor_trees(actual, expected, rtol, None)
        # NaN != NaN: compare the reprs, which spell every field
        assert repr(deferred) == repr(direct)
    assert pending.results() == []  # read once
