"""The text helpers every printer shares: tables, byte sizes, report numbers, clipping."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph.records.json_values import number
from pytest_cudagraph.render.plain_text import (
    KIB,
    MIB,
    NODEID_WIDTH,
    clip,
    clip_middle,
    clip_nodeid,
    count_noun,
    format_bytes,
    format_table,
    wrap_line,
)

# ----------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------


def test_a_table_aligns_columns_two_spaces_apart_without_trailing_spaces():
    rows = [["test", "pool"], ["tests/a.py::t", "60.0M"], ["b", "-"]]
    assert format_table(rows) == ["test           pool", "tests/a.py::t  60.0M", "b              -"]


def test_a_table_right_aligns_the_columns_it_is_told_and_indents():
    rows = [["#", "size", "reason"], ["1", "512", "x"], ["12", "8", "a longer one"]]
    assert format_table(rows, align=">>", indent="  ") == [
        "   #  size  reason",
        "   1   512  x",
        "  12     8  a longer one",
    ]


def test_an_empty_table_is_no_lines():
    assert format_table([]) == []


# ----------------------------------------------------------------------------
# bytes
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "full", "short"),
    [
        (60 * MIB, "60.0 MiB", "60.0M"),
        (5 * 1024 * MIB, "5120.0 MiB", "5120.0M"),  # one unit from 1 MiB up: a column stays comparable
        (1536, "1.5 KiB", "1.5K"),
        (12, "12 B", "12B"),
        (0, "0 B", "0B"),
        (-3 * MIB, "-3.0 MiB", "-3.0M"),
        (float(2 * MIB), "2.0 MiB", "2.0M"),
        ("62914560", "60.0 MiB", "60.0M"),  # a report's number as a string
        (None, "-", "-"),
        (True, "-", "-"),
        ("nan", "nan", "nan"),  # NaN is a value (text.number's rule), not an absence
        (float("inf"), "inf", "inf"),
        ("lots", "lots", "lots"),  # no number: shown as it is
    ],
)
def test_bytes_read_alike_everywhere(value, full, short):
    assert format_bytes(value) == full
    assert format_bytes(value, compact=True) == short


def test_small_figures_keep_kib_so_a_table_never_shows_zero():
    assert format_bytes(KIB) == "1.0 KiB" and format_bytes(MIB - 1) == "1024.0 KiB"
    assert format_bytes(MIB) == "1.0 MiB"


# ----------------------------------------------------------------------------
# numbers
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (2.5, 2.5), ("1e-06", 1e-06), ("inf", math.inf), ("-inf", -math.inf), (10**400, math.inf)],
)
def test_a_report_number_reads_as_a_float(value, expected):
    assert number(value) == expected


@pytest.mark.parametrize("value", [None, True, False, "", "many", [1], {"a": 1}])
def test_what_is_no_number_is_none(value):
    assert number(value) is None


def test_one_nan_rule_nan_is_a_measurement_unless_a_finite_figure_is_asked_for():
    assert math.isnan(number("nan")) and math.isnan(number(float("nan")))
    assert number(-(10**400)) == -math.inf
    for value in ("nan", float("nan"), "inf", 10**400):
        assert number(value, finite=True) is None
    assert number("7", finite=True) == 7.0


# ----------------------------------------------------------------------------
# clipping
# ----------------------------------------------------------------------------


def test_clip_puts_text_on_one_line_and_cuts_its_end():
    assert clip("a  long\n  reason") == "a long reason"
    assert clip("x" * 50, 10) == "xxxxxxx..."
    assert len(clip("word " * 100)) == 160
    assert clip(ValueError("bad  value")) == "bad value"


def test_clip_first_line_keeps_the_headline_as_it_is():
    assert clip("\n  size  mismatch\nsecond line\n", first_line=True) == "size  mismatch"
    assert clip("   ", first_line=True) == ""
    assert clip("y" * 200 + "\nmore", 20, first_line=True) == "y" * 17 + "..."


def test_clip_middle_keeps_both_ends():
    assert clip_middle("abcdefghijklmnopqrstuvwxyz", 11) == "abcd...wxyz"
    assert clip_middle("abcdefghijklmnopqrstuvwxyz", 11, head_share=0.25) == "ab...uvwxyz"
    assert clip_middle("short", 11) == "short"


def test_a_short_id_is_kept_and_a_long_one_keeps_function_and_param_end():
    short = "tests/test_model.py::test_decode[bs16]"
    assert clip_nodeid(short) is short
    clipped = clip_nodeid("tests/test_model.py::test_decode[" + "x" * 3000 + "-bs16]")
    assert len(clipped) == NODEID_WIDTH
    assert clipped.startswith("tests/test_model.py::test_decode[xxx") and clipped.endswith("x-bs16]")


@given(st.text(alphabet="abc/.:[]-_", max_size=400))
def test_a_clipped_id_never_exceeds_the_width(nodeid):
    clipped = clip_nodeid(nodeid)
    assert len(clipped) <= NODEID_WIDTH
    assert clipped == nodeid if len(nodeid) <= NODEID_WIDTH else "..." in clipped


@given(st.integers(min_value=0, max_value=10**6))
def test_a_count_takes_the_singular_only_for_one(n):
    assert count_noun(n, "recompile") == f"{n} recompile{'' if n == 1 else 's'}"
    assert count_noun(n, "recompile-limit hit") == f"{n} recompile-limit hit{'' if n == 1 else 's'}"
    assert count_noun(n, "bypass", "bypasses").endswith("bypass" if n == 1 else "bypasses")


def test_a_command_that_ends_a_long_line_stays_whole_on_a_line_of_its_own():
    command = "pytest-cudagraph explain /a/long/directory/base.json /a/long/directory/new.json"
    assert wrap_line(f"  ... and 2 more components: {command}", 60) == [
        "  ... and 2 more components:",
        f"    {command}",
    ]
    # a command named in prose is wrapped as prose
    for prose in (
        "to compare them, run pytest-cudagraph startup NODEID --runs N on each build, then compare the reports",
        "To compare compile times, run pytest-cudagraph startup NODEID --runs N on each build and compare those.",
    ):
        assert all(len(line) <= 40 for line in wrap_line(prose, 40))
