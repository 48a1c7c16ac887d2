"""Append one row to docs/gpu-runs.md for a GPU run of .ci/gpu: what ran where, and what it printed.

    python .ci/gpu_run_row.py OUTDIR [ROWS_FILE]

Reads the logs .ci/gpu wrote into OUTDIR (each step's closing pytest line, the
benchmarks' ratios) and the machine (GPU, torch, the commit), and appends a row
to the table in ROWS_FILE (default docs/gpu-runs.md), creating the file with its
header where it does not exist.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from pathlib import Path

HEADER = """# GPU runs

Every run of `.ci/gpu` on a GPU appends a row here: what was proven on which GPU, with which torch, at which
commit. Each step's cell is pytest's closing line (or the benchmark's ratio) as that run printed it; a step that did
not run says so. The CPU CI cannot run these: this table is the record of what the GPU last saw.

| date (UTC) | commit | GPU | torch | tests/gpu | model zoo | docs/examples | docs/examples_failing | bench_capture | bench_observe |
|---|---|---|---|---|---|---|---|---|---|
"""

# pytest's closing line: "=== 2 failed, 13 passed, 1 skipped in 187.20s (0:03:07) ===" or "-q"'s bare form
CLOSING = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+ in [\d.]+s(?: \([\d:]+\))?)\s*=*$")


def closing_line(log: Path) -> str:
    if not log.exists():
        return "not run"
    found = [m.group(1) for line in log.read_text(errors="replace").splitlines() if (m := CLOSING.match(line.strip()))]
    return found[-1] if found else "no closing line (see the log)"


def ratio(log: Path, pattern: str) -> str:
    if not log.exists():
        return "not run"
    found = re.findall(pattern, log.read_text(errors="replace"))
    return found[-1] if found else "no ratio (see the log)"


def machine() -> tuple[str, str]:
    try:
        import torch

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
        return gpu, torch.__version__
    except Exception as error:  # a row still records the run
        return f"unknown ({type(error).__name__})", "unknown"


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
        return out.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = Path(argv[0])
    rows = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "docs" / "gpu-runs.md"
    gpu, torch_version = machine()
    row = [
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        commit(),
        gpu,
        torch_version,
        closing_line(out / "tests.log"),
        closing_line(out / "zoo.log"),
        closing_line(out / "examples.log"),
        closing_line(out / "failing.log"),
        ratio(out / "bench.log", r"ratio[^:\n]*:\s*([\d.]+)"),
        ratio(out / "bench_observe.log", r"ratio observed/plain \(medians\): ([\d.]+)"),
    ]
    if not rows.exists():
        rows.write_text(HEADER)
    with rows.open("a") as table:
        table.write("| " + " | ".join(cell(c) for c in row) + " |\n")
    print(f"{rows}: " + " | ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
