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
import sys
import tempfile
from pathlib import Path

# the timing loop of the start-up benchmark: alternating runs, checkout first on the path
from bench_startup import alternate, subprocess_env


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


def collect_only(extra: list[str]) -> list[str]:
    # pytest-randomly, where installed, reorders the items with a new seed in every run: not the same run twice
    return [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        *extra,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_suite(root)
        # the environment's byte-code setting is kept, as the figures in docs/performance.md were taken
        env = subprocess_env(None)
        with_plugin, without_plugin = alternate(
            collect_only([]), collect_only(["-p", "no:cudagraph"]), root, env, args.runs
        )
    med_with = statistics.median(with_plugin)
    med_without = statistics.median(without_plugin)
    print(f"collect-only, 300 test functions (400 items), {args.runs} runs each")
    print(f"  with plugin       median {med_with * 1000:.1f} ms")
    print(f"  -p no:cudagraph   median {med_without * 1000:.1f} ms")
    print(f"  ratio {med_with / med_without:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
