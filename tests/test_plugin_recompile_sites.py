"""Where a recompile or graph break came from, and which guards failed, seen from outside through pytester.

A failing ``max_recompiles`` test must point at the user's line that called the
compiled function (a helper's line, not torch's), list every failed guard with the
value expected and the value that came, and keep all of it in the report's
``recompiles.events``; ``reasons`` stays one flat line per failed entry.
"""

from __future__ import annotations

import json
import re

import pytest

# torch 2.6 prints a tensor argument's guard source as L['x'], 2.8+ as x
# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal", "dynamo_modules_loaded")


X = r"(?:L\['x'\]|x)"


def line_of(source: str, text: str) -> int:
    """The 1-based line of ``text`` in the file pytester writes from ``source``."""
    lines = source.strip("\n").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


Y = r"(?:L\['y'\]|y)"


HELPER_CALL = """
import pytest
import torch

def scale(x, y):
    return x * y

compiled = torch.compile(scale, backend="eager", dynamic=False)

def run(x, y):
    return compiled(x, y)

@pytest.mark.max_recompiles(0)
def test_two_guards_change():
    run(torch.ones(4), torch.ones(1))
    run(torch.ones(8), torch.ones(1, dtype=torch.float64))
"""


def test_recompile_names_the_helpers_call_line_and_every_failed_guard(pytester, tmp_path):
    pytester.makepyfile(test_sites=HELPER_CALL)
    report = tmp_path / "report.json"
    result = pytester.runpytest(f"--cudagraph-report={report}", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            rf".*recompile 1 of 1: scale \(test_sites\.py:{line_of(HELPER_CALL, 'def scale')}\), called from "
            rf"test_sites\.py:{line_of(HELPER_CALL, 'return compiled')} `return compiled\(x, y\)`",
            r".*entry\s+failed guard\s+expected\s+actual",
            # torch's message names x's size only; y's dtype is the watch's own finding
            r".*0/0\s+tensor '" + X + r"' size mismatch at index 0\s+4\s+8$",
            r".*0/0\s+tensor '" + Y + r"' dtype mismatch \*\s+(?:Float|torch\.float32)\s+(?:Double|torch\.float64)$",
            r".*\* not in torch's message, which names only the first failing guard of an entry",
            # what to try reads the guards torch left out too
            r".*what to try:",
            r".*a size changed.*",
            r".*a dtype changed: cast inputs to one dtype.*",
        ]
    )
    record = json.loads(report.read_text())["tests"]["test_sites.py::test_two_guards_change"]["recompiles"]
    [event] = record["events"]
    assert event["function"] == f"scale (test_sites.py:{line_of(HELPER_CALL, 'def scale')})"
    assert event["call_site"] == {
        "file": "test_sites.py",
        "line": line_of(HELPER_CALL, "return compiled"),
        "code": "return compiled(x, y)",
        "function": "run",
    }
    size, dtype = event["guards"]
    assert (size["entry"], size["kind"], size["expected"], size["actual"]) == ("0/0", "size", "4", "8")
    assert size["reported_by_torch"] is True
    assert (dtype["entry"], dtype["kind"], dtype["reported_by_torch"]) == ("0/0", "dtype", False)
    # spelled as torch spells a dtype in its own rows
    assert dtype["source"] == "y" and dtype["expected"] == "Float" and dtype["actual"] == "Double"
    # reasons: one flat line per failed entry, torch's words; the verbatim text is kept apart
    assert [re.sub(X, "x", r) for r in record["reasons"]] == [
        "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"
    ]
    assert event["verbatim"] and event["verbatim"][0].startswith("0/0: ")


SCALAR_AND_COMMENT = """
import pytest
import torch

def shift(x, n):
    return x + n  # a comment Dynamo quotes into its reason

compiled = torch.compile(shift, backend="eager", dynamic=False)

@pytest.mark.max_recompiles(0)
def test_scalar():
    compiled(torch.ones(2), 2)
    compiled(torch.ones(2), 3)
"""


def test_reasons_are_flat_first_lines_without_comments_or_stacks(pytester, tmp_path):
    pytester.makepyfile(test_flat=SCALAR_AND_COMMENT)
    report = tmp_path / "report.json"
    result = pytester.runpytest(f"--cudagraph-report={report}", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    record = json.loads(report.read_text())["tests"]["test_flat.py::test_scalar"]["recompiles"]
    [reason] = record["reasons"]
    assert re.fullmatch(r"0/0: (?:L\['n'\]|n) == 2", reason), reason
    # the quoted source line and the user stack torch 2.8+ appends are in the verbatim text only
    [event] = record["events"]
    assert "a comment Dynamo quotes" not in reason and "User stack" not in reason
    [verbatim] = event["verbatim"]
    assert verbatim.startswith(reason)
    [guard] = event["guards"]
    assert guard["kind"] == "value" and guard["expected"] == "2"
    assert guard["actual"] in ("3", None)  # the value that came, where the watch could evaluate it
    call = line_of(SCALAR_AND_COMMENT, "compiled(torch.ones(2), 3)")
    result.stdout.re_match_lines([rf".*called from test_flat\.py:{call} `compiled\(torch\.ones\(2\), 3\)`"])


LIMIT_HIT = """
import pytest
import torch
import torch._dynamo

def shift(x, n):
    return x + n

compiled = torch.compile(shift, backend="eager", dynamic=False)

@pytest.mark.max_recompiles(100)
def test_limit():
    with torch._dynamo.config.patch({LIMIT: 2}):
        for n in range(4):
            compiled(torch.ones(2), n)
"""


def test_a_limit_hit_is_an_event_with_its_call_site_and_guards(pytester, tmp_path):
    from pytest_cudagraph import _compat

    pytester.makepyfile(test_limit=LIMIT_HIT.replace("LIMIT", repr(_compat.recompile_limit_name())))
    report = tmp_path / "report.json"
    result = pytester.runpytest(f"--cudagraph-report={report}", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    record = json.loads(report.read_text())["tests"]["test_limit.py::test_limit"]["recompiles"]
    hits = [event for event in record["events"] if event["limit_hit"]]
    assert hits, record["events"]
    hit = hits[0]
    call = line_of(LIMIT_HIT, "compiled(torch.ones(2), n)")
    assert hit["function"] == f"shift (test_limit.py:{line_of(LIMIT_HIT, 'def shift')})"
    assert hit["call_site"]["file"] == "test_limit.py" and hit["call_site"]["line"] == call
    assert hit["guards"] and all(g["kind"] == "value" for g in hit["guards"])
    assert "hit config." in hit["limit_hit"]
    # the readable line keeps torch's last reason flat: no comment, no stack
    assert "User stack" not in hit["limit_hit"] and "#" not in hit["limit_hit"]
    result.stdout.re_match_lines(
        [r".*hit config\.\w+ \(2\).*; called from test_limit\.py:14 `compiled\(torch\.ones\(2\), n\)`"]
    )


GRAPH_BREAK = """
import pytest
import torch

def noisy(x):
    y = x * 2
    print("traced")
    return y + 1

compiled = torch.compile(noisy, backend="eager")

def call(x):
    return compiled(x)

@pytest.mark.max_recompiles(0)
def test_breaks():
    call(torch.ones(3))
    call(torch.ones(3, dtype=torch.float64))
"""


def test_graph_breaks_name_where_they_broke_and_who_called(pytester, tmp_path):
    pytester.makepyfile(test_breaks=GRAPH_BREAK)
    report = tmp_path / "report.json"
    result = pytester.runpytest(f"--cudagraph-report={report}", "-p", "no:randomly", "-s")
    result.assert_outcomes(failed=1)
    brk, call = line_of(GRAPH_BREAK, "print("), line_of(GRAPH_BREAK, "return compiled")
    result.stdout.re_match_lines(
        [
            # the code after the break is a function Dynamo made; its caller is still the user's line
            rf".*recompile 2 of 2: torch_dynamo_resume_in_noisy_at_{brk} \(test_breaks\.py:{brk}\), called from "
            rf"test_breaks\.py:{call} `return compiled\(x\)`",
            r".*graph breaks \(not recompiles\): 2",
            rf".*- .*print.* \(x2\) at test_breaks\.py:{brk} `print\(\"traced\"\)`, called from "
            rf"test_breaks\.py:{call} `return compiled\(x\)`",
        ]
    )
    breaks = json.loads(report.read_text())["tests"]["test_breaks.py::test_breaks"]["recompiles"]["graph_breaks"]
    [site] = breaks["sites"]
    assert site["location"] == f"test_breaks.py:{brk}" and site["code"] == 'print("traced")'
    assert site["call_site"]["line"] == call and site["count"] == 2
    assert "\n" not in site["reason"]
