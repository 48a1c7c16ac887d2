"""What a failing test that compiled prints: the plugin's message, not torch's structured trace.

pytest 9.2 attaches its capture handlers to torch's non-propagating trace logger,
and torch then writes dozens of empty ``DEBUG torch.__trace`` records per compile
into "Captured log call".  The plugin takes them off (ini option
``cudagraph_capture_torch_trace`` leaves them on).  In-process pytester runs with
backend="eager": each costs well under a second.
"""

from __future__ import annotations

import re

import pytest

# in-process runs that compile (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("dynamo_modules_loaded")

TRACE = "torch.__trace"

FAILING_RECOMPILE = """
import logging
import pytest
import torch

compiled = torch.compile(lambda x: x * 2, backend="eager")

@pytest.mark.max_recompiles(0)
def test_rank_flip():
    compiled(torch.ones(3))
    compiled(torch.ones(4, 4))

def test_compiles_then_fails():
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    assert False, "the test's own message"

def test_caplog_holds_no_trace_records(caplog):
    caplog.set_level(logging.DEBUG)
    torch.compile(lambda x: x - 1, backend="eager")(torch.ones(5))
    trace = [r for r in caplog.records if r.name == "torch.__trace"]
    assert not trace, f"{len(trace)} torch.__trace records in caplog"
"""

# pytest before 9.2 attaches its capture handlers to the root logger only: torch's
# trace logger never propagates there, so no run floods and the control has nothing to show.
PYTEST_ATTACHES_TO_NON_PROPAGATING_LOGGERS = pytest.version_tuple[:2] >= (9, 2)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((), id="defaults"),
        pytest.param(("--log-level=DEBUG",), id="log-level-debug"),
        pytest.param(("-o", "log_cli=true", "--log-cli-level=DEBUG"), id="live-log"),
        pytest.param(("--cudagraph",), id="cudagraph"),
    ],
)
def test_a_failing_compiled_test_shows_no_torch_trace_records(pytester, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "200")  # the headline on one line: its lines are fitted to the terminal
    pytester.makepyfile(test_flood=FAILING_RECOMPILE)
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=2, passed=1)
    output = result.stdout.str()
    assert re.search(r"^recompiled 1 time \(max 0\): .* \(@pytest\.mark\.max_recompiles\(0\)\)$", output, re.M)
    assert "AssertionError: the test's own message" in output
    assert TRACE not in output


@pytest.mark.skipif(
    not PYTEST_ATTACHES_TO_NON_PROPAGATING_LOGGERS, reason="pytest < 9.2 never captures torch's trace logger"
)
def test_the_ini_option_keeps_torch_trace_records_in_the_capture(pytester):
    pytester.makepyfile(test_flood=FAILING_RECOMPILE)
    result = pytester.runpytest("-o", "cudagraph_capture_torch_trace=true")
    result.assert_outcomes(failed=3)
    assert f"DEBUG    {TRACE}" in result.stdout.str()
    result.stdout.fnmatch_lines(["*torch.__trace records in caplog*"])


def test_the_ini_option_is_listed_in_help(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*cudagraph_capture_torch_trace*"])
