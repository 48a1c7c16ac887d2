"""Cost of measuring compile time: compiles with and without ``watch_compile_time``, in one process.

Each round compiles ``--functions`` fresh functions with ``backend="eager"`` (Dynamo
only: the part of a compile the watch could slow down is torch's own bookkeeping,
which it reads, and the watch's start and stop), once inside a
``watch_compile_time()`` block and once outside, alternating which goes first so
that machine noise hits both alike.  Prints the median seconds of each and their
ratio (target: at most 1.05), and the figures the watch measured.

    python benchmarks/bench_compile_time.py [--rounds 7] [--functions 20]
"""

from __future__ import annotations

import argparse
import statistics
import time


def fresh_functions(count: int, tag: str) -> list:
    """``count`` functions with code objects Dynamo has never seen (a new compile each)."""
    functions = []
    for index in range(count):
        namespace: dict = {}
        exec(f"def f_{tag}_{index}(x):\n    return (x * {index + 2}).sin() + {index}\n", namespace)
        functions.append(namespace[f"f_{tag}_{index}"])
    return functions


def compile_all(functions: list) -> float:
    import torch

    x = torch.ones(8)
    start = time.perf_counter()
    for fn in functions:
        torch.compile(fn, backend="eager")(x)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--functions", type=int, default=20)
    args = parser.parse_args()

    import torch

    from pytest_cudagraph.compile.compile_time import watch_compile_time

    compile_all(fresh_functions(3, "warmup"))  # Dynamo's own first-use costs
    plain, watched, last = [], [], None
    for round_ in range(args.rounds):
        order = ("plain", "watched") if round_ % 2 == 0 else ("watched", "plain")
        for kind in order:
            functions = fresh_functions(args.functions, f"{kind}{round_}")
            if kind == "plain":
                plain.append(compile_all(functions))
            else:
                with watch_compile_time(report=False) as watch:
                    watched.append(compile_all(functions))
                last = watch.result
        torch._dynamo.reset()
    plain_median, watched_median = statistics.median(plain), statistics.median(watched)
    print(f"torch {torch.__version__}, {args.functions} compiles per block, {args.rounds} rounds")
    print(f"without the watch: median {plain_median:.3f} s (min {min(plain):.3f}, max {max(plain):.3f})")
    print(f"with the watch:    median {watched_median:.3f} s (min {min(watched):.3f}, max {max(watched):.3f})")
    print(f"ratio: {watched_median / plain_median:.3f} (target: at most 1.05)")
    if last is not None:
        print(f"the watch saw {len(last.frames)} frames, {last.total_s:.3f} s of compile time: {last.phases}")


if __name__ == "__main__":
    main()
