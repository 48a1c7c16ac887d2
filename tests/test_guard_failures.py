"""guard_failures: Dynamo's reasons as data, read from reasons this torch really writes, and the watch's evaluation."""

from __future__ import annotations

import torch
import torch._dynamo
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph.compile.guard_failures import flat_reason, parse_guard, parse_reason
from pytest_cudagraph.compile.recompiles import watch_recompiles

SCALE = 2


def _events(calls):
    torch._dynamo.reset()
    with watch_recompiles() as watch:
        calls()
    return watch.events


def test_a_python_scalar_reason_keeps_the_guard_and_its_expected_value():
    f = torch.compile(lambda x, n: x + n, backend="eager", dynamic=False)
    [event] = _events(lambda: (f(torch.ones(2), 3), f(torch.ones(2), 4)))
    [reason] = event.reasons
    assert reason in ("0/0: n == 3", "0/0: L['n'] == 3")
    [guard] = event.guards
    assert (guard.entry, guard.kind, guard.expected, guard.actual) == ("0/0", "value", "3", "4")
    assert guard.source in ("n", "L['n']")


def test_a_global_that_changed_is_named_with_its_old_and_new_value():
    global SCALE

    def scaled(x):
        return x * SCALE

    f = torch.compile(scaled, backend="eager")
    try:
        torch._dynamo.reset()
        with watch_recompiles() as watch:
            SCALE = 2
            f(torch.ones(2))
            SCALE = 5
            f(torch.ones(2))
    finally:
        SCALE = 2
    [event] = watch.events
    [guard] = event.guards
    assert guard.source == "G['SCALE']" and (guard.expected, guard.actual) == ("2", "5")


def test_grad_mode_is_a_global_state_guard_with_both_values():
    f = torch.compile(lambda x: x + 1, backend="eager")

    def calls():
        f(torch.ones(2, requires_grad=True))
        with torch.no_grad():
            f(torch.ones(2, requires_grad=True))

    [event] = _events(calls)
    [guard] = event.guards
    assert guard.kind == "global_state" and guard.source == "grad_mode"
    assert (guard.expected, guard.actual) == ("True", "False")
    assert event.reasons[0].startswith("0/0: GLOBAL_STATE changed: grad_mode")


def test_a_third_compile_lists_the_guards_of_both_cached_entries():
    f = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    events = _events(lambda: [f(torch.ones(n)) for n in (2, 3, 4)])
    entries = {guard.entry for guard in events[-1].guards}
    assert entries == {"0/0", "0/1"}
    assert len(events[-1].reasons) == 2


def test_an_entry_whose_tensor_changed_in_two_ways_lists_both():
    f = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    [event] = _events(lambda: (f(torch.ones(2)), f(torch.ones(3, dtype=torch.float64))))
    kinds = sorted(guard.kind for guard in event.guards)
    assert kinds == ["dtype", "size"], event.guards
    printed = [guard for guard in event.guards if guard.reported_by_torch]
    assert len(printed) == 1  # torch names one of them


def test_parse_handles_both_spellings_of_a_frame_local():
    old = parse_reason("0/0: tensor 'L['x']' size mismatch at index 0. expected 4, actual 8")
    new = parse_reason("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8")
    assert old.guards[0].same_check(new.guards[0])
    assert (old.guards[0].expected, old.guards[0].actual) == ("4", "8")


def test_a_shape_guard_reads_from_the_size_side():
    guard = parse_guard("2 <= x.size()[0]  # s = f(x)  # t.py:3 in f (user code shown is first use)")
    assert (guard.source, guard.expected, guard.kind) == ("x.size()[0]", ">= 2", "value")


@given(st.text(max_size=200))
def test_flat_reason_is_one_line_and_never_raises(text):
    flat = flat_reason(text)
    assert "\n" not in flat
    parse_reason(text)  # any text: no exception
