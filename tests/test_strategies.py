"""Hypothesis strategies for capture tests and the ``cudagraph`` profile."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.errors import MisuseError
from pytest_cudagraph.strategies import PROFILE, batch_sizes, capture_sizes, dtypes, shapes


@given(st.data())
def test_capture_sizes_are_sorted_unique_and_in_bounds(data):
    low = data.draw(st.integers(1, 64), label="min_size")
    high = data.draw(st.integers(low + 3, low + 600), label="max_size")
    sizes = data.draw(capture_sizes(min_size=low, max_size=high, min_count=2, max_count=4))
    assert sizes == sorted(set(sizes))
    assert 2 <= len(sizes) <= 4
    assert all(low <= s <= high for s in sizes)


@given(batch_sizes(min_size=3, max_size=9), shapes(min_dims=2, max_dims=2, min_side=1, max_side=5))
def test_batch_sizes_and_shapes_respect_their_bounds(size, shape):
    assert 3 <= size <= 9
    assert len(shape) == 2 and all(1 <= side <= 5 for side in shape)


@given(dtypes(["float32", "bfloat16"]))
def test_dtypes_are_torch_dtypes(dtype):
    import torch

    assert dtype in (torch.float32, torch.bfloat16)


@pytest.mark.parametrize(
    "make",
    [
        lambda: capture_sizes(min_size=1, max_size=2, min_count=3),
        lambda: capture_sizes(min_count=0),
        lambda: batch_sizes(min_size=0),
        lambda: dtypes(["float32", "not_a_dtype"]),
    ],
)
def test_impossible_arguments_are_rejected_at_once(make):
    with pytest.raises(MisuseError):
        make()


def test_profile_is_registered_without_deadline_and_bounded():
    profile = settings.get_profile(PROFILE)
    assert profile.deadline is None
    assert 1 <= profile.max_examples <= 50


def test_importing_the_strategies_does_not_import_torch():
    code = "import sys, pytest_cudagraph.strategies; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
