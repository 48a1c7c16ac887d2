"""Reduce-overhead's trees watched across the test body's own ``torch._dynamo.reset()``, on a GPU.

``torch._dynamo.reset()`` (``torch.compiler.reset()`` calls it) takes the tree
watch's CUDAGRAPH_RECORDING callback off Dynamo and shuts the trees down.  Undoing
the watch then raised ``ValueError: list.remove(x): x not in list`` from the
plugin, chained under the body's own error where there was one.  Now the watch
registers the callback again and counts on (a new tree after a reset records the
shape again: a recording, not a re-recording), and a watch that could not see
says so in one sentence and fails both verdicts.

Run with ``pytest tests/gpu/test_resets_gpu.py --cudagraph -p no:randomly``;
without a GPU (or the flag) every test skips.  The CPU half is tests/test_resets.py.
"""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.cudagraph


@pytest.fixture(autouse=True)
def fresh_trees():
    """Each test starts and ends without compiled frames or tree state of another."""
    from torch._inductor import cudagraph_trees

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


def step(x):
    return torch.relu(x) * 2 + 1


def _three_calls(compiled, rows):
    x = torch.randn(rows, 16, device="cuda")
    for _ in range(3):  # a warm-up, a recording, a replay
        compiled(x)


def test_a_tree_watch_counts_on_after_the_bodys_reset(cudagraphs):
    compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
    with cudagraphs.watch_trees() as trees:
        _three_calls(compiled, 4)
        torch._dynamo.reset()  # the trees are shut down; undoing the watch raised ValueError, before
        _three_calls(compiled, 4)  # recorded again in the new tree
        torch.compiler.reset()
        _three_calls(compiled, 8)
    result = trees.result()
    print("\n" + json.dumps(result.to_json(), indent=1, default=str))
    assert result.lost_sight is None
    assert trees.recordings == 3
    trees.assert_fully_cudagraphed()
    # each tree's functions are regions of their own, though the new tree numbers them from 0 again
    assert result.regions is not None and len(result.regions) == 3, result.regions
    assert result.calls is not None and result.calls["recorded"] == 3 and result.calls["warmup"] == 3
    (counts,) = result.rerecords.values()
    assert counts.shapes == ("(4, 16)", "(8, 16)") and counts.recordings == 3 and counts.rerecords == 1


MARKED = """
import pytest
import torch
from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

TORCH_RECORD_FUNCTION = CUDAGraphTreeManager.record_function  # read before any watch patched it


def step(x):
    return torch.relu(x) * 2 + 1


def three_calls(compiled, rows):
    x = torch.randn(rows, 16, device="cuda")
    for _ in range(3):
        compiled(x)


@pytest.mark.cudagraph(trees="all", max_rerecords=1)
def test_reset_between_two_shapes():
    compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
    three_calls(compiled, 4)
    torch._dynamo.reset()
    three_calls(compiled, 4)
    three_calls(compiled, 8)


@pytest.mark.cudagraph(max_rerecords=0)
def test_compiler_reset_then_a_new_shape():
    compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
    three_calls(compiled, 4)
    torch.compiler.reset()
    three_calls(compiled, 8)


@pytest.mark.cudagraph(trees="all")
def test_the_body_fails_after_a_reset():
    compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
    three_calls(compiled, 4)
    torch._dynamo.reset()
    three_calls(compiled, 4)
    raise RuntimeError("the body's own error")


@pytest.mark.cudagraph(trees="all", max_rerecords=4)
def test_a_reset_the_plugin_cannot_see(monkeypatch):
    from torch._dynamo.callback import callback_handler

    compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
    three_calls(compiled, 4)
    # the body puts torch's own record_function back over the plugin's meter, and clears
    # Dynamo's callbacks by hand: the recording at 8 rows is seen by nothing of the plugin
    monkeypatch.setattr(CUDAGraphTreeManager, "record_function", TORCH_RECORD_FUNCTION)
    callback_handler.clear()
    three_calls(compiled, 8)
"""


def test_the_tree_markers_survive_a_reset_in_the_body_and_fail_a_watch_that_lost_sight(pytester, tmp_path):
    assert torch.cuda.is_available()
    pytester.makepyfile(test_resets=MARKED)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--cudagraph", f"--cudagraph-report={report}", "-p", "no:randomly")
    output = result.stdout.str()
    print(output)
    result.assert_outcomes(passed=1, failed=3)
    assert "ValueError" not in output and "x not in list" not in output
    # max_rerecords=0: the new shape after torch.compiler.reset() is one re-recording
    assert (
        "@pytest.mark.cudagraph(max_rerecords=0): reduce-overhead re-recorded step (test_resets.py:8) 1 time" in output
    )
    assert "2 shapes in the order recorded: (4, 16); (8, 16)." in output
    # the body's own error is the test's failure, with no error of the plugin under it
    assert "RuntimeError: the body's own error" in output
    # a reset by hand, with the tree manager patched over the plugin's meter: said, never passed
    assert (
        "@pytest.mark.cudagraph(trees='all'): recordings after Dynamo's callbacks were cleared somewhere in "
        "the block could not be counted"
    ) in output
    assert "so max_rerecords=4 is not vouched for after it." in output

    tests = json.loads(report.read_text())["tests"]
    passed = tests["test_resets.py::test_reset_between_two_shapes"]["reduce_overhead"]
    assert passed["recordings"] == 3 and "lost_sight" not in passed
    assert passed["rerecords"]["step (test_resets.py:8)"]["shapes"] == ["(4, 16)", "(8, 16)"]
    blind = tests["test_resets.py::test_a_reset_the_plugin_cannot_see"]["reduce_overhead"]
    assert blind["lost_sight"].startswith("recordings after Dynamo's callbacks were cleared somewhere in the block")
