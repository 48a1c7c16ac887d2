"""Every path the plugin writes refuses a file of another kind, and a path the run collects, before anything runs.

The report (``--cudagraph-report``, ``merge -o``, ``startup --report``), the HTML
page (``show --html``), the durations file (``durations -o``) and the job summary
(``$GITHUB_STEP_SUMMARY``) are each given by a user; a slip must cost one line,
never the file it names.
"""

from __future__ import annotations

import io
import json

import pytest
from sample_reports import sample_report

from pytest_cudagraph.records.output_paths import DURATIONS, HTML_PAGE, REPORT, foreign_file
from pytest_cudagraph.records.report import write_report
from pytest_cudagraph.tools.cli import main

MODULE = "import pytest\n\n\n@pytest.mark.max_recompiles(0)\ndef test_q():\n    pass\n"


def _refused_in_one_line(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    [line] = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    return line


def test_a_forgotten_report_path_never_replaces_the_test_module(pytester):
    """``pytest --cudagraph-report test_q.py``: pytest takes the module as the report's path."""
    module = pytester.makepyfile(test_q=MODULE)
    line = _refused_in_one_line(pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report", "test_q.py"))
    assert "test_q.py is a Python module that is not a pytest-cudagraph report" in line
    assert line.endswith("give the report a path of its own: pytest --cudagraph-report=cudagraph.json test_q.py")
    assert module.read_text().strip() == MODULE.strip()


def test_a_report_path_that_is_a_collected_path_is_refused_whatever_it_holds(pytester):
    pytester.makepyfile(test_q=MODULE)
    line = _refused_in_one_line(
        pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report=test_q.py", "test_q.py")
    )
    assert "test_q.py is" in line and pytester.path.joinpath("test_q.py").read_text().strip() == MODULE.strip()
    empty = pytester.makepyfile(test_empty="")
    line = _refused_in_one_line(
        pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report=test_empty.py", "test_empty.py", "test_q.py")
    )
    assert "a path this run collects" in line and empty.read_text() == ""


def test_the_job_summary_never_appends_to_a_collected_path(pytester, monkeypatch):
    pytester.makepyfile(test_q=MODULE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "test_q.py"))
    line = _refused_in_one_line(pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report=r.json", "test_q.py"))
    assert line.startswith("ERROR: $GITHUB_STEP_SUMMARY=") and "a path this run collects" in line
    assert pytester.path.joinpath("test_q.py").read_text().strip() == MODULE.strip()
    assert not pytester.path.joinpath("r.json").exists()


def test_an_earlier_report_an_empty_file_and_dev_null_are_written_over(pytester):
    pytester.makepyfile(test_q=MODULE)
    for _ in range(2):  # the second run replaces the first run's report
        pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report=r.json").assert_outcomes(passed=1)
    pytester.path.joinpath("empty.json").write_text("")  # REPORT=$(mktemp)
    pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report=empty.json").assert_outcomes(passed=1)
    assert json.loads(pytester.path.joinpath("empty.json").read_text())["schema"].startswith("pytest-cudagraph/")
    pytester.runpytest("-p", "no:cacheprovider", "--cudagraph-report=/dev/null").assert_outcomes(passed=1)


def _cli(*argv: object) -> tuple[int, str]:
    err = io.StringIO()
    code = main([str(arg) for arg in argv], stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            ["show", "{report}", "--html", "{target}"],
            "--html {target} is a Python module that is not a pytest-cudagraph HTML page",
        ),
        (
            ["durations", "{report}", "-o", "{target}"],
            "-o {target} is a Python module that is not a pytest-split durations file",
        ),
        (
            ["merge", "{report}", "-o", "{target}"],
            "-o {target} is a Python module that is not a pytest-cudagraph report",
        ),
    ],
    ids=["show --html", "durations -o", "merge -o"],
)
def test_each_command_refuses_to_write_over_a_file_of_another_kind(tmp_path, command, said):
    report = write_report(tmp_path / "run.json", sample_report())
    target = tmp_path / "test_q.py"
    target.write_text(MODULE)
    code, err = _cli(*(part.format(report=report, target=target) for part in command))
    assert code == 2 and err.count("\n") == 1, err
    assert said.format(target=target) in err
    assert target.read_text().strip() == MODULE.strip()


def test_startup_refuses_a_report_path_of_another_kind_before_any_run(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    code, err = _cli("startup", "tests/test_never_run.py::test_x", "--report", target, "--runs", "1")
    assert code == 2 and "is a file that is not a pytest-cudagraph report" in err, err
    assert target.read_text() == "my notes\n"


def test_each_command_writes_over_its_own_earlier_output(tmp_path):
    report = write_report(tmp_path / "run.json", sample_report())
    for argv in (["show", report, "--html", tmp_path / "page.html"], ["durations", report, "-o", tmp_path / "d.json"]):
        assert _cli(*argv)[0] == 0
        assert _cli(*argv)[0] == 0  # over the page or durations the first call wrote
    assert foreign_file(tmp_path / "page.html", HTML_PAGE) is None
    assert foreign_file(tmp_path / "d.json", DURATIONS) is None
    assert foreign_file(report, REPORT) is None
    reformatted = tmp_path / "sorted.json"  # jq -S puts "schema" after other keys
    reformatted.write_text(json.dumps(json.loads(report.read_text()), sort_keys=True))
    assert foreign_file(reformatted, REPORT) is None
    assert foreign_file(tmp_path / "d.json", REPORT) == "a file that is not a pytest-cudagraph report"
