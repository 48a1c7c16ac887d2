"""What observing costs an engine's capture: vLLM's 51 sizes of the benchmark MLP, with and without ``observe_graphs()``.

The engine is ``bench_capture.py``'s hand-written loop, capture only: vLLM's 51
default capture sizes (``[1, 2, 4] + range(8, 256, 8) + range(256, 513, 16)``) of
the 8-block MLP (d=1024, fp32), every size largest first into one shared pool on
one stream, each warmed up 3 times on that stream before its capture, inputs and
outputs in static buffers allocated before the first capture.  One side captures
plainly, the other inside ``observe_graphs(expect_sizes=SIZES)`` (what
``@pytest.mark.cudagraph(observe=True)`` does around a test body), the verdict
included.  The sides alternate in one process, each run releasing its graphs
before the next; the figure is the ratio of their medians (observed / plain;
target <= 1.02).  The observed side's verdict must pass: the loop is a correct
engine.

Run on a GPU: ``python benchmarks/bench_observe.py [--runs 7]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import torch
from bench_capture import MLP, SIZES, D  # the same 51 sizes of the same MLP as the capture benchmark

from pytest_cudagraph import _compat
from pytest_cudagraph.graphs.observe import observe_graphs

WARMUPS = 3
TARGET = 1.02


class Engine:
    """An engine's capture: one pool, one stream, static buffers, largest size first."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.stream = torch.cuda.Stream()
        self.static_in = torch.randn(max(SIZES), D, device="cuda")
        self.static_out = torch.zeros(max(SIZES), D, device="cuda")
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}

    def capture(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        self.stream.wait_stream(torch.cuda.current_stream())
        for size in sorted(SIZES, reverse=True):
            self.graphs[size] = self.capture_one(size, pool)
        torch.cuda.current_stream().wait_stream(self.stream)

    def capture_one(self, size: int, pool) -> torch.cuda.CUDAGraph:
        x = self.static_in[:size]
        with torch.cuda.stream(self.stream):
            for _ in range(WARMUPS):
                self.model(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=self.stream):
            self.static_out[:size].copy_(self.model(x))
        return graph


def capture_seconds(model: torch.nn.Module, observed: bool) -> tuple[float, object]:
    """One run: the engine's whole capture, timed to the device's end; the observation's verdict (None if plain)."""
    engine = Engine(model)
    torch.cuda.synchronize()
    start = time.perf_counter()
    verdict = None
    if observed:
        with observe_graphs(expect_sizes=SIZES) as observation:
            engine.capture()
            torch.cuda.synchronize()
        verdict = observation.result()
    else:
        engine.capture()
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    del engine
    gc.collect()
    torch.cuda.empty_cache()
    return seconds, verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_observe.py needs a CUDA device")
    torch.manual_seed(0)
    model = MLP().cuda().eval()
    plain, observed = [], []
    verdict = None
    with torch.inference_mode():
        capture_seconds(model, observed=False)  # the process's first use: kernels loaded, cuBLAS set up
        capture_seconds(model, observed=True)
        for _ in range(args.runs):
            plain.append(capture_seconds(model, observed=False)[0])
            seconds, verdict = capture_seconds(model, observed=True)
            observed.append(seconds)
    p, o = statistics.median(plain), statistics.median(observed)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, hooked through {_compat.graph_observer_kind()}")
    print(
        f"plain capture of {len(SIZES)} sizes:    median {p:.4f}s over {len(plain)} runs {[round(s, 4) for s in plain]}"
    )
    print(f"observed capture of {len(SIZES)} sizes: median {o:.4f}s over {len(observed)} runs "
          f"{[round(s, 4) for s in observed]}")  # fmt: skip
    print(f"observing costs {(o - p) / len(SIZES) * 1e6:.0f} us per capture")
    if verdict is not None:
        json = verdict.to_json()
        pool = "pool bytes not read" if json["pool_bytes"] is None else f"{json['pool_bytes'] / 2**20:.1f} MiB"
        print(f"the observation: {json['captured']} graphs, {json['pools']} pool, {pool}, causes {json['causes']}")
    ratio = o / p
    print(f"ratio observed/plain (medians): {ratio:.3f} (target <= {TARGET})")
    if verdict is None or not verdict.passed:
        raise SystemExit("the observed engine's verdict failed: " + (verdict.message() if verdict else "none"))


if __name__ == "__main__":
    main()
