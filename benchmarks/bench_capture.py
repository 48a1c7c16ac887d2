"""How much the plugin costs over a hand-written capture-replay-compare loop.

Both sides validate vLLM's 51 default capture sizes
(``[1, 2, 4] + range(8, 256, 8) + range(256, 513, 16)``) of an 8-block MLP
(d=1024, fp32): capture every size largest-first in one shared pool, then replay
each size on fresh random inputs and compare with eager (3 trials).  They
alternate in the same process; the figure is the ratio of the medians of several
runs (plugin / hand-written; target <= 0.80).  The hand-written loop warms every
size up 3 times and reads each comparison back at once (``torch.allclose``); the
plugin warms the first size up 3 times and each later size once, and compares on
the device with one read-back per check, and runs each eager reference on a second
stream beside its replay (``check_replay(side_by_side=True)``, the default, for a
model that writes no state).  Two more sides, the plugin warming every size up 3
times (``size_warmup_iters=3``) and the plugin with the reference one after the
replay (``side_by_side=False``), show what each change gives.
The plugin's optional per-size high-water-mark measurement (``GraphSet.graph_bytes``)
is timed on its own, and so is the capture-cost meter's own reading of the device
(one ``cudaMemGetInfo`` and one ``memory_reserved`` per size).

Where the plugin's time goes: one more plugin run under cProfile, its cumulative
time split into capture (warm-ups, captures, pool snapshots, the cost meter's
device readings) and the replay check (fresh inputs, replays with their pointer
checks and output copies, eager references, comparisons queued and read back).
cProfile slows Python-heavy parts more than device-bound ones, so the shares
are of the profiled run, beside the unprofiled median.

Run on a GPU: ``python benchmarks/bench_capture.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import torch

from pytest_cudagraph import capture_graphs
from pytest_cudagraph.render.plain_text import format_bytes

SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
D = 1024
TRIALS = 3


class MLP(torch.nn.Module):
    def __init__(self, d: int = D, blocks: int = 8):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
            for _ in range(blocks)
        )

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x


def make_inputs(size: int) -> torch.Tensor:
    return torch.randn(size, D, device="cuda")


def hand_written(model: torch.nn.Module) -> float:
    """The loop a careful engineer writes with torch.cuda.graph alone."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    pool = torch.cuda.graph_pool_handle()
    stream = torch.cuda.Stream()
    graphs, static_in, static_out = {}, {}, {}
    with torch.no_grad():
        for size in sorted(SIZES, reverse=True):
            x = make_inputs(size)
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=stream):
                out = model(x)
            graphs[size], static_in[size], static_out[size] = g, x, out
        for _ in range(TRIALS):
            for size in sorted(SIZES, reverse=True):
                x = make_inputs(size)
                static_in[size].copy_(x)
                graphs[size].replay()
                replayed = static_out[size].clone()
                expected = model(x)
                assert torch.allclose(replayed, expected, rtol=1.3e-6, atol=1e-5), size
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    for g in graphs.values():
        g.reset()
    del graphs, static_in, static_out
    torch.cuda.empty_cache()
    return elapsed


def with_plugin(
    model: torch.nn.Module, size_warmup_iters: int = 1, side_by_side: bool = True
) -> tuple[float, float, dict]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    gs = capture_graphs(model, make_inputs, SIZES, size_warmup_iters=size_warmup_iters)
    captured = time.perf_counter()
    check = gs.check_replay(trials=TRIALS, side_by_side=side_by_side)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    figures = {
        "serial_reason": check.serial_reason,
        "pool_bytes": gs.pool_bytes,
        "cublas_workspace_bytes": gs.cublas_workspace_bytes,
        "cost": gs.cost,
    }
    # the check ends with its one read-back, so the device has caught up with the host by then
    figures["capture_phase_s"], figures["check_phase_s"] = captured - start, elapsed - (captured - start)
    t0 = time.perf_counter()
    figures["largest_graph_bytes"] = gs.largest_graph_bytes  # the 512 graph alone
    figures["largest_s"] = time.perf_counter() - t0
    gs.close()
    return elapsed, figures["largest_s"], figures


def replays_and_references_alone(model: torch.nn.Module) -> tuple[float, float]:
    """The check's floor: the same replays and eager references with nothing compared, and the device's time of them.

    Every loop that makes the same checks runs these kernels; what the plugin's check
    takes beyond this is its own cost (comparisons, pointer checks, read-back).
    """
    with capture_graphs(model, make_inputs, SIZES) as gs:
        torch.cuda.synchronize()
        start = time.perf_counter()
        began, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began.record()
        with torch.no_grad():
            for _ in range(TRIALS):
                for size in gs.capture_order:
                    x = make_inputs(size)
                    gs.replay(size, x)
                    model(x)
        ended.record()
        torch.cuda.synchronize()
        return time.perf_counter() - start, began.elapsed_time(ended) / 1e3


def measure_all_sizes(model: torch.nn.Module) -> tuple[float, dict[int, int]]:
    with capture_graphs(model, make_inputs, SIZES) as gs:
        start = time.perf_counter()
        per_size = gs.graph_bytes
        return time.perf_counter() - start, per_size


def meter_reading_s(model: torch.nn.Module) -> float:
    """What the capture-cost meter's readings of one capture run cost: one per size, and two more."""
    from pytest_cudagraph._compat import device_memory_reading

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(len(SIZES) + 2):
        device_memory_reading(torch.cuda.current_device())
    return time.perf_counter() - start


# (category, module file suffix, function name): functions whose cumulative time cProfile reports
# (Python 3.12's cProfile leaves out some frames that handle exceptions, so the two phases' totals
# are timed around the calls instead, and the eager references are the rest of the check)
CAPTURE_PARTS = (
    ("warm-ups", "graphs/captured.py", "_warm_up"),
    ("captures", "graphs/guarded.py", "guarded_capture"),
    ("pool snapshots", "graphs/memory.py", "pool_usage"),
    ("device readings (cost meter)", "_compat/cuda.py", "device_memory_reading"),
)
CHECK_PARTS = (
    ("fresh inputs", "graphs/batch_inputs.py", "batch_inputs"),
    ("replays (pointer checks, output copies)", "graphs/graph_set.py", "replay"),
    ("comparisons queued", "graphs/numerics.py", "add"),
    ("comparisons read back", "graphs/numerics.py", "results"),
)


def plugin_breakdown(model: torch.nn.Module) -> tuple[float, list[tuple[str, float]]]:
    """One plugin run under cProfile: its total, and the seconds of each phase and part."""
    profile = cProfile.Profile()
    profile.enable()
    elapsed, _, figures = with_plugin(model)
    profile.disable()
    stats = pstats.Stats(profile).stats  # pstats keeps its table there

    def cumulative(suffix: str, name: str) -> float:
        return sum(
            row[3]
            for (filename, _, function), row in stats.items()
            if function == name and filename.replace("\\", "/").endswith(suffix)
        )

    rows: list[tuple[str, float]] = [(f"capture, {len(SIZES)} sizes", figures["capture_phase_s"])]
    rows += [(f"  {label}", cumulative(suffix, name)) for label, suffix, name in CAPTURE_PARTS]
    rows.append((f"replay check, {len(SIZES)} sizes x {TRIALS} trials", figures["check_phase_s"]))
    parts = [(f"  {label}", cumulative(suffix, name)) for label, suffix, name in CHECK_PARTS]
    rows += parts
    rows.append(("  eager references (the rest of the check)", figures["check_phase_s"] - sum(s for _, s in parts)))
    return elapsed, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MLP().cuda().eval()
    hand_written(model)  # warm both paths once: cuBLAS heuristics, lazy module loads
    with_plugin(model)
    hand, plugin, plugin_full_warmup, plugin_one_after = [], [], [], []
    figures: dict = {}
    for _ in range(args.runs):
        hand.append(hand_written(model))
        elapsed, _, figures = with_plugin(model)
        plugin.append(elapsed)
        plugin_full_warmup.append(with_plugin(model, size_warmup_iters=3)[0])
        plugin_one_after.append(with_plugin(model, side_by_side=False)[0])
    floors = [replays_and_references_alone(model) for _ in range(args.runs)]
    all_sizes_s, per_size = measure_all_sizes(model)
    reading_s = meter_reading_s(model)
    ratio = statistics.median(plugin) / statistics.median(hand)
    cost = figures["cost"]
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(
        f"hand-written capture+check: median {statistics.median(hand):.3f}s over {args.runs} runs {[round(t, 3) for t in hand]}"
    )
    print(
        f"plugin capture+check:       median {statistics.median(plugin):.3f}s over {args.runs} runs {[round(t, 3) for t in plugin]}"
    )
    print(
        f"pool {format_bytes(figures['pool_bytes'])}, cuBLAS workspace {format_bytes(figures['cublas_workspace_bytes'])}, "
        f"512 alone {format_bytes(figures['largest_graph_bytes'])} (measured in {figures['largest_s']:.3f}s)"
    )
    print(
        f"per-size high-water marks of all {len(SIZES)} sizes: {all_sizes_s:.3f}s "
        f"(1: {format_bytes(per_size[1])}, 256: {format_bytes(per_size[256])}, 512: {format_bytes(per_size[512])})"
    )
    print(
        f"plugin, every size warmed up 3 times: median {statistics.median(plugin_full_warmup):.3f}s "
        f"(ratio {statistics.median(plugin_full_warmup) / statistics.median(hand):.3f})"
    )
    print(
        f"plugin, the reference one after the replay (side_by_side=False): median {statistics.median(plugin_one_after):.3f}s "
        f"(ratio {statistics.median(plugin_one_after) / statistics.median(hand):.3f}); the default run's reference ran "
        + ("beside the replay" if figures["serial_reason"] is None else f"one after it: {figures['serial_reason']}")
    )
    slowest = max(cost.sizes, key=lambda row: row.warmup_s + row.capture_s)
    print(
        f"capture cost of the last plugin run: warm-up {cost.warmup_s:.3f}s, capture {cost.graph_capture_s:.3f}s over "
        f"{len(cost.sizes)} sizes (median per size: warm-up {statistics.median(r.warmup_s for r in cost.sizes) * 1e3:.2f}ms, "
        f"capture {statistics.median(r.capture_s for r in cost.sizes) * 1e3:.2f}ms; slowest: size {slowest.size}, "
        f"{(slowest.warmup_s + slowest.capture_s) * 1e3:.1f}ms); behind the allocator {format_bytes(cost.behind_allocator_bytes)}, "
        f"in the allocator outside the pool {format_bytes(cost.allocator_outside_pool_bytes)}"
    )
    print(
        f"capture-cost meter readings: {reading_s * 1e3:.3f}ms per capture run "
        f"({reading_s / statistics.median(plugin):.2%} of the plugin's median)"
    )
    print(
        f"the last unprofiled plugin run: capture {figures['capture_phase_s']:.3f}s, "
        f"replay check {figures['check_phase_s']:.3f}s"
    )
    floor_s, floor_device_s = statistics.median(f[0] for f in floors), statistics.median(f[1] for f in floors)
    print(
        f"the floor of a check one after the other, the same replays and eager references with nothing compared: "
        f"median {floor_s:.3f}s (device busy {floor_device_s:.3f}s); the plugin's check, side by side, took "
        f"{figures['check_phase_s']:.3f}s"
    )
    profiled_s, rows = plugin_breakdown(model)
    print(f"where the plugin's time goes (one run under cProfile, {profiled_s:.3f}s in all):")
    for label, seconds in rows:
        print(f"  {label:<44} {seconds * 1e3:8.1f} ms  {seconds / profiled_s:6.1%}")
    print(f"ratio plugin/hand-written (medians): {ratio:.3f} (target <= 0.70)")


if __name__ == "__main__":
    main()
