"""Piecewise CUDA graphs: the attention op runs eagerly, everything between is captured per size."""

import pytest
import torch
from example_models import AttentionSplitModel

LAYERS = 3
SIZES = [1, 2, 4, 8, 16]


def test_split_at_attention_on_any_device(piecewise):
    """The split itself, validated without a GPU: pieces run uncaptured on the CPU."""
    model = AttentionSplitModel(layers=LAYERS).eval()
    compiled = piecewise(model, ["examples::attention"], capture_sizes=SIZES, backend="eager")
    with torch.no_grad():
        compiled.check_replay(lambda bs: torch.randn(bs, 64))
    stats = compiled.stats
    assert stats.pieces == 2 * LAYERS + 1
    assert stats.capturable_pieces == LAYERS + 1


@pytest.mark.cudagraph(capture_sizes=SIZES)
def test_piecewise_graphs_on_gpu(piecewise):
    model = AttentionSplitModel(layers=LAYERS).cuda().eval()
    compiled = piecewise(model, [torch.ops.examples.attention.default])
    with torch.no_grad():
        compiled.check_replay(lambda bs: torch.randn(bs, 64, device="cuda"), sizes=SIZES + [3, 5, 12])
    stats = compiled.stats
    assert stats.graphs_captured == len(SIZES) * (LAYERS + 1)
    assert stats.splitting_op_calls["examples::attention"] == LAYERS
