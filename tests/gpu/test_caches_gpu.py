"""Compile caches with Triton kernels on a CUDA device: compiled cold, none compiled warm.

Run with ``pytest tests/gpu --cudagraph``; without it (or without a GPU) these skip.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.probe import cache_probe

pytestmark = pytest.mark.cudagraph


def gpu_train_step(x: torch.Tensor, w: torch.Tensor):
    """Forward and backward on the GPU: pointwise and reduction kernels go through Triton."""
    w = w.detach().requires_grad_(True)
    compiled = torch.compile(lambda a, b: (torch.sin(a @ b) * 2 + a.cos().sum()).sum())
    loss = compiled(x, w)
    loss.backward()
    return loss.detach(), w.grad


@pytest.fixture(scope="module")
def gpu_inputs():
    gen = torch.Generator(device="cuda").manual_seed(0)
    return (torch.randn(64, 64, device="cuda", generator=gen), torch.randn(64, 64, device="cuda", generator=gen))


@pytest.fixture(scope="module")
def gpu_runs(gpu_inputs):
    with cache_probe() as probe:
        inprocess = probe.cold_warm(gpu_train_step, *gpu_inputs)
        moved = probe.portable(gpu_train_step, *gpu_inputs) if compat.has_portable_cache_artifacts() else None
        subprocess_pair = probe.cold_warm(gpu_train_step, *gpu_inputs, mode="subprocess")
    for name, pair in (("inprocess", inprocess), ("portable", moved), ("subprocess", subprocess_pair)):
        if pair is not None:  # the figures, for `pytest -s`
            print(name, {p.name: p.stats.to_json() for p in pair})
    return {"inprocess": inprocess, "portable": moved, "subprocess": subprocess_pair}


@pytest.mark.parametrize("mode", ["inprocess", "subprocess"])
def test_triton_kernels_compiled_cold_and_none_warm(gpu_runs, mode):
    pair = gpu_runs[mode]
    cold, warm = pair.cold.stats, pair.warm.stats
    assert cold.triton["compiled"] > 0, cold.triton
    assert cold.triton["new_kernel_dirs"] > 0
    assert warm.triton["compiled"] == 0 and warm.triton["new_kernel_dirs"] == 0, warm.triton
    assert warm.fxgraph["hit"] >= 2 and warm.fxgraph["miss"] == 0
    pair.check()


def test_warm_hit_loads_kernels_without_calling_triton(gpu_runs):
    warm = gpu_runs["inprocess"].warm.stats
    # on an FX-cache hit the kernels come bundled with the entry (torch 2.8 and newer)
    if "listener_compiled" in warm.triton:
        assert warm.triton["listener_compiled"] == 0
    assert warm.triton["loaded"] >= 0


@pytest.mark.skipif(
    not compat.has_portable_cache_artifacts(), reason="needs torch.compiler.save_cache_artifacts (2.7+)"
)
def test_portable_cache_with_triton_kernels_gives_only_hits(gpu_runs):
    moved = gpu_runs["portable"]
    assert moved.warm.stats.fxgraph["miss"] == 0 and moved.warm.stats.triton["compiled"] == 0, moved.warm.stats
    moved.check()
