"""A test body that resets Dynamo or torch's logging under the plugin's markers and fixtures, through pytester.

``torch._dynamo.reset()``, ``torch.compiler.reset()`` and ``torch._logging.set_logs()``
in the body must leave the recompile counts of ``@pytest.mark.max_recompiles`` and
of the ``recompiles`` fixture right, and leave the report saying what happened.
The runs are in-process with backend="eager" (Dynamo only); the GPU half, reduce-
overhead's trees under ``trees="all"`` and ``max_rerecords``, is
tests/gpu/test_resets_gpu.py.
"""

from __future__ import annotations

import json
import re

import pytest

# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal", "dynamo_modules_loaded")


BODIES = """
import logging

import pytest
import torch


def scale(tokens):
    return tokens * 2


@pytest.mark.max_recompiles(1)
def test_a_recompile_before_and_after_a_reset():
    f = torch.compile(scale, backend="eager", dynamic=False)
    f(torch.ones(2))
    f(torch.ones(3))
    torch._dynamo.reset()
    f(torch.ones(3))
    f(torch.ones(4))


@pytest.mark.max_recompiles(1)
def test_a_recompile_before_and_after_set_logs():
    f = torch.compile(scale, backend="eager", dynamic=False)
    f(torch.ones(2))
    f(torch.ones(3))
    torch._logging.set_logs(dynamo=logging.ERROR)
    try:
        f(torch.ones(4))
    finally:
        torch._logging.set_logs()


@pytest.mark.max_recompiles(2)
def test_two_recompiles_across_torch_compiler_reset(recompiles):
    f = torch.compile(scale, backend="eager", dynamic=False)
    f(torch.ones(2))
    f(torch.ones(3))
    torch.compiler.reset()
    f(torch.ones(3))
    f(torch.ones(4))
    assert recompiles.count == 2
"""


def test_recompiles_are_counted_across_the_bodys_reset_and_set_logs(pytester):
    import torch

    reset_before = torch._dynamo.reset
    pytester.makepyfile(test_bodies=BODIES)
    result = pytester.runpytest("--cudagraph-report=r.json", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    # Each failure section opens with the verdict; the short summary may repeat
    # it, to a width that depends on the terminal, so only line starts count.
    opening_lines = re.findall(r"^recompiled 2 times \(max 1\)", output, re.MULTILINE)
    assert len(opening_lines) == 2, output
    assert "ValueError" not in output and "torch/_dynamo" not in output
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    for name in (
        "test_a_recompile_before_and_after_a_reset",
        "test_a_recompile_before_and_after_set_logs",
        "test_two_recompiles_across_torch_compiler_reset",
    ):
        recompiles = tests[f"test_bodies.py::{name}"]["recompiles"]
        assert recompiles["count"] == 2, name
        assert "lost_sight" not in recompiles, name
    assert torch._dynamo.reset is reset_before


CUT_OFF = """
import logging

import pytest
import torch


@pytest.mark.max_recompiles(5)
def test_the_log_cut_off():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager", dynamic=False)
    f(torch.ones(2))
    f(torch.ones(3))
    logging.disable(logging.CRITICAL)
    f(torch.ones(4))
"""


def test_a_recompile_limit_the_watch_could_not_count_fails_in_one_sentence(pytester):
    import logging

    pytester.makepyfile(test_cut=CUT_OFF)
    try:
        result = pytester.runpytest("--cudagraph-report=r.json", "-p", "no:randomly")
    finally:
        logging.disable(logging.NOTSET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.max_recompiles(5): recompiles after a handler of the watch was taken off Dynamo's "
            "loggers (or their records disabled) in the block could not be counted, so at most 5 recompiles is "
            "not vouched for (1 counted before)."
        ]
    )
    record = json.loads((pytester.path / "r.json").read_text())["tests"]["test_cut.py::test_the_log_cut_off"]
    assert record["recompiles"]["lost_sight"].startswith("recompiles after a handler of the watch")
