"""Two runs of one build never compare as a regression: on caches warmer for one run, in another test order.

Real Inductor compiles on the CPU in fresh pytest subprocesses (slow): a test that
compiles against the caches the run shares, and a session-scoped fixture that
compiles (how a compiled model is shared), set up for whichever test asks first.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pytest_cudagraph.tools.cli import main

SUITE = """
import pytest
import torch


@pytest.fixture(scope="session")
def shared_model():
    model = torch.compile(lambda x: torch.cos(x) * 3)
    model(torch.randn(4, 8))
    return model


@pytest.mark.max_recompiles(1)
def test_compiles_itself():
    torch.compile(lambda x: torch.sin(x) * 2)(torch.randn(4, 8))


@pytest.mark.max_recompiles(1)
def test_uses_the_model_first(shared_model):
    shared_model(torch.randn(4, 8))


def test_uses_the_model_plainly(shared_model):
    shared_model(torch.randn(4, 8))
"""
ORDER = ["test_compiles_itself", "test_uses_the_model_first", "test_uses_the_model_plainly"]


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cache: Path, report: str, order: list[str]):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    args = [f"test_suite.py::{name}" for name in order]
    result = pytester.runpytest_subprocess(
        *args, "-p", "no:randomly", "-p", "no:cacheprovider", f"--cudagraph-report={report}"
    )
    result.assert_outcomes(passed=3)
    return json.loads((pytester.path / report).read_text())


def _compare(pytester: pytest.Pytester, base: str, new: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["compare", str(pytester.path / base), str(pytester.path / new)], stdout=out, stderr=io.StringIO())
    return code, out.getvalue()


@pytest.mark.slow
def test_one_build_twice_is_no_regression_on_a_warmer_cache_or_in_another_order(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(test_suite=SUITE)
    _run(pytester, monkeypatch, tmp_path / "runner", "cold.json", ORDER)
    # the second run on that runner hits; the next one, on a fresh runner, misses; its tests in reverse order
    warm = _run(pytester, monkeypatch, tmp_path / "runner", "warm.json", ORDER)
    fresh = _run(pytester, monkeypatch, tmp_path / "fresh", "fresh.json", ORDER[::-1])

    for base, new in (("warm.json", "fresh.json"), ("cold.json", "warm.json"), ("fresh.json", "warm.json")):
        code, text = _compare(pytester, base, new)
        assert code == 0, text
        assert "vanished" not in text.splitlines()[-1] or " 0 vanished" in text.splitlines()[-1]
    code, text = _compare(pytester, "warm.json", "fresh.json")
    assert "cache-miss: 1 test missed more" in text

    record = warm["tests"]["test_suite.py::test_compiles_itself"]
    assert record["caches"]["start"] == "shared" and record["caches"]["fxgraph"]["hit"] >= 1
    assert fresh["tests"]["test_suite.py::test_compiles_itself"]["caches"]["fxgraph"]["miss"] >= 1
    # the session fixture's compile is nobody's test: recorded apart, for the test it was set up for
    for report, first in ((warm, ORDER[1]), (fresh, ORDER[2])):
        assert "test_suite.py::test_uses_the_model_plainly" not in report["tests"]
        # the plugin test compiles the model again itself (the test before it reset Dynamo): that one is its own
        own = report["tests"]["test_suite.py::test_uses_the_model_first"]
        assert (own["caches"]["fxgraph"]["hit"], own["caches"]["fxgraph"]["miss"]) == (1, 0)
        assert {lookup["pass"] for lookup in own["cache_keys"]["lookups"]} == {None}
        (setup,) = report["fixture_setups"]
        assert setup["fixture"] == "shared_model" and setup["scope"] == "session"
        assert setup["set_up_for"] == f"test_suite.py::{first}" and setup["worker"] == "main"
        assert setup["caches"]["fxgraph"]["hit"] + setup["caches"]["fxgraph"]["miss"] == 1
        if first == ORDER[1]:  # a plugin test's lookups: the fixture's went with it
            assert {lookup["layer"] for lookup in setup["lookups"]} == {"fxgraph", "aot_autograd"}
    assert warm["summary"]["caches"]["fxgraph"]["hit"] >= 2  # the fixture's counters count in the run's totals
