"""Each pass of a cache probe starts from the arguments as given (``caches.arguments``), and refusals name their call.

A step that calls ``backward()`` accumulates into its parameters' ``.grad``, and a
state tensor advanced in place changes its argument: handed the same objects, the
warm pass ran on other inputs, and the check blamed the cache ("a hit that loads
the wrong artifact") while every layer hit.  The plain tests hold the copies and
the watch over arguments that cannot be copied; the compiled ones run the
docstring's own example of ``caches/probe.py``.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph.caches.arguments import PassArguments
from pytest_cudagraph.caches.probe import cache_probe
from pytest_cudagraph.errors import InvariantViolation, MisuseError


class Uncopyable:
    """An argument that refuses ``copy.deepcopy`` (a handle on something outside the process)."""

    def __deepcopy__(self, memo):
        raise TypeError("a handle cannot be copied")


def test_each_pass_gets_its_own_copy_and_the_callers_arguments_stay_as_they_were():
    weight = torch.ones(3, requires_grad=True)
    base = torch.arange(6.0)
    args = (weight, base, base[2:4], {"state": torch.zeros(2)})
    arguments = PassArguments(args)
    first = arguments.fresh()
    first[0].grad = torch.full((3,), 5.0)
    first[3]["state"].add_(1)
    second = arguments.fresh()
    assert second[0] is not weight and second[0].grad is None and second[0].requires_grad
    assert torch.equal(second[3]["state"], torch.zeros(2))
    # one copy of the whole tuple: a view of another argument stays a view of its copy
    second[1][2] = 100.0
    assert second[2][0].item() == 100.0
    assert weight.grad is None and torch.equal(args[3]["state"], torch.zeros(2)) and base[2].item() == 2.0
    assert arguments.copied and arguments.changed() == () and arguments.changed_problem("x()") is None


def test_arguments_that_cannot_be_copied_are_shared_and_each_change_is_named():
    state, weight = torch.zeros(2), torch.ones(3, requires_grad=True)
    arguments = PassArguments(([state, Uncopyable()], weight))
    shared = arguments.fresh()
    assert shared[0][0] is state and not arguments.copied
    state.add_(1)
    (weight * 2).sum().backward()
    assert arguments.changed() == ("args[0][0]", "args[1].grad")
    line = arguments.changed_problem("compile_cache.cold_warm()")
    assert line is not None and "\n" not in line
    assert line.startswith("the arguments changed during the passes (args[0][0], args[1].grad)")
    assert "(TypeError: a handle cannot be copied)" in line and "copy.deepcopy()" in line


def advance(state, handle):
    """Advances its state in place: the next call sees another state."""
    state.add_(1)
    return state * 2


def test_a_pass_that_changes_arguments_it_cannot_copy_is_said_so_not_blamed_on_the_cache():
    state = torch.zeros(2)
    with cache_probe() as probe:
        pair = probe.cold_warm(advance, state, Uncopyable())
    problems = pair.problems()
    assert problems[0].startswith("the arguments changed during the passes (args[0])")
    # the outputs of passes on other inputs are not compared, and the cache is not blamed for them
    assert not any(p.startswith("returned") for p in problems)
    with pytest.raises(InvariantViolation) as info:
        pair.check()
    assert "a hit that loads the wrong artifact" not in str(info.value)
    assert pair.to_json()["arguments_changed"] == problems[0]


def step(x, w):
    """``caches/probe.py``'s docstring example: backward() accumulates into ``w.grad``, read back."""
    y = torch.compile(lambda a, b: (torch.sin(a @ b) * 2).sum())(x, w).sum()
    y.backward()
    return y.detach(), w.grad


def advance_compiled(state, x):
    """A state tensor advanced in place by every call, then read by a compiled function."""
    state.add_(x)
    return torch.compile(lambda s: (s.cos() * 3).sum())(state)


@pytest.mark.slow  # two cold compiles of forward and backward (about 10 s on two cores)
def test_the_docstring_example_passes_the_check_and_leaves_the_callers_tensors_alone():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=gen)
    w = torch.randn(8, 8, generator=gen).requires_grad_(True)
    state = torch.zeros(4)
    with cache_probe() as probe:
        pair = probe.cold_warm(step, x, w)
        advanced = probe.cold_warm(advance_compiled, state, torch.ones(4))
    pair.check()
    advanced.check()
    assert pair.warm.stats.fxgraph["hit"] == 2 and torch.equal(pair.cold.outputs[1], pair.warm.outputs[1])
    assert w.grad is None and torch.equal(state, torch.zeros(4))


@pytest.mark.slow  # the warm pass compiles again in a child interpreter (about 20 s on two cores)
def test_the_child_interpreter_gets_the_arguments_as_given():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=gen)
    w = torch.randn(8, 8, generator=gen).requires_grad_(True)
    with cache_probe() as probe:
        pair = probe.cold_warm(step, x, w, mode="subprocess")
    pair.check()
    assert w.grad is None and pair.warm.stats.fxgraph["hit"] == 2


# ----------------------------------------------------------------------------
# refusals name the call that was made
# ----------------------------------------------------------------------------


REFUSED_CALLS = {
    "portable-subprocess": (
        lambda p: p.portable(lambda x: x, 1, mode="subprocess"),
        "compile_cache.portable(mode='subprocess'): ",
    ),
    "portable-name": (lambda p: p.portable("no_such_module_here:fn", 1), "compile_cache.portable(mode='inprocess'): "),
    "relocate-name": (lambda p: p.relocate("no_such_module_here:fn", 1), "compile_cache.relocate(): "),
    "relocate-lambda": (lambda p: p.relocate(lambda x: x, 1), "compile_cache.relocate(): "),
    "cold_warm-name": (
        lambda p: p.cold_warm("no_such_module_here:fn", 1),
        "compile_cache.cold_warm(mode='inprocess'): ",
    ),
    "cold_warm-lambda": (
        lambda p: p.cold_warm(lambda x: x, 1, mode="subprocess"),
        "compile_cache.cold_warm(mode='subprocess'): ",
    ),
}


@pytest.mark.parametrize(("call", "words"), list(REFUSED_CALLS.values()), ids=list(REFUSED_CALLS))
def test_a_refused_function_is_refused_in_the_words_of_the_call_made(call, words):
    with cache_probe() as probe:
        with pytest.raises(MisuseError) as info:
            call(probe)
    message = str(info.value)
    assert message.startswith(words) and "\n" not in message
    if "cold_warm" not in words:
        assert "cold_warm" not in message
