"""``cudagraph_capture_torch_trace = true`` keeps torch's trace records in the capture, and nothing else of torch's.

torch's own loggers print through their own stderr handlers; pytest 9.2 also attaches
its capture handlers to them (they do not propagate), so a warning of torch's, such
as the recompile limit's, would show twice under a failing test: in the captured
stderr and in the captured log (tests/test_torch_log_capture.py).  The plugin takes
pytest's handlers off those loggers; the ini option keeps them on the trace logger
only, where the hook that took them off every other logger used to be left
unregistered.  Compiles with backend="eager".
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

KEEP_TRACE = ("-o", "cudagraph_capture_torch_trace=true")

HANDLERS_TAKEN_OFF = """
import logging

import torch
from _pytest.logging import LogCaptureHandler

from pytest_cudagraph.plugin.torch_trace import detach_pytest_handlers


def test_pytest_handlers_leave_torch_loggers_but_the_trace_one(request):
    assert request.config.pluginmanager.get_plugin("cudagraph-torch-trace") is not None
    torch_logger, trace_logger = logging.getLogger("torch"), logging.getLogger("torch.__trace")
    on_torch, on_trace = LogCaptureHandler(), LogCaptureHandler()
    torch_logger.addHandler(on_torch)
    trace_logger.addHandler(on_trace)
    try:
        detach_pytest_handlers(request.config)
        assert on_torch not in torch_logger.handlers
        assert on_trace in trace_logger.handlers
    finally:
        torch_logger.removeHandler(on_torch)
        trace_logger.removeHandler(on_trace)
"""


def test_with_the_trace_kept_pytest_handlers_still_leave_torch_other_loggers(pytester):
    pytester.makepyfile(test_handlers=HANDLERS_TAKEN_OFF)
    pytester.runpytest(*KEEP_TRACE).assert_outcomes(passed=1)


HITS_THE_LIMIT = """
import torch
from pytest_cudagraph import _compat


def double(tokens):
    return tokens * 2


def test_hits_the_recompile_limit():
    fixed = torch.compile(double, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(**{_compat.recompile_limit_name(): 2}):
        for size in range(2, 8):
            fixed(torch.ones(size))
    raise AssertionError("the test's own failure")
"""


@pytest.mark.skipif(
    pytest.version_tuple[:2] < (9, 2), reason="pytest < 9.2 attaches its handlers to the root logger only"
)
def test_with_the_trace_kept_the_recompile_limit_warning_is_shown_once(pytester, monkeypatch):
    """A subprocess: torch's stderr handler writes to the stderr of the process that imported torch."""
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    pytester.makepyfile(test_limit=HITS_THE_LIMIT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *KEEP_TRACE)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert output.count("hit config.recompile_limit (2)") == 1, output
    assert "DEBUG    torch.__trace" in output  # what the option is for


CACHE_FAILURE = """
import pytest
import torch

# Inductor's loggers exist before the test starts: pytest 9.2 attaches its handlers to those that exist then
torch.compile(lambda a: a + 1)(torch.randn(2))


@pytest.mark.compile_cache
def test_warm_pass_bypasses():
    with torch._inductor.config.patch(post_grad_custom_post_pass=lambda graph: None):
        torch.compile(lambda a: a.cos() + 1)(torch.randn(8))
"""


@pytest.mark.skipif(
    pytest.version_tuple[:2] < (9, 2), reason="pytest < 9.2 attaches its handlers to the root logger only"
)
def test_with_the_trace_kept_a_cache_failure_shows_no_output_code_lines(pytester, monkeypatch):
    """Inductor's off-by-default ``__output_code`` logger has no handler of its own: pytest's printed its INFO lines."""
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    pytester.makepyfile(test_cache=CACHE_FAILURE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *KEEP_TRACE)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "fxgraph: bypass 1 on the warm pass" in output
    assert "Output code written to" not in output, output
