"""The plugin's section of pytest's terminal summary, from records: passes, legend, words, GPU skips."""

from __future__ import annotations

import copy

from sample_reports import graph_record, piecewise_record, recompile_record, warm_start_record

from pytest_cudagraph.records.cold_warm import pass_pairs
from pytest_cudagraph.render.summary import HEADER, summary_row, terminal_summary_lines, totals_line, wrapped

NO_CUDA = "no CUDA device (torch 2.13.0+cpu reports torch.cuda.is_available() == False)"


def _cells(record: dict) -> dict[str, str]:
    return dict(zip(HEADER, summary_row("t.py::test", record)))


def test_a_warm_start_shows_each_pass_not_their_sum():
    cells = _cells(warm_start_record())
    assert cells["fxgraph"] == "m=1 s=1 -> h=1"
    assert cells["aot"] == "m=1 s=1 -> h=1"
    assert cells["triton"] == "c=2 -> l=2"
    assert "h=1 m=1" not in cells.values()  # the passes added up


def test_the_passes_of_several_cold_warm_calls_add_up_per_pass():
    record = warm_start_record()
    pair = record["extra"].pop("compile_cache")
    record["extra"]["cold_warm"] = [pair, copy.deepcopy(pair)]
    pairs = pass_pairs(record)
    assert [p.label for p in pairs] == ["cold_warm(mode='subprocess') #1", "cold_warm(mode='subprocess') #2"]
    assert _cells(record)["fxgraph"] == "m=2 s=2 -> h=2"


def test_pairs_made_by_portable_and_relocate_are_named_by_their_method():
    record = warm_start_record()
    pair = record["extra"].pop("compile_cache")
    record["extra"]["cold_warm"] = [dict(pair, mode=mode) for mode in ("portable", "relocate", "inprocess")]
    labels = [p.label for p in pass_pairs(record)]
    assert labels == ["portable() #1", "relocate() #2", "cold_warm(mode='inprocess') #3"]


def test_a_warm_pass_that_missed_shows_the_miss_on_the_warm_side():
    record = warm_start_record()
    record["extra"]["compile_cache"]["warm"]["stats"]["fxgraph"] = {"hit": 0, "miss": 1, "bypass": 1, "saved": 1}
    assert _cells(record)["fxgraph"] == "m=1 s=1 -> m=1 s=1 b=1"


def test_a_test_without_passes_keeps_its_counters():
    cells = _cells(graph_record())
    # one notation with the passes' cells: the counters that moved, letter first
    assert (cells["fxgraph"], cells["aot"], cells["triton"]) == ("h=1", "h=1", "l=3")


def test_the_legend_explains_what_the_table_shows_and_nothing_else():
    lines = terminal_summary_lines({"t.py::warm": warm_start_record()}, None)
    text = "\n".join(lines)
    assert "a -> b: the cold pass, then the warm pass" in text
    # the counters are named by the columns that hold them: no column is called "caches"
    assert "fxgraph, aot, triton: h hits, m misses, s saves, c Triton kernels compiled" in text
    assert "(h=2: 2 hits)" in text and "caches:" not in text
    assert "b bypasses" not in text and "bundler" not in text and "pool / largest:" not in text
    graphs = "\n".join(terminal_summary_lines({"t.py::g": graph_record()}, None))
    assert "pool / largest: the shared pool and the largest graph alone" in graphs and "->" not in graphs


def test_a_piecewise_test_says_pieces_in_words():
    assert _cells(piecewise_record())["graphs"] == "5 pieces, 12 graphs"
    none = piecewise_record()
    none["piecewise"]["graphs_captured"] = 0  # a CPU run splits, and captures nothing
    assert _cells(none)["graphs"] == "5 pieces"


def test_counts_are_in_words_with_the_right_number():
    one = recompile_record(count=1)
    one["recompiles"]["limit_hits"] = ["forward (model.py:12): hit config.recompile_limit (8)"]
    assert totals_line({"a": one}) == (
        "1 test recorded: 1 passed; 1 recompile (1 recompile-limit hit, in a test that passed); 0 graphs captured"
    )
    errors = {name: {"outcome": "error"} for name in ("a", "b")}
    assert totals_line(errors).startswith("2 tests recorded: 2 errors; ")
    assert totals_line({"a": {"outcome": "error"}}).startswith("1 test recorded: 1 error; ")


def test_gpu_tests_skipped_for_want_of_a_gpu_are_one_line_per_reason():
    records = {
        "t.py::a": {"outcome": "skipped", "skip_reason": NO_CUDA},
        "t.py::b": {"outcome": "skipped", "skip_reason": NO_CUDA},
        "t.py::c": {"outcome": "skipped", "skip_reason": "needs --cudagraph"},
        "t.py::d": {"outcome": "skipped", "skip_reason": "the user's own reason"},
        "t.py::e": recompile_record(),
    }
    lines = terminal_summary_lines(records, None)
    assert f"2 GPU tests skipped, not listed: {NO_CUDA}" in lines
    assert "1 GPU test skipped, not listed: needs --cudagraph" in lines
    assert "1 other skipped test measured nothing, not listed" in lines
    # one row per test that measured something, under its file; all passed, so no outcome column
    assert lines[:3] == ["test  recompiles", "t.py", "  e   0"]
    assert not any("the user's own reason" in line for line in lines)


# ----------------------------------------------------------------------------
# seen from outside, through pytester
# ----------------------------------------------------------------------------

GPU_AND_CPU = """
import pytest

@pytest.mark.cudagraph
def test_gpu_marked():
    pass

def test_gpu_fixture(cudagraphs):
    pass

@pytest.mark.max_recompiles(0)
def test_cpu():
    pass

@pytest.mark.skip(reason="the user's own reason")
@pytest.mark.max_recompiles(0)
def test_skipped_by_the_user():
    pass
"""


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def test_a_run_without_cudagraph_says_how_many_gpu_tests_skipped_and_why(pytester):
    pytester.makepyfile(test_mixed=GPU_AND_CPU)
    result = pytester.runpytest(f"--cudagraph-report={pytester.path / 'run.json'}")
    result.assert_outcomes(passed=1, skipped=3)
    section = result.stdout.str().split("= cudagraph =")[1]
    assert "2 GPU tests skipped, not listed: needs --cudagraph" in section
    assert "the user's own reason" not in section
    import json

    records = json.loads((pytester.path / "run.json").read_text())["tests"]
    assert records["test_mixed.py::test_gpu_marked"]["skip_reason"] == "needs --cudagraph"
    assert records["test_mixed.py::test_skipped_by_the_user"]["skip_reason"] == "the user's own reason"
    assert "skip_reason" not in records["test_mixed.py::test_cpu"]


def test_a_cpu_runner_with_cudagraph_says_no_cuda_device_in_one_line(pytester):
    import pytest

    if _cuda_visible():
        pytest.skip("checks what a machine without a CUDA device prints")
    pytester.makepyfile(test_mixed=GPU_AND_CPU)
    result = pytester.runpytest("--cudagraph")
    result.assert_outcomes(passed=1, skipped=3)
    section = result.stdout.str().split("= cudagraph =")[1]
    lines = [line for line in section.splitlines() if "GPU tests skipped" in line]
    assert len(lines) == 1 and lines[0].startswith("2 GPU tests skipped, not listed: no CUDA device (torch "), lines


def test_a_run_stopped_by_a_collection_error_prints_no_table(pytester):
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.max_recompiles(-1)
def test_bad():
    pass
"""
    )
    report = pytester.path / "run.json"
    result = pytester.runpytest(f"--cudagraph-report={report}")
    assert result.ret == 2
    section = result.stdout.str().split("= cudagraph =")[1]
    assert "outcome" not in section and "  test_bad " not in section
    assert f"report written to {report}" in section and "INCOMPLETE run" in section


def test_without_a_report_an_incomplete_run_does_not_mention_one(pytester):
    pytester.makepyfile(
        test_stop="""
import pytest

@pytest.mark.max_recompiles(0)
def test_first():
    assert False

@pytest.mark.max_recompiles(0)
def test_second():
    assert False
"""
    )
    result = pytester.runpytest("-x", "-p", "no:randomly")
    section = result.stdout.str().split("= cudagraph =")[1]
    assert "INCOMPLETE run: stopped early" in section and "the report says so" not in section


def test_a_run_that_runs_no_test_prints_no_table_for_tests_refused_at_collection(pytester):
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.max_recompiles(-1)
def test_bad():
    pass
"""
    )
    result = pytester.runpytest("--fixtures")
    output = result.stdout.str()
    section = output.split("= cudagraph =")[1] if "= cudagraph =" in output else ""
    assert "  test_bad " not in section and "1 error;" not in section


def test_a_multi_rank_test_shows_every_ranks_graphs_and_the_world_size():
    def rank(index: int, pool: int) -> dict:
        graphs = {"captured": 8, "sizes": [1, 2, 4, 8, 16, 32, 48, 64], "pool_bytes": pool}
        graphs["largest_graph_bytes"] = 2 * 1024 * 1024
        return {"rank": index, "device": f"cuda:{index}", "outcome": "passed", "graphs": graphs}

    record = {
        "outcome": "passed",
        "ranks": {"world_size": 2, "backend": "nccl", "per_rank": [rank(0, 2 * 1024 * 1024), rank(1, 3 * 1024 * 1024)]},
    }
    cells = dict(zip(HEADER, summary_row("t.py::test_tp", record)))
    assert cells["graphs"] == "16 (2 ranks)"
    # the rank whose pool is worst against its largest graph
    assert cells["pool / largest"] == "3.0M / 2.0M  1.50x"


# ----------------------------------------------------------------------------
# the example suite on a CPU, at 120 columns
# ----------------------------------------------------------------------------

EXAMPLES = "docs/examples/"


def _cpu_examples() -> dict[str, dict]:
    """The main job's records on a CPU, as their shapes were: cache tests, recompile tests, GPU tests skipped."""
    records = {
        f"{EXAMPLES}test_compile_cache_cases.py::test_warm_start_in_process_forward_and_backward": warm_start_record(),
        f"{EXAMPLES}test_llama_hf.py::test_llama_forward_compiles_once_for_every_batch_size": recompile_record(0),
        f"{EXAMPLES}test_recompile_cases.py::test_automatic_dynamic_costs_exactly_one_recompile": recompile_record(1),
    }
    passes = records[next(iter(records))]["extra"]["compile_cache"]
    for side in ("cold", "warm"):  # Inductor on a CPU generates C++: Triton moves nothing
        passes[side]["stats"]["triton"] = {"compiled": 0, "loaded": 0}
    for name in ("test_decode_step_bf16", "test_compiled_decode_step_graphs", "test_tensor_parallel_mlp_graphs"):
        records[f"{EXAMPLES}test_decode_step_graphs.py::{name}"] = {"outcome": "skipped", "skip_reason": NO_CUDA}
    return records


def test_each_test_is_one_line_under_its_file_and_no_column_is_empty():
    lines = terminal_summary_lines(_cpu_examples(), None)
    assert max(map(len, lines)) <= 120, "\n".join(lines)
    table = lines[: next(i for i, line in enumerate(lines) if " recorded: " in line)]
    # Triton moved nothing: no column; every row passed (the totals line says so): no outcome column
    assert table[0].split() == ["test", "recompiles", "fxgraph", "aot"]
    assert table[1:] == [
        f"{EXAMPLES}test_compile_cache_cases.py",
        table[2],
        f"{EXAMPLES}test_llama_hf.py",
        table[4],
        f"{EXAMPLES}test_recompile_cases.py",
        table[6],
    ]
    assert table[2].split()[:2] == ["test_warm_start_in_process_forward_and_backward", "-"]
    assert "m=1 s=1 -> h=1  m=1 s=1 -> h=1" in table[2]
    # the GPU tests that skipped are not rows of dashes: one line counts them
    assert not any("skipped" in line for line in table)
    assert f"3 GPU tests skipped, not listed: {NO_CUDA}" in lines
    assert "6 tests recorded: 3 passed, 3 skipped; 1 recompile; 0 graphs captured" in lines


def test_the_legend_says_what_every_column_shown_holds():
    lines = terminal_summary_lines(_cpu_examples(), None)
    legend = " ".join(lines[lines.index(next(line for line in lines if "GPU tests skipped" in line)) + 1 :])
    for said in (
        "recompiles: Dynamo recompiles",
        "fxgraph: Inductor's FX-graph cache",
        "aot: AOTAutograd's cache",
        "fxgraph, aot: h hits, m misses, s saves",
        "a -> b: the cold pass, then the warm pass",
    ):
        assert said in legend, (said, legend)
    assert "triton" not in legend and "graphs:" not in legend


def test_a_function_name_too_wide_for_its_column_gets_a_line_of_its_own_whole():
    long_name = "test_" + "a_very_long_name_" * 6 + "end"
    records = {f"t.py::{long_name}": warm_start_record(), "t.py::test_b": recompile_record(1)}
    lines = terminal_summary_lines(records, None)
    at = lines.index(f"  {long_name}")  # whole, alone on its line
    assert lines[at + 1].startswith("   ") and "m=1 s=1 -> h=1" in lines[at + 1]  # its cells under it
    assert lines[at + 2].startswith("  test_b ") and lines[at + 2].split()[1] == "1"  # a name that fits: one line
    assert max(map(len, lines)) <= 120


def test_a_function_name_wider_than_the_terminal_is_clipped_in_the_middle():
    long_name = "test_" + "a_very_long_name_" * 8 + "end"
    lines = terminal_summary_lines({f"t.py::{long_name}": warm_start_record()}, None)
    name = next(line for line in lines if line.startswith("  test_a_very"))
    assert len(name) <= 120 and "..." in name and name.endswith("_end")


def test_the_outcome_column_shows_where_outcomes_differ():
    failed = recompile_record(1)
    failed["outcome"] = "failed"
    lines = terminal_summary_lines({"t.py::test_a": failed, "t.py::test_b": recompile_record(0)}, None)
    assert lines[0].split()[:2] == ["test", "outcome"]
    assert [line.split()[:2] for line in lines[2:4]] == [["test_a", "failed"], ["test_b", "passed"]]


def test_a_recompile_limit_hit_in_a_test_that_passed_is_no_alarm():
    quiet = recompile_record(2)
    quiet["recompiles"]["limit_hits"] = ["forward hit config.recompile_limit (8)"]
    loud = copy.deepcopy(quiet)
    loud["outcome"] = "failed"
    lines = terminal_summary_lines({"a.py::test_expects_the_hit": quiet}, None)
    text = "\n".join(lines)
    assert "2 limit" in text and "LIMIT" not in text
    assert "(1 recompile-limit hit, in a test that passed)" in text
    assert "limit: hit the recompile limit in a test that passed (it expected the hit, or checked nothing)" in text
    # failed, it is: listed first, in capitals
    lines = terminal_summary_lines({"a.py::test_expects_the_hit": quiet, "b.py::test_failed": loud}, None)
    assert lines[1:3] == ["b.py", lines[2]] and "2 LIMIT" in lines[2]
    assert "(2 recompile-limit hits, 1 in a test that passed)" in "\n".join(lines)


def test_every_layer_off_is_one_line_that_agrees_with_the_failure():
    record = warm_start_record()
    why = "torch._inductor.config.fx_graph_cache is False (set in code)"
    for side in ("cold", "warm"):
        record["extra"]["compile_cache"][side]["stats"]["disabled"] = {"fxgraph": why, "aot_autograd": why}
    record["outcome"] = "failed"
    lines = terminal_summary_lines({"t.py::test_off": record}, None)
    at = next(i for i, line in enumerate(lines) if line.startswith("every compile cache layer was off"))
    said = [" ".join([lines[at], *(line.strip() for line in lines[at + 1 :][:1] if line.startswith("  "))])]
    text = "\n".join(lines)
    assert said == [
        f"every compile cache layer was off in 1 test ({why}; first: t.py::test_off): no warm start to check, "
        "so the test fails"
    ]
    assert "the other layers were" not in text
    # the legend agrees with the failure: "off" is not "not checked" where every layer was off
    assert "off: a cache layer the user turned off (alone it is not checked; with every layer off the test fails)" in (
        " ".join(line.strip() for line in lines)
    )


def test_a_wrapped_line_under_the_table_leaves_no_word_alone_on_its_last_line():
    record = warm_start_record()
    why = "torch.compiler.config.force_disable_caches was True while the test compiled"
    for side in ("cold", "warm"):
        record["extra"]["compile_cache"][side]["stats"]["disabled"] = {"fxgraph": why, "aot_autograd": why}
    record["outcome"] = "failed"
    nodeid = "docs/examples_failing/test_compile_cache_broken.py::test_caches_disabled_by_config"
    lines = terminal_summary_lines({nodeid: record}, None)
    at = next(i for i, line in enumerate(lines) if line.startswith("every compile cache layer was off"))
    said = [lines[at], *(line for line in lines[at + 1 :] if line.startswith("  "))][:3]
    assert len(said) > 1 and all(len(line) <= 120 for line in said)
    assert all(" " in line.strip() for line in said), said
    # the rule itself: 116 characters of words, then one more word
    line = " ".join(["abcdefgh"] * 13) + " there"
    assert wrapped(line) == [" ".join(["abcdefgh"] * 12), "  abcdefgh there"]
