"""Every zoo model captured per batch size on the GPU: replay against eager, then the shared pool.

Decoders capture one decode step over a static KV cache, the others their forward;
each in fp32 and bf16, with the dtype's tolerances (zoo_models.TOLERANCES).
"""

from __future__ import annotations

import pytest
import torch
from zoo_models import ZOO, build, capture_params


@pytest.mark.parametrize("spec, dtype", capture_params(ZOO))
def test_capture_replay_and_pool(spec, dtype, cudagraphs):
    model = build(spec, dtype, "cuda")
    step = spec.step(model, spec.sizes)
    with torch.inference_mode():
        graphs = cudagraphs.capture(step, lambda size: spec.make_inputs(model, size, dtype, "cuda", False))
        graphs.check_replay(trials=2)
    graphs.check_pool()
