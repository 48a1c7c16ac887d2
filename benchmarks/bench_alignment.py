"""Cost of aligning the ranks' collectives before the first replay, on two gloo ranks on the CPU.

What ``rank.capture()`` adds per capture call when ``align_collectives`` is on (the
default), measured on the parts that do not need a GPU:

(a) recording: a tensor-parallel layer's eager forward (two matmuls, one
    all-reduce) under ``record_collectives()`` against the same forward without it,
    per call, on a one-rank group of each rank's own (so the ranks never wait on
    each other while timing);
(b) the exchange: ``rank.align_collectives`` of vLLM's 51 capture sizes, each with
    ``--collectives`` recorded collectives, through the launcher's store, against a
    plain barrier over the same store (the floor of any exchange between ranks).

Both are medians of ``--runs`` rounds, taken in one run of two rank processes.  The
capture itself, and the graph read-back, need a GPU: ``tests/gpu/test_collectives_gpu.py``
prints their cost on one (docs/tensor_parallel.md quotes it).

    python benchmarks/bench_alignment.py [--runs 15] [--collectives 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# vLLM's 51 default capture sizes, as bench_capture.py validates them
VLLM_SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
WIDTH = 256


def bench_body(rank, runs: int, collectives: int):
    import torch
    import torch.distributed as dist

    from pytest_cudagraph.graphs.collectives import Collective, record_collectives
    from pytest_cudagraph.ranks.alignment import SizeCollectives

    own = [dist.new_group([r]) for r in range(rank.world_size)][rank.rank]
    up = torch.randn(WIDTH, 4 * WIDTH)
    down = torch.randn(4 * WIDTH, WIDTH)
    x = torch.randn(8, WIDTH)

    def layer():
        y = (x @ up).relu() @ down
        dist.all_reduce(y, group=own)
        return y

    def timed(fn, repeat=50):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - start) / repeat

    def recorded():
        with record_collectives():
            layer()

    layer(), recorded()  # first calls apart: imports, the mode's class
    plain_s = [timed(layer) for _ in range(runs)]
    recorded_s = [timed(recorded) for _ in range(runs)]

    call = Collective("all_reduce", "bfloat16", 4096, "0", "sum", "c10d::allreduce_", "tp.py:40 in forward")
    sizes = [SizeCollectives(size, (call,) * collectives) for size in VLLM_SIZES]
    store = rank._store
    barrier_s, align_s = [], []
    for round_ in range(runs):
        start = time.perf_counter()
        store.set(f"bench/barrier/{round_}/{rank.rank}", "1")
        store.wait([f"bench/barrier/{round_}/{r}" for r in range(rank.world_size)])
        barrier_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        rank.align_collectives(sizes)
        align_s.append(time.perf_counter() - start)
    med = statistics.median
    return {
        "plain_s": med(plain_s),
        "recorded_s": med(recorded_s),
        "barrier_s": med(barrier_s),
        "align_s": med(align_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--collectives", type=int, default=4, help="collectives per size (a 2-layer TP block: 4)")
    args = parser.parse_args()
    from pytest_cudagraph.ranks import run_ranks

    result = run_ranks(bench_body, args.runs, args.collectives, world_size=2, backend="gloo", timeout=300)
    print(f"sizes: {len(VLLM_SIZES)}, collectives per size: {args.collectives}, runs: {args.runs}, 2 gloo ranks")
    for rank, value in enumerate(result.values):
        print(
            f"rank {rank}: (a) forward {value['plain_s'] * 1e6:.1f} us, recorded {value['recorded_s'] * 1e6:.1f} us: "
            f"ratio {value['recorded_s'] / value['plain_s']:.3f}; (b) barrier {value['barrier_s'] * 1e3:.3f} ms, "
            f"alignment {value['align_s'] * 1e3:.3f} ms: ratio {value['align_s'] / value['barrier_s']:.2f}"
        )


if __name__ == "__main__":
    main()
