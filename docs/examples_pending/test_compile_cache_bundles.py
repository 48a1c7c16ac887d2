"""Shipping a compile cache: a Mega-Cache bundle that round-trips, and precompiled artifacts that load.

``bundle_cycle`` saves a bundle after a cold compile, loads it in a fresh
interpreter, compiles new shapes there and saves again, then loads that second
bundle in another fresh interpreter: every load must hit, and the second bundle
must hold what the first held.  ``precompiled`` (torch 2.14+) loads
``torch.compiler.precompile`` artifacts in a fresh interpreter and checks that a
changed shape is refused rather than answered wrongly.  CPU only; on a GPU the
bundles also carry the Triton kernels (``tests/gpu/test_bundle_cycle_gpu.py``).
"""

import pytest
import torch

from pytest_cudagraph import _compat as compat


def rms_norm(x, weight):
    return torch.compile(lambda a, w: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w)(x, weight)


def gated(x, w):
    return torch.nn.functional.silu(x @ w) * x


def test_a_bundle_extended_with_a_longer_batch_stays_whole(compile_cache):
    x, weight = torch.randn(4, 16), torch.randn(16)
    cycle = compile_cache.bundle_cycle(rms_norm, x, weight, extend=(torch.randn(9, 16), weight))
    cycle.check()
    assert cycle.first.keys("fxgraph") <= cycle.second.keys("fxgraph")


@pytest.mark.skipif(compat.precompile_missing() is not None, reason=str(compat.precompile_missing()))
def test_precompiled_artifacts_load_without_compiling(compile_cache):
    check = compile_cache.precompiled(gated, torch.randn(4, 16), torch.randn(16, 16))
    check.check()
    assert check.outcome("shape")["outcome"] == "PrecompileError"
