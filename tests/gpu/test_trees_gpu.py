"""Reduce-overhead on a real GPU: which input a skip concerns, how much got cudagraphed, trees="all".

Run with ``pytest tests/gpu --cudagraph``; without a GPU (or the flag) every test skips.
"""

from __future__ import annotations

import inspect
import json

import pytest
import torch

from pytest_cudagraph import InvariantViolation
from pytest_cudagraph.records.record import current_record
from pytest_cudagraph.render.summary import HEADER, summary_row

pytestmark = pytest.mark.cudagraph


@pytest.fixture(autouse=True)
def fresh_trees():
    """Each test starts and ends without compiled frames or tree state of another."""
    from torch._inductor import cudagraph_trees

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def bump(x, y):
    x.add_(1)  # changes its input in place
    return x * y


def test_a_mutated_input_fails_naming_the_argument_function_and_line(cudagraphs):
    compiled = torch.compile(bump, mode="reduce-overhead")
    counter, scale = torch.zeros(16, device="cuda"), torch.randn(16, device="cuda")
    with cudagraphs.watch_trees() as trees:
        for _ in range(4):
            compiled(counter, scale)
    with pytest.raises(InvariantViolation) as info:
        trees.assert_fully_cudagraphed()
    text = str(info.value)
    print(f"\n{text}")
    [skip] = trees.result().skipped
    assert skip.reason.startswith("mutated inputs")
    assert skip.arguments == ("x",) and skip.named_by == "identity"
    assert skip.function == "bump" and skip.location.endswith(f"test_trees_gpu.py:{_line_of(bump, 'x.add_(1)')}")
    assert "argument 'x', in bump" in text and "x.add_(1)" in text
    assert "return the new value instead of changing an input in place" in text


def scaled_by_host(x, s):
    return x * s.to(x.device)


def test_a_cpu_input_names_that_argument(cudagraphs):
    x, s = torch.randn(16, device="cuda"), torch.full((16,), 2.0)
    # from torch 2.9 graph partition cudagraphs around a CPU input instead of skipping
    with torch._inductor.config.patch(graph_partition=False):
        compiled = torch.compile(scaled_by_host, mode="reduce-overhead")
        with cudagraphs.watch_trees() as trees:
            for _ in range(3):
                compiled(x, s)
    result = trees.result()
    print("\n" + json.dumps(result.to_json()["skipped"]))
    [skip] = result.skipped
    assert skip.reason.startswith("cpu device")
    assert skip.arguments == ("s",), skip
    with pytest.raises(InvariantViolation, match="argument 's'"):
        trees.assert_fully_cudagraphed()


def three_regions(x, w, state):
    y = torch.relu(x @ w)  # region 1
    torch._dynamo.graph_break()
    state.add_(y.sum())  # region 2 changes an input: runs without graphs
    torch._dynamo.graph_break()
    return y * 2  # region 3


def test_how_much_got_cudagraphed_for_a_partly_captured_function(cudagraphs):
    compiled = torch.compile(three_regions, mode="reduce-overhead")
    x, w = torch.randn(8, 32, device="cuda"), torch.randn(32, 32, device="cuda")
    state = torch.zeros(1, device="cuda")
    with cudagraphs.watch_trees() as trees:
        for _ in range(5):
            torch.compiler.cudagraph_mark_step_begin()
            compiled(x, w, state)
    result = trees.result()
    print("\nreduce-overhead:", json.dumps(result.to_json()))
    assert len(result.regions) == 3 and result.regions_cudagraphed == 2
    assert 0 < result.fraction_of_calls < 1
    assert result.calls["without_graph"] >= 1 and result.calls["replayed"] >= 1
    section = current_record().to_json()["reduce_overhead"]
    assert section["regions_total"] == 3 and section["regions_cudagraphed"] == 2
    cells = dict(zip(HEADER, summary_row("t.py::test", {"outcome": "passed", "reduce_overhead": section})))
    assert "2/3 regions" in cells["graphs"] and "% calls" in cells["graphs"]


def test_a_fully_cudagraphed_function_passes(cudagraphs):
    compiled = torch.compile(lambda x: torch.relu(x) * 2, mode="reduce-overhead")
    x = torch.randn(64, device="cuda")
    with cudagraphs.watch_trees() as trees:
        for _ in range(4):
            compiled(x)
    trees.assert_fully_cudagraphed()
    result = trees.result()
    assert result.regions_cudagraphed == len(result.regions) == 1 and result.fraction_of_calls == 1.0


MARKED = """
import pytest
import torch

def bump(x, y):
    x.add_(1)
    return x * y

@pytest.mark.cudagraph(trees="all")
def test_mutating():
    compiled = torch.compile(bump, mode="reduce-overhead")
    counter, scale = torch.zeros(16, device="cuda"), torch.randn(16, device="cuda")
    for _ in range(3):
        compiled(counter, scale)

@pytest.mark.cudagraph(trees="all")
def test_clean():
    compiled = torch.compile(lambda x: x * 2, mode="reduce-overhead")
    x = torch.randn(16, device="cuda")
    for _ in range(3):
        compiled(x)
"""


def test_the_trees_all_marker_fails_the_test_that_lost_its_graphs(pytester, tmp_path):
    pytester.makepyfile(test_marked=MARKED)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--cudagraph", f"--cudagraph-report={report}", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.re_match_lines(
        [
            r".*@pytest\.mark\.cudagraph\(trees='all'\): reduce-overhead ran 1 compiled region of 1 without a CUDA "
            r"graph.*",
            r".*mutated inputs \(1 instances\), argument 'x', in bump, at test_marked\.py:\d+ `x\.add_\(1\)`",
        ]
    )
    records = json.loads(report.read_text())["tests"]
    assert records["test_marked.py::test_mutating"]["reduce_overhead"]["skipped"][0]["arguments"] == ["x"]
    assert records["test_marked.py::test_clean"]["reduce_overhead"]["fraction_of_calls"] == 1.0
