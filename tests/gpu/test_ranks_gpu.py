"""Tensor-parallel CUDA graphs on two GPUs: collectives captured, replayed, checked on every rank, never hanging.

Needs two visible GPUs and a pytest run without ``--cudagraph-devices`` (which
pins each process to one GPU; the tests then skip saying so)::

    pytest tests/gpu/test_ranks_gpu.py --cudagraph -p no:cacheprovider

The bodies are module-level functions: the rank processes import them from this
module by name.  Every rank starts from the same seed, so weights and inputs
drawn in the same order are the same on every rank.
"""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from pytest_cudagraph.ranks import RanksFailed

pytestmark = pytest.mark.cudagraph(world_size=2, timeout=60)

D_MODEL = 256
D_FF = 1024
# 8 sizes, captured largest first into one pool per rank
SIZES = [1, 2, 4, 8, 16, 24, 32, 64]


class TensorParallelMLP(torch.nn.Module):
    """Megatron's MLP on one rank: the up projection split by columns, the down projection by rows.

    Each rank computes a partial sum of the output; the all-reduce adds them up, so
    every rank ends with the whole output.
    """

    def __init__(self, rank: int, world_size: int):
        super().__init__()
        # the same full weights on every rank (same seed), then this rank's shard of them
        up = torch.randn(D_FF, D_MODEL) / D_MODEL**0.5
        down = torch.randn(D_MODEL, D_FF) / D_FF**0.5
        shard = D_FF // world_size
        columns = slice(rank * shard, (rank + 1) * shard)
        self.full_up, self.full_down = up, down
        self.up = torch.nn.Parameter(up[columns].clone())
        self.down = torch.nn.Parameter(down[:, columns].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = F.linear(F.gelu(F.linear(x, self.up)), self.down)
        dist.all_reduce(partial)
        return partial

    def unsharded(self, x: torch.Tensor) -> torch.Tensor:
        up, down = self.full_up.to(x.device), self.full_down.to(x.device)
        return F.linear(F.gelu(F.linear(x, up)), down)


def tp_mlp_body(rank):
    model = TensorParallelMLP(rank.rank, rank.world_size).to(rank.device)

    def make_inputs(n):
        return torch.randn(n, D_MODEL, device=rank.device)

    graphs = rank.capture(model, make_inputs, sizes=SIZES)
    check = graphs.check_replay(trials=3)
    graphs.check_pool()
    x = make_inputs(max(SIZES))
    out = graphs.replay(max(SIZES), x)
    rank.assert_ranks_agree(out, name="replayed output")
    # the sharded graph computes what the whole MLP computes (the summation order differs)
    torch.testing.assert_close(out, model.unsharded(x), rtol=1e-4, atol=1e-4)
    return {"sizes": list(graphs.sizes), "max_abs_err": check.max_abs_err, "pool_bytes": graphs.pool_bytes}


def test_tensor_parallel_mlp_at_8_sizes_on_2_ranks(cudagraph_ranks):
    result = cudagraph_ranks.run(tp_mlp_body)
    assert result.passed and result.world_size == 2
    for rank in result.per_rank:
        assert rank.graphs["captured"] == len(SIZES)
        assert rank.graphs["sizes"] == SIZES
        assert rank.graphs["pool_check_passed"] is True
        assert rank.graphs["replay_checks"] == 1
        assert rank.device == f"cuda:{rank.rank}"
        # the ranks' collectives were compared before the first replay: one all-reduce per size
        assert rank.collective_alignment["sizes"] == len(SIZES)
        assert rank.collective_alignment["collectives"] == len(SIZES)
    # replay equals eager on both ranks (measured bitwise on H200s; a hair of slack for other GPUs)
    assert all(value["max_abs_err"] <= 1e-5 for value in result.values)


def gather_and_scatter_body(rank):
    world = rank.world_size

    def gather(x):
        out = torch.empty(world * x.shape[0], x.shape[1], device=x.device)
        dist.all_gather_into_tensor(out, x)
        return out

    def scatter(x):
        out = torch.empty(x.shape[0] // world, x.shape[1], device=x.device)
        dist.reduce_scatter_tensor(out, x)
        return out

    def rank_inputs(n):
        return torch.randn(n, 64, device=rank.device) + rank.rank

    def scatter_inputs(n):
        return torch.randn(n * world, 64, device=rank.device)

    gathered = rank.capture(gather, rank_inputs, sizes=[2, 4, 8])
    gathered.check_replay(trials=2)
    rank.assert_ranks_agree(gathered.replay(8, rank_inputs(8)), name="all-gathered")
    scattered = rank.capture(scatter, scatter_inputs, sizes=[2, 4, 8])
    scattered.check_replay(trials=2)
    gathered.check_pool()
    scattered.check_pool()


def test_all_gather_and_reduce_scatter_captured(cudagraph_ranks):
    result = cudagraph_ranks.run(gather_and_scatter_body)
    assert [len(rank.graph_sets) for rank in result.per_rank] == [2, 2]


def state_around_graphs_body(rank):
    model = TensorParallelMLP(rank.rank, rank.world_size).to(rank.device)

    def make_inputs(n):
        return torch.randn(n, D_MODEL, device=rank.device)

    graphs = rank.capture(model, make_inputs, sizes=[8, 4, 2, 1])
    world = rank.world_size
    for step in range(3):
        graphs.replay(8, make_inputs(8))
        # an eager collective between replays still pairs up with the other rank's
        t = torch.full((16,), float(rank.rank + step), device=rank.device)
        dist.all_reduce(t)
        expected = world * step + world * (world - 1) / 2
        assert torch.equal(t, torch.full_like(t, expected)), (step, t[0].item(), expected)
    graphs.check_replay(trials=1)
    # a second capture after replays (NCCL state baked into the first must not break it: sglang#31852)
    second = rank.capture(lambda x: model(x) * 2, make_inputs, sizes=[16, 8])
    second.check_replay(trials=2)
    graphs.check_replay(trials=1)


def test_eager_collectives_between_replays_and_a_second_capture(cudagraph_ranks):
    result = cudagraph_ranks.run(state_around_graphs_body)
    assert [sum(s["captured"] for s in rank.graph_sets) for rank in result.per_rank] == [6, 6]


def item_on_rank_one_body(rank):
    def reduce_then_scale(x):
        y = x * 2
        dist.all_reduce(y)
        if rank.rank == 1:
            y = y * y.sum().item()  # a host sync on one rank only
        return y

    rank.capture(reduce_then_scale, lambda n: torch.randn(n, 32, device=rank.device), sizes=[8, 4, 2])


@pytest.mark.cudagraph(world_size=2, timeout=30)
def test_item_on_rank_one_fails_naming_rank_one_and_item(cudagraph_ranks):
    start = time.monotonic()
    with pytest.raises(RanksFailed) as info:
        cudagraph_ranks.run(item_on_rank_one_body)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert message.startswith("rank 1 of 2 failed: CaptureError: "), message
    assert ".item()" in message and "y.sum().item()" in message
    assert "rank 0 " in message  # where rank 0 was when it was stopped
    assert info.value.error_type == "CaptureError"
    result = info.value.result
    assert result.first_failure == 1 and result.per_rank[0].outcome == "aborted"
    assert elapsed < 2 * 30 + 15
    # rank 0 is not left hanging
    for rank in result.per_rank:
        with pytest.raises(ProcessLookupError):
            os.kill(rank.pid, 0)


def collective_on_rank_zero_only_body(rank):
    t = torch.ones(4, device=rank.device)
    if rank.rank == 0:
        dist.all_reduce(t)
    torch.cuda.synchronize()


@pytest.mark.cudagraph(world_size=2, timeout=15)
def test_a_collective_on_one_rank_only_fails_within_the_timeout(cudagraph_ranks):
    start = time.monotonic()
    with pytest.raises(RanksFailed) as info:
        cudagraph_ranks.run(collective_on_rank_zero_only_body)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert info.value.result.outcome == "timeout"
    assert message.startswith("rank 0 did not finish within 15 s; it was waiting"), message
    assert "rank 1 had finished its body" in message
    assert elapsed < 2 * 15 + 15


def extra_all_reduce_on_rank_one_body(rank):
    model = TensorParallelMLP(rank.rank, rank.world_size).to(rank.device)

    def forward(x):
        y = model(x)
        # a path taken only while capturing, on rank 1 only: the warm-up pairs up, the graphs do not
        if rank.rank == 1 and torch.cuda.is_current_stream_capturing():
            dist.all_reduce(y)
        return y

    graphs = rank.capture(forward, lambda n: torch.randn(n, D_MODEL, device=rank.device), sizes=SIZES)
    graphs.check_replay()  # never reached: replaying would hang until the timeout


@pytest.mark.cudagraph(world_size=2, timeout=60)
def test_an_all_reduce_on_rank_one_only_is_caught_before_replay(cudagraph_ranks):
    start = time.monotonic()
    with pytest.raises(RanksFailed) as info:
        cudagraph_ranks.run(extra_all_reduce_on_rank_one_body)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert info.value.error_type == "CollectivesMisaligned", message
    assert info.value.result.outcome == "failed"  # the comparison, not the watchdog's timeout
    largest = max(SIZES)
    assert f"CUDA graphs for batch size {largest} hold different collectives, found before" in message
    assert "call #2 that the captured function issued differs" in message
    assert f"rank 0 has nothing, rank 1 has all_reduce of {largest * D_MODEL} float32 (sum, group 0)" in message
    assert "rank 1 issued it at tests/gpu/test_ranks_gpu.py:" in message and "in forward" in message
    print(f"\nthe mismatch was reported {elapsed:.1f} s after the run started (timeout 60 s)")


def pool_per_rank_body(rank):
    graphs = rank.capture(
        TensorParallelMLP(rank.rank, rank.world_size).to(rank.device),
        lambda n: torch.randn(n, D_MODEL, device=rank.device),
        sizes=SIZES,
    )
    graphs.check_pool()
    # every rank's graphs live on its own GPU
    return torch.cuda.current_device()


def test_each_rank_uses_its_own_gpu(cudagraph_ranks):
    result = cudagraph_ranks.run(pool_per_rank_body)
    assert result.values == [0, 1]
