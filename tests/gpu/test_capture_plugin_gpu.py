"""The cudagraphs fixture seen from outside on a GPU: marker defaults, failures, the report."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cudagraph

USER_TESTS = """
import pytest
import torch

def make_inputs(n):
    return torch.randn(n, 64, device="cuda")

model = None

def get_model():
    global model
    if model is None:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).cuda()
    return model

@pytest.mark.cudagraph(capture_sizes=[1, 2, 4, 8])
def test_good(cudagraphs):
    gs = cudagraphs.capture(get_model(), make_inputs)
    gs.check_replay()
    gs.check_pool()

@pytest.mark.cudagraph(capture_sizes=[2, 4], rtol=0, atol=0)
def test_wrong_reference(cudagraphs):
    gs = cudagraphs.capture(get_model(), make_inputs)
    gs.check_replay(reference=lambda x: get_model()(x) * 1.5)

@pytest.mark.cudagraph(capture_sizes=[4])
def test_sync_in_capture(cudagraphs):
    cudagraphs.capture(lambda x: x * x.max().item(), make_inputs)

@pytest.mark.cudagraph
def test_rng_after_failure(cudagraphs):
    assert torch.isfinite(torch.randn(16, device="cuda")).all()
    gs = cudagraphs.capture(lambda x: x.relu(), make_inputs, sizes=[3])
    gs.check_replay()

def test_no_sizes_anywhere(cudagraphs):
    cudagraphs.capture(lambda x: x, make_inputs)
"""


def test_fixture_marker_defaults_and_report(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("--cudagraph", f"--cudagraph-report={report}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*replay of batch size 4 differs from the reference on trial 1 of 3*",
            "*real cause*x * x.max().item()*",
            "*no capture sizes were given*",
        ]
    )
    tests = json.loads(report.read_text())["tests"]
    good = tests["test_user.py::test_good"]
    assert good["outcome"] == "passed"
    graphs = good["graphs"]
    assert graphs["sizes"] == [1, 2, 4, 8] and graphs["captured"] == 4
    assert graphs["pool_bytes"] > 0 and graphs["largest_graph_bytes"] > 0
    assert graphs["max_abs_err"] is not None and graphs["pool_check_passed"] is True
    # capture cost: each size's two phases in capture order, and memory outside the pool
    assert [row["size"] for row in graphs["per_size"]] == [8, 4, 2, 1]
    assert all(row["warmup_s"] > 0 and row["capture_s"] > 0 for row in graphs["per_size"])
    assert 0 < graphs["warmup_s"] < graphs["capture_s"]
    assert sum(row["pool_bytes"] for row in graphs["per_size"]) == graphs["pool_bytes"]
    assert isinstance(graphs["behind_allocator_bytes"], int) and "outside_unreliable" not in graphs
    # the test's line under its file's line; its pool cell ends "..., N outside" (broken over two lines at most)
    result.stdout.fnmatch_lines(["test_user.py", "  test_good *passed*", "*outside: device memory behind PyTorch*"])
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if line.startswith("  test_good "))
    assert "outside" in lines[at] or (lines[at + 1].startswith(" " * 10) and "outside" in lines[at + 1])
    assert tests["test_user.py::test_wrong_reference"]["outcome"] == "failed"
    assert tests["test_user.py::test_sync_in_capture"]["outcome"] == "failed"
    assert tests["test_user.py::test_rng_after_failure"]["graphs"]["sizes"] == [3]
