"""The canonical case: a transformer decode step captured for many batch sizes in one pool.

Each batch size gets its own CUDA graph, captured largest first so that the
smaller graphs reuse the blocks the largest one already reserved; replay must
match eager for every size, and the shared pool must cost about as much as the
largest graph alone.
"""

import pytest
import torch
from example_models import DecodeStep

# vLLM's default capture sizes, cut at 64 to keep the example quick
SIZES = [1, 2, 4] + list(range(8, 65, 8))


@pytest.mark.cudagraph(capture_sizes=SIZES)
def test_decode_step_replays_like_eager_in_one_pool(cudagraphs):
    model = DecodeStep(max_batch=max(SIZES)).cuda().eval()
    with torch.inference_mode():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, 256, device="cuda"))
        graphs.check_replay(trials=3)
    graphs.check_pool()
    assert graphs.pool_bytes <= sum(graphs.graph_bytes.values())


@pytest.mark.cudagraph(capture_sizes=[1, 8, 32], rtol=2e-2, atol=2e-2)
def test_decode_step_bf16(cudagraphs):
    model = DecodeStep(max_batch=32).cuda().to(torch.bfloat16).eval()
    with torch.inference_mode():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, 256, device="cuda", dtype=torch.bfloat16))
        graphs.check_replay()
    graphs.check_pool()


@pytest.mark.cudagraph(capture_sizes=[4, 16])
def test_compiled_decode_step_graphs(cudagraphs):
    """torch.compile'd code captured the same way: Inductor's kernels inside one graph per size."""
    model = DecodeStep(max_batch=16).cuda().eval()
    compiled = torch.compile(model, dynamic=False)
    with torch.inference_mode():
        graphs = cudagraphs.capture(compiled, lambda bs: torch.randn(bs, 256, device="cuda"))
        graphs.check_replay(reference=model, rtol=1e-3, atol=1e-3)
    graphs.check_pool()
