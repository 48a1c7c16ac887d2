"""What the installed plugin adds to collecting a suite that does not use it, counted in instructions.

Generates the suite of ``bench_collect.py`` (300 test functions, 400 items, no
plugin marker or fixture) and runs ``python -m pytest --collect-only -q -p
no:cacheprovider -p no:randomly`` once under ``valgrind --tool=callgrind`` with
the plugin and once with ``-p no:cudagraph``, then prints the total ``Ir`` of each
callgrind output file (its ``totals:`` line) and their ratio (target: at most 1.02).

Both sides run the same code but for the plugin: ``PYTHONHASHSEED=0`` and
pytest-randomly off (where installed it reorders the items with a new seed in
every run), so a side gives the same count, to some ten thousand instructions, in
every run, and one run of each is enough.  The cyclic garbage collector's share is
printed too: when it runs depends on how many objects were made, so a small change
can move a whole collection from one side of the end of the run to the other.
The interpreter under valgrind is the real one (``sys.executable`` resolved), never
a pyenv shim, which would be a shell script valgrind follows into a second process.

Byte-code is cached as a user has it: pip compiles each module of an installed
package, and pytest writes its rewritten byte-code of the plugin's modules at its
first run; here into a private directory (PYTHONPYCACHEPREFIX), warmed by one run
of each side outside valgrind.  ``--no-pyc-cache`` keeps the environment's own
setting instead (``PYTHONDONTWRITEBYTECODE=1`` on the machine of
docs/performance.md, under which pytest reads, rewrites and compiles each of the
plugin's modules it imports, in every run).  Each run under callgrind takes about
a minute on a 2-core machine.

``--run`` counts ``bench_startup.py``'s whole run of 5 trivial tests instead (its
wall-time ratio moves by several percent from run to run on a shared machine).

    python benchmarks/bench_startup_instructions.py [--no-pyc-cache] [--run] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_collect import make_suite
from bench_startup import TESTS, subprocess_env
from bench_startup import make_suite as make_small_suite

TARGET = 1.02


def python_executable() -> str:
    """The interpreter itself: a pyenv shim on PATH is a script, so valgrind would count bash and exec'd children."""
    return str(Path(os.path.realpath(sys.executable)))


def whole_run(extra: list[str]) -> list[str]:
    """bench_startup.py's run of its 5 trivial tests: start-up, collection, the tests, exit."""
    return [python_executable(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *extra]


def collect_only(extra: list[str]) -> list[str]:
    # pytest-randomly, where installed, reorders the items with a new seed in every run: the two sides
    # would not run the same code
    return [
        python_executable(),
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


def callgrind_total(path: Path) -> int:
    """The ``Ir`` total of a callgrind output file (``totals:`` at its end, ``summary:`` in older files)."""
    found = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("totals:", "summary:")):
            fields = line.split(":", 1)[1].split()
            if fields and fields[0].isdigit():
                found = int(fields[0])
    if found is None:
        raise SystemExit(f"{path}: no totals or summary line")
    return found


def count(cmd: list[str], cwd: Path, env: dict[str, str], out_file: Path) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not on PATH (apt-get install valgrind)")
    run = [valgrind, "--tool=callgrind", "--trace-children=no", f"--callgrind-out-file={out_file}", *cmd]
    proc = subprocess.run(run, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(run)} failed:\n{proc.stdout}\n{proc.stderr}")
    return callgrind_total(out_file)


def gc_share(path: Path) -> int | None:
    """The inclusive ``Ir`` of the cyclic garbage collector (``gc_collect_main``), where callgrind_annotate exists."""
    annotate = shutil.which("callgrind_annotate")
    if annotate is None:
        return None
    text = subprocess.run([annotate, "--inclusive=yes", str(path)], capture_output=True, text=True).stdout
    for line in text.splitlines():
        if ":gc_collect_main " in line and line.split()[0].replace(",", "").isdigit():
            return int(line.split()[0].replace(",", ""))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--no-pyc-cache",
        action="store_true",
        help="keep the environment's byte-code setting (PYTHONDONTWRITEBYTECODE) instead of a warmed private cache",
    )
    parser.add_argument("--pyc-cache", action="store_true", help="the default: kept for older command lines")
    parser.add_argument(
        "--run", action="store_true", help=f"count bench_startup.py's whole run of {TESTS} trivial tests instead"
    )
    parser.add_argument("--keep", metavar="DIR", help="copy the two callgrind output files into DIR")
    args = parser.parse_args()
    cached = not args.no_pyc_cache
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        root.mkdir()
        (make_small_suite if args.run else make_suite)(root)
        env = subprocess_env(Path(tmp) / "pycache" if cached else None)
        env["PYTHONHASHSEED"] = "0"  # the same set and dict orders in every run, so one run of each side is enough
        command = whole_run if args.run else collect_only
        with_cmd, without_cmd = command([]), command(["-p", "no:cudagraph"])
        if cached:
            for cmd in (with_cmd, without_cmd):
                subprocess.run(cmd, cwd=root, env=env, capture_output=True, check=True)
        outs = {"with": Path(tmp) / "callgrind.with", "without": Path(tmp) / "callgrind.without"}
        with_ir = count(with_cmd, root, env, outs["with"])
        without_ir = count(without_cmd, root, env, outs["without"])
        gc_with, gc_without = gc_share(outs["with"]), gc_share(outs["without"])
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            for path in outs.values():
                shutil.copy(path, Path(args.keep) / path.name)
    if cached:
        bytecode = "cached in a private PYTHONPYCACHEPREFIX (warmed by one run of each side)"
    else:
        bytecode = (
            f"as the environment has it (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})"
        )
    print(f"byte-code: {bytecode}")
    what = f"pytest run of {TESTS} trivial tests" if args.run else "collect-only, 300 test functions (400 items)"
    print(f"{what} under callgrind, {python_executable()}, one run each")
    print(f"  with plugin       {with_ir:,} Ir")
    print(f"  -p no:cudagraph   {without_ir:,} Ir")
    print(f"  ratio {with_ir / without_ir:.3f} (target <= {TARGET}), plugin {with_ir - without_ir:+,} Ir")
    if gc_with is not None and gc_without is not None:
        print(f"  of which the cyclic garbage collector: {gc_with:,} Ir with, {gc_without:,} Ir without")


if __name__ == "__main__":
    main()
