"""Warnings the plugin triggers are not the user's: torch's deprecations from importing Inductor stay out of a test.

Importing Inductor (``compat.start_compiler()``, before a cache probe's first pass)
made torch 2.13 warn ``torch.jit.script_method is deprecated`` 14 times inside every
compile-cache test, and under ``-W error::DeprecationWarning`` the quickstart's
cache test failed through the plugin's frames.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

START_COMPILER = "from pytest_cudagraph import _compat; print(sorted(_compat.start_compiler()))"


def test_starting_the_compiler_turns_no_warning_filter_of_the_user_into_a_failure():
    # a fresh interpreter: this one may have imported Inductor already
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", START_COMPILER],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "['cpu_isa_s', 'imports_s']" in done.stdout
    assert "script_method" not in done.stderr


QUICKSTART_CACHE = """
import pytest
import torch


@pytest.mark.compile_cache
def test_warm_start(compile_cache):
    fn = torch.compile(lambda x: torch.sin(x) + x.cos())
    compile_cache.record("out", fn(torch.randn(8, 8)))
"""


@pytest.mark.slow  # an Inductor compile, cold and warm, in a fresh interpreter
def test_the_quickstart_cache_test_passes_without_torch_warnings_and_under_warnings_as_errors(pytester):
    pytester.makepyfile(test_quickstart_cache=QUICKSTART_CACHE)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert "script_method" not in result.stdout.str() and "warning" not in result.stdout.lines[-1]
    strict = pytester.runpytest_subprocess("-p", "no:randomly", "-W", "error::DeprecationWarning")
    strict.assert_outcomes(passed=1)
