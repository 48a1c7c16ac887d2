"""A tensor-parallel MLP on two GPUs: its all-reduce captured in every size's graph, checked on both ranks.

Megatron's split: the up projection by columns, the down projection by rows; each
rank computes a partial output and ``dist.all_reduce`` adds the partials up.  The
``cudagraph_ranks`` fixture runs the body on two processes (one per GPU, NCCL),
and each rank captures the MLP, all-reduce included, for every batch size, largest
first, in one pool.  Replays must equal eager on every rank, the ranks must agree,
and each rank's pool must stay at its largest graph's high-water mark.

Needs two GPUs, and a run without ``--cudagraph-devices`` (which pins a process to
one GPU; the test then skips saying so)::

    pytest docs/examples/test_tensor_parallel.py --cudagraph
"""

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

SIZES = [1, 2, 4, 8, 16, 32, 48, 64]
D_MODEL, D_FF = 256, 1024


class TensorParallelMLP(torch.nn.Module):
    def __init__(self, rank: int, world_size: int):
        super().__init__()
        # every rank starts from the same seed, so these full weights are the same on each
        up = torch.randn(D_FF, D_MODEL) / D_MODEL**0.5
        down = torch.randn(D_MODEL, D_FF) / D_FF**0.5
        shard = slice(rank * D_FF // world_size, (rank + 1) * D_FF // world_size)
        self.up = torch.nn.Parameter(up[shard].clone())  # column-parallel
        self.down = torch.nn.Parameter(down[:, shard].clone())  # row-parallel

    def forward(self, x):
        partial = F.linear(F.gelu(F.linear(x, self.up)), self.down)
        dist.all_reduce(partial)  # captured into the graph, replayed with it
        return partial


# Module level: the rank processes import the body by name.
def tensor_parallel_body(rank):
    model = TensorParallelMLP(rank.rank, rank.world_size).to(rank.device)

    def make_inputs(n):
        # the same draws on every rank: the activations of tensor parallelism are replicated
        return torch.randn(n, D_MODEL, device=rank.device)

    graphs = rank.capture(model, make_inputs)  # sizes from the marker
    graphs.check_replay(trials=3)
    graphs.check_pool()
    rank.assert_ranks_agree(graphs.replay(64, make_inputs(64)), name="output")


@pytest.mark.cudagraph(world_size=2, capture_sizes=SIZES, timeout=120)
def test_tensor_parallel_mlp_graphs(cudagraph_ranks):
    result = cudagraph_ranks.run(tensor_parallel_body)
    for rank in result.per_rank:
        assert rank.graphs["captured"] == len(SIZES)
        assert rank.graphs["pool_check_passed"]
