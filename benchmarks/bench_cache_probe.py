"""Cost of the cold/warm cache probe over a single cold compile, on CPU Inductor.

The function is ``relu(x @ w + 1)`` (x 64x128, w 128x64, fp32) under
``torch.compile`` (default backend, Inductor).  Two kinds of fresh interpreter
alternate, ``--runs`` of each; every one imports torch and this package before
any timer starts and then measures twice:

- single: compile and call once in an empty cache directory
  (TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR fresh, Dynamo's and Inductor's
  in-memory caches dropped with the probe's own ``clear_in_memory_compile_caches``);
- probe: ``cache_probe(directory=fresh).cold_warm(step, x, w)``, the default
  ``mode="inprocess"``: the same cold compile, then a warm pass that only the disk
  cache can answer, plus the probe's counter and directory readings.

The first measurement of an interpreter also pays Inductor's one-time start
(lazy imports of its code generators, C++ tool-chain checks; ``torch._dynamo``
and ``torch._inductor`` themselves are imported before the timers): what the
first compiling test of a run pays.  The second, in a new empty directory, is what every later test pays.  Both
ratios (probe / single, medians) are printed, with the cache counters that show
the single compile missed and the probe's warm pass hit.

    python benchmarks/bench_cache_probe.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

CHECKOUT = Path(__file__).resolve().parent.parent
SHAPES = {"x": (64, 128), "w": (128, 64)}


# ----------------------------------------------------------------------------
# the child: one fresh interpreter, two measurements of one kind
# ----------------------------------------------------------------------------


def matmul_relu(x: Any, w: Any) -> Any:
    import torch

    return torch.relu(x @ w + 1.0)


def compile_and_call(x: Any, w: Any) -> Any:
    """What a test body does: compile (a new wrapper each call, as a fresh test would) and call."""
    import torch

    return torch.compile(matmul_relu)(x, w)


def measure_single(directory: Path, x: Any, w: Any) -> dict[str, Any]:
    from pytest_cudagraph import _compat as compat
    from pytest_cudagraph.caches.counters import counter_snapshot, delta_between
    from pytest_cudagraph.caches.probe import cache_environment

    directory.mkdir(mode=0o700)  # as the probe makes its own
    with mock.patch.dict(os.environ, cache_environment(directory)):
        compat.clear_in_memory_compile_caches()
        before = counter_snapshot()
        start = time.perf_counter()
        compile_and_call(x, w)
        elapsed = time.perf_counter() - start
        delta = delta_between(before, counter_snapshot())
    return {"s": elapsed, "fxgraph": dict(delta.fxgraph)}


def measure_probe(directory: Path, x: Any, w: Any) -> dict[str, Any]:
    from pytest_cudagraph.caches.probe import cache_probe

    start = time.perf_counter()
    with cache_probe(directory=directory) as probe:
        cold, warm = result = probe.cold_warm(compile_and_call, x, w)
    elapsed = time.perf_counter() - start
    return {
        "s": elapsed,
        "cold_s": cold.duration_s,
        "warm_s": warm.duration_s,
        "cold_fxgraph": dict(cold.stats.fxgraph),
        "warm_fxgraph": dict(warm.stats.fxgraph),
        "problems": result.problems(),
    }


def child(kind: str, workdir: Path) -> None:
    import torch

    from pytest_cudagraph import _compat as compat

    # Both kinds import Dynamo and Inductor before any timer (clearing their caches
    # imports them): the single measurement clears before its timer, the probe inside.
    compat.clear_in_memory_compile_caches()
    torch.manual_seed(0)
    x, w = torch.randn(*SHAPES["x"]), torch.randn(*SHAPES["w"])
    measure = measure_single if kind == "single" else measure_probe
    first = measure(workdir / "first", x, w)
    later = measure(workdir / "later", x, w)
    print(json.dumps({"torch": torch.__version__, "first": first, "later": later}))


# ----------------------------------------------------------------------------
# the parent
# ----------------------------------------------------------------------------


def checkout_env() -> dict[str, str]:
    """The environment with this checkout first on the path: measure its probe, not another installed copy."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    return env


def run_child(kind: str, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(mode=0o700)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(workdir)]
    proc = subprocess.run(cmd, env=checkout_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    singles, probes = [], []
    with tempfile.TemporaryDirectory(prefix="bench-cache-probe-") as tmp:
        for run in range(args.runs):
            singles.append(run_child("single", Path(tmp) / f"single-{run}"))
            probes.append(run_child("probe", Path(tmp) / f"probe-{run}"))
    print(
        f"torch {singles[0]['torch']}, CPU Inductor, relu(x @ w + 1) x{SHAPES['x']} w{SHAPES['w']}; "
        f"{args.runs} fresh interpreters of each kind"
    )
    for when, title in (("first", "first compile of the interpreter"), ("later", "a later compile (steady state)")):
        single = statistics.median(r[when]["s"] for r in singles)
        probe = statistics.median(r[when]["s"] for r in probes)
        cold = statistics.median(r[when]["cold_s"] for r in probes)
        warm = statistics.median(r[when]["warm_s"] for r in probes)
        readings = statistics.median(r[when]["s"] - r[when]["cold_s"] - r[when]["warm_s"] for r in probes)
        print(f"{title}:")
        print(f"  (a) single cold compile+call  median {single:7.3f}s {[round(r[when]['s'], 3) for r in singles]}")
        print(f"  (b) probe.cold_warm           median {probe:7.3f}s {[round(r[when]['s'], 3) for r in probes]}")
        print(
            f"      cold pass {cold:.3f}s, warm pass {warm:.3f}s, probe set-up and readings {readings:.3f}s (medians)"
        )
        print(f"  ratio (b)/(a) {probe / single:.3f}")
    last_single, last_probe = singles[-1]["later"], probes[-1]["later"]
    print(
        f"counters of the last run: single fxgraph {last_single['fxgraph']}; probe cold fxgraph "
        f"{last_probe['cold_fxgraph']}, warm fxgraph {last_probe['warm_fxgraph']}"
    )
    problems = [p for r in probes for when in ("first", "later") for p in r[when]["problems"]]
    print(f"warm passes that were not a pure cache hit: {len(problems)}" + (f" ({problems[0]})" if problems else ""))


if __name__ == "__main__":
    main()
