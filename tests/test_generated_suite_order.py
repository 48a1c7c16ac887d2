"""The suites this test suite generates run in their files' order, though the suite itself runs shuffled.

Several generated suites remember some state in a first test and check it in a later
one; shuffled, the check could run first and pass without checking anything.
pytester deletes PYTEST_ADDOPTS, so tests/conftest.py's pytester fixture sets it again.
"""

from __future__ import annotations

import re

import pytest

MODULES = {
    f"test_m{module}": "\n".join(f"def test_{n}(): print('RAN m{module}:{n}')" for n in range(8)) for module in range(3)
}


def _order(result: pytest.RunResult) -> list[str]:
    return re.findall(r"RAN (m\d:\d)", result.stdout.str())


def test_in_process_and_subprocess_runs_keep_their_files_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**MODULES)
    for result in (pytester.runpytest("-s"), pytester.runpytest_subprocess("-s")):
        result.assert_outcomes(passed=24)
        assert _order(result) == sorted(_order(result))


def test_a_run_that_asks_for_random_order_gets_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**MODULES)
    result = pytester.runpytest("-s", "-p", "randomly", "--randomly-seed=1")
    result.assert_outcomes(passed=24)
    assert _order(result) != sorted(_order(result))
