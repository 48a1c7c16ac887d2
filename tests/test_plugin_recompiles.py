"""@pytest.mark.max_recompiles and the `recompiles` fixture, seen from outside through pytester.

The runs are in-process (torch is already imported by tests/conftest.py) and every
compile uses backend="eager", so each run costs well under a second.
"""

from __future__ import annotations

import json
import re

import pytest

# Dynamo names a tensor argument by its guard source: 2.6 writes the frame-locals
# lookup (``tensor 'L['tokens']'``), 2.8+ the bare name (``tensor 'tokens'``).  The
# plugin reports reasons verbatim, so both spellings are correct output.
# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal", "dynamo_modules_loaded")


TOKENS_DTYPE_MISMATCH = r"tensor '(?:L\['tokens'\]|tokens)' dtype mismatch"


DTYPE_RECOMPILE = """
import pytest
import torch

def double(tokens):
    return tokens * 2

compiled = torch.compile(double, backend="eager")
"""


def test_failing_max_recompiles_prints_reason_and_function(pytester):
    pytester.makepyfile(
        test_bad=DTYPE_RECOMPILE
        + """
@pytest.mark.max_recompiles(0)
def test_dtype_flip():
    compiled(torch.ones(2))
    compiled(torch.ones(2, dtype=torch.float64))
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r"^recompiled 1 time \(max 0\): double \(test_bad\.py:\d+\), tensor '.*' dtype mismatch "
            r"\(@pytest\.mark\.max_recompiles\(0\)\)$",
            # the function, the line of the test that called it, then the failed guard as a row
            r".*recompile 1 of 1: double \(test_bad\.py:\d+\), called from test_bad\.py:\d+ "
            r"`compiled\(torch\.ones\(2, dtype=torch\.float64\)\)`",
            r".*entry\s+failed guard\s+expected\s+actual",
            r".*\d+/0\s+" + TOKENS_DTYPE_MISMATCH + r"\s+Float\s+Double",
            r".*what to try:",
        ]
    )
    # the plugin's own report, not a traceback from inside torch
    assert "torch/_dynamo" not in result.stdout.str()


def test_passing_max_recompiles_stays_quiet(pytester):
    pytester.makepyfile(
        test_ok=DTYPE_RECOMPILE
        + """
@pytest.mark.max_recompiles(1)
def test_one_allowed():
    compiled(torch.ones(2))
    compiled(torch.ones(2, dtype=torch.float64))
"""
    )
    result = pytester.runpytest("-p", "no:terminalsummary")
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert "recompiled" not in text and "guard failure" not in text and "Recompiling" not in text


def test_recompile_limit_hit_fails_even_with_a_large_n(pytester):
    pytester.makepyfile(
        test_limit=DTYPE_RECOMPILE
        + """
from pytest_cudagraph import _compat

@pytest.mark.max_recompiles(100)
def test_many_sizes():
    fixed = torch.compile(double, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(**{_compat.recompile_limit_name(): 2}):
        for size in range(2, 8):
            fixed(torch.ones(size))
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "hit the recompile limit 1 time (recompiled 1 time, max 100) (@pytest.mark.max_recompiles(100))",
            "*recompile limit hits (Dynamo fell back to eager silently*",
            "*double (test_limit.py:*) hit config.*(2); Dynamo then ran it eagerly*size mismatch*",
        ]
    )


MANY_GUARDS = """
@pytest.mark.max_recompiles(0)
def test_marked():
    fixed = torch.compile(double, backend="eager", dynamic=False)
    for size in range(1, 8):
        fixed(torch.ones(size))


@pytest.mark.max_recompiles(0)
def test_marked_with_the_fixture(recompiles):
    fixed = torch.compile(double, backend="eager", dynamic=False)
    for size in range(1, 8):
        fixed(torch.ones(size))
"""


def test_guards_past_the_table_are_said_to_be_where_the_test_can_read_them(pytester):
    pytester.makepyfile(test_many_guards=DTYPE_RECOMPILE + MANY_GUARDS)
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    marked, fixture = text.split("test_marked_with_the_fixture", 1)[0], text.split("test_marked_with_the_fixture")[1]
    # the marker's own watch is nowhere in the test: only the report holds the events
    assert re.search(r"\.\.\. and \d+ more failed guards \(all are in the report's recompiles\.events\)", marked)
    assert ".events and" not in marked
    # with the recompiles fixture the test holds the watch: its .events are named too
    assert "more failed guards (all are in .events and the report's recompiles.events)" in fixture


def test_state_is_clean_for_the_next_test(pytester):
    pytester.makepyfile(
        test_two=DTYPE_RECOMPILE
        + """
import logging
from torch._logging._internal import log_state

def _state():
    names = ["torch._dynamo.guards.__recompiles", "torch._dynamo.convert_frame"]
    return (
        sorted(log_state.artifact_names),
        [(logging.getLogger(n).level, logging.getLogger(n).propagate, len(logging.getLogger(n).handlers))
         for n in names],
        torch._dynamo.config.error_on_recompile,
    )

START = _state()

@pytest.mark.max_recompiles(0)
def test_first_fails():
    compiled(torch.ones(2))
    compiled(torch.ones(2, dtype=torch.float64))

def test_second_sees_only_its_own_entries(recompiles):
    # Dynamo's cache starts empty: the float64 entry of the first test is gone,
    # so the only reason is this test's own float32 entry failing.
    compiled(torch.ones(2))
    compiled(torch.ones(2, dtype=torch.int64))
    assert recompiles.count == 1
    assert len(recompiles.reasons) == 1
    assert "expected Float, actual Long" in recompiles.reasons[0]

def test_third_sees_clean_state():
    assert _state() == START
"""
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1, passed=2)


def test_fixture_result_goes_into_the_report(pytester, tmp_path):
    pytester.makepyfile(
        test_fixture=DTYPE_RECOMPILE
        + """
def test_watch(recompiles):
    compiled(torch.ones(2))
    compiled(torch.ones(2, dtype=torch.float64))
    assert recompiles.count == 1
    assert recompiles.by_function["double (test_fixture.py:4)"].count == 1
"""
    )
    report = tmp_path / "report.json"
    result = pytester.runpytest(f"--cudagraph-report={report}")
    result.assert_outcomes(passed=1)
    entry = json.loads(report.read_text())["tests"]["test_fixture.py::test_watch"]
    recompiles = entry["recompiles"]
    assert recompiles["count"] == 1
    assert recompiles["limit_hits"] == []
    [reason] = recompiles["reasons"]
    assert re.fullmatch(r"\d+/0: " + TOKENS_DTYPE_MISMATCH + r"\. expected Float, actual Double", reason), reason
    assert recompiles["by_function"]["double (test_fixture.py:4)"]["count"] == 1
    assert recompiles["graph_breaks"] == {"count": 0, "reasons": [], "sites": []}


def test_fixture_assert_at_most_fails_the_test_with_the_report(pytester):
    pytester.makepyfile(
        test_fixture_fail=DTYPE_RECOMPILE
        + """
def test_watch(recompiles):
    compiled(torch.ones(2))
    compiled(torch.ones(3))
    recompiles.assert_at_most(0)
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*recompiled 1 time (max 0): *size mismatch*", "*size mismatch*"])


def test_raise_on_recompile_fails_at_the_recompile(pytester):
    pytester.makepyfile(
        test_strict=DTYPE_RECOMPILE
        + """
from pytest_cudagraph import watch_recompiles

def test_strict():
    with watch_recompiles(raise_on_recompile=True):
        compiled(torch.ones(2))
        compiled(torch.ones(2, dtype=torch.float64))
        raise AssertionError("not reached")
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r".*strict recompile check: double \(test_strict\.py:\d+\) was compiled again after its warm-up compile",
            r".*called from test_strict\.py:\d+",
            r".*\d+/0\s+" + TOKENS_DTYPE_MISMATCH + r"\s+Float\s+Double",
        ]
    )
    assert "not reached" not in result.stdout.str()


def test_watch_in_a_hypothesis_body_reports_every_example(pytester):
    pytester.makepyfile(
        test_hypo=DTYPE_RECOMPILE
        + """
from hypothesis import given, settings, strategies as st
from pytest_cudagraph import watch_recompiles

@settings(deadline=None, max_examples=5, database=None)
@given(size=st.integers(2, 6))
@pytest.mark.max_recompiles(1)
def test_sizes(size):
    with watch_recompiles() as w:
        compiled(torch.ones(size))
    w.assert_at_most(1)
"""
    )
    result = pytester.runpytest()
    # automatic dynamic shapes: at most one recompile over all examples
    result.assert_outcomes(passed=1)


SHARED_FUNCTION = """
import torch
from pytest_cudagraph import watch_recompiles

double = torch.compile(lambda tokens: tokens * 2, backend="eager")


def test_warms_the_shared_function():
    double(torch.ones(2))
    double(torch.ones(3))


def test_watches_the_shared_function():
    with watch_recompiles() as watch:
        double(torch.ones(2))
        double(torch.ones(3))
    assert watch.count == 1
"""


def test_a_plain_watch_counts_the_same_in_any_test_order(pytester):
    """Two orders of one build (pytest-randomly's seeds 6 and 1) record the same recompiles and compare clean."""
    from pytest_cudagraph.tools.cli import main

    pytester.makepyfile(test_shared=SHARED_FUNCTION)
    orders = []
    for seed in (6, 1):
        result = pytester.runpytest(
            "-v", "-p", "randomly", f"--randomly-seed={seed}", f"--cudagraph-report=seed{seed}.json"
        )
        result.assert_outcomes(passed=2)
        orders.append(re.findall(r"::(test_\w+) PASSED", result.stdout.str()))
    assert orders[0] == orders[1][::-1], orders  # the two seeds run the tests in the two orders
    counts = []
    for seed in (6, 1):
        report = json.loads((pytester.path / f"seed{seed}.json").read_text())
        counts.append(report["tests"]["test_shared.py::test_watches_the_shared_function"]["recompiles"]["count"])
    assert counts == [1, 1]
    assert main(["compare", str(pytester.path / "seed6.json"), str(pytester.path / "seed1.json")]) == 0
