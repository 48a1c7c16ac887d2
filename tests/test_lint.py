"""ruff and mypy hold the line in CI: the checks (the layers' banned-API rule among them), the format, the types.

pyproject.toml's ``[tool.ruff]`` says what is checked; TID251 bans torch's, Triton's,
pytest's and xdist's internals outside the gateway (``pytest_cudagraph._compat``).
ruff comes with the ``test`` extra; where it is not installed these tests skip.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed (pip install -e '.[test]')"
)


def _ruff(*args: str) -> subprocess.CompletedProcess:
    # --no-cache: a test run leaves nothing behind in the checkout
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_check_passes():
    result = _ruff("check")
    assert result.returncode == 0, f"ruff check . found problems:\n{result.stdout}{result.stderr}"


def test_ruff_format_is_applied():
    result = _ruff("format", "--check")
    assert result.returncode == 0, (
        f"ruff format --check . would reformat (run 'ruff format .'):\n{result.stdout}{result.stderr}"
    )


# a cold mypy over 192 files: about a minute on two cores, the longest test of the default run; it runs
# with the slow tests (.ci/run, `pytest -m slow`) and in `tox -e lint`
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (pip install -e '.[test]')")
def test_mypy_passes_on_every_layer_and_the_gateway():
    """pyproject.toml's ``[tool.mypy]`` names the whole package: every layer and the gateway.

    The cache goes nowhere, so the checkout stays clean.
    """
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", "/dev/null"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
