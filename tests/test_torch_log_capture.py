"""What a failing compiled test prints of torch's own logging: each message once, no Inductor chatter.

pytest 9.2 attaches its capture handlers to every logger that does not propagate,
and torch's ``torch``, ``torch._dynamo``, ``torch._inductor`` loggers are such
loggers, with their own stderr handlers: the recompile-limit WARNING came out twice
(captured stderr and captured log), and torch's off-by-default artifact loggers
(``torch._inductor.graph.__output_code``, INFO ``Output code written to``) had their
records captured.  The plugin keeps pytest's handlers off them unless the user asked
for torch's logs.  On pytest before 9.2 the handlers sit on the root logger only, so
the outcome asserted here holds there too.  Each run is a fresh subprocess: the
cache case compiles with Inductor, which an in-process pytester run cannot import twice.
"""

from __future__ import annotations

import pytest

PYTEST_ATTACHES_TO_NON_PROPAGATING_LOGGERS = pytest.version_tuple[:2] >= (9, 2)

FAILING_COMPILES = """
import pytest
import torch
from pytest_cudagraph import _compat
from pytest_cudagraph.compile.recompiles import watch_recompiles


@pytest.mark.compile_cache
def test_warm_pass_bypasses():
    with torch._inductor.config.patch(post_grad_custom_post_pass=lambda graph: None):
        torch.compile(lambda a: a.cos() + 1)(torch.randn(8))


def double(tokens):
    return tokens * 2


def test_recompile_limit():
    fixed = torch.compile(double, backend="eager", dynamic=False)
    with watch_recompiles():
        with torch._dynamo.config.patch(**{_compat.recompile_limit_name(): 2}):
            for size in range(2, 8):
                fixed(torch.ones(size))
    raise AssertionError("the test's own failure")
"""

LIMIT = "hit config.recompile_limit (2)"


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_failures_show_torchs_messages_once_and_no_output_code_lines(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    pytester.makepyfile(test_compiles=FAILING_COMPILES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "fxgraph: bypass 1 on the warm pass" in text
    assert "Output code written to" not in text
    assert text.count(LIMIT) == 1, text
    assert "Captured log" not in text, text


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
@pytest.mark.skipif(
    not PYTEST_ATTACHES_TO_NON_PROPAGATING_LOGGERS, reason="pytest < 9.2 never captures torch's own loggers"
)
def test_a_log_level_keeps_torchs_records_in_the_captured_log(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    pytester.makepyfile(test_compiles=FAILING_COMPILES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--log-level=WARNING")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*Captured log call*", f"WARNING  torch._dynamo.*{LIMIT}*"])
    assert "torch.__trace" not in result.stdout.str()


RECOMPILES_THEN_FAILS = """
import logging

import torch


def double(tokens):
    return tokens * 2


def test_recompiles_then_fails(recompiles):
    fixed = torch.compile(double, backend="eager", dynamic=False)
    for size in range(2, 5):
        fixed(torch.ones(size))
    raise AssertionError("the test's own failure")


def test_caplog_sees_no_recompile_record(recompiles, caplog):
    caplog.set_level(logging.DEBUG)
    fixed = torch.compile(double, backend="eager", dynamic=False)
    for size in range(2, 5):
        fixed(torch.ones(size))
    assert recompiles.count == 2
    assert [r.getMessage() for r in caplog.records if "Recompiling function" in r.getMessage()] == []
"""


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_the_recompile_records_the_plugin_turned_on_stay_out_of_a_debug_log_and_caplog(
    pytester: pytest.Pytester, monkeypatch
):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    pytester.makepyfile(test_recompiles=RECOMPILES_THEN_FAILS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--log-level=DEBUG")
    result.assert_outcomes(failed=1, passed=1)
    text = result.stdout.str()
    assert "the test's own failure" in text
    assert "__recompiles" not in text and "Recompiling function" not in text, text
    # the summary's row: the test under its file's line, its two recompiles counted
    result.stdout.fnmatch_lines(["test_recompiles.py", "  test_recompiles_then_fails *failed*2*"])
