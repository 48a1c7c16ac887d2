"""The replay check's reference beside the replay on a second stream (graphs/reference_overlap.py).

Which references may run side by side is decided on the CPU (tests/test_reference_overlap.py);
here: the verdicts side by side are the verdicts one after the other, a mismatch seen only
side by side is never reported as the graph's, and stateful models stay one after the other.
"""

from __future__ import annotations

import pytest
import torch
from mlp_model import MLP

from pytest_cudagraph import InvariantViolation, capture_graphs

pytestmark = pytest.mark.cudagraph

SIZES = [1, 2, 4, 8, 16, 32, 64]


def make_inputs(size: int) -> torch.Tensor:
    return torch.randn(size, 256, device="cuda")


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return MLP(256, 4).cuda().eval()


def test_a_stateless_model_is_checked_side_by_side_with_the_same_verdict(mlp):
    with capture_graphs(mlp, make_inputs, SIZES) as gs:
        beside = gs.check_replay(trials=3)
        after = gs.check_replay(trials=3, side_by_side=False)
    assert beside.serial_reason is None
    assert after.serial_reason == "side_by_side=False"
    assert beside.sizes == after.sizes == tuple(SIZES)
    # the same kernels on the same inputs' distribution: errors of the same order
    assert beside.max_abs_err is not None and after.max_abs_err is not None
    assert beside.max_abs_err < 1e-3 and after.max_abs_err < 1e-3


class CachedAttention(torch.nn.Module):
    """Writes each batch's keys into a cache it then reads: the pattern of a KV cache."""

    def __init__(self, d: int = 256, slots: int = 64):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)
        self.kv_cache = [torch.zeros(slots, d, device="cuda")]

    def forward(self, x):
        cache = self.kv_cache[0]
        cache[: x.shape[0]] = self.proj(x)
        return cache[: x.shape[0]].softmax(-1) @ self.proj.weight


def test_a_model_that_writes_its_cache_stays_one_after_the_other():
    model = CachedAttention().cuda().eval()
    with capture_graphs(model, make_inputs, SIZES) as gs:
        check = gs.check_replay(trials=2)
    assert check.serial_reason == "the reference writes CachedAttention.kv_cache[0] in place"


def test_a_mismatch_seen_only_side_by_side_is_reported_as_such(mlp):
    calls = {"beside": 0}

    def reference(x):
        # wrong only when run on a stream other than the caller's: what a race on shared state looks like
        if torch.cuda.current_stream() != torch.cuda.default_stream():
            calls["beside"] += 1
            return mlp(x) + 1.0
        return mlp(x)

    with capture_graphs(mlp, make_inputs, SIZES) as gs:
        with pytest.raises(InvariantViolation) as info:
            gs.check_replay(reference=reference, trials=2)
        text = str(info.value)
        assert calls["beside"] > 0
        assert "appeared only while the reference ran beside the replay" in text
        assert "pass side_by_side=False" in text
        assert "static control flow" not in text  # one after the other, the flow agreed
        # one after the other the same reference agrees everywhere
        assert gs.check_replay(reference=reference, trials=2, side_by_side=False).serial_reason == "side_by_side=False"


def test_a_real_mismatch_is_confirmed_one_after_the_other_and_reported_as_before(mlp):
    with capture_graphs(mlp, make_inputs, SIZES) as gs:
        with pytest.raises(InvariantViolation) as beside:
            gs.check_replay(reference=lambda x: mlp(x) + 1e-2, trials=2)
        with pytest.raises(InvariantViolation) as after:
            gs.check_replay(reference=lambda x: mlp(x) + 1e-2, trials=2, side_by_side=False)
    assert "appeared only" not in str(beside.value)
    # the first mismatch is the same size and trial, in the same words (the inputs, and so the worst element, differ)
    first = str(beside.value).split(",")[0]
    assert first == str(after.value).split(",")[0]
    assert first == "replay of batch size 64 differs from the reference on trial 1 of 2"
