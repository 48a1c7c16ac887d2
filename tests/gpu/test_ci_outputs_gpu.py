"""The CI outputs of a GPU run: the graphs' figures in the JUnit XML, annotations at the op and at the replay."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.cudagraph

USER_TESTS = """
import pytest
import torch


def make_inputs(n):
    return torch.randn(n, 64, device="cuda")


@pytest.mark.cudagraph(capture_sizes=[1, 2, 4, 8])
def test_good(cudagraphs):
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).cuda()
    gs = cudagraphs.capture(model, make_inputs)
    gs.check_replay()
    gs.check_pool()


@pytest.mark.cudagraph(capture_sizes=[4])
def test_sync_in_capture(cudagraphs):
    def step(x):
        scale = x.abs().max().item()  # THE OP
        return x / scale

    cudagraphs.capture(step, make_inputs)


@pytest.mark.cudagraph(capture_sizes=[4])
def test_parameter_replaced(cudagraphs):
    model = torch.nn.Linear(64, 64).cuda().eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, make_inputs)
        model.weight = torch.nn.Parameter(torch.randn_like(model.weight))
        graphs.replay(4, make_inputs(4))  # THE REPLAY
"""


def line_of(source: str, marker: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if f"# {marker}" in line)


def test_a_gpu_runs_figures_and_failures_reach_the_xml_and_the_annotations(pytester, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    source = pytester.makepyfile(test_user=USER_TESTS).read_text()
    report, xml = pytester.path / "report.json", pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--cudagraph", f"--cudagraph-report={report}", f"--junitxml={xml}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=2)
    tests = json.loads(report.read_text())["tests"]
    # the graphs' figures, each the report's own number
    graphs = tests["test_user.py::test_good"]["graphs"]
    (case,) = [c for c in ET.parse(xml).getroot().iter("testcase") if c.get("name") == "test_good"]
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["cudagraph.graphs_captured"] == "4"
    assert properties["cudagraph.pool_bytes"] == str(graphs["pool_bytes"]) and graphs["pool_bytes"] > 0
    for name in ("largest_graph_bytes", "first_use_bytes", "behind_allocator_bytes"):
        value = graphs.get(name)  # null where not measured: no property then
        assert properties.get(f"cudagraph.{name}") == (None if value is None else repr(value)), name
    # the annotations: the capture failure at its op, the stale parameter at the replay that found it
    lines = [line for line in result.outlines if line.startswith("::error")]
    assert any(
        line.startswith(f"::error file=test_user.py,line={line_of(source, 'THE OP')},title=capture::") for line in lines
    ), lines
    assert any(
        line.startswith(f"::error file=test_user.py,line={line_of(source, 'THE REPLAY')},title=stale-graph::")
        for line in lines
    ), lines
    failure = tests["test_user.py::test_sync_in_capture"]["failure"]
    assert (failure["rule"], failure["file"], failure["line"]) == ("capture", "test_user.py", line_of(source, "THE OP"))
