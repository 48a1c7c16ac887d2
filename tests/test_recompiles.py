"""watch_recompiles(): counts, reasons, limit hits, graph breaks, refusing compiles, expect(), restored state.

Every compile here uses backend="eager" or torch's own CompileCounter, so only
Dynamo runs: each test costs milliseconds, not an Inductor compile.
"""

from __future__ import annotations

import logging
import re

import pytest
import torch
import torch._dynamo
import torch._dynamo.config as dynamo_config
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dynamo.testing import CompileCounter
from torch._logging._internal import log_state

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.compile.recompiles import RecompileStats, watch_recompiles
from pytest_cudagraph.errors import InvariantViolation, MisuseError


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test starts from empty Dynamo caches: code objects are shared between examples."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _payload(reason: str) -> str:
    """The reason without its "frame/compile: " prefix."""
    head, sep, tail = reason.partition(": ")
    return tail if sep and "/" in head else reason


# ----------------------------------------------------------------------------
# the guard kinds of the issue, one by one
# ----------------------------------------------------------------------------


def test_dtype_change_is_one_recompile_naming_the_tensor():
    f = torch.compile(lambda tokens: tokens + 1, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(3))
        f(torch.ones(3))
        f(torch.ones(3, dtype=torch.float64))
    assert w.count == 1
    assert len(w.reasons) == 1
    assert "tokens" in w.reasons[0] and "dtype mismatch" in w.reasons[0]
    assert w.limit_hits == []


def test_shape_change_with_dynamic_false_recompiles_per_size():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager", dynamic=False)
    with watch_recompiles() as w:
        for size in (2, 3, 4):
            f(torch.ones(size))
    assert w.count == 2
    # the third compile fails both cached entries' guards: one reason per entry
    assert len(w.reasons) == 3
    assert all("size mismatch" in r and "tokens" in r for r in w.reasons)


def test_automatic_dynamic_recompiles_once_then_never():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as w:
        for size in (2, 3, 4, 5, 9):
            f(torch.ones(size))
    assert w.count == 1
    assert "size mismatch" in w.reasons[0]


def test_mark_dynamic_avoids_the_recompile():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    first = torch.ones(2)
    torch._dynamo.mark_dynamic(first, 0)
    with watch_recompiles() as w:
        f(first)
        for size in (3, 4, 5):
            f(torch.ones(size))
    assert w.count == 0 and w.reasons == []


def test_python_scalar_argument():
    f = torch.compile(lambda tokens, scale: tokens * scale, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2), 2)
        f(torch.ones(2), 3)
    assert w.count == 1
    assert "scale" in w.reasons[0]


GLOBAL_OFFSET = 1


def _add_global(tokens):
    return tokens + GLOBAL_OFFSET


def test_global_value():
    global GLOBAL_OFFSET
    f = torch.compile(_add_global, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        GLOBAL_OFFSET = 2
        try:
            f(torch.ones(2))
        finally:
            GLOBAL_OFFSET = 1
    assert w.count == 1
    assert "GLOBAL_OFFSET" in w.reasons[0]


def test_closure_value():
    def make(offset):
        def add(tokens):
            return tokens + offset

        return add

    compiled = [torch.compile(make(k), backend="eager") for k in (1, 2)]
    with watch_recompiles() as w:
        for f in compiled:
            f(torch.ones(2))
    # two closures share one code object: the second is a recompile of the first
    assert w.count == 1
    assert "offset" in w.reasons[0]


def test_module_training_flag():
    model = torch.nn.Dropout(0.5)
    f = torch.compile(model, backend="eager")
    with watch_recompiles() as w:
        model.eval()
        f(torch.ones(4))
        model.train()
        f(torch.ones(4))
    assert w.count == 1
    assert "training" in w.reasons[0]


def test_module_attribute():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.factor = 2

        def forward(self, tokens):
            return tokens * self.factor

    model = Scale()
    f = torch.compile(model, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        model.factor = 3
        f(torch.ones(2))
    assert w.count == 1
    assert "factor" in w.reasons[0]


def test_grad_mode_is_the_global_state_guard():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        with torch.no_grad():
            f(torch.ones(2))
    assert w.count == 1
    assert _payload(w.reasons[0]).startswith("GLOBAL_STATE changed: grad_mode")


# ----------------------------------------------------------------------------
# the recompile limit, reset() in the body, graph breaks, grouping
# ----------------------------------------------------------------------------


def test_recompile_limit_hit_is_booked_apart_and_always_fails():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager", dynamic=False)
    with dynamo_config.patch(**{compat.recompile_limit_name(): 2}):
        with watch_recompiles() as w:
            for size in (2, 3, 4, 5, 6):
                f(torch.ones(size))
    # sizes 2 and 3 compiled, 4 hit the limit, then Dynamo ran eager for good
    assert w.count == 1
    assert len(w.limit_hits) == 1
    assert "recompile_limit" in w.limit_hits[0] or "cache_size_limit" in w.limit_hits[0]
    assert "size mismatch" in w.limit_hits[0]
    with pytest.raises(InvariantViolation) as info:
        w.assert_at_most(100)
    message = str(info.value)
    assert "recompile limit" in message and "eager" in message and "silently" in message


def test_reset_in_the_body_keeps_earlier_recompiles():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager", dynamic=False)
    with watch_recompiles() as w:
        f(torch.ones(2))
        f(torch.ones(3))
        torch._dynamo.reset()  # clears guard_failures and every cache entry
        f(torch.ones(3))  # a first compile again, not a recompile
        f(torch.ones(3, dtype=torch.float64))
    assert w.count == 2
    assert "size mismatch" in w.reasons[0]
    assert "dtype mismatch" in w.reasons[1]


def test_graph_breaks_are_a_separate_figure():
    def with_break(tokens):
        tokens = tokens + 1
        torch._dynamo.graph_break()
        return tokens * 2

    f = torch.compile(with_break, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        f(torch.ones(2))
    assert w.count == 0
    assert w.graph_breaks.count >= 1
    assert w.graph_breaks.reasons
    assert w.result().to_json()["graph_breaks"]["count"] == w.graph_breaks.count


def test_by_function_groups_reasons_per_compiled_function():
    def first(tokens):
        return tokens + 1

    def second(tokens):
        return tokens - 1

    f, g = (torch.compile(fn, backend="eager") for fn in (first, second))
    with watch_recompiles() as w:
        f(torch.ones(2))
        f(torch.ones(2, dtype=torch.float64))
        g(torch.ones(2))
        g(torch.ones(2, dtype=torch.int64))
        g(torch.ones(2, dtype=torch.float16))
    names = {name.split(" ")[0]: fn for name, fn in w.by_function.items()}
    assert names["first"].count == 1 and names["second"].count == 2
    assert all("test_recompiles.py:" in name for name in w.by_function)
    assert sum(fn.count for fn in w.by_function.values()) == w.count
    assert [r for fn in w.by_function.values() for r in fn.reasons] == w.reasons


def test_nested_watches_both_count():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as outer:
        f(torch.ones(2))
        with watch_recompiles() as inner:
            f(torch.ones(2, dtype=torch.float64))
        f(torch.ones(2, dtype=torch.int32))
    assert inner.count == 1
    assert outer.count == 2


def test_result_is_frozen_and_serialises():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        f(torch.ones(2, dtype=torch.float64))
    stats = w.result()
    assert isinstance(stats, RecompileStats)
    with pytest.raises(AttributeError):
        stats.count = 0  # type: ignore[misc]
    data = stats.to_json()
    assert set(data) == {"count", "reasons", "limit_hits", "by_function", "graph_breaks", "events"}
    assert data["count"] == 1 and data["reasons"] == w.reasons
    assert set(data["graph_breaks"]) == {"count", "reasons", "sites"}


def test_assert_at_most_message_is_a_small_report():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager", dynamic=False)
    with watch_recompiles() as w:
        f(torch.ones(2))
        f(torch.ones(3))
    w.assert_at_most(1)  # passes
    with pytest.raises(InvariantViolation) as info:
        w.assert_at_most(0, context="after warm-up")
    message = str(info.value)
    assert message.startswith("recompiled 1 time (max 0): ")
    assert message.splitlines()[0].endswith(" (after warm-up)")
    assert "test_recompiles.py:" in message  # the function and its place
    # the call site, then the guard as a row: entry, guard, expected, actual
    assert re.search(
        r"recompile 1 of 1: <lambda> \(.*test_recompiles\.py:\d+\), called from .*`f\(torch\.ones\(3\)\)`", message
    )
    assert re.search(r"0/0\s+tensor '(?:L\['tokens'\]|tokens)' size mismatch at index 0\s+2\s+3$", message, re.M)
    assert "mark_dynamic" in message and "dynamic=True" in message  # what to try


# ----------------------------------------------------------------------------
# refusing compiles: raise_on_recompile=True, with w.no_compiles()
# ----------------------------------------------------------------------------


def test_raise_on_recompile_raises_at_the_first_recompile_with_the_reason():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    calls = []
    with pytest.raises(InvariantViolation) as info:
        with watch_recompiles(raise_on_recompile=True):
            f(torch.ones(2))  # warm-up compile is allowed
            calls.append("warm")
            f(torch.ones(2, dtype=torch.float64))
            calls.append("after recompile")  # never reached
    assert calls == ["warm"]
    message = str(info.value)
    assert message.splitlines()[0].startswith("strict recompile check: ")
    assert "dtype mismatch" in message and "tokens" in message
    assert dynamo_config.error_on_recompile is False


def test_no_compiles_block_refuses_compiles_after_warm_up():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with pytest.raises(InvariantViolation) as info:
        with watch_recompiles() as w:
            f(torch.ones(2))
            with w.no_compiles():
                f(torch.ones(2))  # cached, fine
                f(torch.ones(2, dtype=torch.int64))
    assert "strict recompile check:" in str(info.value)
    assert "<lambda> (" in str(info.value)
    if compat.has_fail_on_recompile_stance():
        from torch._dynamo.eval_frame import _stance

        assert _stance.stance == "default"


def test_no_compiles_block_and_a_function_never_compiled_before():
    f = torch.compile(lambda tokens: tokens * 3, backend="eager")
    with watch_recompiles() as w:
        if compat.stance_refusal_names_the_frame():
            # the stance refuses first compiles too: warm up before entering
            with pytest.raises(InvariantViolation, match=r"strict recompile check: <lambda> \("):
                with w.no_compiles():
                    f(torch.ones(2))
        else:
            # error_on_recompile (torch 2.6) refuses recompiles only
            with w.no_compiles():
                f(torch.ones(2))
            with pytest.raises(InvariantViolation, match=r"(?s)<lambda> \(.*dtype mismatch"):
                with w.no_compiles():
                    f(torch.ones(2, dtype=torch.int64))
    assert dynamo_config.error_on_recompile is False


def test_a_watch_is_not_reentrant_and_blocks_need_an_active_watch():
    w = watch_recompiles()
    with pytest.raises(MisuseError, match="needs an active watch"):
        with w.no_compiles():
            pass
    with pytest.raises(MisuseError, match="needs an active watch"):
        with w.expect(count=0):
            pass
    with w:
        with pytest.raises(MisuseError, match="this RecompileWatch is already active"):
            w.__enter__()


# ----------------------------------------------------------------------------
# expect(**deltas): the change of each named figure over a block
# ----------------------------------------------------------------------------


def test_expect_passes_when_every_named_figure_changes_by_exactly_that_much():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as w:
        with w.expect(count=0, reasons=0, limit_hits=0, graph_breaks=0):
            f(torch.ones(2))  # a first compile is not a recompile
        with w.expect(count=1, reasons=1, limit_hits=0):
            f(torch.ones(2, dtype=torch.float64))
        with w.expect(count=1, reasons=2):  # the third entry fails both cached entries' guards
            f(torch.ones(2, dtype=torch.int64))
        with w.expect(count=0):
            f(torch.ones(2, dtype=torch.float64))  # cached
    assert w.count == 2


def test_expect_failure_prints_before_after_and_expected_per_figure():
    f = torch.compile(lambda tokens: tokens + 1, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(3))
        with pytest.raises(InvariantViolation) as info:
            with w.expect(count=0, limit_hits=0):
                f(torch.ones(3, dtype=torch.float64))
    message = str(info.value)
    lines = message.splitlines()
    assert lines[0] == "count +1 (expected +0) in the block of RecompileWatch.expect(count=0, limit_hits=0)"
    assert lines[2].split() == ["figure", "before", "after", "expected", "change", "change"]
    assert lines[3].split() == ["count", "0", "1", "+0", "+1", "<-", "differs"]
    assert lines[4].split() == ["limit_hits", "0", "0", "+0", "+0"]
    assert "recompiles inside the block:" in message
    assert re.search(r"0/0\s+tensor '(?:L\['tokens'\]|tokens)' dtype mismatch\s+Float\s+Double$", message, re.M)
    assert "cast inputs to one dtype" in message  # what to try


def test_expect_sees_a_recompile_limit_hit():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager", dynamic=False)
    with dynamo_config.patch(**{compat.recompile_limit_name(): 2}):
        with watch_recompiles() as w:
            f(torch.ones(2))
            with w.expect(count=1):
                f(torch.ones(3))
            with pytest.raises(InvariantViolation) as info:
                with w.expect(count=0, limit_hits=0):
                    f(torch.ones(4))  # past the limit: Dynamo falls back to eager
    message = str(info.value)
    assert message.startswith(
        "limit_hits +1 (expected +0) in the block of RecompileWatch.expect(count=0, limit_hits=0)"
    )
    assert "recompile limit hits inside the block:" in message
    assert w.limit_hits[0] in message


def test_expect_counts_graph_breaks_apart_from_recompiles():
    def with_break(tokens):
        tokens = tokens + 1
        torch._dynamo.graph_break()
        return tokens * 2

    f = torch.compile(with_break, backend="eager")
    with watch_recompiles() as w:
        before = w.graph_breaks.count
        f(torch.ones(2))
        breaks = w.graph_breaks.count - before
        assert breaks >= 1
        with w.expect(count=0, graph_breaks=0):
            f(torch.ones(2))  # cached: the break is not traced again
        with pytest.raises(InvariantViolation, match=r"^graph_breaks \+1 \(expected \+0\)"):
            with w.expect(count=0, graph_breaks=0):
                torch._dynamo.reset()
                f(torch.ones(2))  # traced again from scratch: a first compile, its breaks again


def test_expect_lets_the_body_error_through_unchecked():
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        with pytest.raises(ZeroDivisionError):
            with w.expect(count=0):
                f(torch.ones(2, dtype=torch.float64))  # a recompile the check would flag
                raise ZeroDivisionError("the body's own error comes first")


@pytest.mark.parametrize(
    "deltas, match",
    [
        (
            {"counts": 1},
            r"unknown figure\(s\) 'counts'; use the known figures count, reasons, limit_hits, graph_breaks",
        ),
        ({"count": 1, "recompiles": 0, "hits": 0}, r"unknown figure\(s\) 'hits', 'recompiles'; use the known figures"),
        ({}, "was given no figure, so it would check nothing"),
        ({"count": -1}, r"expect\(count=-1\): the expected change is not a non-negative int"),
        ({"count": True}, r"expect\(count=True\)"),
        ({"limit_hits": 0.0}, r"expect\(limit_hits=0.0\)"),
    ],
)
def test_expect_misuse_names_the_known_figures(deltas, match):
    with watch_recompiles() as w:
        with pytest.raises(MisuseError, match=match):
            w.expect(**deltas)


# ----------------------------------------------------------------------------
# restored state
# ----------------------------------------------------------------------------


def _logging_state():
    loggers = [*compat.recompile_log_names(), *compat.recompile_limit_logger_names()]
    return (
        set(log_state.artifact_names),
        {
            name: (
                logging.getLogger(name).level,
                logging.getLogger(name).propagate,
                list(logging.getLogger(name).handlers),
            )
            for name in loggers
        },
        dynamo_config.error_on_recompile,
        compat.recompile_limit(),
    )


@pytest.mark.parametrize("raise_on_recompile", [False, True])
def test_state_is_restored_even_when_the_body_raises(raise_on_recompile):
    before = _logging_state()
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with pytest.raises(ZeroDivisionError):
        with watch_recompiles(raise_on_recompile=raise_on_recompile):
            assert compat.log_artifact_enabled("recompiles")
            f(torch.ones(2))
            raise ZeroDivisionError("the test body fails inside the watch")
    assert _logging_state() == before


def test_a_user_enabled_recompiles_log_stays_enabled_and_still_prints(capfd):
    torch._logging.set_logs(recompiles=True)
    try:
        before = _logging_state()
        f = torch.compile(lambda tokens: tokens * 2, backend="eager")
        with watch_recompiles() as w:
            f(torch.ones(2))
            f(torch.ones(2, dtype=torch.float64))
        assert w.count == 1
        assert _logging_state() == before
        assert "Recompiling function" in capfd.readouterr().err
    finally:
        torch._logging.set_logs()


def test_recompile_log_does_not_reach_stderr_when_the_user_did_not_ask(capfd):
    f = torch.compile(lambda tokens: tokens * 2, backend="eager")
    with watch_recompiles() as w:
        f(torch.ones(2))
        f(torch.ones(2, dtype=torch.float64))
    assert w.count == 1
    assert "Recompiling function" not in capfd.readouterr().err


# ----------------------------------------------------------------------------
# the property: our count equals torch's own compile counter minus one
# ----------------------------------------------------------------------------

SHAPES = st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple)
DTYPES = st.sampled_from([torch.float32, torch.float64, torch.int64])


def _scale(tokens):
    return tokens * 2


@settings(deadline=None, max_examples=12)
@given(
    calls=st.lists(st.tuples(SHAPES, DTYPES), min_size=1, max_size=6),
    dynamic=st.sampled_from([False, None, True]),
)
def test_count_equals_compile_counter_minus_one(calls, dynamic):
    torch._dynamo.reset()
    counter = CompileCounter()
    f = torch.compile(_scale, backend=counter, dynamic=dynamic)
    with watch_recompiles() as w:
        for shape, dtype in calls:
            f(torch.ones(shape, dtype=dtype))
    assert w.count == counter.frame_count - 1
    assert w.limit_hits == []  # at most 6 calls: the default limit (8) is out of reach
    for reason in w.reasons:
        assert "tokens" in _payload(reason), reason


def test_failure_table_shows_the_first_reasons_and_counts_the_rest():
    from pytest_cudagraph.compile.recompile_messages import MAX_REASONS_SHOWN

    fn = torch.compile(lambda x: x + 1, backend="eager", dynamic=False)
    with watch_recompiles() as watch:
        for size in range(1, 8):  # 6 recompiles, 1 + 2 + ... + 6 = 21 reasons
            fn(torch.ones(size))
    assert len(watch.reasons) == 21 > MAX_REASONS_SHOWN
    with pytest.raises(InvariantViolation) as info:
        watch.assert_at_most(0)
    message = str(info.value)
    assert f"... and {21 - MAX_REASONS_SHOWN} more" in message
    # the head names the first failed guard, the table shows the first MAX_REASONS_SHOWN
    assert message.count("size mismatch at index 0") == 1 + MAX_REASONS_SHOWN
