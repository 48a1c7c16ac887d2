"""Compile cost in instructions: callgrind's counts, the compile-instructions rule, the expected-values file.

The counting itself needs valgrind (``test_startup_counts_the_compiles_instructions_under_callgrind``,
slow, skipped where valgrind is not installed); the rest is plain data and the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from sample_reports import ENV_2_13

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import write_report
from pytest_cudagraph.records.startup import NodeStartup, RunSample, StartupResult
from pytest_cudagraph.tools.compare import compare_reports
from pytest_cudagraph.tools.instructions import (
    INSTRUCTIONS_NOTE,
    ExpectedCount,
    callgrind_total,
    check_expected,
    expected_rows,
    expected_text,
    read_expected,
)

NODE = "tests/test_model.py::test_compile"


def counted_report(cold: list[int], warm: list[int]) -> dict:
    """A ``startup --instructions`` report of one test: each run's compile instructions."""
    samples = tuple(
        RunSample(kind, index, 0, 20.0, "passed", 10.0, 5.0, compile_instructions=count)
        for kind, counts in (("cold", cold), ("warm", warm))
        for index, count in enumerate(counts, 1)
    )
    node = NodeStartup(NODE, len(cold), samples, notes=(INSTRUCTIONS_NOTE,))
    return json.loads(json.dumps(StartupResult((node,), ENV_2_13).to_report()))


def test_a_callgrind_file_is_read_by_its_totals_line(tmp_path):
    out = tmp_path / "callgrind.out"
    out.write_text(
        "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 2218618777\n\nfn=(1) f\n5 3\ntotals: 2218618777\n"
    )
    assert callgrind_total(out) == 2_218_618_777
    out.write_text("events: Ir\nsummary: 1234\n")  # an older file with its summary only
    assert callgrind_total(out) == 1234
    out.write_text("events: Ir\n")
    assert callgrind_total(out) is None
    assert callgrind_total(tmp_path / "missing.out") is None


def test_the_compile_instructions_rule_flags_a_growth_past_its_threshold_only():
    base = counted_report([2_000_000_000], [400_000_000])
    steady = counted_report([2_010_000_000], [401_000_000])  # +0.5 %: one build's jitter
    grown = counted_report([2_100_000_000], [400_000_000])  # +5 % cold
    assert not compare_reports(base, steady, rules=["compile-instructions"]).regressed
    comparison = compare_reports(base, grown, rules=["compile-instructions"])
    assert [r.rule for r in comparison.regressions] == ["compile-instructions"]
    assert comparison.regressions[0].message == (
        "cold compile 2,000,000,000 -> 2,100,000,000 instructions (+5.00%, threshold 2.5%)"
    )
    text = comparison.format_text()
    row = next(line for line in text.splitlines() if line.strip().startswith("startup.cold.compile_instructions"))
    assert row.endswith("<- compile-instructions")
    # the threshold is the caller's; the rule is off by default
    assert not compare_reports(base, grown, rules=["compile-instructions"], instructions_threshold=0.06).regressed
    assert not compare_reports(base, grown).regressed
    # selected where no test has counts: said in one note
    plain = json.loads(json.dumps(base))
    for kind in ("cold", "warm"):
        del plain["tests"][NODE]["startup"][kind]["compile_instructions"]
    notes = compare_reports(plain, plain, rules=["compile-instructions"]).notes()
    assert any(note.startswith("compile-instructions: not checked, no test in both reports") for note in notes)


def test_the_expected_values_file_fails_on_regressions_and_on_wins_and_prints_the_rows(tmp_path):
    base = counted_report([2_000_000_000], [400_000_000])
    rows = expected_rows(base)
    assert rows == [
        ExpectedCount(NODE, "cold", 2_000_000_000, 0.025),
        ExpectedCount(NODE, "warm", 400_000_000, 0.025),
    ]
    path = tmp_path / "expected.csv"
    path.write_text(expected_text(rows))
    assert path.read_text().splitlines()[0] == "nodeid,pass,compile_instructions,noise_margin"
    assert read_expected(path) == rows
    lines, failed = check_expected(rows, counted_report([2_010_000_000], [399_000_000]))
    assert not failed and all(line.startswith("ok ") for line in lines)
    lines, failed = check_expected(rows, counted_report([2_100_000_000], [360_000_000]))
    assert failed
    assert lines[0] == f"REGRESSION {NODE} (cold): 2,000,000,000 -> 2,100,000,000 instructions (+5.00%, margin 2.5%)"
    assert lines[1] == (
        f"WIN {NODE} (warm): 400,000,000 -> 360,000,000 instructions (-10.00%, margin 2.5%): update the expected value"
    )
    assert lines[-3:] == [
        "paste these rows into the expected-values file:",
        f"{NODE},cold,2100000000,0.025",
        f"{NODE},warm,360000000,0.025",
    ]
    lines, failed = check_expected(rows, counted_report([], []))
    assert failed and lines[0].startswith(f"MISSING {NODE} (cold)")


@pytest.mark.parametrize(
    "text, words",
    [
        ("nodeid,count\n", "is not an expected instruction counts file"),
        ("nodeid,pass,compile_instructions,noise_margin\nt,cold,many,0.025\n", "line 2: give nodeid,pass"),
        ("nodeid,pass,compile_instructions,noise_margin\nt,lukewarm,5,0.025\n", "line 2: the pass is cold or warm"),
        ("nodeid,pass,compile_instructions,noise_margin\nt,cold,5,2.5\n", "a fraction below 1"),
        ("nodeid,pass,compile_instructions,noise_margin\n", "holds its header and no row"),
        ("nodeid,pass,compile_instructions,noise_margin\n\n\n", "holds its header and no row"),
    ],
)
def test_a_bad_expected_values_file_is_one_sentence(tmp_path, text, words):
    path = tmp_path / "expected.csv"
    path.write_text(text)
    with pytest.raises(ReportError, match=words):
        read_expected(path)


def _cli(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=cwd,
    )


def test_instructions_without_valgrind_is_refused_before_any_run(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no valgrind on it
    done = _cli("startup", "t.py::test_x", "--instructions", "--report", str(tmp_path / "r.json"), env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "pytest-cudagraph: --instructions needs valgrind, which is not installed (not on PATH): install it "
        "(apt-get install valgrind, dnf install valgrind) and run again"
    ]
    assert not (tmp_path / "r.json").exists()
    done = _cli("startup", "t.py::test_x", "--write-expected", "e.csv", "--report", str(tmp_path / "r.json"))
    assert done.returncode == 2 and "--write-expected needs --instructions" in done.stderr


def test_compare_reads_an_expected_values_file_as_its_base(tmp_path):
    base = counted_report([2_000_000_000], [400_000_000])
    (tmp_path / "expected.csv").write_text(expected_text(expected_rows(base)))
    write_report(tmp_path / "same.json", counted_report([2_001_000_000], [400_500_000]))
    write_report(tmp_path / "grown.json", counted_report([2_200_000_000], [400_000_000]))
    same = _cli("compare", str(tmp_path / "expected.csv"), str(tmp_path / "same.json"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines()[-1] == "no regression: 2 expected instruction counts checked against same.json"
    grown = _cli("compare", str(tmp_path / "expected.csv"), str(tmp_path / "grown.json"))
    assert grown.returncode == 1
    assert grown.stdout.splitlines()[0].startswith(f"REGRESSION {NODE} (cold)")
    bad = _cli("compare", str(tmp_path / "same.json").replace(".json", ".csv"), str(tmp_path / "same.json"))
    assert bad.returncode == 2 and bad.stderr.startswith("pytest-cudagraph: cannot read the expected")
    # a file of no rows checks nothing: refused, never "no regression"
    (tmp_path / "empty.csv").write_text(expected_text([]))
    empty = _cli("compare", str(tmp_path / "empty.csv"), str(tmp_path / "same.json"))
    assert empty.returncode == 2 and empty.stdout == "", empty.stdout
    assert empty.stderr == (
        f"pytest-cudagraph: {tmp_path / 'empty.csv'} holds its header and no row, so there is no expected instruction "
        "count to check; write the counts with pytest-cudagraph startup --instructions --write-expected\n"
    )


TINY = textwrap.dedent(
    """
    import torch


    def test_tiny():
        torch.compile(lambda x: (x.sin() * 2).relu().sum())(torch.randn(16))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (apt-get install valgrind)")
def test_startup_counts_the_compiles_instructions_under_callgrind(tmp_path):
    """One cold and one warm run under callgrind: counts of the compile alone, the warm one smaller."""
    (tmp_path / "test_tiny.py").write_text(TINY)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", "startup", "test_tiny.py::test_tiny", "--instructions"]
        + ["--runs", "1", "--report", "r.json", "--write-expected", "expected.csv"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    startup = json.loads((tmp_path / "r.json").read_text())["tests"]["test_tiny.py::test_tiny"]["startup"]
    cold = startup["cold"]["compile_instructions"]["median"]
    warm = startup["warm"]["compile_instructions"]["median"]
    # a compile of a few ops executes hundreds of millions of instructions; python's start-up alone is not counted
    assert 10_000_000 < warm < cold < 50_000_000_000, (cold, warm)
    assert INSTRUCTIONS_NOTE in startup["notes"]
    assert startup["command"][0] == "python"  # the measured interpreter, not valgrind
    assert "compile_instructions" in done.stdout
    rows = read_expected(tmp_path / "expected.csv")
    assert [(row.kind, row.compile_instructions) for row in rows] == [("cold", cold), ("warm", warm)]
    check = subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", "compare", "expected.csv", "r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout
