"""Compile-cache cases broken on purpose: each test FAILS naming the layer and the reason."""

import pytest
import torch


@pytest.mark.compile_cache
def test_custom_pass_without_uuid_bypasses_the_cache(compile_cache):
    # A post-grad pass that is not a CustomGraphPass with uuid() cannot be part of a
    # cache key, so Inductor bypasses its FX-graph cache: the warm pass recompiles.
    with torch._inductor.config.patch(post_grad_custom_post_pass=lambda graph: None):
        fn = torch.compile(lambda x: x.relu() + 1)
        compile_cache.record("out", fn(torch.randn(8)))


@pytest.mark.compile_cache
def test_caches_disabled_by_config(compile_cache):
    with torch._inductor.config.patch(force_disable_caches=True):
        fn = torch.compile(lambda x: x.sin() * 2)
        compile_cache.record("out", fn(torch.randn(8)))


@pytest.mark.compile_cache
def test_warm_pass_returns_different_values(compile_cache):
    import random

    fn = torch.compile(lambda x: x * 2)
    # host randomness the plugin cannot seed the same way: the output differs between passes
    compile_cache.record("out", fn(torch.full((4,), float(random.SystemRandom().random()))))
