"""GitHub annotations of the plugin's failures, and the job summary: the lines, their escaping, where they point.

The escaping is checked against a parser that reads a command as the Actions runner does
(``ActionCommand.TryParseV2``: the first ``::`` after the name ends the properties; each
property and the message are unescaped in the runner's order), with hostile messages:
newlines, ``%``, ``::``, commas, control characters, a megabyte of text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.plugin.failure_annotations import annotation_lines, annotation_path
from pytest_cudagraph.records.comparison import Regression
from pytest_cudagraph.render.failure_line import failure_cause
from pytest_cudagraph.render.plain_text import clip_middle, terminal_safe
from pytest_cudagraph.render.workflow_commands import MESSAGE_WIDTH, error_command, escape_data, escape_property

# the runner's unescaping, in its order: %0D, %0A (and for properties %3A, %2C), then %25
DATA_ESCAPES = (("\r", "%0D"), ("\n", "%0A"), ("%", "%25"))
PROPERTY_ESCAPES = (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25"))


def unescape(text: str, escapes: tuple[tuple[str, str], ...]) -> str:
    for token, replacement in escapes:
        text = text.replace(replacement, token)
    return text


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """``(name, properties, message)`` as GitHub's runner reads a workflow command line."""
    assert line.startswith("::") and "\n" not in line and "\r" not in line
    end = line.index("::", 2)
    info, data = line[2:end], line[end + 2 :]
    name, _, rest = info.partition(" ")
    properties = {}
    for pair in filter(None, rest.split(",")):
        key, _, value = pair.partition("=")
        properties[key] = unescape(value, PROPERTY_ESCAPES)
    return name, properties, unescape(data, DATA_ESCAPES)


def shown(text: str) -> str:
    """What the annotation shows of ``text``: its characters, control characters but CR and LF written as escapes."""
    return "".join(char if char in "\r\n" else terminal_safe(char) for char in text)


def test_escaping_follows_githubs_rules():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a,b: 50%\n") == "a%2Cb%3A 50%25%0A"
    assert escape_data("a :: b, c") == "a :: b, c"  # the message may hold "::" and commas as they are
    line = error_command("x", file="dir/a,b:c.py", line=7, title="rule: one, two")
    assert line == "::error file=dir/a%2Cb%3Ac.py,line=7,title=rule%3A one%2C two::x"
    assert error_command("only a message") == "::error::only a message"


@settings(max_examples=300, deadline=None)
@given(message=st.text(max_size=200), title=st.text(max_size=40), file=st.text(max_size=40))
def test_any_message_reads_back_as_itself_on_one_line(message, title, file):
    line = error_command(message, file=file or None, line=12, title=title or None)
    name, properties, data = parse_command(line)
    assert name == "error"
    assert data == shown(message)
    if file:
        assert properties["file"] == shown(file) and properties["line"] == "12"
    if title:
        assert properties["title"] == shown(title)


def test_a_very_long_message_is_cut_in_the_middle_before_it_is_escaped():
    message = "%\n" * 500_000 + "the end"
    line = error_command(message, title="t")
    assert len(line) < 3 * MESSAGE_WIDTH + 100
    _, _, data = parse_command(line)
    assert data == clip_middle(message, MESSAGE_WIDTH) and data.endswith("the end")


def test_each_failure_is_one_line_once_and_a_regression_points_at_its_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record = {
        "outcome": "failed",
        "failure": {"when": "call", "message": "Failed: boom\nmore", "rule": "capture", "file": "t.py", "line": 4},
    }
    own = {"outcome": "failed", "failure": {"when": "call", "message": "AssertionError: assert 1 == 2"}}
    regression = Regression("tests/t.py::test_a", "pool", "graph pool 60.0 MiB -> 72.0 MiB")
    lines = annotation_lines({"t.py::a": record, "t.py::own": own}, [regression, regression], tmp_path, None)
    assert lines == [
        "::error file=t.py,line=4,title=capture::boom%0Ain t.py::a",
        "::error file=tests/t.py,title=pool (baseline)::graph pool 60.0 MiB -> 72.0 MiB%0Ain tests/t.py::test_a",
    ]
    # relative to the checkout when GitHub names one; a file outside it gets no place on the diff
    assert annotation_path(str(tmp_path / "src" / "m.py"), str(tmp_path)) == "src/m.py"
    assert annotation_path("/elsewhere/m.py", str(tmp_path)) is None


HOSTILE_SUITE = """
import pytest
from pytest_cudagraph.errors import InvariantViolation, MisuseError, StaleGraphError
from pytest_cudagraph.graphs.pool_check import PoolCheck

MiB = 2 ** 20


def test_stale():
    raise StaleGraphError("parameter 'w' was replaced 100% :: a,b\\nsecond line")  # STALE


def test_long():
    raise InvariantViolation("x" * 50_000 + " the end")  # LONG


def helper():
    raise MisuseError("sizes=[0, 8]: give sizes >= 1, e.g. 1:8")  # MISUSE


def test_misuse():
    helper()


def test_pool():
    check = PoolCheck(pool_bytes=90 * MiB, largest_size=8, largest_graph_bytes=10 * MiB, cublas_workspace_bytes=0,
                      pools=(((0, 1), 45 * MiB), ((0, 2), 45 * MiB)), pool_mode="separate", order="largest_first",
                      keep_outputs=False)
    check.raise_if_failed()  # POOL


def test_own_assert():
    assert 1 == 2


def test_passes():
    pass
"""


def line_of(source: str, marker: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if f"# {marker}" in line)


def run_hostile(pytester, monkeypatch, *args: str, github: bool = True):
    if github:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    else:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    pytester.makepyfile(test_hostile=HOSTILE_SUITE)
    result = pytester.runpytest(f"--cudagraph-report={pytester.path / 'r.json'}", "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1, failed=5)
    return result, [line for line in result.outlines if line.startswith("::")]


def test_each_plugin_failure_is_an_error_annotation_at_the_users_line(pytester, monkeypatch):
    result, lines = run_hostile(pytester, monkeypatch)
    source = (pytester.path / "test_hostile.py").read_text()
    commands = {properties["title"]: (properties, data) for _, properties, data in map(parse_command, lines)}
    assert len(lines) == len(commands) == 4  # the test's own assert is pytest's to report
    for title, marker in (("stale-graph", "STALE"), ("check", "LONG"), ("misuse", "MISUSE"), ("pool", "POOL")):
        properties, _ = commands[title]
        assert properties["file"] == "test_hostile.py" and properties["line"] == str(line_of(source, marker)), title
    _, stale = commands["stale-graph"]
    assert stale == "StaleGraphError: parameter 'w' was replaced 100% :: a,b\nin test_hostile.py::test_stale"
    _, long = commands["check"]
    assert len(long) < 400 and long.startswith("InvariantViolation: xxx")
    assert long.endswith("xxx...\nin test_hostile.py::test_long")  # one line of the cause, cut at its end
    assert commands["pool"][1].startswith("InvariantViolation: pool check (separate pools): the graphs use 2 pools")
    # the report keeps the check and the line
    failure = json.loads((pytester.path / "r.json").read_text())["tests"]["test_hostile.py::test_misuse"]["failure"]
    assert (failure["rule"], failure["file"], failure["line"]) == (
        "misuse",
        "test_hostile.py",
        line_of(source, "MISUSE"),
    )
    assert "rule" not in json.loads((pytester.path / "r.json").read_text())["tests"].get(
        "test_hostile.py::test_own_assert", {"failure": {}}
    ).get("failure", {})


def test_annotations_off_and_outside_github(pytester, monkeypatch):
    _, lines = run_hostile(pytester, monkeypatch, "--cudagraph-annotations=off")
    assert lines == []


def test_annotations_only_under_github_unless_asked_for(pytester, monkeypatch):
    _, lines = run_hostile(pytester, monkeypatch, github=False)
    assert lines == []
    _, lines = run_hostile(pytester, monkeypatch, "--cudagraph-annotations=github", github=False)
    assert len(lines) == 4


def test_a_recompile_check_points_at_the_call_site(dynamo_modules_loaded, pytester, monkeypatch):
    """A real recompile (the eager backend): the marker's and the watch's failures point at the line that called."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    source = """
import pytest
import torch


@pytest.mark.max_recompiles(0)
def test_marker():
    fn = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    fn(torch.ones(2))
    fn(torch.ones(2, dtype=torch.float64))  # MARKER


def test_watch(recompiles):
    fn = torch.compile(lambda x: x - 1, backend="eager", dynamic=False)
    fn(torch.ones(2))
    fn(torch.ones(3))  # WATCH
    recompiles.assert_at_most(0)
"""
    source = pytester.makepyfile(test_rec=source).read_text()
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    commands = [parse_command(line) for line in result.outlines if line.startswith("::error")]
    assert [(p["title"], p["file"], p["line"]) for _, p, _ in commands] == [
        ("max_recompiles", "test_rec.py", str(line_of(source, "MARKER"))),
        ("recompiles", "test_rec.py", str(line_of(source, "WATCH"))),
    ]
    assert re.match(r"recompiled 1 time \(max 0\): <lambda> .*dtype mismatch", commands[0][2])


def test_the_job_summary_is_appended_to_githubs_file(pytester, monkeypatch):
    summary = pytester.path / "summary.md"
    summary.write_text("an earlier step's summary\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    result, _ = run_hostile(pytester, monkeypatch, github=False)
    text = summary.read_text()
    assert text.startswith(
        "an earlier step's summary\n### pytest-cudagraph: r.json\n\n**FAILED**: 4 tests recorded: 4 failed;"
    )
    assert "- `test_hostile.py::test_stale` failed, **stale-graph** at `test_hostile.py:" in text
    # off: nothing appended; auto without a report: nothing either
    before = summary.read_text()
    pytester.runpytest("--cudagraph-report=r2.json", "--cudagraph-summary=off", "-p", "no:cacheprovider")
    pytester.runpytest("--cudagraph", "-p", "no:cacheprovider")
    assert summary.read_text() == before
    # asked for: written without a report too
    pytester.runpytest("--cudagraph-summary=github", "-p", "no:cacheprovider")
    assert summary.read_text().count("### pytest-cudagraph") == 2


def test_a_summary_asked_for_outside_github_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makepyfile(test_one="def test_one(): pass")
    result = pytester.runpytest_subprocess("--cudagraph-summary=github", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--cudagraph-summary=github appends to the file $GITHUB_STEP_SUMMARY names, and it is not set;*"]
    )
    assert "Traceback" not in result.stderr.str()


def test_an_unwritable_summary_costs_a_line_not_the_run(pytester, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path))  # a directory
    pytester.makepyfile(test_one="def test_one(): pass")
    result = pytester.runpytest("--cudagraph-summary=github", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["cudagraph: the job summary was NOT appended to *; the report and the outcome*"])


def test_the_baseline_comparison_joins_the_summary(pytester, monkeypatch, tmp_path):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_one="def test_one(): pass")
    base = pytester.path / "base.json"
    pytester.runpytest(f"--cudagraph-report={base}", "--cudagraph-summary=off", "-p", "no:cacheprovider")
    pytester.runpytest(f"--cudagraph-report={pytester.path / 'new.json'}", f"--cudagraph-baseline={base}")
    text = summary.read_text()
    assert "### pytest-cudagraph: new.json" in text
    assert f"### pytest-cudagraph: compared with baseline {base}" in text and "**no regression**:" in text


def test_one_line_causes_keep_the_headline_and_the_first_problem():
    record = {
        "outcome": "failed",
        "failure": {
            "message": "Failed: @pytest.mark.compile_cache(mode='inprocess'): the warm pass was not a pure cache hit "
            "(2 problems); cache dir /tmp/x/marked-1\n  - fxgraph: no hit\n  - aot_autograd: bypass 1\n\nhint: - no",
            "rule": "compile_cache",
        },
    }
    assert failure_cause(record) == (
        "@pytest.mark.compile_cache(mode='inprocess'): the warm pass was not a pure cache hit (2 problems): "
        "fxgraph: no hit"
    )
    record["failure"]["message"] = "pytest_cudagraph.errors.CaptureError: capturing f failed\n\nwhat to try:\n  - x"
    assert failure_cause(record) == "CaptureError: capturing f failed"
    assert failure_cause({"outcome": "failed", "failure": {"message": "y" * 1000}}).endswith("...")


def test_the_plain_api_capture_failure_site_is_the_ops_line(tmp_path):
    """A capture's failure names the op's line (``describe_capture_failure_at``): the file and line GitHub shows."""
    from pytest_cudagraph.graphs.capture_failure import describe_capture_failure_at

    def step(x):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")  # THE OP

    try:
        step(None)
    except RuntimeError as exc:
        message, _, site = describe_capture_failure_at(exc, "batch size 4", "step")
    source = Path(__file__).read_text()
    assert site == (__file__, line_of(source, "THE OP"))
    assert f"test_ci_annotations.py:{site[1]}" in message
    assert describe_capture_failure_at(RuntimeError("capture ended"), "b", "f")[2] is None


def test_a_changed_graphs_one_line_cause_ends_on_the_constant_not_on_a_colon():
    """The problem that introduces the code diff ends on a colon: the line names what changed after it."""
    from test_failure_heads import _graph_changed

    from pytest_cudagraph.caches.warm_start import format_failure

    pair = _graph_changed()
    message = format_failure(pair, pair.problems(), context="@pytest.mark.compile_cache(mode='inprocess')")
    record = {"outcome": "failed", "failure": {"message": f"Failed: {message}", "rule": "compile_cache"}}
    assert failure_cause(record) == (
        "the traced graph differs between the cold and the warm pass (@pytest.mark.compile_cache(mode='inprocess')): "
        "the code the body traced, cold pass -> warm pass (aot_autograd graph 1): a constant: 1.0 -> 2.0"
    )
    # code that differs in more than a constant: its first removed and added lines
    record["failure"]["message"] = "Failed: head\n  - the code:\n      - a = x.sin()\n      + a = x.cos()\n  - other"
    assert failure_cause(record) == "head: the code: `a = x.sin()` -> `a = x.cos()`"
