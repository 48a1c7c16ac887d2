"""Re-recordings of reduce-overhead, counted from recorded data: no GPU needed.

The counting is a plain function of ``(function, shape)`` recording events; the
GPU side (tests/gpu/test_rerecords_gpu.py) checks that the cudagraph trees hand
the right events over.
"""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph import _compat
from pytest_cudagraph.graphs.reduce_overhead import ReduceOverheadResult
from pytest_cudagraph.graphs.rerecords import count_rerecords, rerecord_failure, rerecord_remedy, shape_text
from pytest_cudagraph.plugin.markers import MarkerArgumentError, parse_cudagraph
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.records.validate import checked_report

shapes = st.tuples(st.integers(1, 6), st.sampled_from([16, 32]))
events = st.lists(st.tuples(st.sampled_from(["f (m.py:1)", "g (m.py:9)"]), shapes), max_size=40)


@given(events)
def test_a_function_re_records_once_per_new_shape_after_its_first(recorded):
    counts = count_rerecords(recorded)
    for function, result in counts.items():
        own = [shape_text(shape) for name, shape in recorded if name == function]
        first_seen = list(dict.fromkeys(own))
        assert list(result.shapes) == first_seen  # the shapes in the order first recorded
        assert result.rerecords == len(first_seen) - 1
        assert result.recordings == len(own) == sum(result.per_shape.values())
        assert all(result.per_shape[s] == own.count(s) for s in first_seen)
    assert set(counts) == {name for name, _ in recorded}


@given(events, st.integers(0, 8))
def test_the_limit_fails_exactly_the_functions_over_it_naming_their_shapes_in_order(recorded, limit):
    counts = count_rerecords(recorded)
    message = rerecord_failure(counts, limit, "@pytest.mark.cudagraph(max_rerecords=...)")
    over = [c for c in counts.values() if c.rerecords > limit]
    if not over:
        assert message is None
        return
    assert message is not None
    for c in over:
        assert f"re-recorded {c.function} {c.rerecords} time" in message
        assert "; ".join(c.shapes) in message
    for c in counts.values():
        if c.rerecords <= limit:
            assert f"re-recorded {c.function} " not in message
    assert "mark_dynamic" in message and "bucket" in message


def test_twelve_shapes_are_eleven_re_recordings_and_the_message_lists_them():
    recorded = [("step (model.py:3)", ((n, 16),)) for n in range(2, 14)]
    recorded += [("step (model.py:3)", ((2, 16),))]  # a shape seen before: a recording, no re-recording
    [result] = count_rerecords(recorded).values()
    assert result.rerecords == 11 and result.recordings == 13 and result.per_shape["(2, 16)"] == 2
    message = rerecord_failure(count_rerecords(recorded), 4, "@pytest.mark.cudagraph(max_rerecords=4)")
    assert message.startswith(
        "@pytest.mark.cudagraph(max_rerecords=4): reduce-overhead re-recorded step (model.py:3) 11 times "
        "(more than max_rerecords=4): 12 shapes in the order recorded: (2, 16); (3, 16); (4, 16);"
    )
    assert message.rstrip(".").endswith(rerecord_remedy())


def test_an_uncounted_limit_fails_instead_of_passing_silently():
    assert "could not be counted" in rerecord_failure(None, 4)


@pytest.mark.parametrize(
    "shape, text",
    [(((4, 16),), "(4, 16)"), (((4, 16), (4,)), "(4, 16), (4,)"), ((4, 16), "(4, 16)"), ((8,), "(8,)"), ("s", "s")],
)
def test_a_shape_reads_as_python_writes_it(shape, text):
    assert shape_text(shape) == text


def test_the_counts_go_into_the_reduce_overhead_section_and_validate():
    counts = count_rerecords([("f (m.py:1)", ((n, 8),)) for n in (2, 3, 4)])
    section = ReduceOverheadResult(0, 0, (), 0, 0, 3, None, rerecords=counts).to_json()
    assert section["rerecords"]["f (m.py:1)"] == {
        "recordings": 3,
        "rerecords": 2,
        "shapes": ["(2, 8)", "(3, 8)", "(4, 8)"],
        "per_shape": {"(2, 8)": 1, "(3, 8)": 1, "(4, 8)": 1},
    }
    report = json.loads(json.dumps(build_report({}, {"t::r": {"outcome": "failed", "reduce_overhead": section}})))
    typed = checked_report(report, "report.json").tests["t::r"].reduce_overhead.rerecords["f (m.py:1)"]
    assert typed.rerecords == 2 and typed.shapes == ["(2, 8)", "(3, 8)", "(4, 8)"]
    assert "rerecords" not in ReduceOverheadResult(0, 0, (), 0, 0, 0, None).to_json()


def test_a_recording_is_named_after_the_users_calling_function():
    from pytest_cudagraph._compat.cudagraph_trees import _calling_function

    here = sys._getframe()
    name = _calling_function(here)
    assert name == (
        f"test_a_recording_is_named_after_the_users_calling_function (test_rerecords.py:{here.f_code.co_firstlineno})"
    )
    meter = _compat.TreeCallMeter()
    meter.on_recording("f (m.py:1)", ((2, 8),))
    assert meter.recordings == [("f (m.py:1)", ((2, 8),))]


@pytest.mark.parametrize("value", [-1, 1.5, True, "4"])
def test_max_rerecords_must_be_a_non_negative_integer(value):
    with pytest.raises(MarkerArgumentError, match=rf"max_rerecords={value!r} is not a non-negative integer; give"):
        parse_cudagraph((), {"max_rerecords": value})


def test_max_rerecords_alone_watches_the_trees():
    marker = parse_cudagraph((), {"max_rerecords": 0})
    assert marker.max_rerecords == 0 and marker.watches_trees and marker.trees is None
    assert not parse_cudagraph((), {}).watches_trees


BAD_MARKS = """
import pytest

@pytest.mark.cudagraph(max_rerecords=-2)
def test_negative():
    pass

@pytest.mark.cudagraph(break_at=("attention",))
def test_not_an_op_name():
    pass
"""


@pytest.mark.slow
def test_bad_marker_options_are_collection_errors_naming_the_test_and_the_fix(pytester):
    pytester.makepyfile(test_marks=BAD_MARKS)
    result = pytester.runpytest()
    assert result.ret == 2
    output = result.stdout.str()
    assert (
        "test_marks.py::test_negative: @pytest.mark.cudagraph: max_rerecords=-2 is not a non-negative integer" in output
    )
    assert (
        "test_marks.py::test_not_an_op_name: @pytest.mark.cudagraph: break_at=['attention']: 'attention' is not"
        in output
    )
