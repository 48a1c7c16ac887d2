"""Dynamo's guard cache: code that compiles once and stays compiled.

Only Dynamo matters here, so the backend is "eager": no Inductor compile time.
"""

import pytest
import torch


def mlp_step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x @ w) + 1


@pytest.mark.max_recompiles(0)
def test_mark_dynamic_batch_dimension_compiles_once():
    step = torch.compile(mlp_step, backend="eager")
    w = torch.randn(16, 16)
    for batch in (2, 3, 8, 31):
        x = torch.randn(batch, 16)
        torch._dynamo.mark_dynamic(x, 0)
        step(x, w)


def test_automatic_dynamic_costs_exactly_one_recompile(recompiles):
    step = torch.compile(mlp_step, backend="eager")
    w = torch.randn(16, 16)
    for batch in (2, 3, 8, 31):
        step(torch.randn(batch, 16), w)
    # the second size fails the static-shape guard once; then the batch dimension is dynamic
    assert recompiles.count == 1
    assert "size mismatch at index 0" in recompiles.reasons[0]


@pytest.mark.max_recompiles(0)
def test_eval_model_under_inference_mode_is_stable():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16)).eval()
    compiled = torch.compile(model, backend="eager", dynamic=True)
    with torch.inference_mode():
        for batch in (2, 4, 9):  # a batch of 1 is specialised even with dynamic=True
            compiled(torch.randn(batch, 16))
