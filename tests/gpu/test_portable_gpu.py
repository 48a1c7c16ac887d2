"""Mega-Cache artifacts with Triton kernels, loaded into an empty directory in a fresh interpreter.

The cold pass compiles Triton kernels; ``portable(mode="subprocess")`` saves the
artifacts (``torch.compiler.save_cache_artifacts``), loads them into an empty
directory in a fresh interpreter and runs there.  The kernels that pass loaded and
compiled are printed (``pytest -s``), and the plugin's verdict must agree with
them: a moved pass that compiled kernels again fails ``check()`` naming the
Triton layer; one that compiled none passes.

Run with ``pytest tests/gpu/test_portable_gpu.py --cudagraph -s``; without it (or
without a GPU) these skip.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.probe import cache_probe
from pytest_cudagraph.errors import InvariantViolation

pytestmark = [
    pytest.mark.cudagraph,
    pytest.mark.skipif(
        not compat.has_portable_cache_artifacts(), reason=str(compat.portable_cache_artifacts_missing())
    ),
]


def mlp_step(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor):
    """A small MLP, forward and backward: pointwise, reduction and matmul epilogues go through Triton."""
    w1 = w1.detach().requires_grad_(True)
    w2 = w2.detach().requires_grad_(True)
    compiled = torch.compile(lambda a, b, c: (torch.nn.functional.gelu(a @ b) @ c).softmax(-1).square().sum())
    loss = compiled(x, w1, w2)
    loss.backward()
    return loss.detach(), w1.grad, w2.grad


@pytest.fixture(scope="module")
def inputs():
    gen = torch.Generator(device="cuda").manual_seed(0)
    return tuple(torch.randn(64, 64, device="cuda", generator=gen) for _ in range(3))


@pytest.fixture(scope="module", params=["inprocess", "subprocess"])
def moved(request, inputs):
    with cache_probe() as probe:
        cold_warm = probe.cold_warm(mlp_step, *inputs)
        pair = probe.portable(mlp_step, *inputs, mode=request.param)
    triton = pair.warm.stats.triton
    print(
        f"portable(mode={request.param!r}): cold pass compiled {cold_warm.cold.stats.triton.get('compiled', 0)} "
        f"Triton kernels; moved pass in {pair.warm.process}: loaded {triton.get('loaded', 0)}, "
        f"compiled {triton.get('compiled', 0)}, new kernel dirs {triton.get('new_kernel_dirs', 0)}, "
        f"bundler files loaded {triton.get('bundler_loaded_files', 0)}; fxgraph {dict(pair.warm.stats.fxgraph)}"
    )
    print(pair.triton_note)
    return request.param, cold_warm, pair


def test_the_cold_pass_compiles_triton_kernels(moved):
    _, cold_warm, pair = moved
    assert cold_warm.cold.stats.triton["compiled"] > 0, cold_warm.cold.stats.triton
    assert pair.triton_used


def test_the_verdict_agrees_with_the_kernels_the_moved_pass_loaded_and_compiled(moved):
    _, _, pair = moved
    compiled = pair.warm.stats.triton.get("compiled", 0)
    assert f"compiled {compiled} kernels" in pair.triton_note
    if compiled:
        with pytest.raises(InvariantViolation, match="left the Triton kernels out") as info:
            pair.check()
        assert "triton: " in str(info.value)
    else:
        assert pair.warm.stats.fxgraph.get("miss", 0) == 0, pair.warm.stats
        pair.check()


def test_the_moved_pass_ran_where_asked(moved):
    mode, _, pair = moved
    assert pair.warm.process.startswith("a fresh interpreter") == (mode == "subprocess"), pair.warm.process
