"""A Mega-Cache bundle with Triton kernels, saved, loaded, extended, saved again and loaded again.

``bundle_cycle()`` on a small MLP, forward and backward: the first bundle is saved
after a cold compile, a fresh interpreter loads it, runs the step (all hits), runs
it on a longer batch (new shapes: new graphs, new Triton kernels) and saves the
second bundle, another fresh interpreter loads that and runs both.  Each bundle's
artifacts per layer, the Triton kernels bundled in its FX graphs among them, are
printed (``pytest -s``); the check must pass, or name what the second bundle lost.

Run with ``pytest tests/gpu/test_bundle_cycle_gpu.py --cudagraph -s``; without it (or
without a GPU) these skip.
"""

from __future__ import annotations

import pytest
import torch
from test_portable_gpu import mlp_step  # importable by name: the cycle's fresh interpreters import it

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.probe import cache_probe

pytestmark = [
    pytest.mark.cudagraph,
    pytest.mark.skipif(
        not compat.has_portable_cache_artifacts(), reason=str(compat.portable_cache_artifacts_missing())
    ),
]


def test_a_bundle_with_triton_kernels_round_trips_and_counts_them_per_bundle():
    gen = torch.Generator(device="cuda").manual_seed(0)
    x, w1, w2 = (torch.randn(64, 64, device="cuda", generator=gen) for _ in range(3))
    longer = torch.randn(96, 64, device="cuda", generator=gen)
    with cache_probe() as probe:
        cycle = probe.bundle_cycle(mlp_step, x, w1, w2, extend=(longer, w1, w2))
    for line in cycle.notes():
        print(line)
    print(cycle.counter_line())
    for name, one in cycle.passes:
        print(f"{name}: triton {dict(one.stats.triton)}")
    first, second = cycle.first.artifacts, cycle.second.artifacts
    print(
        f"triton kernels bundled: first {len(first.get('triton', {}))}, second {len(second.get('triton', {}))}; "
        f"lost {cycle.lost()}"
    )
    assert first.get("triton"), "the cold compile bundled no Triton kernel in its FX graphs"
    cycle.check()
    assert set(first["triton"]) <= set(second.get("triton", {}))
    for name in ("reload", "second_load", "second_extend"):
        assert getattr(cycle, name).stats.triton.get("compiled", 0) == 0, name
