"""Inductor's FX-graph cache and AOTAutograd's cache: a warm start loads, never recompiles or re-saves."""

import pytest
import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x)).sum(-1)


@pytest.mark.compile_cache
def test_warm_start_in_process_forward_and_backward(compile_cache):
    torch.manual_seed(0)  # the plugin also seeds every RNG identically before each pass
    model = Head()
    compiled = torch.compile(model)
    x = torch.randn(8, 32, requires_grad=True)
    loss = compiled(x).sum()
    loss.backward()
    compile_cache.record("loss", loss.detach())
    compile_cache.record("grad", x.grad)


@pytest.mark.compile_cache(mode="subprocess")
def test_warm_start_in_a_fresh_interpreter(compile_cache):
    fn = torch.compile(lambda x: torch.sin(x) * x.cos() + 1)
    compile_cache.record("out", fn(torch.randn(16, 16)))
