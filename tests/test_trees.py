"""Reduce-overhead diagnostics on the CPU: torch's skip messages read as data, the failure text, the call meter.

The GPU half (real skips, argument names, fractions) is tests/gpu/test_trees_gpu.py.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph import _compat
from pytest_cudagraph.graphs.reduce_overhead import (
    CudagraphSkip,
    ReduceOverheadResult,
    not_fully_cudagraphed,
    parse_skip_message,
)

# the shapes torch 2.11 writes (seen on an H200): a doubled prefix on a compile-time skip, a
# graph-break continuation as the function of a run-time one
CPU_SKIP = (
    "skipping cudagraphs due to skipping cudagraphs due to cpu device (arg0_1). Found from : \n"
    '  File "/work/model.py", line 418, in uses_cpu\n'
    "    return x * s.to(x.device)\n"
)
MUTATION_SKIP = (
    "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
    '   File "/work/model.py", line 396, in torch_dynamo_resume_in_step_at_390\n'
    "    state.add_(1)  # keeps a running count\n"
)


def test_a_compile_time_skip_reads_as_reason_function_and_line():
    skip = parse_skip_message(CPU_SKIP)
    assert skip.reason == "cpu device (arg0_1)"
    assert (skip.function, skip.location, skip.code) == ("uses_cpu", "/work/model.py:418", "return x * s.to(x.device)")


def test_a_run_time_skip_names_the_function_a_continuation_belongs_to():
    skip = parse_skip_message(MUTATION_SKIP)
    assert skip.reason == "mutated inputs (1 instances)"
    assert skip.function == "step" and skip.code == "state.add_(1)  # keeps a running count"


def test_a_skip_without_a_stack_keeps_its_reason():
    skip = parse_skip_message("skipping cudagraphs due to ['non-Tensor inputs']")
    assert skip.reason == "['non-Tensor inputs']" and skip.function is None and skip.location is None


@given(st.text(max_size=300))
def test_any_message_parses(text):
    parse_skip_message(text)


def _result(skipped=(), regions=None, skips=None):
    return ReduceOverheadResult(
        recordings=2,
        skips=len(skipped) if skips is None else skips,
        skip_reasons=tuple(s.message for s in skipped),
        recorded_non_static_inputs=0,
        partitions=0,
        tree_nodes=2,
        pool_bytes=None,
        skipped=tuple(skipped),
        regions=regions,
    )


def test_fully_cudagraphed_passes_silently():
    regions = {"forward": {"warmup": 1, "recorded": 1, "replayed": 3}}
    assert not_fully_cudagraphed(_result(regions=regions)) is None


def test_the_failure_names_the_argument_the_function_the_line_and_the_share_of_calls():
    skip = CudagraphSkip(
        "mutated inputs (1 instances)",
        function="step",
        location="model.py:396",
        code="state.add_(1)",
        arguments=("state",),
        named_by="identity",
    )
    regions = {
        "forward": {"warmup": 1, "recorded": 1, "replayed": 3},
        "step": {"warmup": 1, "without_graph": 4},
        "tail": {"warmup": 1},
    }
    result = _result([skip], regions)
    assert result.regions_cudagraphed == 1 and result.fraction_of_calls == 4 / 8
    message = not_fully_cudagraphed(result, context="@pytest.mark.cudagraph(trees='all')")
    lines = message.splitlines()
    assert lines[0] == (
        "@pytest.mark.cudagraph(trees='all'): reduce-overhead ran 2 compiled regions of 3 without a CUDA graph; "
        "50% of the calls after warm-up ran as graphs."
    )
    assert "  - mutated inputs (1 instances), argument 'state', in step, at model.py:396 `state.add_(1)`" in lines
    assert "  - step: 1 warmup, 4 without graph" in lines
    assert any(line.startswith("regions only warmed up") for line in lines) and "  - tail: 1 warmup" in lines
    assert any("return the new value instead of changing an input in place" in line for line in lines)


def test_skips_without_a_message_are_counted_too():
    message = not_fully_cudagraphed(_result(regions={}, skips=1))
    assert "1 compiled graph skipped without a message" in message


def test_the_report_section_carries_the_fractions():
    regions = {"forward": {"warmup": 1, "recorded": 1, "replayed": 2}, "step": {"without_graph": 2}}
    data = _result(regions=regions).to_json()
    assert data["regions_total"] == 2 and data["regions_cudagraphed"] == 1
    assert data["calls"] == {"replayed": 2, "recorded": 1, "warmup": 1, "without_graph": 2}
    assert data["fraction_of_calls"] == 3 / 5


def test_the_call_meter_sees_a_cpu_graph_run_without_graphs_and_puts_torch_back():
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager
    from torch._inductor.output_code import CompiledFxGraph

    before = (CUDAGraphTreeManager.__dict__["_run"], CompiledFxGraph.__dict__["__call__"])
    compiled = torch.compile(lambda x: x.sin() + 1, mode="reduce-overhead")
    compiled(torch.ones(4))  # compiled outside the meter
    with _compat.TreeCallMeter() as meter:
        for _ in range(3):
            compiled(torch.ones(4))
    assert meter.available
    # on the CPU Inductor never hands the graph to the cudagraph trees: every call ran without one
    [region] = meter.regions.values()
    assert dict(region["calls"]) == {"without_graph": 3}
    assert (CUDAGraphTreeManager.__dict__["_run"], CompiledFxGraph.__dict__["__call__"]) == before


def _accumulates(total, x):
    total.add_(x.sum())  # the statement torch's cached stack trace names
    return x * 2


def test_a_skip_line_from_another_functions_cached_compile_is_moved_to_the_running_one(tmp_path):
    """Inductor's FX graph cache keeps the stack traces of whichever function first compiled a graph."""
    import inspect

    from pytest_cudagraph.graphs.reduce_overhead import _at_live_line

    other = tmp_path / "first_compiler.py"
    other.write_text("import torch\n\n\ndef accumulate(total, x):\n    total.add_(x.sum())\n    return x * 2\n")
    message = (
        "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
        f'   File "{other}", line 5, in accumulate\n'
        "    total.add_(x.sum())\n"
    )
    skip = _at_live_line(parse_skip_message(message), {"code": _accumulates.__code__})
    _, first = inspect.getsourcelines(_accumulates)
    assert skip.location.endswith(f"test_trees.py:{first + 1}") and skip.function == "_accumulates"
    assert skip.code.startswith("total.add_(x.sum())")
    # a line inside a running function stands as torch wrote it
    namespace: dict = {}
    exec(compile(other.read_text(), str(other), "exec"), namespace)
    kept = _at_live_line(parse_skip_message(message), {"code": namespace["accumulate"].__code__})
    assert kept.location.endswith("first_compiler.py:5") and kept.function == "accumulate"


def test_a_cpu_skip_without_live_frames_names_the_graph_input():
    """A graph loaded from the FX graph cache logs its cached reason only: the placeholder is the name left."""
    from pytest_cudagraph.graphs.reduce_overhead import _with_arguments

    skip = _with_arguments(parse_skip_message(CPU_SKIP), None)
    assert skip.arguments == ("arg0_1",) and skip.named_by == "placeholder"
