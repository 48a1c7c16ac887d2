"""The replay check's floor one after the other and side by side: the loop behind check_replay(side_by_side=...).

The 153 replays and eager references of ``bench_capture.py`` (51 sizes x 3 trials),
nothing compared: one after the other on one stream ("serial"), and with each
reference on a second stream beside its replay ("overlapped", joined back before
a subtraction that stands for the comparison).  The replays alone and the
references alone show what each side costs; the last lines are each side's
device time per call at four sizes (CUDA events over 20 calls).  Medians of 5.

Run on a GPU from the checkout's root: ``python benchmarks/bench_side_by_side.py``.
"""

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capture import MLP, SIZES, TRIALS, make_inputs  # noqa: E402

from pytest_cudagraph import capture_graphs  # noqa: E402


def timed(body) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    body()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def one_stream(gs, model, replay: bool = True, reference: bool = True) -> None:
    """The pairs on one stream: replay then reference ("serial"), or only one of the two."""
    with torch.no_grad():
        for _ in range(TRIALS):
            for s in gs.capture_order:
                x = make_inputs(s)
                if replay:
                    gs.replay(s, x)
                if reference:
                    model(x)


def overlapped(gs, model, side: torch.cuda.Stream) -> None:
    """Each reference on ``side`` beside its replay, joined back before a use of both."""
    main = torch.cuda.current_stream()
    with torch.no_grad():
        for _ in range(TRIALS):
            for s in gs.capture_order:
                x = make_inputs(s)
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    y = model(x)
                x.record_stream(side)
                y.record_stream(main)
                r = gs.replay(s, x)
                main.wait_stream(side)
                torch.sub(r, y)  # a comparison-like use of both


def main() -> None:
    torch.manual_seed(0)
    model = MLP().cuda().eval()
    gs = capture_graphs(model, make_inputs, SIZES)
    gs.check_replay(trials=1)
    side = torch.cuda.Stream()
    sides = [
        ("serial", lambda: one_stream(gs, model)),
        ("overlapped", lambda: overlapped(gs, model, side)),
        ("replays only", lambda: one_stream(gs, model, reference=False)),
        ("eager only", lambda: one_stream(gs, model, replay=False)),
    ]
    for name, body in sides + sides[:2]:  # the first two again: does either drift over the run?
        ts = [timed(body) for _ in range(5)]
        print(f"{name:14s} median {statistics.median(ts):.4f}s  {[round(t, 4) for t in ts]}", flush=True)
    # per-size device time of eager vs replay, a few sizes
    for s in (1, 64, 256, 512):
        x = make_inputs(s)
        for label, f in (("eager", lambda x=x: model(x)), ("replay", lambda s=s, x=x: gs.replay(s, x))):
            with torch.no_grad():
                f()
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(20):
                    f()
                b.record()
                torch.cuda.synchronize()
            print(f"size {s:4d} {label:6s} {a.elapsed_time(b) / 20:.3f} ms", flush=True)
    gs.close()


if __name__ == "__main__":
    main()
