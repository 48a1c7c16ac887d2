"""Recompile cases broken on purpose: each test FAILS with the guard-failure reasons."""

import pytest
import torch


def scale(x, factor):
    return x * factor + 1


@pytest.mark.max_recompiles(0)
def test_dtype_change_recompiles():
    fn = torch.compile(scale, backend="eager")
    fn(torch.randn(4), 2.0)
    fn(torch.randn(4, dtype=torch.float64), 2.0)  # guard: tensor 'x' dtype mismatch


@pytest.mark.max_recompiles(0)
def test_python_scalar_argument_recompiles():
    fn = torch.compile(scale, backend="eager")
    x = torch.randn(4)
    for step in range(3):
        fn(x, step)  # an int argument is specialised: the second value recompiles (then Dynamo makes it dynamic)


@pytest.mark.max_recompiles(1000)
def test_recompile_limit_silently_falls_back_to_eager():
    fn = torch.compile(scale, backend="eager", dynamic=False)
    for batch in range(1, 20):
        fn(torch.randn(batch), 2.0)  # past the recompile limit Dynamo runs eager, silently
