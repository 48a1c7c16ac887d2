"""``pytest-cudagraph startup``: cold and warm runs in fresh interpreters, their medians and spreads, and failures.

Every run is a real ``python -m pytest`` child (about 3 s each on 2 cores, most of
it the plugin's report), bounded by ``--timeout``; the runs that compile with
Inductor are marked slow.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_cudagraph.caches.cache_root import CacheRoot
from pytest_cudagraph.records.report import load_report
from pytest_cudagraph.records.startup import RunSample, Stats
from pytest_cudagraph.tools.cli import main
from pytest_cudagraph.tools.compare import compare_reports
from pytest_cudagraph.tools.startup_child import child_command, child_environment

COMPILED_TEST = """
    import pytest
    import torch


    @pytest.mark.max_recompiles(0)
    def test_compiled():
        def f(x):
            return torch.sin(x) * 2 + x.cos()

        x = torch.randn(8)
        torch.testing.assert_close(torch.compile(f, backend="inductor")(x), f(x))
"""

# passes once, then fails: the first (cold) run is measured, the second (warm) one is not
FLAKY_TEST = """
    from pathlib import Path

    def test_second_run_fails():
        seen = Path(__file__).with_name("seen")
        assert not seen.exists(), "the second run fails on purpose"
        seen.write_text("1")
"""

SLEEPING_TEST = """
    import time

    def test_sleeps():
        time.sleep(120)
"""

# leaves a mark that it ran
MARKING_TEST = """
    from pathlib import Path

    def test_marks():
        Path(__file__).with_name("ran").write_text("1")
"""

# passes in its first run; in every later one starts a grandchild of the benchmark, says both pids, and hangs
HANGS_AFTER_ITS_FIRST_RUN = """
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    def test_hangs():
        here = Path(__file__).parent
        if os.environ.get("HANG_AT_ONCE") != "1" and not (here / "seen").exists():
            (here / "seen").write_text("1")
            return
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        (here / "pids.tmp").write_text(f"{os.getpid()} {grandchild.pid}")
        (here / "pids.tmp").rename(here / "pids")
        time.sleep(300)
"""


def suite(tmp_path: Path, source: str, name: str = "test_subject.py") -> Path:
    """A one-file suite of its own (its own rootdir), so the children never read this repository's conftest."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / name).write_text(textwrap.dedent(source))
    return tmp_path


def startup(tmp_path: Path, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(tmp_path)
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["startup", *args], stdout=stdout, stderr=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


# ----------------------------------------------------------------------------
# the statistic and the child's command
# ----------------------------------------------------------------------------


def test_the_statistic_is_the_median_and_the_spread_max_minus_min():
    stats = Stats.of([9.0, 7.5, 8.1, None, float("nan")])
    assert (stats.median, stats.min, stats.max, stats.n) == (8.1, 7.5, 9.0, 3)
    assert stats.spread == pytest.approx(1.5)
    assert stats.to_json() == {
        "median": 8.1,
        "min": 7.5,
        "max": 9.0,
        "spread": 1.5,
        "trimmed_spread": 0.6,
        "mad": 0.6,
        "n": 3,
    }
    assert Stats.of([None]) is None


def test_one_slow_run_widens_the_range_but_not_the_trimmed_spread():
    # the first cold run on a fresh runner: three times as slow as the others
    stats = Stats.of([22.2, 7.5, 7.6, 7.4, 7.5])
    assert stats.spread == pytest.approx(14.8)
    assert stats.trimmed_spread == pytest.approx(0.2)
    assert Stats.of([7.5, 22.2]).trimmed_spread == pytest.approx(14.7)  # two runs: no outlier to tell


def test_two_slow_runs_of_five_widen_the_trimmed_spread_but_not_the_median_absolute_deviation():
    stats = Stats.of([10.0, 10.0, 10.0, 40.0, 40.0])
    assert stats.trimmed_spread == pytest.approx(30.0)
    assert stats.mad == 0.0
    jittered = Stats.of([10.4, 9.7, 41.0, 10.1, 38.5])
    assert jittered.median == 10.4 and jittered.mad == pytest.approx(0.7)


def test_the_child_uses_the_cache_root_layout_the_plugin_sets(tmp_path):
    env = child_environment(tmp_path / "cold-1", base={"PATH": "/bin", "TORCHINDUCTOR_CACHE_DIR": "/home/me/global"})
    assert {k: env[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")} == CacheRoot(
        tmp_path / "cold-1", persistent=True
    ).run_cache_environment()
    command = child_command("t.py::test_a", tmp_path / "r.json", tmp_path / "cold-1", ["-x"], python="python")
    assert command[:4] == ["python", "-m", "pytest", "t.py::test_a"]
    assert f"--cudagraph-cache-dir={tmp_path / 'cold-1'}" in command
    assert f"--cudagraph-report={tmp_path / 'r.json'}" in command
    assert command[-1] == "-x" and "no:randomly" in command


def test_a_sample_keeps_what_it_measured():
    sample = RunSample("warm", 2, 0, 3.14159, "passed", 1.0, 0.5, None, {"inductor_s": 0.25})
    assert sample.to_json() == {
        "pass": "warm",
        "index": 2,
        "exitcode": 0,
        "outcome": "passed",
        "wall_s": 3.1416,
        "duration_s": 1.0,
        "compile_s": 0.5,
        "capture_s": None,
        "phases": {"inductor_s": 0.25},
        "error": None,
    }


# ----------------------------------------------------------------------------
# bad arguments: exit 2, no child started
# ----------------------------------------------------------------------------


def test_runs_below_one_is_refused(tmp_path, monkeypatch):
    code, out, err = startup(tmp_path, monkeypatch, "t.py::test_a", "--runs", "0", "--report", "out.json")
    assert code == 2 and out == ""
    assert err == "pytest-cudagraph: --runs 0: give at least 1 (3 or more, for a spread)\n"


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_bounds_no_run_is_refused_before_any_run(tmp_path, monkeypatch, timeout):
    suite(tmp_path, MARKING_TEST)
    code, out, err = startup(
        tmp_path,
        monkeypatch,
        "test_subject.py::test_marks",
        "--runs",
        "1",
        "--report",
        "out.json",
        "--timeout",
        timeout,
    )
    assert (code, out) == (2, "")
    assert err == (
        f"pytest-cudagraph: --timeout {timeout}: give a positive, finite number of seconds for one run (default 1800)\n"
    )
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out.json").exists()


def test_an_unwritable_report_is_refused_before_any_run(tmp_path, monkeypatch):
    code, _, err = startup(tmp_path, monkeypatch, "t.py::test_a", "--report", "missing/out.json")
    assert code == 2
    assert err.startswith("pytest-cudagraph: --report missing/out.json: directory missing does not exist")


# ----------------------------------------------------------------------------
# children that fail, crash or hang
# ----------------------------------------------------------------------------


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_a_failing_child_is_named_with_its_exit_status_and_the_runs_before_it_are_kept(tmp_path, monkeypatch):
    suite(tmp_path, FLAKY_TEST)
    nodeid = "test_subject.py::test_second_run_fails"
    code, out, err = startup(tmp_path, monkeypatch, nodeid, "--runs", "2", "--report", "out.json", "--timeout", "120")
    assert code == 1
    # pytest's own last line follows ("1 failed in 2.03s", "1 failed, 1 warning in ..." where torch warns)
    sentence = f"warm run 1 of {nodeid} exited with status 1 (the test failed): 1 failed"
    assert re.search(re.escape(f"pytest-cudagraph: {sentence}") + r"(?:, \d+ warnings?)? in ", err), err
    assert "run it alone with python -m pytest to see why" in err
    assert "INCOMPLETE" in out
    report = load_report(tmp_path / "out.json")
    assert report["summary"]["complete"] is False
    assert report["summary"]["incomplete_reasons"][0].startswith(sentence)
    record = report["tests"][nodeid]
    assert record["outcome"] == "failed"
    section = record["startup"]
    assert section["complete"] is False and section["runs"] == 2
    # the cold run measured before the failure is kept, with its figures
    assert section["cold"]["runs"] == 1 and section["cold"]["wall_s"]["n"] == 1
    assert section["cold"]["samples"][0]["exitcode"] == 0
    assert section["warm"]["samples"][0]["exitcode"] == 1
    assert section["warm"]["runs"] == 0 and "wall_s" not in section["warm"]
    # compare never calls such a run free of regressions
    assert [r.rule for r in compare_reports(report, report).regressions] == ["incomplete"]


def test_a_hung_child_is_killed_at_the_timeout_and_the_pytest_arguments_reach_it(tmp_path, monkeypatch):
    suite(tmp_path, SLEEPING_TEST)
    nodeid = "test_subject.py::test_sleeps"
    code, _, err = startup(
        tmp_path, monkeypatch, nodeid, "--runs", "1", "--report", "out.json", "--timeout", "1", "--", "-x"
    )
    assert code == 1
    assert f"cold run 1 of {nodeid} was killed after the 1 s timeout" in err
    record = load_report(tmp_path / "out.json")["tests"][nodeid]
    assert record["outcome"] == "crashed"
    assert record["startup"]["cold"]["samples"][0]["exitcode"] is None
    assert record["startup"]["command"][-1] == "-x"


# ----------------------------------------------------------------------------
# the measurement itself (Inductor on the CPU)
# ----------------------------------------------------------------------------


@pytest.mark.slow
def test_cold_and_warm_runs_of_a_compiled_test(tmp_path, monkeypatch):
    suite(tmp_path, COMPILED_TEST)
    nodeid = "test_subject.py::test_compiled"
    code, out, err = startup(tmp_path, monkeypatch, nodeid, "--runs", "3", "--report", "out.json", "--timeout", "300")
    assert code == 0, err
    assert out.splitlines()[0] == f"{nodeid}: 3 cold runs and 3 warm runs (median, spread = max - min, seconds)"
    assert out.splitlines()[-1] == "wrote out.json"
    report = load_report(tmp_path / "out.json")
    assert report["summary"]["complete"] is True and report["env"]["torch"]
    section = report["tests"][nodeid]["startup"]
    assert section["complete"] is True
    for kind in ("cold", "warm"):
        assert section[kind]["runs"] == 3
        for figure in ("wall_s", "duration_s"):
            stats = section[kind][figure]
            assert stats["n"] == 3 and stats["min"] <= stats["median"] <= stats["max"]
            assert stats["spread"] == pytest.approx(stats["max"] - stats["min"], abs=1e-3)
    # a cold run compiles C++ (some 10 s here), a warm one loads it: the gap dwarfs the noise
    assert section["warm"]["wall_s"]["median"] < section["cold"]["wall_s"]["median"]
    assert section["warm_over_cold"]["wall_s"] < 1
    if "compile_s" in section["cold"]:  # where the plugin records compile_time
        assert section["warm"]["compile_s"]["median"] < section["cold"]["compile_s"]["median"]
    # a report compare reads, and one that is no regression against itself
    assert not compare_reports(report, report, rules=["all"]).regressed


def test_a_runs_figures_come_from_its_record_phases_and_captures_added_up():
    from pytest_cudagraph.tools.startup_child import figures_from_report

    record = {
        "outcome": "passed",
        "duration_s": 4.5,
        "compile_time": {"total_s": 3.0, "phases": {"dynamo_s": 0.5, "aot_autograd_s": 0.5, "inductor_s": 2.0}},
        "graphs": {"capture_s": 0.25},
        "piecewise": {"capture_s": 0.5},
    }
    report = {"tests": {"t.py::test_a": record}, "durations": {"t.py::test_a": 4.5, "t.py::test_b": 1.0}}
    name, figures, kept = figures_from_report(report, "t.py::test_a")
    assert name == "t.py::test_a" and kept == record
    assert figures == {
        "outcome": "passed",
        "duration_s": 4.5,
        "compile_s": 3.0,
        "capture_s": 0.75,
        "phases": {"dynamo_s": 0.5, "aot_autograd_s": 0.5, "inductor_s": 2.0},
    }
    # a node id that selected several tests (a file): their figures added up, under the id given
    name, figures, _ = figures_from_report(report, "t.py")
    assert name == "t.py" and figures["duration_s"] == 5.5 and figures["compile_s"] == 3.0
    # a test without a record (no plugin feature): the report's durations still give its duration
    name, figures, kept = figures_from_report(report, "t.py::test_b")
    assert (name, figures["duration_s"], figures["compile_s"], kept) == ("t.py::test_b", 1.0, None, {})


# ----------------------------------------------------------------------------
# the benchmark interrupted: Ctrl-C, SIGTERM
# ----------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _interrupted_benchmark(tmp_path: Path, signum: int, hang_at_once: bool) -> tuple[int, str, str, list[int]]:
    """Run ``pytest-cudagraph startup`` on the hanging test, send it ``signum`` while a run hangs; its result.

    (exit status, stdout, stderr, the pids of the hung run and of the grandchild it started.)  Every wait is
    bounded, and whatever still runs at the end is killed by its pid.
    """
    suite(tmp_path, HANGS_AFTER_ITS_FIRST_RUN)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "HANG_AT_ONCE": "1" if hang_at_once else "0"}
    command = [sys.executable, "-m", "pytest_cudagraph", "startup", "test_subject.py::test_hangs", "--runs", "2"]
    command += ["--report", "out.json", "--timeout", "300"]
    bench = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "pids").exists():
            assert bench.poll() is None, bench.communicate()
            assert time.monotonic() < deadline, "the hanging run never started"
            time.sleep(0.1)
        pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
        bench.send_signal(signum)
        out, err = bench.communicate(timeout=60)
        # the hung run and what it started are stopped before the benchmark exits (init reaps the grandchild)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        return bench.returncode, out, err, [pid for pid in pids if _alive(pid)]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_benchmark_stops_its_run_writes_the_report_incomplete_and_cleans_up(tmp_path, signum):
    code, out, err, running = _interrupted_benchmark(tmp_path, signum, hang_at_once=True)
    assert running == [], "the hung run or the process it started outlived the benchmark"
    words = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else "SIGTERM"
    sentence = f"cold run 1 of test_subject.py::test_hangs was stopped by {words} and not measured"
    assert code == 1, err
    assert "Traceback" not in err and err.endswith(f"pytest-cudagraph: {sentence}\n"), err
    assert f"INTERRUPTED: {sentence}" in out and out.endswith("wrote out.json\n")
    # nothing of the benchmark is left in the temporary directory
    assert list((tmp_path / "tmp").iterdir()) == []
    report = load_report(tmp_path / "out.json")
    summary = report["summary"]
    assert summary["complete"] is False and summary["incomplete_reasons"] == [sentence]
    # a node id without one finished run has no record, and is listed as not run
    assert report["tests"] == {} and summary["not_run"] == ["test_subject.py::test_hangs"]
    assert [r.rule for r in compare_reports(report, report).regressions] == ["incomplete"]


@pytest.mark.slow
def test_ctrl_c_in_a_later_run_keeps_the_runs_measured_before_it(tmp_path):
    code, out, err, running = _interrupted_benchmark(tmp_path, signal.SIGINT, hang_at_once=False)
    assert running == [] and code == 1 and "Traceback" not in err
    sentence = "warm run 1 of test_subject.py::test_hangs was stopped by Ctrl-C (SIGINT) and not measured"
    report = load_report(tmp_path / "out.json")
    assert report["summary"]["incomplete_reasons"] == [f"{sentence}; the runs before it are kept"]
    assert "not_run" not in report["summary"] or report["summary"]["not_run"] == []
    section = report["tests"]["test_subject.py::test_hangs"]["startup"]
    assert section["complete"] is False and section["interrupted"] == sentence
    assert section["cold"]["runs"] == 1 and section["cold"]["samples"][0]["exitcode"] == 0
    assert section["warm"]["runs"] == 0 and section["warm"]["samples"] == []
    assert "failure" not in report["tests"]["test_subject.py::test_hangs"]  # interrupted: the test did not fail
    assert list((tmp_path / "tmp").iterdir()) == []
