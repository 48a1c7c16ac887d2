"""What the installed plugin adds to the start-up and run of a small suite that does not use it.

Generates one module of 5 trivial tests, then times a whole run,
``python -m pytest -q -p no:cacheprovider``, with the plugin and with
``-p no:cudagraph``, alternating the two so that machine noise hits both alike.
A second pair times the bare imports, ``import pytest`` against
``import pytest, pytest_cudagraph.plugin``: their difference is what the plugin's
own modules cost a start-up, and the benchmark checks that importing the plugin
left torch unimported (a plugin that imports torch adds seconds to every run).
Prints the median of each and the ratios (target for the run: at most 1.02);
the imports get three times ``--runs``.

Byte-code is cached as on a developer machine or a CI runner after its first
run, in a private directory (PYTHONPYCACHEPREFIX) so that nothing is written
into site-packages or the checkout.  ``--no-pyc-cache`` keeps the environment's
own setting instead: under PYTHONDONTWRITEBYTECODE every run compiles each module
that has no ``.pyc`` and pytest rewrites the plugin's modules again.

    python benchmarks/bench_startup.py [--runs 15] [--no-pyc-cache]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = 5
CHECKOUT = Path(__file__).resolve().parent.parent


def subprocess_env(pyc_cache: Path | None) -> dict[str, str]:
    """This checkout first on the path (measure its plugin, not another installed copy), and the byte-code cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    if pyc_cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pyc_cache)
    return env


def make_suite(root: Path) -> None:
    body = [f"def test_{t}():\n    assert {t} + 1 > {t}\n" for t in range(TESTS)]
    (root / "test_small.py").write_text("\n".join(body))
    (root / "pytest.ini").write_text("[pytest]\n")


def time_command(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def pytest_run(extra: list[str]) -> list[str]:
    # pytest-randomly, where installed, reorders the tests with a new seed in every run: not the same run twice
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *extra]


def import_only(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def plugin_leaves_torch_unimported(env: dict[str, str]) -> bool:
    code = "import sys, pytest_cudagraph.plugin; print('torch' in sys.modules)"
    out = subprocess.run(import_only(code), env=env, capture_output=True, text=True, check=True).stdout.strip()
    return out == "False"


def alternate(
    first: list[str], second: list[str], cwd: Path, env: dict[str, str], runs: int
) -> tuple[list[float], list[float]]:
    time_command(first, cwd, env)  # warm the file-system and byte-code caches
    time_command(second, cwd, env)
    a, b = [], []
    for _ in range(runs):
        a.append(time_command(first, cwd, env))
        b.append(time_command(second, cwd, env))
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--no-pyc-cache", action="store_true", help="keep the environment's byte-code setting (PYTHONDONTWRITEBYTECODE)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        root.mkdir()
        make_suite(root)
        env = subprocess_env(None if args.no_pyc_cache else Path(tmp) / "pycache")
        run_with, run_without = alternate(pytest_run([]), pytest_run(["-p", "no:cudagraph"]), root, env, args.runs)
        # an import is a fifth of a run and noisier: three times the samples
        imp_with, imp_without = alternate(
            import_only("import pytest, pytest_cudagraph.plugin"),
            import_only("import pytest"),
            root,
            env,
            3 * args.runs,
        )
        torch_unimported = plugin_leaves_torch_unimported(env)
    timings = {"run_with": run_with, "run_without": run_without, "imp_with": imp_with, "imp_without": imp_without}
    med = {name: statistics.median(values) for name, values in timings.items()}
    if args.no_pyc_cache:
        bytecode = (
            f"as the environment has it (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})"
        )
    else:
        bytecode = "cached in a private PYTHONPYCACHEPREFIX"
    print(f"byte-code: {bytecode}")
    print(f"pytest run of {TESTS} trivial tests (start-up, collection, run, exit), {args.runs} runs each")
    print(f"  with plugin       median {med['run_with'] * 1000:.1f} ms")
    print(f"  -p no:cudagraph   median {med['run_without'] * 1000:.1f} ms")
    print(f"  ratio {med['run_with'] / med['run_without']:.3f} (target <= 1.02)")
    print(f"python -c imports, {3 * args.runs} runs each")
    print(f"  import pytest, pytest_cudagraph.plugin  median {med['imp_with'] * 1000:.1f} ms")
    print(f"  import pytest                           median {med['imp_without'] * 1000:.1f} ms")
    print(
        f"  ratio {med['imp_with'] / med['imp_without']:.3f}, plugin modules "
        f"{(med['imp_with'] - med['imp_without']) * 1000:+.1f} ms; "
        f"torch left unimported: {'yes' if torch_unimported else 'NO'}"
    )


if __name__ == "__main__":
    main()
