"""The report, the terminal summary, xdist and the baseline, seen from outside through pytester.

The runs of the tests not marked slow are in-process: torch is already imported by
tests/conftest.py and the compiles use backend="eager", so each costs well under a second.
"""

from __future__ import annotations

import io
import json

import pytest
import torch

from pytest_cudagraph.plugin.environment import ENV_FIELDS
from pytest_cudagraph.records.report import SCHEMA, build_report, write_report
from pytest_cudagraph.tools.cli import main

# Tiny tests: Dynamo with backend="eager" (no Inductor compile), plugin markers with
# no torch work, a GPU test that skips on this CPU runner, and a test that does not
# use the plugin at all (and so gets no record).
TESTS = """
import pytest
import torch


def test_recompiles_twice(recompiles):
    def double(x):
        return x * 2

    compiled = torch.compile(double, backend="eager", dynamic=False)
    for n in (2, 3, 4):
        compiled(torch.ones(n))
    assert recompiles.count == 2


@pytest.mark.max_recompiles(0)
def test_marker_without_torch_work():
    pass


@pytest.mark.cudagraph(capture_sizes=[1, 2])
def test_gpu_graphs():
    pass


def test_not_using_the_plugin():
    pass
"""

RECORDED = {
    "test_model.py::test_recompiles_twice": "passed",
    "test_model.py::test_marker_without_torch_work": "passed",
    "test_model.py::test_gpu_graphs": "skipped",
}


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys {keys}"
    return dict(pairs)


def read_report(path):
    return json.loads(path.read_text(), object_pairs_hook=_no_duplicate_keys)


def test_report_env_hook_records_and_terminal_summary(dynamo_modules_loaded, pytester):
    pytester.makeconftest(
        """
        def pytest_cudagraph_update_env(config, env):
            env["model_zoo"] = "1.2.3"
            env["torch_in_hook"] = env["torch"]
        """
    )
    pytester.makepyfile(test_model=TESTS)
    report_path = pytester.path / "out" / "run.json"
    report_path.parent.mkdir()
    result = pytester.runpytest("-p", "no:cacheprovider", f"--cudagraph-report={report_path}")
    result.assert_outcomes(passed=3, skipped=1)

    report = read_report(report_path)
    assert report["schema"] == SCHEMA
    assert set(ENV_FIELDS) <= set(report["env"])
    assert report["env"]["model_zoo"] == "1.2.3"
    assert report["env"]["torch_in_hook"] == report["env"]["torch"]
    assert report["env"]["plugin"] == "0.1.0"
    assert {n: r["outcome"] for n, r in report["tests"].items()} == RECORDED
    recompiles = report["tests"]["test_model.py::test_recompiles_twice"]["recompiles"]
    assert recompiles["count"] == 2
    assert all("size mismatch" in reason for reason in recompiles["reasons"])
    assert report["summary"]["tests"] == 3
    assert report["summary"]["recompiles"] == 2
    assert report["summary"]["exitstatus"] == 0
    assert [p.name for p in report_path.parent.iterdir()] == ["run.json"]  # no temp file left

    result.stdout.fnmatch_lines(
        [
            "*= cudagraph =*",
            # columns empty in every row (no graphs, no caches on this run) are left out, and the
            # outcome column where every row passed
            "test * recompiles * compile",
            "test_model.py",
            "  test_marker_without_torch_work * 0 *",
            "  test_recompiles_twice * 2 *",
            "3 tests recorded: 2 passed, 1 skipped; 2 recompiles; 0 graphs captured",
            "1 GPU test skipped, not listed: needs --cudagraph",
            f"report written to {report_path}",
        ]
    )
    header = next(line for line in result.stdout.lines if line.startswith("test ") and "recompiles" in line)
    assert "graphs" not in header and "fxgraph" not in header
    assert "test_not_using_the_plugin" not in result.stdout.str().split("= cudagraph =")[1]

    # the file the plugin wrote is what `compare` reads (its command line: test_cli.py)
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["compare", str(report_path), str(report_path)], stdout=stdout, stderr=stderr) == 0, stderr.getvalue()


@pytest.mark.slow
def test_xdist_workers_send_every_record_once(pytester):
    pytester.makepyfile(test_model=TESTS)
    pytester.makepyfile(
        test_more="""
        import pytest
        import torch

        @pytest.mark.parametrize("width", [2, 3, 5, 7])
        def test_once_per_width(recompiles, width):
            torch._dynamo.reset()  # a worker runs several widths: start each without cache entries
            def triple(x):
                return x * 3
            compiled = torch.compile(triple, backend="eager", dynamic=False)
            compiled(torch.ones(width))
            compiled(torch.ones(width + 1))
            assert recompiles.count == 1

        @pytest.mark.cudagraph
        @pytest.mark.parametrize("size", [1, 8])
        def test_gpu_sizes(size):
            pass
        """
    )
    report_path = pytester.path / "run.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", f"--cudagraph-report={report_path}")
    result.assert_outcomes(passed=7, skipped=3)
    report = read_report(report_path)
    expected = dict(RECORDED)
    expected.update({f"test_more.py::test_once_per_width[{w}]": "passed" for w in (2, 3, 5, 7)})
    expected.update({f"test_more.py::test_gpu_sizes[{s}]": "skipped" for s in (1, 8)})
    assert {n: r["outcome"] for n, r in report["tests"].items()} == expected
    assert all(
        report["tests"][f"test_more.py::test_once_per_width[{w}]"]["recompiles"]["count"] == 1 for w in (2, 3, 5, 7)
    )
    assert report["summary"]["tests"] == len(expected) == 9
    assert report["summary"]["recompiles"] == 2 + 4
    # the controller printed one summary with every worker's records: one line per test under its file's line
    # (the GPU tests skipped: counted in a line of their own, not rows)
    section = result.stdout.str().split("= cudagraph =")[1].splitlines()
    assert section.count("test_more.py") == 1
    assert sum(1 for line in section if line.startswith("  test_once_per_width[")) == 4
    assert "3 GPU tests skipped, not listed: needs --cudagraph" in section  # one of test_model.py too
    assert [p.name for p in pytester.path.iterdir() if p.name.startswith(".run.json")] == []


@pytest.mark.slow
def test_a_figure_below_minus_two_gib_travels_from_an_xdist_worker(pytester):
    """execnet packs an int below -2**31 as a signed 4-byte int and fails: the record travels as JSON.

    A device reading's change is such a figure when another worker on the same GPU frees 3 GiB meanwhile.
    """
    pytester.makepyfile(
        test_big="""
        from pytest_cudagraph.records.record import current_record

        def test_a_pool_of_three_gib(recompiles):
            current_record().note("device_change", -3 * 2**30)
        """
    )
    report_path = pytester.path / "run.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", f"--cudagraph-report={report_path}")
    result.assert_outcomes(passed=1)
    assert "INTERNALERROR" not in result.stdout.str()
    record = read_report(report_path)["tests"]["test_big.py::test_a_pool_of_three_gib"]
    assert record["extra"]["device_change"] == -3 * 2**30


def _baseline(pytester, recompile_count: int):
    """A baseline as an older torch would have written it: same tests, ``recompile_count`` recompiles."""
    env = {name: None for name in ("triton", "cuda", "gpu", "git_commit")}
    env.update(torch="2.12.0+cpu", python="3.11.7", platform="Linux", plugin="0.1.0")
    records = {
        "test_model.py::test_recompiles_twice": {
            "outcome": "passed",
            "recompiles": {"count": recompile_count, "reasons": [], "limit_hits": []},
        },
        "test_model.py::test_marker_without_torch_work": {"outcome": "passed", "recompiles": {"count": 0}},
        "test_model.py::test_gpu_graphs": {"outcome": "skipped"},
    }
    return write_report(pytester.path / f"baseline-{recompile_count}.json", build_report(env, records))


@pytest.mark.slow
def test_baseline_regression_fails_a_green_session(pytester):
    pytester.makepyfile(test_model=TESTS)
    baseline = _baseline(pytester, recompile_count=0)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--cudagraph-baseline={baseline}")
    result.assert_outcomes(passed=3, skipped=1)  # every test passed ...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ... and the session still fails
    result.stdout.fnmatch_lines(
        [
            f"compared with baseline {baseline}:",
            "environment:",
            f"  torch * 2.12.0+cpu * → {torch.__version__}*",
            "test_model.py::test_recompiles_twice  REGRESSED (recompiles)",
            "*recompiles.count * 0 * 2 * +2 * <- recompiles",
            "  recompiles: Dynamo recompiled 2 times, 0 before; new guard failure: *size mismatch*",
            "REGRESSION: 3 tests in both reports: 1 changed, 1 regressed; 0 new, 0 vanished (by rule: recompiles 1)",
        ]
    )


@pytest.mark.slow
def test_baseline_rules_come_from_the_ini(pytester):
    pytester.makepyfile(test_model=TESTS)
    baseline = _baseline(pytester, recompile_count=0)
    # the same regression as above, but the project's rules leave recompiles out
    pytester.makeini("[pytest]\ncudagraph_baseline_fail_on = outcome,cache-miss\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--cudagraph-baseline={baseline}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["test_model.py::test_recompiles_twice  changed"])


def test_unknown_baseline_rule_in_the_ini_is_a_usage_error(pytester):
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.makeini("[pytest]\ncudagraph_baseline_fail_on = recompile,pool\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini option cudagraph_baseline_fail_on = 'recompile,pool': unknown rule 'recompile'" in result.stderr.str()


@pytest.mark.slow
def test_baseline_without_regression_keeps_the_session_green(pytester):
    pytester.makepyfile(test_model=TESTS)
    baseline = _baseline(pytester, recompile_count=2)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--cudagraph-baseline={baseline}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["no regression: 3 tests in both reports: * 0 regressed; 0 new, 0 vanished*"])


def _other_suite_baseline(pytester, nodeids: list[str]):
    """A baseline of ``nodeids``, each passed without plugin figures (written from another suite's run)."""
    records = {nodeid: {"outcome": "passed", "recompiles": {"count": 0}} for nodeid in nodeids}
    return write_report(pytester.path / "other.json", build_report({"torch": torch.__version__}, records))


NO_TORCH_WORK = """
import pytest


@pytest.mark.max_recompiles(0)
def test_one():
    pass
"""


def test_a_baseline_that_shares_no_test_with_the_run_fails_it_as_nothing_compared(pytester):
    pytester.makepyfile(test_quick=NO_TORCH_WORK)
    baseline = _other_suite_baseline(pytester, [f"test_model.py::test_{n}" for n in range(3)])
    result = pytester.runpytest("-p", "no:cacheprovider", f"--cudagraph-baseline={baseline}")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"compared with baseline {baseline}:",
            "vanished tests (3):",
            "NOTHING COMPARED: no test is in both reports (3 vanished, 1 new); check the paths, "
            "or compare reports of one suite",
        ]
    )
    result.stdout.no_fnmatch_line("*no regression*")


def test_a_baseline_most_of_whose_tests_vanished_says_so_and_keeps_the_session_green(pytester):
    pytester.makepyfile(test_quick=NO_TORCH_WORK)
    baseline = _other_suite_baseline(
        pytester, ["test_quick.py::test_one", "test_gone.py::test_a", "test_gone.py::test_b"]
    )
    result = pytester.runpytest("-p", "no:cacheprovider", f"--cudagraph-baseline={baseline}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "warning: 2 of the 3 tests of base vanished, so most of it was not compared; *",
            "no regression, but MOST TESTS VANISHED (2 of the 3 of base): 1 test in both reports: *",
        ]
    )


@pytest.mark.slow
def test_report_that_cannot_be_written_at_the_end_is_said_in_one_line(pytester):
    # The directory is checked at start; a test removes it, so the write at the end fails.
    pytester.makepyfile(
        test_vanish="""
        import shutil
        import pytest

        @pytest.mark.max_recompiles(0)
        def test_removes_report_dir(pytestconfig):
            shutil.rmtree(pytestconfig.getoption("cudagraph_report").rsplit("/", 1)[0])
        """
    )
    report_dir = pytester.path / "reports"
    report_dir.mkdir()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--cudagraph-report={report_dir}/run.json")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(
        [
            f"cudagraph: the report was NOT written to {report_dir}/run.json "
            "(No such file or directory [ENOENT]; give another --cudagraph-report path)"
        ]
    )
    assert "free space" not in result.stdout.str()  # the hint fits the OS error, not a guess
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
