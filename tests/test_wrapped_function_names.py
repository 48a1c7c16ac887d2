"""A decorated forward is named as the user wrote it, not as the decorator's wrapper Dynamo compiled.

transformers' ``deprecate_kwarg`` wraps ``forward`` with ``functools.wraps``: Dynamo
compiles the wrapper's code, and its name, file and line are the decorator's.  Every
compile here uses backend="eager" (or aot_eager for compile time): only Dynamo runs.
"""

from __future__ import annotations

import functools
import json

import pytest
import torch
import torch._dynamo

from pytest_cudagraph.compile.compile_time import watch_compile_time
from pytest_cudagraph.compile.recompiles import watch_recompiles


def deprecate_kwarg(old_name):
    """A local stand-in for transformers' decorator: one ``functools.wraps`` wrapper per function."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            kwargs.pop(old_name, None)
            return func(*args, **kwargs)

        return wrapper

    return decorator


class Block(torch.nn.Module):
    @deprecate_kwarg("past_key_value")
    def forward(self, x):
        return x * 2 + 1


FORWARD_LINE = Block.forward.__wrapped__.__code__.co_firstlineno


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_recompile_of_a_decorated_forward_names_the_forward():
    compiled = torch.compile(Block(), backend="eager", dynamic=False)
    with watch_recompiles() as w:
        compiled(torch.ones(2))
        compiled(torch.ones(3))  # a new shape: the wrapper's frame compiled again
    assert w.count == 1
    (name,) = w.by_function
    assert name == f"Block.forward (tests/test_wrapped_function_names.py:{FORWARD_LINE})", name
    assert "wrapper" not in name


def test_the_compile_time_frames_of_a_decorated_forward_name_the_forward():
    compiled = torch.compile(Block(), backend="aot_eager", dynamic=False)
    with watch_compile_time(report=False) as watch:
        compiled(torch.ones(2))
        compiled(torch.ones(3))
    functions = {frame.function for frame in watch.result.frames}
    assert functions == {f"Block.forward (tests/test_wrapped_function_names.py:{FORWARD_LINE})"}, functions


def test_one_wrapper_shared_by_several_functions_keeps_its_name_and_says_so():
    def shared(func):
        def wrapper(*args):
            return func(*args)

        wrapper.__wrapped__ = func  # one code, several targets
        return wrapper

    first, second = shared(lambda x: x + 1), shared(lambda x: x - 1)
    compiled = torch.compile(first, backend="eager", dynamic=False)
    with watch_recompiles() as w:
        compiled(torch.ones(2))
        compiled(torch.ones(3))
    (name,) = w.by_function
    assert name.startswith("wrapper (tests/test_wrapped_function_names.py:"), name
    assert name.endswith(", wrapping one of 2 functions)"), name
    assert second is not first


def test_an_undecorated_function_keeps_its_own_name():
    def plain(x):
        return x - 1

    compiled = torch.compile(plain, backend="eager", dynamic=False)
    with watch_recompiles() as w:
        compiled(torch.ones(2))
        compiled(torch.ones(3))
    (name,) = w.by_function
    assert name.startswith("plain (tests/test_wrapped_function_names.py:"), name


DECORATED = """
import functools

import pytest
import torch

def deprecate_kwarg(old_name):
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            kwargs.pop(old_name, None)
            return func(*args, **kwargs)
        return wrapper
    return decorator

class Block(torch.nn.Module):
    @deprecate_kwarg("past_key_value")
    def forward(self, x):
        return x * 2 + 1

@pytest.mark.max_recompiles(0)
def test_shapes():
    compiled = torch.compile(Block(), backend="eager", dynamic=False)
    compiled(torch.ones(2))
    compiled(torch.ones(3))
"""


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
@pytest.mark.usefixtures("wide_terminal")  # the recompile's call site is read as one line
def test_the_terminal_and_the_report_name_the_decorated_forward(pytester: pytest.Pytester):
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))  # load the lazily imported compile stack
    torch._dynamo.reset()
    pytester.makepyfile(test_deco=DECORATED)
    result = pytester.runpytest_subprocess("--cudagraph-report=r.json", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [r".*recompile 1 of 1: Block\.forward \(test_deco\.py:16\), called from test_deco\.py"]
    )
    assert "wrapper (test_deco.py" not in result.stdout.str()
    record = json.loads((pytester.path / "r.json").read_text())["tests"]["test_deco.py::test_shapes"]
    assert "Block.forward (test_deco.py:16)" in json.dumps(record)
    assert "wrapper (test_deco.py" not in json.dumps(record)
