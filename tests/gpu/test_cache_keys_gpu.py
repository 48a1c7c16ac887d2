"""Why a cache missed, on a CUDA device: a Triton-backed warm miss explained, and GPU inputs against CPU inputs.

Run with ``pytest tests/gpu --cudagraph``; without it (or without a GPU) these skip.
Each inner run is a fresh pytest subprocess that compiles with Inductor (Triton on
the GPU, C++ on the CPU).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cudagraph

# The same tests on either device (CG_DEVICE), so that their reports pair test by test.
WARM_MISS = """
import os

import pytest
import torch

DEVICE = os.environ["CG_DEVICE"]
PASSES = {"flip": 0}


def step(x):
    with torch.no_grad():
        return torch.compile(lambda a: torch.sin(a) * 2 + a.cos().sum())(x)


@pytest.mark.compile_cache
def test_flip():
    PASSES["flip"] += 1
    torch._inductor.config.fallback_random = PASSES["flip"] == 2
    step(torch.randn(64, 64, device=DEVICE))


@pytest.mark.compile_cache
def test_warm_start():
    step(torch.randn(64, 64, device=DEVICE))
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, device: str) -> tuple[str, dict]:
    monkeypatch.setenv("CG_DEVICE", device)
    report = pytester.path / f"{device}.json"
    result = pytester.runpytest_subprocess(f"--cudagraph-report={report}", "-p", "no:cacheprovider", timeout=600)
    result.assert_outcomes(failed=1, passed=1)
    return result.stdout.str(), json.loads(report.read_text())


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", *args], capture_output=True, text=True, timeout=120
    )


def test_a_triton_backed_warm_miss_names_the_config_and_a_cpu_run_differs_in_device_and_system(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    pytester.makepyfile(test_keys=WARM_MISS)
    output, gpu = _run(pytester, monkeypatch, "cuda")
    print(output)
    assert "fxgraph miss for graph 1 of the warm pass: inductor_config[fallback_random]: False -> True" in output

    # the cold pass compiled Triton kernels; the warm start hit with none compiled
    warm_start = gpu["tests"]["test_keys.py::test_warm_start"]
    passes = warm_start["extra"]["compile_cache"]
    assert passes["cold"]["stats"]["triton"]["compiled"] > 0, passes["cold"]["stats"]
    assert passes["warm"]["stats"]["triton"]["compiled"] == 0, passes["warm"]["stats"]
    lookups = warm_start["cache_keys"]["lookups"]
    assert {(x["layer"], x["pass"], x["outcome"]) for x in lookups if x["layer"] == "fxgraph"} >= {
        ("fxgraph", "cold", "miss"),
        ("fxgraph", "warm", "hit"),
    }
    flip = gpu["tests"]["test_keys.py::test_flip"]["cache_keys"]["lookups"]
    warm_fx = next(x for x in flip if x["pass"] == "warm" and x["layer"] == "fxgraph")
    assert warm_fx["explained"] == ["inductor_config[fallback_random]: False -> True"]

    # the same tests with CPU tensors on this machine: the keys differ in the inputs' device (the
    # machine's system_info is the same for both; a CPU machine's report differs there too, see
    # docs/reports/README.md)
    _, _cpu = _run(pytester, monkeypatch, "cpu")
    compared = _cli("compare", str(pytester.path / "cpu.json"), str(pytester.path / "cuda.json"))
    print(compared.stdout)
    assert compared.returncode in (0, 1), compared.stderr
    explained = _cli("explain", str(pytester.path / "cpu.json"), str(pytester.path / "cuda.json"), "test_warm_start")
    print(explained.stdout)
    assert explained.returncode == 0, explained.stderr
    text = compared.stdout + explained.stdout
    assert "example_inputs[0]" in text and "device(type='cuda'" in text
