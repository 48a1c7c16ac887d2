"""Compile time per phase and per frame, from torch's own compilation metrics (compile_time.py)."""

from __future__ import annotations

import json

import pytest
import torch

from pytest_cudagraph import cache_probe
from pytest_cudagraph.compile.compile_time import (
    PHASES,
    compile_time_from_json,
    compile_time_from_records,
    watch_compile_time,
)
from pytest_cudagraph.records.report import SCHEMA, ReportError, validate_report
from pytest_cudagraph.render.compile_time_text import compile_time_cell


def _gelu_rowsum(x):
    return torch.nn.functional.gelu(x @ x.T).sum(dim=-1) * 2


def test_frames_and_phases_of_a_recompile():
    # an entry an earlier test compiled for this frame would make these its second and third compiles
    torch._dynamo.reset()
    fn = torch.compile(_gelu_rowsum, backend="aot_eager", dynamic=False)
    with watch_compile_time(report=False) as watch:
        fn(torch.randn(8, 16))
        fn(torch.randn(9, 16))  # a new shape: the same frame compiled again
    result = watch.result
    first, second = (f.compile_id.split("/") for f in result.frames)  # "N/0", "N/1": frame N, compiled twice
    assert first[0] == second[0] and int(second[1]) == int(first[1]) + 1
    for frame in result.frames:
        assert frame.function.startswith("_gelu_rowsum (") and "test_compile_time.py:" in frame.function
        assert frame.phases["dynamo_s"] > 0 and frame.phases["aot_autograd_s"] > 0
        assert frame.phases["inductor_s"] == 0  # aot_eager: Inductor never ran
    assert set(result.phases) <= set(PHASES)
    assert not result.unavailable, result.note  # 2.6 through 2.14 record every phase
    parts = result.phases["dynamo_s"] + result.phases["aot_autograd_s"] + result.phases["inductor_s"]
    assert parts == pytest.approx(result.total_s, abs=1e-5)
    assert result.total_s == pytest.approx(sum(f.total_s for f in result.frames), abs=1e-5)


def test_backward_compiled_in_the_block_counts_in_its_frame():
    w = torch.randn(16, 16, requires_grad=True)
    fn = torch.compile(lambda x: (x @ w).relu().sum(), backend="aot_eager")
    with watch_compile_time(report=False) as watch:
        fn(torch.randn(4, 16)).backward()
    (frame,) = watch.result.frames
    assert frame.total_s > 0 and frame.phases["aot_autograd_s"] > 0


def test_a_block_that_compiles_nothing():
    with watch_compile_time(report=False) as watch:
        torch.ones(3).sum()
    assert watch.result.total_s == 0 and watch.result.frames == ()


def test_a_phase_torch_does_not_record_is_absent_not_zero():
    records = [
        {"compile_id": "0/0", "name": "f", "filename": "m.py", "line": 3, "is_forward": True, "frame_us": 2_000_000,
         "backend_us": 1_500_000, "inductor_us": 1_000_000, "codegen_us": 600_000, "kernel_compile_us": None,
         "backward_us": None, "cache_saved_us": None},
    ]  # fmt: skip
    result = compile_time_from_records(records, missing=("kernel_compile_us",))
    assert "kernel_compile_s" not in result.phases and "kernel_compile_s" not in result.frames[0].phases
    assert result.unavailable == ("kernel_compile_s",)
    assert "kernel_compile_s" in result.note
    assert result.phases == {
        "dynamo_s": 0.5, "aot_autograd_s": 0.5, "inductor_s": 1.0, "inductor_codegen_s": 0.6, "cache_saved_s": 0.0
    }  # fmt: skip
    assert compile_time_from_json(json.loads(json.dumps(result.to_json()))) == result


@pytest.mark.slow
def test_cold_compile_per_phase_and_warm_pass_from_the_fx_graph_cache():
    x = torch.randn(8, 16)
    with cache_probe() as probe:
        cold, warm = pair = probe.cold_warm(lambda: torch.compile(_gelu_rowsum)(x))
    assert warm.stats.fxgraph["hit"] >= 1
    ct_cold, ct_warm = cold.compile_time, warm.compile_time
    assert ct_cold.phases["dynamo_s"] > 0 and ct_cold.phases["inductor_s"] > 0
    assert ct_cold.phases["inductor_codegen_s"] > 0
    assert ct_cold.phases["cache_saved_s"] == 0
    # the warm pass loads the compiled graph: Inductor's time is near zero, the time saved is reported
    assert ct_warm.phases["inductor_s"] <= 0.05 * ct_cold.phases["inductor_s"]
    assert ct_warm.phases["cache_saved_s"] >= 0.5 * ct_cold.phases["inductor_s"]
    assert pair.compile_time_ratio is not None and pair.compile_time_ratio < 0.5
    entry = pair.to_json()
    assert entry["cold"]["compile_time"]["frames"][0]["function"].startswith("_gelu_rowsum (")
    assert entry["compile_time_ratio"] == pair.compile_time_ratio
    cell = compile_time_cell({"extra": {"cold_warm": [entry]}})
    assert " -> " in cell and cell.endswith(("s", "ms"))


def test_compile_time_cell():
    assert compile_time_cell({}) == "-"
    # a test that compiled nothing (a skipped one) shows no time, not "0s"
    assert compile_time_cell({"compile_time": {"total_s": 0.0, "phases": {}, "frames": []}}) == "-"
    assert compile_time_cell({"compile_time": {"total_s": 3.21}}) == "3.2s"
    assert compile_time_cell({"compile_time": {"total_s": 0.012}}) == "12ms"
    pair = {"mode": "inprocess", "cold": {"compile_time": {"total_s": 4.1}}, "warm": {"compile_time": {"total_s": 0.3}}}
    assert compile_time_cell({"compile_time": {"total_s": 4.5}, "extra": {"compile_cache": pair}}) == "4.1s -> 0.3s"


def test_the_section_passes_the_report_schema():
    with watch_compile_time(report=False) as watch:
        torch.compile(_gelu_rowsum, backend="eager")(torch.randn(2, 4))
    section = watch.result.to_json()
    validate_report({"schema": SCHEMA, "tests": {"t": {"outcome": "passed", "compile_time": section}}})
    section["phases"]["dynamo_s"] = [1]
    with pytest.raises(ReportError, match="compile_time"):
        validate_report({"schema": SCHEMA, "tests": {"t": {"outcome": "passed", "compile_time": section}}})


BODY = """
import pytest, torch
from pytest_cudagraph.compile.compile_time import watch_compile_time

def f(x):
    return (x * 2).sin()

def test_watched():
    with watch_compile_time():
        torch.compile(f, backend="aot_eager")(torch.randn(4))

@pytest.mark.max_recompiles(0)
def test_marked():
    torch.compile(f, backend="aot_eager")(torch.randn(4))
"""


def _run(pytester: pytest.Pytester) -> dict:
    pytester.makepyfile(test_ct=BODY)
    result = pytester.runpytest_subprocess("--cudagraph-report=r.json", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    return json.loads((pytester.path / "r.json").read_text())["tests"]


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_report_has_the_section_of_a_watched_block(pytester: pytest.Pytester):
    section = _run(pytester)["test_ct.py::test_watched"]["compile_time"]
    assert section["total_s"] > 0 and section["phases"]["dynamo_s"] > 0
    (frame,) = section["frames"]
    assert frame["function"] == "f (test_ct.py:4)"


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_report_has_the_section_of_every_plugin_test(pytester: pytest.Pytester):
    section = _run(pytester)["test_ct.py::test_marked"]["compile_time"]
    assert section["total_s"] > 0 and section["frames"][0]["function"] == "f (test_ct.py:4)"


def test_a_cache_setting_patched_in_the_block_is_seen_only_where_every_frame_had_it():
    import torch

    from pytest_cudagraph.compile.compile_time import watch_compile_time

    torch._dynamo.reset()
    with watch_compile_time(report=False) as watch:
        with torch._inductor.config.patch(force_disable_caches=True):
            torch.compile(lambda x: x.cos() + 1, backend="eager")(torch.randn(4))
    assert set(watch.caches_off) == {"fxgraph", "aot_autograd"}
    assert "force_disable_caches was True while the test compiled" in watch.caches_off["fxgraph"]
    torch._dynamo.reset()
    # one helper compiled under the patch does not mark the model's own compile unchecked
    with watch_compile_time(report=False) as watch:
        with torch._inductor.config.patch(force_disable_caches=True):
            torch.compile(lambda x: x.cos() + 2, backend="eager")(torch.randn(4))
        torch.compile(lambda x: x.sin() + 3, backend="eager")(torch.randn(4))
    assert watch.caches_off == {}
