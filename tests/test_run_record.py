"""The report as the record of the run: crashes, interrupts, early stops, narrowed and collection-only runs.

Each test starts pytest in a subprocess (a crash or a signal must not reach this
process) with a bounded timeout, so that none of them can hang CI.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from pytest_cudagraph.tools.cli import main as cli_main

# Four plugin tests that do no torch work, one of which can crash, fail or be interrupted.
SUITE = """
import os
import signal
import pytest

HOW = os.environ.get("BREAK_HOW", "")


@pytest.mark.max_recompiles(0)
def test_a():
    pass


@pytest.mark.max_recompiles(0)
def test_b():
    pass


@pytest.mark.max_recompiles(0)
def test_c_breaks():
    if HOW == "crash":
        os._exit(1)
    if HOW == "fail":
        raise AssertionError("broken on purpose")
    if HOW == "ctrl-c":
        raise KeyboardInterrupt
    if HOW == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.max_recompiles(0)
def test_d():
    pass
"""

ALL = [f"test_suite.py::{name}" for name in ("test_a", "test_b", "test_c_breaks", "test_d")]
TIMEOUT_S = 120


def run(pytester: pytest.Pytester, *args: str, how: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, BREAK_HOW=how)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def report_of(pytester: pytest.Pytester, name: str = "new.json") -> dict:
    return json.loads((pytester.path / name).read_text())


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.slow
def test_a_crashed_xdist_worker_loses_no_record_and_the_run_is_incomplete(suite, capsys):
    base = run(suite, "-n", "2", "--cudagraph-report=base.json")
    assert base.returncode == 0, base.stdout
    assert report_of(suite, "base.json")["summary"]["complete"] is True

    crashed = run(suite, "-n", "2", "--max-worker-restart=0", "--cudagraph-report=new.json", how="crash")
    assert crashed.returncode != 0
    report = report_of(suite)
    summary = report["summary"]
    # every test that finished has its record (as many passed as pytest says), the crashed one says so
    passed = int(re.search(r"(\d+) passed", crashed.stdout).group(1))
    assert passed >= 1
    outcomes = {nodeid: record["outcome"] for nodeid, record in report["tests"].items()}
    assert sorted(outcomes.values()) == ["crashed"] + ["passed"] * passed, crashed.stdout
    assert outcomes["test_suite.py::test_c_breaks"] == "crashed"
    # and what never ran is named
    assert sorted([*outcomes, *summary["not_run"]]) == ALL
    assert summary["complete"] is False
    assert any("crashed" in reason and "test_c_breaks" in reason for reason in summary["incomplete_reasons"])
    assert "INCOMPLETE run" in crashed.stdout

    # compare never calls a crashed run "no regression"
    code = cli_main(["compare", str(suite.path / "base.json"), str(suite.path / "new.json")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "INCOMPLETE" in out


@pytest.mark.slow
def test_ctrl_c_writes_the_records_so_far_and_marks_the_run_incomplete(suite):
    result = run(suite, "--cudagraph-report=new.json", how="ctrl-c")
    assert result.returncode == pytest.ExitCode.INTERRUPTED, result.stdout
    report = report_of(suite)
    assert sorted(report["tests"]) == ALL[:2]
    summary = report["summary"]
    assert summary["complete"] is False
    assert summary["not_run"] == ALL[2:] and summary["not_run_count"] == 2
    assert any(reason.startswith("interrupted") for reason in summary["incomplete_reasons"])


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="needs POSIX signals")
def test_sigterm_ends_the_run_like_ctrl_c_with_the_report_written(suite):
    result = run(suite, "--cudagraph-report=new.json", how="sigterm")
    assert result.returncode == pytest.ExitCode.INTERRUPTED, result.stdout + result.stderr
    summary = report_of(suite)["summary"]
    assert summary["complete"] is False
    assert "interrupted (SIGTERM)" in summary["incomplete_reasons"]
    assert sorted(report_of(suite)["tests"]) == ALL[:2]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_stopping_early_with_maxfail_is_incomplete(suite, workers):
    result = run(suite, "-x", *workers, "--cudagraph-report=new.json", how="fail")
    assert result.returncode != 0
    summary = report_of(suite)["summary"]
    assert summary["complete"] is False, summary
    assert summary["incomplete_reasons"] == ["stopped early by -x/--maxfail after 1 failure"]
    if not workers:
        assert summary["not_run"] == ["test_suite.py::test_d"]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_a_run_narrowed_by_k_is_complete_and_says_what_it_deselected(suite, workers):
    result = run(suite, "-k", "not test_d", *workers, "--cudagraph-report=new.json")
    assert result.returncode == 0, result.stdout
    summary = report_of(suite)["summary"]
    assert summary["complete"] is True
    assert summary["deselected"] == 1
    assert summary["selection"] == {"-k": "not test_d"}
    assert summary["not_run"] == [] and summary["not_run_count"] == 0


@pytest.mark.slow
def test_a_collection_only_run_leaves_the_last_report_as_it_was(suite):
    assert run(suite, "--cudagraph-report=new.json").returncode == 0
    before = (suite.path / "new.json").read_bytes()
    result = run(suite, "--co", "--cudagraph-report=new.json")
    assert result.returncode == 0, result.stdout
    assert (suite.path / "new.json").read_bytes() == before
    assert "the report at" in result.stdout and "was left as it was" in result.stdout


@pytest.mark.parametrize(
    ("workers", "exit_code"),
    # pytest stops after a collection error; xdist runs the tests that did collect
    [([], pytest.ExitCode.INTERRUPTED), (["-n", "2"], pytest.ExitCode.TESTS_FAILED)],
    ids=["in-process", "xdist"],
)
@pytest.mark.slow
def test_a_collection_error_is_named_as_such_not_as_an_interrupt(suite, workers, exit_code):
    suite.makepyfile(test_broken="import this_module_does_not_exist\n")
    result = run(suite, *workers, "--cudagraph-report=new.json")
    assert result.returncode == exit_code, result.stdout
    summary = report_of(suite)["summary"]
    assert summary["complete"] is False
    assert summary["incomplete_reasons"] == ["1 error during collection"]


EACH = """
import os
import pytest


@pytest.mark.max_recompiles(0)
def test_fails_on_one_worker_only():
    assert os.environ["PYTEST_XDIST_WORKER"] != "gw1", "broken on gw1 on purpose"
"""


@pytest.mark.slow
def test_dist_each_keeps_the_worst_run_and_lists_every_workers_outcome(pytester):
    pytester.makepyfile(test_each=EACH)
    result = run(pytester, "-n", "2", "--dist", "each", "--cudagraph-report=new.json")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    record = report_of(pytester)["tests"]["test_each.py::test_fails_on_one_worker_only"]
    assert record["outcome"] == "failed"  # whichever worker reported last
    assert sorted((run["worker"], run["outcome"]) for run in record["extra"]["runs"]) == [
        ("gw0", "passed"),
        ("gw1", "failed"),
    ]


PLAIN = """
def test_plain():
    pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_every_test_that_ran_has_its_duration_in_the_report_plugin_or_not(suite, workers):
    """pytest-split needs every test's time; records exist only for tests that used the plugin."""
    suite.makepyfile(test_plain=PLAIN)
    result = run(suite, *workers, "--cudagraph-report=new.json")
    assert result.returncode == 0, result.stdout
    report = report_of(suite)
    assert sorted(report["durations"]) == sorted([*ALL, "test_plain.py::test_plain"])
    assert all(isinstance(seconds, float) and seconds >= 0 for seconds in report["durations"].values())
    assert all(round(seconds, 3) == seconds for seconds in report["durations"].values())
    assert "test_plain.py::test_plain" not in report["tests"]


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_an_interrupted_run_has_the_durations_of_the_tests_that_finished(suite):
    result = run(suite, "--cudagraph-report=new.json", how="ctrl-c")
    assert result.returncode == pytest.ExitCode.INTERRUPTED, result.stdout
    # test_c_breaks was interrupted in its call: the time of its setup alone would call it quick
    assert sorted(report_of(suite)["durations"]) == ALL[:2]


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "words"), [("--sw", "first"), ("--sw-skip", "second (--sw-skip)")])
def test_a_stepwise_stop_is_named_as_such_not_as_an_interrupt(pytester, flag, words):
    pytester.makepyfile(
        test_steps="""
        import pytest

        @pytest.mark.max_recompiles(0)
        @pytest.mark.parametrize("n", range(4))
        def test_step(n):
            assert n not in (1, 2)
        """
    )
    # stepwise keeps its place in pytest's cache: the cache provider stays on
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", flag, "--cudagraph-report=new.json"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == pytest.ExitCode.INTERRUPTED, result.stdout
    summary = report_of(pytester)["summary"]
    assert summary["complete"] is False
    assert summary["incomplete_reasons"] == [f"stepwise (--sw) stopped the run at its {words} failure"]
    assert "KeyboardInterrupt" not in result.stdout


# Every pytest mode that runs no test body, with the line the terminal section says (None: the mode prints no
# summary at all); --cache-show needs pytest's cache provider, which run() leaves out.
NO_TEST_BODY_MODES = [
    (["--collect-only"], "collection only"),
    (["--setup-plan"], "--setup-plan ran no test"),
    (["--setup-only"], "--setup-only ran no test"),
    (["--fixtures"], "--fixtures ran no test"),
    (["--fixtures-per-test"], "--fixtures-per-test ran no test"),
    (["-p", "cacheprovider", "--cache-show"], "--cache-show ran no test"),
    (["--trace-config", "--ignore=test_suite.py"], "no test was selected"),
    (["-k", "no_such_test"], "no test was selected"),
    (["--markers"], None),
    (["--version"], None),
    (["--help"], None),
]


@pytest.mark.slow
@pytest.mark.parametrize(("flags", "said"), NO_TEST_BODY_MODES, ids=[" ".join(f) for f, _ in NO_TEST_BODY_MODES])
def test_a_run_of_no_test_body_leaves_the_last_report_as_it_was(suite, flags, said, tmp_path):
    """Nor does it append to the job summary: a report of such a run would hold no test ran and say it was complete."""
    assert run(suite, "--cudagraph-report=new.json").returncode == 0
    before = (suite.path / "new.json").read_bytes()
    job_summary = tmp_path / "step_summary.md"
    job_summary.write_text("earlier step\n")
    os.environ["GITHUB_STEP_SUMMARY"] = str(job_summary)
    try:
        result = run(suite, *flags, "--cudagraph-report=new.json")
    finally:
        del os.environ["GITHUB_STEP_SUMMARY"]
    assert result.returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), result.stdout + result.stderr
    assert (suite.path / "new.json").read_bytes() == before
    assert job_summary.read_text() == "earlier step\n"
    if said is not None:
        assert f"{said}: the report at " in result.stdout and "was left as it was" in result.stdout


@pytest.mark.slow
def test_a_run_of_tests_still_appends_to_the_job_summary(suite, tmp_path, monkeypatch):
    job_summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(job_summary))
    assert run(suite, "--cudagraph-report=new.json").returncode == 0
    assert "**PASSED**" in job_summary.read_text()
    assert report_of(suite)["summary"]["tests"] == 4


def test_a_pytest_split_shard_that_got_no_test_still_writes_its_report(pytester):
    """``merge`` asks for every shard's report: a shard with nothing to run is a shard, not a run of no test body."""
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("-p", "no:randomly", "--splits", "2", "--group", "2", "--cudagraph-report=s2.json")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()
    report = report_of(pytester, "s2.json")
    assert report["summary"]["shard"]["group"] == 2 and report["tests"] == {}
    result = pytester.runpytest("-p", "no:randomly", "-k", "nothing", "--cudagraph-report=none.json")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert not (pytester.path / "none.json").exists()
