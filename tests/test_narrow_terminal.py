"""An 80-column terminal (most CI logs): the plugin's table, its failures and pytest's ``-r`` line fit it.

The table stayed 120 wide, the failure messages had lines of up to 280 characters,
and the ``-r`` line cut the verdict to ``Failed...`` after a long test id.
"""

from __future__ import annotations

import pytest
from sample_reports import sample_report

from pytest_cudagraph.render.summary import NARROWEST, WIDTH, section_width, terminal_summary_lines

NARROW_SUITE = """
from pytest_cudagraph.errors import InvariantViolation

HINT = "hint: " + " ".join(["a value the body computes anew is baked into the graph"] * 3)


def test_a_check_fails():
    raise InvariantViolation("the warm pass missed the cache (@pytest.mark.compile_cache(mode='inprocess'))\\n  - x\\n"
                             + "  " + HINT)


def test_own_assert():
    assert 1 == 2, "the test's own words " * 10
"""


def run_at(pytester, monkeypatch, columns: int):
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.delenv("CI", raising=False)  # pytest cuts the -r line to the terminal only outside CI
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    pytester.makepyfile(test_narrow=NARROW_SUITE)
    result = pytester.runpytest("--cudagraph", "-rf", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    return result


def test_a_plugin_failure_fits_80_columns_and_its_r_line_starts_with_the_cause(pytester, monkeypatch):
    result = run_at(pytester, monkeypatch, 80)
    lines = result.outlines
    r_line = next(line for line in lines if line.startswith("FAILED test_narrow.py::test_a_check"))
    assert r_line == "FAILED test_narrow.py::test_a_check_fails - the warm pass missed the cache: x..."
    assert len(r_line) <= 80
    # the message's long hint is broken at spaces, pytest's E on every piece, none wider than the terminal
    failure = lines[lines.index(next(line for line in lines if "_ test_a_check" in line)) :]
    failure = failure[: failure.index(next(line for line in failure if "_ test_own_assert _" in line))]
    hint = [line for line in failure if "baked into" in line]
    assert len(hint) > 1 and all(line.startswith("E   ") and len(line) <= 80 for line in hint)
    assert "".join(line.removeprefix("E").strip() + " " for line in hint).count("baked into the graph") == 3
    # the test's own failure is pytest's: untouched
    assert "FAILED test_narrow.py::test_own_assert - AssertionError: the test's own words..." in lines
    assert any(len(line) > 80 and "the test's own words" in line for line in lines)


def test_the_r_line_outside_a_terminal_puts_the_check_after_the_cause(pytester, monkeypatch):
    result = run_at(pytester, monkeypatch, 200)
    assert (
        "FAILED test_narrow.py::test_a_check_fails - "
        "the warm pass missed the cache: x (@pytest.mark.compile_cache(mode='inprocess'))"
    ) in result.outlines
    # wide enough: the hint is one line, as written
    assert any(line.startswith("E ") and "hint: " in line and line.count("baked into") == 3 for line in result.outlines)


@pytest.mark.parametrize("columns", [40, 80, 100, 120, 200])
def test_the_terminal_section_fits_the_terminal_down_to_its_narrowest(columns):
    width = section_width(columns)
    assert width == max(NARROWEST, min(WIDTH, columns))
    lines = terminal_summary_lines(sample_report()["tests"], None, max_rows=None, width=width)
    too_wide = [line for line in lines if len(line) > width and " " in line.strip()]
    assert not too_wide


def test_the_terminal_section_in_an_80_column_run(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makepyfile(
        test_wide="""
        import pytest

        @pytest.mark.cudagraph
        @pytest.mark.parametrize("case", ["a-rather-long-parametrize-id-" + str(i) for i in range(2)])
        def test_a_graph_test_with_a_long_name_that_needs_a_gpu(case):
            pass
        """
    )
    result = pytester.runpytest("--cudagraph", "-p", "no:cacheprovider", "-p", "no:randomly")
    section = result.outlines[result.outlines.index(next(line for line in result.outlines if " cudagraph " in line)) :]
    assert len(section) > 1 and all(len(line) <= 80 for line in section), section
