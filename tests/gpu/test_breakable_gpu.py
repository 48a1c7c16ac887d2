"""Breakable CUDA graphs on a GPU: a toy decoder captured as a chain of graphs, broken at its attention op.

The toy decoder (tests/toy_attention.py) has ``L`` layers whose attention is a
``torch.library`` custom op; captured with ``break_at=(attention,)`` each size is
``L + 1`` graphs with ``L`` eager attention calls between them, all sizes in one
pool.  Replay must equal eager, the pool must stay at the largest size's mark, and
a host sync in another custom op must fail naming it as the break op to add.

Run with ``pytest tests/gpu/test_breakable_gpu.py --cudagraph -p no:randomly``;
without a GPU (or the flag) every test skips.
"""

from __future__ import annotations

import json

import pytest
import torch
from toy_attention import ATTENTION_OP, FUNCTIONAL_ATTENTION_OP, ToyModel, attention_calls, make_inputs_for

from pytest_cudagraph import CaptureError, GraphChain, StaleGraphError
from pytest_cudagraph.graphs.memory import graph_pool_segments
from pytest_cudagraph.records.record import current_record
from pytest_cudagraph.render.summary import HEADER, summary_row

SIZES = [1, 2, 4, 8, 16, 32, 64, 128]
LAYERS = 3

pytestmark = pytest.mark.cudagraph(capture_sizes=SIZES, atol=1e-4, rtol=1e-4)


@pytest.fixture
def pool_baseline():
    """Graph-pool ids alive before the test; the test must leave no new ones."""
    before = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    yield before
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # released pools are only freeable until then
    after = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    assert after <= before, f"graph pools left behind: {sorted(after - before)}"


@pytest.mark.parametrize("op", [ATTENTION_OP, FUNCTIONAL_ATTENTION_OP], ids=["mutating", "functional"])
def test_a_toy_decoder_is_layers_plus_one_graphs_a_size_and_replays_like_eager(cudagraphs, op):
    model = ToyModel(layers=LAYERS, mutating=op == ATTENTION_OP).cuda().eval()
    make_inputs = make_inputs_for(model, device="cuda")
    graphs = cudagraphs.capture(model, make_inputs, break_at=(op,))
    for size in SIZES:
        chain = graphs.graph(size).graph
        assert isinstance(chain, GraphChain), chain
        assert chain.segments == LAYERS + 1, (size, chain)
        assert chain.eager_calls == {op: LAYERS}, (size, chain)
        assert {tuple(g.pool()) for g in chain.graphs} == {tuple(graphs.pool_ids[0])}
    check = graphs.check_replay(trials=2)
    assert check.sizes == tuple(SIZES)

    # one replay runs the attention op L times, eagerly, between the graphs
    x = make_inputs(4)
    before = attention_calls()
    out = graphs.replay(4, x)
    assert attention_calls() - before == LAYERS
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)

    pool = graphs.check_pool()
    assert pool.passed and pool.largest_size == max(SIZES)
    print(f"\nbreakable {op}: pool {pool.pool_bytes} B, largest alone {pool.largest_graph_bytes} B")
    result = graphs.result().to_json()
    assert result["break_at"] == [op]
    assert result["segments"] == len(SIZES) * (LAYERS + 1)
    assert [c["size"] for c in result["chains"]] == sorted(SIZES, reverse=True)
    assert all(c["eager_calls"] == {op: LAYERS} and c["pool_bytes"] > 0 for c in result["chains"])


@pytest.mark.cudagraph(capture_sizes=[1, 2, 4, 8], atol=1e-4, rtol=1e-4, break_at=(ATTENTION_OP,))
def test_the_marker_makes_the_fixtures_captures_breakable_and_the_summary_counts_segments(pool_baseline, cudagraphs):
    model = ToyModel(layers=LAYERS).cuda().eval()
    assert cudagraphs.break_at == (ATTENTION_OP,)
    graphs = cudagraphs.capture(model, make_inputs_for(model, device="cuda"))
    assert all(graphs.graph(size).graph.segments == LAYERS + 1 for size in (1, 2, 4, 8))
    graphs.check_replay()
    graphs.close()
    section = current_record().to_json()["graphs"]
    json.dumps(section)
    cells = dict(zip(HEADER, summary_row("t.py::test", {"outcome": "passed", "graphs": section})))
    assert cells["graphs"] == f"4 graphs ({4 * (LAYERS + 1)} segments)"


def test_a_replaced_parameter_and_a_moved_input_are_stale_for_a_chain(cudagraphs):
    model = ToyModel(layers=1).cuda().eval()
    graphs = cudagraphs.capture(model, make_inputs_for(model, device="cuda"), sizes=[2, 4], break_at=(ATTENTION_OP,))
    x = torch.randn(4, model.hidden, device="cuda")
    model.layers[0].qkv.weight.data.mul_(2)  # in place: the chain sees it
    with torch.no_grad():
        torch.testing.assert_close(graphs.replay(4, x), model(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(StaleGraphError, match="new tensor|captured buffer"):
        graphs.graph(4).replay_from(x.clone())
    model.layers[0].proj.weight = torch.nn.Parameter(model.layers[0].proj.weight.detach().clone())
    with pytest.raises(StaleGraphError, match=r"parameter 'layers\.0\.proj\.weight'"):
        graphs.replay(4, x)


# a custom op that reads its metadata on the host: it cannot live in any graph
@torch.library.custom_op("cudagraph_breakable_test::host_scale", mutates_args=())
def host_scale(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    longest = int(lengths.max().item())  # a host sync: fails inside a capture
    return x * longest


@host_scale.register_fake
def _host_scale_fake(x, lengths):
    return torch.empty_like(x)


class HostScaled(torch.nn.Module):
    def __init__(self, hidden: int = 32):
        super().__init__()
        self.inner = ToyModel(layers=1, hidden=hidden)
        self.register_buffer("lengths", torch.arange(1, 5))

    def forward(self, x):
        return torch.ops.cudagraph_breakable_test.host_scale(self.inner(x), self.lengths)


def test_a_host_sync_in_an_uncovered_custom_op_names_it_as_the_break_op_to_add(pool_baseline, cudagraphs):
    model = HostScaled().cuda().eval()
    make_inputs = make_inputs_for(model.inner, device="cuda")
    with pytest.raises(CaptureError) as info:
        cudagraphs.capture(model, make_inputs, sizes=[2, 4], break_at=(ATTENTION_OP,))
    message = str(info.value)
    print(f"\n{message}")
    assert "batch size 4 (graph 2 of the chain)" in message
    assert "cudagraph_breakable_test::host_scale" in message and ".item()" in message
    assert f"break_at=('{ATTENTION_OP}', 'cudagraph_breakable_test::host_scale',)" in message
    assert info.value.failing_op == "cudagraph_breakable_test::host_scale"
    torch.randn(4, device="cuda").sum().item()  # the process is usable: RNG and streams restored

    # with the op broken at too, it runs eagerly between the graphs
    graphs = cudagraphs.capture(
        model, make_inputs, sizes=[2, 4], break_at=(ATTENTION_OP, "cudagraph_breakable_test::host_scale")
    )
    assert graphs.graph(4).graph.segments == 3  # before attention, between, after host_scale
    graphs.check_replay()
    graphs.check_pool()
