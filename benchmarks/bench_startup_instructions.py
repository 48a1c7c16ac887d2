"""What the installed plugin adds to collecting a suite that does not use it, counted in instructions.

Generates the suite of ``bench_collect.py`` (300 test functions, 400 items, no
plugin marker or fixture) and runs ``python -m pytest --collect-only -q -p
no:cacheprovider`` once under ``valgrind --tool=callgrind`` with the plugin and
once with ``-p no:cudagraph``, then prints the total ``Ir`` of each callgrind
output file (its ``totals:`` line) and their ratio (target: at most 1.02).

Instructions do not move with the machine's load: two runs of one build give the
same count within a few hundredths of a percent, so one run of each side is
enough.  The interpreter under valgrind is the real one (``sys.executable``
resolved), never a pyenv shim, which would be a shell script valgrind follows
into a second process.  The subprocesses keep the environment's byte-code setting
(as ``bench_collect.py`` does; here ``PYTHONDONTWRITEBYTECODE=1``, under which
pytest rewrites each of the plugin's modules it imports, in every run);
``--pyc-cache`` caches byte-code in a private directory instead, warmed by one run
of each side outside valgrind.  Each run under callgrind takes about a minute on
a 2-core machine.

    python benchmarks/bench_startup_instructions.py [--pyc-cache] [--keep DIR]
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
from bench_startup import subprocess_env

TARGET = 1.02


def python_executable() -> str:
    """The interpreter itself: a pyenv shim on PATH is a script, so valgrind would count bash and exec'd children."""
    return str(Path(os.path.realpath(sys.executable)))


def collect_only(extra: list[str]) -> list[str]:
    return [python_executable(), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *extra]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pyc-cache", action="store_true", help="cache byte-code in a private directory, warmed outside valgrind"
    )
    parser.add_argument("--keep", metavar="DIR", help="copy the two callgrind output files into DIR")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        root.mkdir()
        make_suite(root)
        env = subprocess_env(Path(tmp) / "pycache" if args.pyc_cache else None)
        with_cmd, without_cmd = collect_only([]), collect_only(["-p", "no:cudagraph"])
        if args.pyc_cache:
            for cmd in (with_cmd, without_cmd):
                subprocess.run(cmd, cwd=root, env=env, capture_output=True, check=True)
        outs = {"with": Path(tmp) / "callgrind.with", "without": Path(tmp) / "callgrind.without"}
        with_ir = count(with_cmd, root, env, outs["with"])
        without_ir = count(without_cmd, root, env, outs["without"])
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            for path in outs.values():
                shutil.copy(path, Path(args.keep) / path.name)
    if args.pyc_cache:
        bytecode = "cached in a private PYTHONPYCACHEPREFIX (warmed by one run of each side)"
    else:
        bytecode = (
            f"as the environment has it (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})"
        )
    print(f"byte-code: {bytecode}")
    print(f"collect-only under callgrind, 300 test functions (400 items), {python_executable()}, one run each")
    print(f"  with plugin       {with_ir:,} Ir")
    print(f"  -p no:cudagraph   {without_ir:,} Ir")
    print(f"  ratio {with_ir / without_ir:.3f} (target <= {TARGET}), plugin {with_ir - without_ir:+,} Ir")


if __name__ == "__main__":
    main()
