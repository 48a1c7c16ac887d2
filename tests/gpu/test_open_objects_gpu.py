"""On a GPU: a GraphSet a test never closes is closed, its graphs released, and recorded at the test's end."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cudagraph

USER_TESTS = """
import pytest
import torch
from pytest_cudagraph import capture_graphs

KEPT = []


def make_inputs(n):
    return torch.randn(n, 256, device="cuda")


@pytest.mark.max_recompiles(0)
def test_capture_left_open():
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
    graphs = capture_graphs(model, make_inputs, [1, 2, 4])
    graphs.check_replay()
    KEPT.append(graphs)  # never closed


def test_the_plugin_closed_it():
    assert KEPT[0].closed
    assert not KEPT[0].graphs  # its graphs, and with them its pool, were released


def test_closed_by_a_with_block():
    model = torch.nn.Linear(256, 256).cuda()
    with capture_graphs(model, make_inputs, [1, 2]) as graphs:
        graphs.check_replay()
"""


def test_a_graph_set_left_open_is_closed_recorded_and_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_left_open=USER_TESTS)
    result = pytester.runpytest_subprocess("--cudagraph", "--cudagraph-report=report.json", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    left_open = tests["test_left_open.py::test_capture_left_open"]
    assert left_open["graphs"]["captured"] == 3
    assert left_open["extra"]["closed_by_plugin"] == ["<GraphSet Sequential sizes=[1, 2, 4] pool=shared 3 graphs>"]
    closed = tests["test_left_open.py::test_closed_by_a_with_block"]
    assert closed["graphs"]["captured"] == 2
    assert "closed_by_plugin" not in closed.get("extra", {})
