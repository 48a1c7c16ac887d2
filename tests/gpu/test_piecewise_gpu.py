"""Piecewise CUDA graphs on a GPU: every capturable piece of every size in one pool.

The toy model has ``L`` attention layers whose attention is a registered op, so the
split has the counts vLLM's tests check: ``2L + 1`` pieces, ``L + 1`` captured per
size, ``L`` eager attention calls per replay.  Replay must equal eager at every
captured size, at padded sizes between them and above the largest (eager pieces).
"""

from __future__ import annotations

import pytest
import torch
from toy_attention import ATTENTION_OP, FUNCTIONAL_ATTENTION_OP, ToyModel, attention_calls, make_inputs_for

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.errors import StaleGraphError

SIZES = [1, 2, 4, 8, 16]
LAYERS = 2

pytestmark = pytest.mark.cudagraph(capture_sizes=SIZES, atol=1e-4, rtol=1e-4)


def assert_toy_counts(compiled, op=ATTENTION_OP):
    stats = compiled.stats
    assert stats.pieces == 2 * LAYERS + 1
    assert stats.capturable_pieces == LAYERS + 1
    assert stats.backend_compilations == LAYERS + 1
    assert stats.graphs_captured == len(SIZES) * (LAYERS + 1)
    assert stats.splitting_op_calls == {op: LAYERS}


def assert_one_pool(compiled):
    graphs = compiled.captured_graphs()
    assert len(graphs) == compiled.stats.graphs_captured
    assert {tuple(g.pool) for g in graphs.values()} == {compiled.pool_id}
    check = compiled.check_pool()
    assert check.passed and compiled.pool_bytes == check.pool_bytes > 0
    return check


def test_fx_split_inductor_pieces_replay_like_eager_in_one_pool(piecewise):
    model = ToyModel(layers=LAYERS).cuda()
    compiled = piecewise(model, [ATTENTION_OP])  # Inductor, sizes from the marker
    make_inputs = make_inputs_for(model, device="cuda")
    check = compiled.check_replay(make_inputs)
    paths = {s.size: s.path for s in check.sizes}
    assert paths[4] == "captured" and paths[5] == "captured, padded to 8"
    assert paths[17].startswith("eager")
    assert_toy_counts(compiled)
    pool = assert_one_pool(compiled)
    print(f"fx_split inductor: {compiled.stats}, pool {pool.pool_bytes} B, after each size {compiled.pool_bytes_after}")

    # a batch of 3 replays the graphs of size 4, with the attention op eager in between
    graphs = compiled.captured_graphs()
    replays = {key: g.replays for key, g in graphs.items()}
    before = attention_calls()
    x = make_inputs(3)
    torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    assert attention_calls() - before == 2 * LAYERS  # L in the replay, L in the eager reference
    stepped = {key for key, g in graphs.items() if g.replays > replays[key]}
    assert stepped == {(piece, 4) for piece, size in graphs if size == 4}


@pytest.mark.parametrize("op", [ATTENTION_OP, FUNCTIONAL_ATTENTION_OP], ids=["mutating", "functional"])
def test_eager_pieces_captured_for_both_op_kinds(piecewise, op):
    model = ToyModel(layers=LAYERS, mutating=op == ATTENTION_OP).cuda()
    compiled = piecewise(model, [op], backend="eager")
    compiled.check_replay(make_inputs_for(model, device="cuda"), sizes=[1, 2, 3, 8, 11, 16, 20])
    assert_toy_counts(compiled, op)
    assert_one_pool(compiled)


def test_replaced_parameter_is_a_stale_graph(piecewise):
    model = ToyModel(layers=1).cuda()
    compiled = piecewise(model, [ATTENTION_OP], backend="eager")
    x = torch.randn(4, model.hidden, device="cuda")
    compiled(x)
    layer = model.layers[0]
    layer.qkv.weight.data.mul_(2)  # in place: the graph sees it
    torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    layer.qkv.weight = torch.nn.Parameter(layer.qkv.weight.detach().clone())
    with pytest.raises(StaleGraphError, match="parameter or buffer at 0x"):
        compiled(x)


def test_inductor_partition_agrees_with_fx_split(piecewise):
    missing = compat.inductor_partition_missing()
    if missing:
        pytest.skip(f"this torch lacks Inductor graph partition at custom ops ({missing})")
    model = ToyModel(layers=LAYERS).cuda()
    split = piecewise(model, [ATTENTION_OP])
    partitioned = piecewise(model, [ATTENTION_OP], strategy="inductor_partition")
    make_inputs = make_inputs_for(model, device="cuda", seed=7)
    for n in (1, 3, 8, 13, 16, 21):
        x = make_inputs(n)
        torch.testing.assert_close(partitioned(x), split(x), atol=1e-4, rtol=1e-4)
    partitioned.check_replay(make_inputs)
    stats = partitioned.stats
    print(f"inductor_partition: {stats}")
    assert stats.backend_compilations == 1
    assert 1 <= stats.capturable_pieces <= LAYERS + 1
    assert stats.graphs_captured == len(SIZES) * stats.capturable_pieces
    assert stats.splitting_op_calls == {ATTENTION_OP: LAYERS}
    assert_one_pool(partitioned)
