"""Does ``compare --fail-on graph-memory`` vouch for one build against itself, whatever the test order?

Needs a CUDA GPU.  Writes four GPU tests (the 8-block MLP at vLLM's 51 sizes, a
4-block MLP of width 512, a GELU layer, a LayerNorm MLP) into a temporary
directory, runs them ``--pairs`` times two in shuffled orders (each run a fresh
pytest process with ``--cudagraph-report``), and compares each pair of runs with
``pytest-cudagraph compare --fail-on graph-memory``.  The first GPU test of a
process pays the process's first use (kernels loaded, library handles: about
156 MiB on an H200), so the order moves that figure between tests; a pair of one
build must exit 0.  Then it runs the same tests with the first MLP 1.5 times as
wide and compares that run with the first: a real growth must exit 1.

Prints one line per pair and one for the growth, then the verdict; exits 1 when a
pair of one build regressed or the growth went unseen.

    python benchmarks/bench_graph_memory_order.py [--pairs 5] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = """
import os

import pytest
import torch

pytestmark = pytest.mark.cudagraph
WIDTH = int(os.environ.get("GRAPH_MEMORY_WIDTH", "1024"))
SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))


def mlp(d, blocks):
    layers = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)]
    return torch.nn.Sequential(*layers).cuda().eval()


def test_mlp_8_blocks(cudagraphs):
    torch.manual_seed(0)
    gs = cudagraphs.capture(mlp(WIDTH, 8), lambda n: torch.randn(n, WIDTH, device="cuda"), SIZES)
    gs.check_replay(trials=1)
    gs.check_pool()


def test_mlp_4_blocks_512(cudagraphs):
    torch.manual_seed(0)
    gs = cudagraphs.capture(mlp(512, 4), lambda n: torch.randn(n, 512, device="cuda"), SIZES[:34])
    gs.check_replay(trials=1)


def test_gelu_layer(cudagraphs):
    w = torch.randn(256, 256, device="cuda")
    gs = cudagraphs.capture(
        lambda x: torch.nn.functional.gelu(x @ w), lambda n: torch.randn(n, 256, device="cuda"), [1, 8, 64]
    )
    gs.check_replay(trials=1)


def test_layernorm_mlp(cudagraphs):
    model = torch.nn.Sequential(
        torch.nn.LayerNorm(768), torch.nn.Linear(768, 3072), torch.nn.SiLU(), torch.nn.Linear(3072, 768)
    ).cuda().eval()
    gs = cudagraphs.capture(model, lambda n: torch.randn(n, 768, device="cuda"), [1, 2, 4, 8, 16, 32])
    gs.check_replay(trials=1)
"""
NAMES = ("test_mlp_8_blocks", "test_mlp_4_blocks_512", "test_gelu_layer", "test_layernorm_mlp")


def run_tests(directory: Path, order: list[str], report: Path, width: int = 1024, may_fail: bool = False) -> None:
    env = {**os.environ, "GRAPH_MEMORY_WIDTH": str(width)}
    ids = [f"test_graph_memory.py::{name}" for name in order]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *ids]
    command += ["--cudagraph", "--cudagraph-require-gpu", f"--cudagraph-report={report}"]
    done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0 and may_fail and report.exists():
        failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
        print(f"(the wider run failed a test, its report kept: {'; '.join(failed)})")
    elif done.returncode != 0:
        raise SystemExit(f"the run of {' '.join(order)} failed (exit {done.returncode}):\n{done.stdout[-3000:]}")


def compare(base: Path, new: Path) -> tuple[int, str]:
    command = [sys.executable, "-m", "pytest_cudagraph", "compare", str(base), str(new), "--fail-on", "graph-memory"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in done.stdout.splitlines() if "graph-memory:" in line or "regression" in line.lower()]
    return done.returncode, " | ".join(lines[-3:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    shuffle = random.Random(args.seed)
    ok = True
    with tempfile.TemporaryDirectory(prefix="graph-memory-order-") as tmp:
        directory = Path(tmp)
        (directory / "test_graph_memory.py").write_text(TESTS)
        reports = []
        for index in range(2 * args.pairs):
            order = list(NAMES)
            shuffle.shuffle(order)
            report = directory / f"run-{index + 1}.json"
            run_tests(directory, order, report)
            reports.append((report, order))
        for pair in range(args.pairs):
            (base, base_order), (new, new_order) = reports[2 * pair], reports[2 * pair + 1]
            code, text = compare(base, new)
            first = f"{base_order[0]} first vs {new_order[0]} first"
            print(f"pair {pair + 1} ({first}): compare exit {code}: {text}")
            ok = ok and code == 0
        grown = directory / "grown.json"
        run_tests(directory, list(NAMES), grown, width=1536, may_fail=True)
        code, text = compare(reports[0][0], grown)
        print(f"the 8-block MLP 1.5 times as wide: compare exit {code}: {text}")
        ok = ok and code == 1
    print("one build compares clean in every order, and the growth is caught" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
