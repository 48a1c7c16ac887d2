"""A captured graph's collectives read on one H200: one NCCL rank, the calls recorded and the kernels read back.

Needs one visible GPU and ``--cudagraph``::

    pytest tests/gpu/test_collectives_gpu.py --cudagraph -p no:cacheprovider

A one-rank NCCL communicator launches no NCCL kernel: an in-place sum leaves no
node in the graph, an average a ``oneRankReduce`` kernel (NCCL 2.28).  So the
recorded calls hold both all-reduces with their counts, and the graph's read-back
holds the one kernel the average left, with its reduction and dtype.  The
bodies are module-level functions: the rank process imports them by name.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

pytestmark = pytest.mark.cudagraph(world_size=1, timeout=120)

WIDTH = 64
SIZES = [8, 4, 2]


def _forward(x):
    y = x * 2
    dist.all_reduce(y, op=dist.ReduceOp.AVG)  # the average
    dist.all_reduce(y)  # the sum
    return y


def read_back_body(rank):
    def make_inputs(n):
        return torch.randn(n, WIDTH, device=rank.device)

    # one capture of each first: the first capture of a process pays one-time costs (NCCL's
    # kernels, cuBLAS, imports) that would be counted against whichever comes first
    seconds: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(2):
        start = time.perf_counter()
        plain = rank.capture(_forward, make_inputs, sizes=SIZES, align_collectives=False)
        seconds["without"].append(time.perf_counter() - start)
        plain.check_replay(trials=1)
        recorded_without = [plain.graph(size).collectives for size in SIZES]
        plain.close()
        start = time.perf_counter()
        graphs = rank.capture(_forward, make_inputs, sizes=SIZES)
        seconds["with"].append(time.perf_counter() - start)
        check = graphs.check_replay(trials=2)
    per_size = {}
    for size in SIZES:
        recorded = graphs.graph(size).collectives
        per_size[size] = {
            "calls": [c.to_json() for c in recorded.calls],
            "kernels": None if recorded.kernels is None else [c.to_json() for c in recorded.kernels],
        }
    return {
        "per_size": per_size,
        "recorded_without_alignment": recorded_without,
        "max_abs_err": check.max_abs_err,
        "alignment": rank.alignment_result(),
        "capture_s": seconds,
    }


def test_a_captured_all_reduce_is_read_back_from_the_graph(cudagraph_ranks):
    result = cudagraph_ranks.run(read_back_body)
    value = result.values[0]
    for size in SIZES:
        calls = value["per_size"][size]["calls"]
        assert [(c["kind"], c["dtype"], c["count"], c.get("reduce")) for c in calls] == [
            ("all_reduce", "float32", size * WIDTH, "avg"),
            ("all_reduce", "float32", size * WIDTH, "sum"),
        ]
        assert all(c["where"].startswith("tests/gpu/test_collectives_gpu.py:") for c in calls)
        assert calls[0]["where"] != calls[1]["where"]
        # the average's kernel, read back from the captured graph; the in-place sum left no node
        kernels = value["per_size"][size]["kernels"]
        assert kernels == [{"kind": "one_rank_reduce", "reduce": "premul_sum", "dtype": "float32"}], kernels
    assert value["recorded_without_alignment"] == [None] * len(SIZES)
    assert value["max_abs_err"] == 0.0
    assert value["alignment"]["exchanges"] == 2 and value["alignment"]["sizes"] == 2 * len(SIZES)
    assert value["alignment"]["collectives"] == 2 * 2 * len(SIZES)
    assert result.per_rank[0].collective_alignment == value["alignment"]
    without, with_ = value["capture_s"]["without"], value["capture_s"]["with"]
    print(
        f"\ncapture of {len(SIZES)} sizes, first and second time: without alignment {without[0]:.4f} s, "
        f"{without[1]:.4f} s; with it {with_[0]:.4f} s, {with_[1]:.4f} s; the two exchanges "
        f"{value['alignment']['seconds']:.6f} s"
    )
