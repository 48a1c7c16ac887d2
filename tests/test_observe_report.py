"""Observed graphs in the run's record: the marker's arguments, the report section, its text, page, summary cells
and compare's rules; and that a run with no observing test imports and patches nothing.

The pytester runs are in-process (torch is already imported by tests/conftest.py), save the one
that checks what the run imports: only a fresh interpreter shows that (its sys.modules).
"""

from __future__ import annotations

import copy
import textwrap

import pytest
from sample_reports import ENV_2_13, MiB, sample_report

from pytest_cudagraph.compile.call_site import CallSite
from pytest_cudagraph.graphs.observe_verdict import ObservedCapture, ObservedGraphs, ObserveOptions
from pytest_cudagraph.graphs.pool_blocks import LiveBlock
from pytest_cudagraph.plugin.markers import MarkerArgumentError, parse_cudagraph
from pytest_cudagraph.records.loaded import typed_report
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.observed_text import observed_cells
from pytest_cudagraph.render.record_text import detail_lines
from pytest_cudagraph.render.show import render_html
from pytest_cudagraph.render.summary import legend_lines, summary_row, totals_line
from pytest_cudagraph.tools.compare import compare_reports

NODE = "tests/test_engine.py::test_runner_graphs"
SITE = CallSite("engine.py", 42, "with torch.cuda.graph(g, pool=self.pool):", "capture")


def observed_section(pools: int = 1, sizes=(8, 4, 2, 1), kept: bool = False, **figures) -> dict:
    """The section of an engine that captured ``sizes`` largest first, into one pool or a pool per size."""
    captures = []
    held = LiveBlock((0, 1), 0x1000, 6 * MiB, 6 * MiB)
    for i, size in enumerate(sizes):
        pool = (0, 1 + (i % pools))
        captures.append(
            ObservedCapture(
                index=i,
                call_site=SITE,
                pool=pool,
                pool_bytes_before=0 if i < pools else 20 * MiB,
                pool_bytes_after=20 * MiB,
                live_after=(held,) if kept else (),
                behind_allocator_bytes=figures.get("behind", 0),
                capture_s=0.002,
                input_shapes=((size, 256),),
                replays=3,
            )
        )
    return ObservedGraphs(tuple(captures), ObserveOptions(expect_sizes=(8, 4, 2, 1)), hooks="wrapper").to_json()


def observed_report(section: dict, outcome: str = "passed") -> dict:
    return build_report(dict(ENV_2_13), {NODE: {"outcome": outcome, "duration_s": 1.0, "observed_graphs": section}})


# ----------------------------------------------------------------------------
# the marker's arguments
# ----------------------------------------------------------------------------


def test_observe_and_its_switches_parse_and_sizes_default_to_capture_sizes():
    marker = parse_cudagraph((), {"observe": True, "capture_sizes": [1, 2, 4]})
    assert marker.observe and marker.observed_sizes == (1, 2, 4)
    assert parse_cudagraph((), {"observe": True, "expect_sizes": [8]}).observed_sizes == (8,)
    off = parse_cudagraph((), {"observe": True, "capture_sizes": [1], "check_sizes": False, "one_pool": False})
    assert off.observed_sizes is None and not off.one_pool and off.pool_check
    assert not parse_cudagraph((), {}).observe


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"one_pool": False}, "one_pool=False applies only to observed graphs; add observe=True, or leave it out"),
        ({"expect_sizes": [1]}, "expect_sizes=[1] applies only to observed graphs"),
        ({"observe": "yes"}, "observe='yes' is not True or False; observe=True records every CUDA graph"),
        ({"observe": True, "require_replay": 1}, "require_replay=1 is not True or False"),
        ({"observe": True, "expect_sizes": [0, 8]}, "expect_sizes"),
    ],
)
def test_a_bad_observe_argument_is_one_sentence_naming_it(kwargs, words):
    with pytest.raises(MarkerArgumentError, match="^@pytest.mark.cudagraph: ") as error:
        parse_cudagraph((), kwargs)
    assert words in str(error.value)


def test_a_bad_observe_argument_is_a_collection_error_naming_the_test(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cudagraph(pool_check=False)
        def test_engine():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*test_engine: @pytest.mark.cudagraph: pool_check=False applies only to observed graphs; add observe=True*"]
    )
    assert result.ret != 0 and "Traceback" not in result.stdout.str()


def test_an_observed_test_skips_without_a_gpu_and_leaves_nothing_patched(pytester):
    pytester.makepyfile(
        textwrap.dedent(
            """
            import pytest
            from pytest_cudagraph import _compat

            @pytest.mark.cudagraph(observe=True, capture_sizes=[1, 2])
            def test_engine():
                pass

            def test_after():
                state = _compat.graph_observer_state()
                assert state["patched"] == [] and state["hooks"] == 0 and state["listeners"] == 0
            """
        )
    )
    # in file order (tests/conftest.py): test_after checks what test_engine left
    result = pytester.runpytest("-p", "no:cacheprovider", "--cudagraph")
    result.assert_outcomes(passed=1, skipped=1)


def test_observe_graphs_in_a_failing_test_is_taken_off_for_the_next_test(pytester):
    pytester.makepyfile(
        textwrap.dedent(
            """
            from pytest_cudagraph import _compat
            from pytest_cudagraph.graphs.observe import observe_graphs

            def test_fails_while_observing():
                with observe_graphs():
                    assert _compat.graph_observer_state()["listeners"] == 1
                    raise RuntimeError("the engine broke")

            def test_after():
                state = _compat.graph_observer_state()
                assert state["patched"] == [] and state["hooks"] == 0 and state["listeners"] == 0
            """
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider")  # in file order, as above
    result.assert_outcomes(passed=1, failed=1)


def test_a_run_with_no_observing_test_imports_and_patches_nothing_of_it(pytester):
    pytester.makepyfile(
        textwrap.dedent(
            """
            import sys
            import pytest
            import torch

            @pytest.mark.cudagraph(capture_sizes=[1, 2])
            def test_gpu():
                pass

            def test_plain():
                x = torch.ones(2) * 2
                assert x.sum() == 4
                assert "pytest_cudagraph.graphs.observe" not in sys.modules
                assert "pytest_cudagraph._compat.graph_observer" not in sys.modules
                owner = torch.cuda.CUDAGraph
                assert all(owner.__dict__[name].__module__ == "torch.cuda.graphs"
                           for name in ("capture_begin", "capture_end", "replay", "reset"))
            """
        )
    )
    # a fresh interpreter: in this one torch and the plugin's modules are already imported
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--cudagraph")
    result.assert_outcomes(passed=1, skipped=1)


# ----------------------------------------------------------------------------
# the report, its text, its page and the summary
# ----------------------------------------------------------------------------


def test_a_report_with_observed_graphs_loads_and_counts_them_as_captured():
    report = observed_report(observed_section())
    loaded = typed_report(report)
    assert loaded.tests[NODE].observed_graphs.captured == 4
    assert report["summary"]["graphs_captured"] == 4
    assert "4 graphs captured" in totals_line(report["tests"])


def test_show_draws_each_call_sites_graphs_in_capture_order():
    lines = detail_lines(observed_report(observed_section(pools=4)))
    head = next(line for line in lines if "observed graphs:" in line)
    assert "4 graphs observed at 1 call site (wrapper); 4 pools, 80.0 MiB; 12 replays; failed: separate pools" in head
    table = lines[lines.index(next(line for line in lines if "4 graphs at engine.py:42:" in line)) + 1 :]
    header = ["#", "size", "pool", "pool", "after", "growth", "live", "behind", "allocator", "capture", "replays"]
    assert table[0].split() == header
    assert [row.split()[1:3] for row in table[1:5]] == [["8", "p1"], ["4", "p2"], ["2", "p3"], ["1", "p4"]]


def test_the_page_has_an_observed_graphs_section_with_a_table_per_call_site():
    page = render_html(observed_report(observed_section(kept=True), outcome="failed"))
    assert "<h3>observed graphs</h3>" in page and "failed: kept alive" in page
    assert page.count('<table class="observed">') == 1


def test_the_summary_shows_observed_graphs_and_their_pools():
    record = observed_report(observed_section(pools=2))["tests"][NODE]
    row = summary_row(NODE, record)
    assert row[2] == "4 obs (1-8)" and row[3] == "40.0M in 2 pools"
    assert any("n obs: CUDA graphs the test body captured itself" in line for line in legend_lines([row]))
    assert observed_cells({"captured": 0}) == ("0 obs", "-")


# ----------------------------------------------------------------------------
# compare
# ----------------------------------------------------------------------------


def test_two_runs_of_one_engine_compare_without_a_change():
    report = observed_report(observed_section())
    assert not compare_reports(report, copy.deepcopy(report)).regressed


def test_more_observed_graphs_or_a_larger_pool_are_regressions():
    base = observed_report(observed_section(sizes=(8, 4)))
    more = observed_report(observed_section(sizes=(8, 4, 2, 1)))
    rules = {r.rule: r.message for r in compare_reports(base, more).regressions}
    assert rules["graphs"] == "the test body captured 4 CUDA graphs, 2 before"
    split = observed_report(observed_section(sizes=(8, 4), pools=2))
    rules = {r.rule: r.message for r in compare_reports(base, split).regressions}
    assert rules["pool"].startswith(
        "observed graphs' pools 20.0 MiB -> 40.0 MiB (+100.0%, threshold 10%); pools 1 -> 2"
    )


def test_observed_memory_beyond_the_pool_is_under_the_graph_memory_rule():
    base = observed_report(observed_section())
    kept = observed_report(observed_section(kept=True, behind=8 * MiB))
    comparison = compare_reports(base, kept, rules=("graph-memory",))
    messages = [r.message for r in comparison.regressions]
    assert any(m.startswith("observed_graphs.kept_alive_bytes 0 B -> 6.0 MiB") for m in messages), messages
    assert any(m.startswith("observed_graphs.behind_allocator_bytes 0 B -> 32.0 MiB") for m in messages), messages


def test_the_sample_report_still_compares_with_itself():
    report = sample_report()
    assert not compare_reports(report, copy.deepcopy(report)).regressed
