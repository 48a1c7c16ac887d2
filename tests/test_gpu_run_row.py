"""`.ci/gpu_run_row.py`: the row a GPU run appends to docs/gpu-runs.md, read from the logs `.ci/gpu` wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "gpu_run_row.py"


def run_row(out: Path, rows: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(out), str(rows)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # two child interpreters, each importing torch to name the machine
def test_a_row_holds_each_steps_closing_line_and_the_benchmarks_ratios(tmp_path):
    out = tmp_path / "gpu-results"
    out.mkdir()
    (out / "tests.log").write_text("....\n========= 1 failed, 70 passed, 2 skipped in 301.50s (0:05:01) =========\n")
    (out / "examples.log").write_text("...\n16 passed, 1 skipped in 187.20s (0:03:07)\n")
    (out / "failing.log").write_text("FAILED a\n9 failed in 40.01s\n")
    (out / "bench.log").write_text("ratio plugin/hand-written (medians): 0.642 (target <= 0.70)\n")
    (out / "bench_observe.log").write_text("ratio observed/plain (medians): 1.013 (target <= 1.02)\n")
    rows = tmp_path / "gpu-runs.md"
    done = run_row(out, rows)
    assert done.returncode == 0, done.stderr
    text = rows.read_text()
    assert text.startswith("# GPU runs\n")
    row = text.splitlines()[-1].split(" | ")
    assert row[4:] == [
        "1 failed, 70 passed, 2 skipped in 301.50s (0:05:01)",
        "not run",
        "16 passed, 1 skipped in 187.20s (0:03:07)",
        "9 failed in 40.01s",
        "0.642",
        "1.013 |",
    ]
    # a second run appends below the first, the header once
    assert run_row(out, rows).returncode == 0
    assert (
        rows.read_text().count("# GPU runs") == 1 and len(rows.read_text().splitlines()) == len(text.splitlines()) + 1
    )


def test_a_log_without_a_closing_line_says_so():
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("gpu_run_row", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.CLOSING.match("= 2 failed, 13 passed, 1 skipped in 187.20s (0:03:07) =")
    assert not module.CLOSING.match("FAILED tests/test_x.py::test_y - 2 failed")
