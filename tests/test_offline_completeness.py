"""A report says whether its run ran to its end, and ``compare`` never says "no regression" about one that did not.

The run facts (``summary.complete``, ``incomplete_reasons``, ``not_run``, ``not_run_count``, ``deselected``,
``selection``) reach the report through ``build_report(run=...)``; older reports have only ``exitstatus``.
"""

from __future__ import annotations

import copy
import io
import json

import pytest
from sample_reports import COMPLETE_RUN, ENV_2_13, sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import build_report, load_report, summarize, write_report
from pytest_cudagraph.render.plain_text import wrap_line
from pytest_cudagraph.tools import compare_rules
from pytest_cudagraph.tools.cli import main
from pytest_cudagraph.tools.compare import compare_reports

DECODE = "tests/test_model.py::test_decode_graphs"
SPLIT = "tests/test_model.py::test_attention_split"
GPU_ONLY = "tests/test_model.py::test_gpu_only"
INTERRUPTED = "interrupted (KeyboardInterrupt or SIGTERM)"


def interrupted_report(not_run: list[str]) -> dict:
    """The sample run, cut short by Ctrl-C before ``not_run`` ran (their records are missing)."""
    run = {
        "complete": False,
        "incomplete_reasons": [INTERRUPTED],
        "not_run": not_run,
        "not_run_count": len(not_run),
        "deselected": 0,
    }
    report = sample_report(run=run)
    for nodeid in not_run:
        del report["tests"][nodeid]
    report["summary"]["exitstatus"] = 2
    return report


def run_cli(*args, tmp_path, reports: dict[str, dict]) -> tuple[int, str, str]:
    paths = {name: write_report(tmp_path / name, report) for name, report in reports.items()}
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main([str(paths.get(a, a)) for a in args], stdout=stdout, stderr=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


# ----------------------------------------------------------------------------
# build_report(run=...)
# ----------------------------------------------------------------------------


def test_build_report_puts_the_run_facts_into_the_summary():
    run = {
        "complete": False,
        "incomplete_reasons": ("xdist worker gw1 crashed running tests/t.py::test_x",),
        "not_run": ["tests/t.py::test_y"],
        "not_run_count": 1,
        "deselected": 3,
        "selection": {"-k": "decode"},
    }
    summary = build_report(ENV_2_13, {"tests/t.py::test_x": {"outcome": "crashed"}}, exitstatus=1, run=run)["summary"]
    assert summary["outcomes"] == {"crashed": 1}
    assert {key: summary[key] for key in run} == {**run, "incomplete_reasons": list(run["incomplete_reasons"])}
    assert summary["exitstatus"] == 1
    assert summarize({}, run=run)["selection"] == {"-k": "decode"}


def test_build_report_lists_at_most_100_ids_that_did_not_run_and_counts_them_all():
    missing = [f"tests/t.py::test_{i}" for i in range(250)]
    summary = build_report(ENV_2_13, {}, run={"complete": False, "not_run": missing})["summary"]
    assert summary["not_run"] == missing[:100]
    assert summary["not_run_count"] == 250


@pytest.mark.parametrize(
    "run, error, fragment",
    [
        ({"complete": "no"}, TypeError, "complete = 'no', which is not true or false"),
        ({"not_run_count": "3"}, TypeError, "not_run_count = '3', which is not an integer"),
        ({"incomplete_reasons": [1]}, TypeError, "incomplete_reasons = [1], which is not a list of strings"),
        ({"selection": {"-k": 3}}, TypeError, "selection['-k'] = 3, which is not a string"),
        ({"tests": 5}, ValueError, "may not set the computed totals ['tests']"),
    ],
)
def test_build_report_refuses_run_facts_of_the_wrong_type(run, error, fragment):
    with pytest.raises(error) as info:
        build_report(ENV_2_13, {}, run=run)
    assert fragment in str(info.value)


def test_the_run_facts_survive_writing_and_loading(tmp_path):
    report = interrupted_report([SPLIT])
    loaded = load_report(write_report(tmp_path / "r.json", report))
    assert loaded["summary"]["complete"] is False
    assert loaded["summary"]["not_run"] == [SPLIT]


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("complete", "yes", "summary.complete = 'yes', which is not true or false"),
        (
            "incomplete_reasons",
            "interrupted",
            "summary.incomplete_reasons = 'interrupted', which is not a list of strings",
        ),
        ("not_run", [1, 2], "summary.not_run = [1, 2], which is not a list of strings"),
        ("not_run_count", -0.5, "summary.not_run_count = -0.5, which is not an integer"),
        ("deselected", None, "summary.deselected = None, which is not an integer"),
        ("selection", ["-k"], "summary.selection = ['-k'], which is not a mapping"),
        ("exitstatus", "2", "summary.exitstatus = '2', which is not an integer"),
    ],
)
def test_a_malformed_run_fact_is_a_report_error(tmp_path, field, value, fragment):
    report = sample_report()
    report["summary"][field] = value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ReportError) as info:
        load_report(path)
    assert str(info.value).startswith(f"report {path} has {fragment}; write it again")


# ----------------------------------------------------------------------------
# compare: an incomplete new run is a regression
# ----------------------------------------------------------------------------


def test_an_incomplete_new_run_is_a_regression_naming_why_and_what_is_missing():
    base = sample_report()
    new = interrupted_report([SPLIT, GPU_ONLY])
    comparison = compare_reports(base, new, labels=("base.json", "new.json"))
    assert comparison.regressed
    assert [r.rule for r in comparison.regressions] == ["incomplete"]
    text = comparison.format_text()
    lines = text.splitlines()
    start = lines.index(f"INCOMPLETE: new.json is the record of a run that did not run to its end: {INTERRUPTED}")
    assert lines[start + 1 : start + 5] == [
        "  not run (2 of the selected tests):",
        f"    {SPLIT}",
        f"    {GPU_ONLY}",
        "  absent from it: 2 tests of base.json (listed under vanished tests)",
    ]
    assert f"vanished tests (2):\n  {SPLIT}\n  {GPU_ONLY}" in text
    assert lines[-1].startswith("REGRESSION: 3 tests in both reports") and "incomplete 1" in lines[-1]
    assert "no regression" not in text


def test_the_json_form_says_incomplete_with_reasons_and_what_is_missing():
    data = json.loads(json.dumps(compare_reports(sample_report(), interrupted_report([SPLIT])).to_json()))
    assert data["regressed"] is True
    assert data["rule_counts"] == {"incomplete": 1}
    (regression,) = data["regressions"]
    assert regression["rule"] == "incomplete"
    assert INTERRUPTED in regression["message"] and SPLIT in regression["message"]
    new_run = data["runs"]["new"]
    assert (new_run["complete"], new_run["recorded"], new_run["reasons"]) == (False, True, [INTERRUPTED])
    assert (new_run["not_run"], new_run["not_run_count"]) == ([SPLIT], 1)
    assert data["vanished_tests"] == [SPLIT]
    assert data["runs"]["base"]["complete"] is True


def test_no_rule_selection_makes_an_incomplete_run_pass():
    comparison = compare_reports(sample_report(), interrupted_report([SPLIT]), rules=["none"])
    assert comparison.regressed and [r.rule for r in comparison.regressions] == ["incomplete"]


def test_the_cli_exits_1_on_an_incomplete_new_run(tmp_path):
    code, out, err = run_cli(
        "compare",
        "base.json",
        "new.json",
        tmp_path=tmp_path,
        reports={"base.json": sample_report(), "new.json": interrupted_report([SPLIT])},
    )
    assert (code, err) == (1, "")
    assert "INCOMPLETE: new.json" in out
    code, out, _ = run_cli("show", "new.json", tmp_path=tmp_path, reports={"new.json": interrupted_report([SPLIT])})
    assert code == 0
    assert out.splitlines()[-1] == f"INCOMPLETE run: {INTERRUPTED} (1 selected test not run)"


def test_an_incomplete_base_is_a_warning_not_a_regression():
    comparison = compare_reports(interrupted_report([SPLIT]), sample_report(), labels=("base.json", "new.json"))
    assert not comparison.regressed
    text = comparison.format_text()
    assert _said(
        f"warning: base.json is the record of a run that did not run to its end ({INTERRUPTED}); "
        "tests it did not run show as new here, compared with nothing",
        text,
    )
    assert text.splitlines()[-1].startswith("no regression:")
    assert f"new tests (1):\n  {SPLIT}" in text


def _said(line: str, text: str) -> bool:
    """Whether ``text`` holds ``line`` as the text prints it: within 120 columns, broken at spaces where longer."""
    return "\n".join(wrap_line(line, 120)) in text


def older(report: dict, exitstatus: int | None) -> dict:
    """``report`` as a plugin before summary.complete wrote it."""
    out = copy.deepcopy(report)
    for key in COMPLETE_RUN:
        out["summary"].pop(key, None)
    out["summary"].pop("exitstatus", None)
    if exitstatus is not None:
        out["summary"]["exitstatus"] = exitstatus
    return out


@pytest.mark.parametrize("exitstatus, meaning", [(2, "interrupted"), (3, "internal error"), (4, "usage error")])
def test_an_older_report_is_judged_incomplete_from_its_exit_status(exitstatus, meaning):
    comparison = compare_reports(sample_report(), older(sample_report(), exitstatus), labels=("base.json", "new.json"))
    assert [r.rule for r in comparison.regressions] == ["incomplete"]
    run = comparison.new_run
    assert (run.complete, run.recorded) == (False, False)
    assert run.reasons == (f"pytest exited with status {exitstatus} ({meaning})",)
    assert _said(
        f"note: new.json does not record whether its run ran to its end (an older plugin wrote it); "
        f"judged incomplete from its exit status {exitstatus}",
        comparison.format_text(),
    )


@pytest.mark.parametrize("exitstatus", [None, 0, 1, 5])
def test_an_older_report_that_ended_normally_is_complete_and_the_text_says_it_was_not_recorded(exitstatus):
    comparison = compare_reports(sample_report(), older(sample_report(), exitstatus), labels=("base.json", "new.json"))
    assert not comparison.regressed
    status = "no exit status either" if exitstatus is None else f"exit status {exitstatus}"
    assert _said(
        f"note: new.json does not record whether its run ran to its end (an older plugin wrote it); "
        f"judged complete from its {status}",
        comparison.format_text(),
    )
    assert comparison.to_json()["runs"]["new"]["recorded"] is False


def test_vanished_tests_are_listed_in_text_and_json_when_the_rule_is_off():
    base = sample_report()
    new = copy.deepcopy(base)
    del new["tests"][SPLIT]
    comparison = compare_reports(base, new)  # default rules: vanished is off
    assert not comparison.regressed
    assert f"vanished tests (1):\n  {SPLIT}" in comparison.format_text()
    data = comparison.to_json()
    assert data["vanished_tests"] == [SPLIT]
    assert data["regressions"] == []


def test_different_selections_are_named():
    base = sample_report()
    new = sample_report(run={**COMPLETE_RUN, "deselected": 4, "selection": {"-k": "decode"}})
    text = compare_reports(base, new, labels=("base.json", "new.json")).format_text()
    assert _said(
        "note: the runs selected tests differently (base.json: no -k/-m, 0 deselected; "
        "new.json: -k 'decode', 4 deselected), so tests one of them left out show as vanished or new",
        text,
    )


def test_a_crashed_test_counts_as_failing():
    assert "crashed" in compare_rules.FAILING
    base = sample_report()
    new = copy.deepcopy(base)
    new["tests"][DECODE]["outcome"] = "crashed"
    comparison = compare_reports(base, new)
    assert [(r.nodeid, r.rule, r.message) for r in comparison.regressions] == [(DECODE, "outcome", "passed -> crashed")]


# ----------------------------------------------------------------------------
# compare: reports that share no test compare nothing, and say so
# ----------------------------------------------------------------------------

QUICKSTART = "tests/test_quickstart.py::test_one"


def other_suite_report() -> dict:
    """A complete run of another suite: one test, none of the sample's."""
    return build_report(
        ENV_2_13, {QUICKSTART: {"outcome": "passed", "duration_s": 0.1}}, exitstatus=0, run=COMPLETE_RUN
    )


def test_reports_that_share_no_test_are_nothing_compared_not_no_regression():
    comparison = compare_reports(sample_report(), other_suite_report(), labels=("base.json", "qs.json"))
    assert comparison.regressed and comparison.nothing_compared
    assert [(r.nodeid, r.rule) for r in comparison.regressions] == [("", "nothing-compared")]
    lines = comparison.format_text().splitlines()
    assert lines[-1] == (
        "NOTHING COMPARED: no test is in both reports (5 vanished, 1 new); check the paths, "
        "or compare reports of one suite"
    )
    assert "no regression" not in "\n".join(lines)
    assert not any(line.startswith("nothing-compared:") for line in lines)  # the verdict says it, once


@pytest.mark.parametrize("rules", [None, ["none"], ["all"]])
def test_nothing_compared_fires_whatever_the_rules(rules):
    comparison = compare_reports(sample_report(), other_suite_report(), rules=rules)
    assert "nothing-compared" in comparison.rule_counts()
    assert comparison.format_text().splitlines()[-1].startswith("NOTHING COMPARED: no test is in both reports")


def test_the_json_form_of_nothing_compared_counts_no_compared_test():
    data = json.loads(json.dumps(compare_reports(sample_report(), other_suite_report()).to_json()))
    assert (data["regressed"], data["compared"], data["rule_counts"]) == (True, 0, {"nothing-compared": 1})
    assert data["regressions"][0]["nodeid"] == ""
    assert data["new_tests"] == [QUICKSTART] and len(data["vanished_tests"]) == 5
    assert compare_reports(sample_report(), sample_report()).to_json()["compared"] == 5


def test_an_empty_base_or_an_incomplete_new_run_is_not_nothing_compared():
    empty = build_report(ENV_2_13, {}, exitstatus=5, run=COMPLETE_RUN)
    assert not compare_reports(empty, other_suite_report()).regressed  # the base has nothing to compare
    crashed = interrupted_report(list(sample_report()["tests"]))
    comparison = compare_reports(sample_report(), crashed)
    assert [r.rule for r in comparison.regressions] == ["incomplete"]  # INCOMPLETE already says why
    assert comparison.format_text().splitlines()[-1].startswith("REGRESSION: 0 tests in both reports")


def test_the_cli_exits_1_with_nothing_compared_in_text_json_and_markdown(tmp_path):
    reports = {"base.json": sample_report(), "qs.json": other_suite_report()}
    code, out, err = run_cli("compare", "base.json", "qs.json", tmp_path=tmp_path, reports=reports)
    assert (code, err) == (1, "")
    assert out.splitlines()[-1].startswith("NOTHING COMPARED: no test is in both reports (5 vanished, 1 new)")
    code, out, _ = run_cli("compare", "base.json", "qs.json", "--json", tmp_path=tmp_path, reports=reports)
    assert code == 1 and json.loads(out)["rule_counts"] == {"nothing-compared": 1}
    code, out, _ = run_cli("compare", "base.json", "qs.json", "--markdown", tmp_path=tmp_path, reports=reports)
    assert code == 1
    assert "**NOTHING COMPARED**: no test is in both reports (5 vanished, 1 new); check the paths" in out
    assert "#### Regressions" not in out


def test_most_tests_vanished_is_said_loudly_without_failing():
    base = sample_report()
    new = copy.deepcopy(base)
    for nodeid in (DECODE, SPLIT, GPU_ONLY):
        del new["tests"][nodeid]
    comparison = compare_reports(base, new, labels=("base.json", "new.json"))
    assert not comparison.regressed and comparison.mostly_vanished
    lines = comparison.format_text().splitlines()
    assert lines[-1].startswith(
        "no regression, but MOST TESTS VANISHED (3 of the 5 of base.json): 2 tests in both reports: "
    )
    warning = (
        "warning: 3 of the 5 tests of base.json vanished, so most of it was not compared; "
        "run the same selection, or add vanished to --fail-on to fail on it"
    )
    assert warning in " ".join(line.strip() for line in lines) and warning in comparison.to_json()["notes"]
    # half or fewer vanished: the verdict is the plain one
    new["tests"][GPU_ONLY] = base["tests"][GPU_ONLY]
    text = compare_reports(base, new).format_text()
    assert text.splitlines()[-1].startswith("no regression: 3 tests in both reports") and "warning" not in text


def test_most_tests_vanished_with_the_vanished_rule_is_a_regression():
    base = sample_report()
    new = copy.deepcopy(base)
    for nodeid in (DECODE, SPLIT, GPU_ONLY):
        del new["tests"][nodeid]
    comparison = compare_reports(base, new, rules=["default", "vanished"])
    assert comparison.rule_counts() == {"vanished": 1}
    assert comparison.format_text().splitlines()[-1].startswith("REGRESSION: 2 tests in both reports")
