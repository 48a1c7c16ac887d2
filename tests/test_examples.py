"""The example cases broken on purpose fail, each with the plugin's own message.

``docs/examples_failing`` shows users what each failure looks like; these tests
keep those messages true.  The GPU cases skip here with their reason and are run
on a GPU machine with ``--cudagraph``.  The runs that compile with the eager backend
only, or compile nothing (the GPU cases without the flag), are in this process;
those that compile with Inductor or capture graphs on the GPU are fresh pytest
subprocesses.
"""

import re
from pathlib import Path

import pytest

from pytest_cudagraph import _compat as compat

FAILING = Path(__file__).resolve().parent.parent / "docs" / "examples_failing"


def run_example(pytester, name, *args, in_process=False):
    pytester.syspathinsert(FAILING)
    run = pytester.runpytest if in_process else pytester.runpytest_subprocess
    result = run(str(FAILING / name), "-p", "no:cacheprovider", "-rs", *args)
    return result, result.stdout.str()


# the GPU cases that skip without --cudagraph, and how many tests each file holds
GPU_CASES = {
    "test_graphs_broken.py": 6,
    "test_ranks_broken.py": 2,
    "test_reduce_overhead_broken.py": 3,
    "test_engine_runner_broken.py": 4,
}


@pytest.fixture
def gpu_cases_without_the_flag(pytester):
    """The GPU case files in one pytest run without --cudagraph, in this process: every test skips, nothing compiles.

    Returns the output and, per file, its lines that say a test skipped.
    """
    result = pytester.runpytest(
        *(str(FAILING / name) for name in GPU_CASES),
        *("-p", "no:cacheprovider", "-p", "no:randomly", "-rs", "--color=no", f"--rootdir={pytester.path}"),
    )
    out = result.stdout.str() + result.stderr.str()
    skips = {name: [line for line in out.splitlines() if name in line and "SKIPPED" in line] for name in GPU_CASES}
    return out, skips


def skipped_count(lines: list[str]) -> int:
    """Tests skipped, from pytest's -rs lines (``SKIPPED [3] f.py:9: reason`` counts 3)."""
    return sum(int(match[1]) for line in lines if (match := re.search(r"SKIPPED \[(\d+)\]", line)))


def test_the_gpu_cases_skip_without_the_gpu_flag_all_and_only_for_it(gpu_cases_without_the_flag):
    out, skips = gpu_cases_without_the_flag
    # every test of each file skipped, nothing else happened, and the plugin says so in one line
    assert re.search(rf"^=+ {sum(GPU_CASES.values())} skipped in ", out, re.M), out
    assert f"{sum(GPU_CASES.values())} GPU tests skipped, not listed: needs --cudagraph" in out
    for name, count in GPU_CASES.items():
        assert skipped_count(skips[name]) == count, (name, out)
        assert all("needs --cudagraph" in line for line in skips[name]), skips[name]


def test_broken_recompile_cases_fail_with_guard_reasons(dynamo_modules_loaded, wide_terminal, pytester):
    # in this process: the cases compile with the eager backend only.  Its lines whole (wide_terminal): the
    # limit's name below is read in the plugin's own message (a child's output held torch's log line too)
    result, out = run_example(pytester, "test_recompiles_broken.py", in_process=True)
    result.assert_outcomes(failed=3)
    assert "recompiled 1 time (max 0): " in out
    # guards as Dynamo prints them: torch 2.6 names an argument L['x'], 2.8+ plain x
    assert re.search(r"tensor '(?:L\['x'\]|x)' dtype mismatch\s+Float\s+Double", out)
    assert re.search(r"(?:L\['factor'\]|factor) == 0\s+0\s", out)
    # the limit is named as this torch's config calls it (cache_size_limit before 2.8)
    assert f"hit config.{compat.recompile_limit_name()}" in out and "ran it eagerly" in out
    assert "Traceback" not in out


@pytest.mark.slow
def test_broken_cache_cases_fail_naming_layer_and_reason(pytester):
    result, out = run_example(pytester, "test_compile_cache_broken.py")
    result.assert_outcomes(failed=3)
    assert "fxgraph: bypass 1 on the warm pass" in out
    assert "Unsupported post grad custom pass" in out
    assert "CustomGraphPass" in out
    assert "force_disable_caches" in out
    assert "recorded 'out': not bitwise equal" in out
    assert "During handling of the above exception" not in out


@pytest.mark.cudagraph
def test_broken_graph_cases_fail_with_their_messages_on_gpu(pytester):
    result, out = run_example(pytester, "test_graphs_broken.py", "--cudagraph")
    result.assert_outcomes(failed=6)
    assert "operation not permitted when stream is capturing" in out or "item" in out
    assert "static control flow" in out
    # each pool case names its own cause: outputs kept, separate pools, a tensor kept across captures
    assert "pool check (kept alive): after batch size" in out
    assert "keep_outputs=True keeps every size's outputs alive in the pool" in out
    assert "pool check (separate pools): the graphs use 51 pools" in out
    assert re.search(r"allocated at \S*test_graphs_broken\.py:\d+ in forward", out)
    assert "parameter 'up.weight' of Mlp was replaced after the graph" in out
    # the failed capture left the process usable: later tests captured and replayed
    assert "Offset increment outside graph capture" not in out


@pytest.mark.cudagraph
def test_broken_rank_cases_fail_without_hanging_on_two_gpus(pytester):
    """Both cases fail within their timeouts, naming the failing rank; neither hangs (needs two GPUs)."""
    if compat.cuda_device_count() < 2:
        pytest.skip(f"needs 2 GPUs, sees {compat.cuda_device_count()}")
    result, out = run_example(pytester, "test_ranks_broken.py", "--cudagraph")
    result.assert_outcomes(failed=2)
    assert "rank 1 of 2 failed: CaptureError" in out and ".item()" in out
    assert "rank 0 did not finish within 15 s" in out


@pytest.mark.cudagraph
def test_broken_reduce_overhead_cases_name_the_argument_and_line_on_gpu(pytester):
    result, out = run_example(pytester, "test_reduce_overhead_broken.py", "--cudagraph")
    result.assert_outcomes(failed=3)
    assert "mutated inputs (1 instances), argument 'total', in accumulate" in out
    # named by the user's argument on a fresh compile; a graph from the FX graph cache keeps only its input's name
    assert re.search(r"cpu device \(arg\d+_1\), argument '(?:factors|arg\d+_1)', in scale_by", out)
    assert "host = y.cpu()" in out and "in the compiled code" in out
    assert "torchinductor" not in out


@pytest.mark.cudagraph
def test_broken_engine_runner_cases_fail_saying_why_on_gpu(pytester):
    """observe=True on an engine's own runner: a pool per size, two sizes never captured, batches left eager, and a
    graph-memory estimate summed over sizes."""
    result, out = run_example(pytester, "test_engine_runner_broken.py", "--cudagraph")
    result.assert_outcomes(failed=4)
    assert "batch-size coverage: batches 33-48 ran eager: no graph replayed." in out
    assert "32 of 48 batches replayed a graph (67%)" in out
    assert "the estimate is about the sum over sizes: the 7 graphs share 1 pool" in out
    assert "largest single graph: " in out and "sum over sizes: " in out
    assert "@pytest.mark.cudagraph(observe=True): observed graphs (separate pools): the 7 graphs captured at" in out
    assert (
        "`with torch.cuda.graph(graph, stream=self.stream):  # no pool=: a private pool per graph` use 7 pools" in out
    )
    assert (
        "observed graphs (missing sizes): sizes [32, 64] were never captured: the graphs captured sizes "
        "[1, 2, 4, 8, 16] (5 graphs, at " in out
    )
    assert "Traceback" not in out
