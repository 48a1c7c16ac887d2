"""Tensor-parallel graphs broken on purpose: one rank does what the other does not.

Each case fails within its timeout, naming the rank that failed and where the
other was; neither hangs.  Needs two GPUs and ``--cudagraph`` (without
``--cudagraph-devices``).
"""

import pytest
import torch
import torch.distributed as dist


def item_on_rank_one(rank):
    def reduce_then_scale(x):
        y = x * 2
        dist.all_reduce(y)
        if rank.rank == 1:
            y = y * y.sum().item()  # a host sync inside the capture, on rank 1 only
        return y

    rank.capture(reduce_then_scale, lambda n: torch.randn(n, 64, device=rank.device), sizes=[8, 4])


@pytest.mark.cudagraph(world_size=2, timeout=30)
def test_item_on_one_rank(cudagraph_ranks):
    """Fails: "rank 1 of 2 failed: CaptureError: ... the op .item() at test_ranks_broken.py:...", rank 0 stopped."""
    cudagraph_ranks.run(item_on_rank_one)


def all_reduce_on_rank_zero(rank):
    t = torch.ones(4, device=rank.device)
    if rank.rank == 0:
        dist.all_reduce(t)  # rank 1 never issues it
    torch.cuda.synchronize()


@pytest.mark.cudagraph(world_size=2, timeout=15)
def test_collective_on_one_rank(cudagraph_ranks):
    """Fails: "rank 0 did not finish within 15 s; it was waiting in synchronize ...", not a hang."""
    cudagraph_ranks.run(all_reduce_on_rank_zero)
