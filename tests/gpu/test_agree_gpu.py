"""Modes agree on a GPU: the toy decoder as full, breakable and piecewise graphs gives eager's answer.

Full and breakable graphs run the same kernels, so they must agree bit for bit;
piecewise graphs (Inductor pieces) within the tolerances.  A planted op that reads
host-side state while capturing (whether the stream is capturing) is frozen in a
full graph but read again at every replay by the modes that run it eagerly: the
check must fail naming the size, the trial and the modes.

Run with ``pytest tests/gpu/test_agree_gpu.py --cudagraph -p no:randomly``;
without a GPU (or the flag) every test skips.
"""

from __future__ import annotations

import pytest
import torch
from toy_attention import ATTENTION_OP, ToyModel, make_inputs_for

from pytest_cudagraph import InvariantViolation, agree_modes
from pytest_cudagraph.records.record import current_record

SIZES = [1, 2, 4, 8, 16, 32, 64, 128]
LAYERS = 2
PLANTED_OP = "cudagraph_agree_test::scaled_while_capturing"

pytestmark = pytest.mark.cudagraph(capture_sizes=SIZES, atol=1e-4, rtol=1e-4, break_at=(ATTENTION_OP,))


def test_full_breakable_and_piecewise_graphs_of_the_toy_decoder_agree(cudagraphs):
    model = ToyModel(layers=LAYERS).cuda().eval()
    agreement = cudagraphs.agree(model, make_inputs_for(model, device="cuda"))  # sizes, break_at: the marker's
    agreement.check()
    assert agreement.modes == ("full", "breakable", "piecewise")
    assert agreement.sizes == (1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128)  # padded sizes between
    pairs = {(c.first, c.second) for c in agreement.comparisons}
    assert len(pairs) == 6 and len(agreement.comparisons) == 6 * 3 * len(agreement.sizes)
    assert agreement.max_abs_err("full", "breakable") == 0.0
    print(f"\nmax abs error: {agreement.to_json()['max_abs_err']}")
    record = current_record().to_json()
    assert record["extra"]["mode_agreement"][0]["passed"] is True
    [breakable] = [s for s in record["graphs"]["sets"] if "segments" in s]
    assert breakable["segments"] == len(SIZES) * (LAYERS + 1)
    assert record["piecewise"]["graphs_captured"] == len(SIZES) * (LAYERS + 1)


# reads host-side state: whether the stream is capturing.  In a full graph it runs once, while capturing,
# and the graph replays "x * 2" at batch size 1; the modes that run it eagerly see no capture and give x.
@torch.library.custom_op(PLANTED_OP, mutates_args=())
def scaled_while_capturing(x: torch.Tensor) -> torch.Tensor:
    if torch.cuda.is_current_stream_capturing() and x.shape[0] == 1:
        return x * 2
    return x.clone()


@scaled_while_capturing.register_fake
def _scaled_while_capturing_fake(x):
    return torch.empty_like(x)


class Planted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = ToyModel(layers=LAYERS)

    def forward(self, x):
        return torch.ops.cudagraph_agree_test.scaled_while_capturing(self.decoder(x))


def test_a_mode_that_freezes_host_state_fails_naming_the_size_the_trial_and_the_modes(cudagraphs):
    model = Planted().cuda().eval()
    make_inputs = make_inputs_for(model.decoder, device="cuda")
    agreement = cudagraphs.agree(
        model, make_inputs, sizes=[1, 2, 4, 8], break_at=(ATTENTION_OP, PLANTED_OP), piecewise_backend="eager"
    )
    assert not agreement.passed
    failing = {(c.size, frozenset((c.first, c.second))) for c in agreement.mismatches}
    assert failing == {
        (1, frozenset(pair)) for pair in [("eager", "full"), ("full", "breakable"), ("full", "piecewise")]
    }
    with pytest.raises(InvariantViolation) as info:
        agreement.check()
    message = str(info.value)
    print(f"\n{message}")
    assert "first at batch size 1, trial 1 of 3: full and eager differ" in message
    assert "worst element at index" in message and "frozen in a full graph" in message
    assert "1: breakable vs full" in message and "1: piecewise vs full" in message


def test_the_plain_api_checks_only_the_modes_asked_for(pool_baseline_free):
    model = ToyModel(layers=1).cuda().eval()
    agreement = agree_modes(model, make_inputs_for(model, device="cuda"), [2, 4], modes=("full",), trials=1)
    agreement.check()
    assert {(c.first, c.second) for c in agreement.comparisons} == {("full", "eager")}
    assert agreement.sizes == (2, 3, 4)


@pytest.fixture
def pool_baseline_free():
    """The plain API releases every graph it captured before it returns."""
    from pytest_cudagraph.graphs.memory import graph_pool_segments

    before = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    yield
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    after = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    assert after <= before, f"graph pools left behind: {sorted(after - before)}"
