"""Reduce-overhead re-recording at every new shape, on a GPU: ``@pytest.mark.cudagraph(max_rerecords=N)``.

A function compiled with ``mode="reduce-overhead"`` and called with 12 batch sizes
records a CUDA graph for each (cudagraph trees record one per shape): 11
re-recordings.  The marker's limit of 4 must fail the test naming the function and
the shapes in order, and the report must keep the counts; bucketing the batch to
three sizes passes.

Run with ``pytest tests/gpu/test_rerecords_gpu.py --cudagraph -p no:randomly``;
without a GPU (or the flag) every test skips.
"""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.cudagraph

MARKED = """
import pytest
import torch


def step(x):
    return torch.relu(x) * 2 + 1


def bucketed_step(x):
    return torch.relu(x) * 2 + 1


@pytest.mark.cudagraph(trees="all", max_rerecords=4)
def test_twelve_shapes():
    compiled = torch.compile(step, mode="reduce-overhead")
    for n in range(2, 14):
        x = torch.randn(n, 16, device="cuda")
        for _ in range(3):  # a new shape warms up first, then records
            compiled(x)


@pytest.mark.cudagraph(trees="all", max_rerecords=4)
def test_bucketed():
    compiled = torch.compile(bucketed_step, mode="reduce-overhead")
    for n in range(2, 14):
        bucket = next(b for b in (4, 8, 16) if b >= n)
        x = torch.zeros(bucket, 16, device="cuda")
        x[:n] = torch.randn(n, 16, device="cuda")
        for _ in range(3):
            compiled(x)
"""


def test_twelve_shapes_fail_max_rerecords_naming_the_shapes_and_the_report_keeps_the_counts(pytester, tmp_path):
    assert torch.cuda.is_available()
    pytester.makepyfile(test_rerecord=MARKED)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--cudagraph", f"--cudagraph-report={report}", "-p", "no:randomly")
    print(result.stdout.str())
    result.assert_outcomes(passed=1, failed=1)
    shapes = "; ".join(f"({n}, 16)" for n in range(2, 14))
    output = result.stdout.str()
    assert (
        "@pytest.mark.cudagraph(max_rerecords=4): reduce-overhead re-recorded step (test_rerecord.py:5) 11 times"
        in output
    )
    assert f"12 shapes in the order recorded: {shapes}." in output
    assert "mark_dynamic" in output and "bucket" in output

    tests = json.loads(report.read_text())["tests"]
    failed = tests["test_rerecord.py::test_twelve_shapes"]["reduce_overhead"]["rerecords"]
    assert failed["step (test_rerecord.py:5)"]["rerecords"] == 11
    assert failed["step (test_rerecord.py:5)"]["shapes"] == [f"({n}, 16)" for n in range(2, 14)]
    passed = tests["test_rerecord.py::test_bucketed"]["reduce_overhead"]["rerecords"]
    assert passed["bucketed_step (test_rerecord.py:9)"]["shapes"] == ["(4, 16)", "(8, 16)", "(16, 16)"]
