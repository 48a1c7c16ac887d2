"""Cost of the installed plugin for a suite that uses none of its features.

Generates a 300-test suite with no plugin marker or fixture, then times
``pytest --collect-only -q`` with the plugin and with ``-p no:cudagraph``,
alternating the two so that machine noise hits both alike.  Prints the median
of each and their ratio (target: at most 1.05).

    python benchmarks/bench_collect.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_suite(root: Path, modules: int = 10, tests_per_module: int = 30) -> None:
    for m in range(modules):
        body = ["import pytest", ""]
        for t in range(tests_per_module):
            if t % 3 == 0:
                body.append(f"@pytest.mark.parametrize('x', [1, 2])\ndef test_{t}(x):\n    assert x\n")
            else:
                body.append(f"def test_{t}():\n    assert True\n")
        (root / f"test_mod{m}.py").write_text("\n".join(body))
    (root / "pytest.ini").write_text("[pytest]\n")


def time_collect(root: Path, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"collection failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_suite(root)
        time_collect(root, [])  # warm the file-system cache and .pyc files
        time_collect(root, ["-p", "no:cudagraph"])
        with_plugin, without_plugin = [], []
        for _ in range(args.runs):
            with_plugin.append(time_collect(root, []))
            without_plugin.append(time_collect(root, ["-p", "no:cudagraph"]))
    med_with = statistics.median(with_plugin)
    med_without = statistics.median(without_plugin)
    print(f"collect-only, 300 test functions (400 items), {args.runs} runs each")
    print(f"  with plugin       median {med_with * 1000:.1f} ms")
    print(f"  -p no:cudagraph   median {med_without * 1000:.1f} ms")
    print(f"  ratio {med_with / med_without:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
