"""When the replay check may run the eager reference beside the replay (graphs/reference_overlap.py).

The watch runs on the CPU as on the GPU: it reads version counters, which any device's
in-place writes bump.  What running side by side does on a device is in
tests/gpu/test_capture_gpu.py.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.graphs import reference_overlap
from pytest_cudagraph.graphs.reference_overlap import StateWatch, serial_reason


def verdict(fn, *args):
    """Why the reference must run one after the replay, after one call of it (None: side by side is safe)."""
    watch = StateWatch(fn)
    with torch.no_grad():
        fn(*args)
    return serial_reason(watch)


class Stateless(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return self.lin(x) * self.scale


class RunningMean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x):
        self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return x - self.mean


class KVCache(torch.nn.Module):
    """A cache held in a plain list attribute, as serving engines bind it: not a registered buffer."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(4, 4))
        self.inner[0].kv_cache = [torch.zeros(16, 4)]

    def forward(self, x):
        cache = self.inner[0].kv_cache[0]
        cache[: x.shape[0]] = x
        return self.inner(cache[: x.shape[0]])


def test_a_module_that_writes_nothing_may_run_side_by_side():
    assert verdict(Stateless(), torch.randn(2, 4)) is None


def test_a_buffer_written_in_place_keeps_the_reference_one_after_the_replay():
    assert verdict(RunningMean(), torch.randn(2, 4)) == "the reference writes RunningMean.mean in place"


def test_a_cache_in_a_submodules_list_attribute_is_watched():
    assert verdict(KVCache(), torch.randn(2, 4)) == "the reference writes KVCache.inner.0.kv_cache[0] in place"


def test_writing_the_inputs_is_allowed_they_are_fresh_for_every_pair():
    def scale_in_place(x):
        return x.mul_(2)

    assert verdict(scale_in_place, torch.randn(3)) is None


def test_state_in_a_closure_a_partial_a_bound_object_and_a_global_is_watched():
    counter = torch.zeros(1)

    def closure(x):
        counter.add_(1)
        return x

    def with_state(state, x):
        state.add_(1)
        return x

    class Holder:
        def __init__(self):
            self.steps = torch.zeros(1)

        def step(self, x):
            self.steps += 1
            return x

    assert verdict(closure, torch.ones(1)) == "the reference writes closure:counter in place"
    partial = functools.partial(with_state, torch.zeros(1))
    assert verdict(partial, torch.ones(1)) == "the reference writes partial.args[0] in place"
    assert verdict(Holder().step, torch.ones(1)) == "the reference writes Holder.steps in place"
    assert verdict(_writes_global, torch.ones(1)) == "the reference writes GLOBAL_STEPS in place"


GLOBAL_STEPS = torch.zeros(1)


def _writes_global(x):
    GLOBAL_STEPS.add_(1)
    return x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_compiled_module_writing_its_buffer_is_seen(backend):
    compiled = torch.compile(RunningMean(), backend=backend)
    assert verdict(compiled, torch.randn(2, 4)) == "the reference writes RunningMean.mean in place"


def test_an_inference_tensor_cannot_be_watched():
    with torch.inference_mode():
        cache = torch.zeros(4)

    def reads_cache(x):
        return x + cache

    reason = verdict(reads_cache, torch.ones(4))
    assert reason == "reads_cache:cache is an inference tensor, whose writes cannot be seen"


def test_a_reference_past_the_object_limit_is_not_vouched_for(monkeypatch):
    monkeypatch.setattr(reference_overlap, "_MAX_OBJECTS", 10)
    table = [torch.zeros(1) for _ in range(20)]

    def reads_table(x):
        return x + table[0]

    assert verdict(reads_table, torch.ones(1)).startswith("the reference reaches more than 10 objects")


def test_state_nested_deeper_than_the_walk_follows_is_not_vouched_for(monkeypatch):
    monkeypatch.setattr(reference_overlap, "_MAX_DEPTH", 3)
    deep = Box(Box(Box(Box(torch.zeros(1)))))

    def reads_deep(x):
        return x + deep.content.content.content.content

    assert "nested more than 3 levels deep" in verdict(reads_deep, torch.ones(1))


class CacheLayer:
    __slots__ = ("keys", "cumulative_length")

    def __init__(self):
        self.keys = torch.zeros(8, 4)
        self.cumulative_length = torch.zeros(1)


class StaticCacheLike:
    """Shaped like a Hugging Face StaticCache: a list of layer objects, each holding its tensors."""

    def __init__(self):
        self.layers = [CacheLayer(), CacheLayer()]


class DecodeStep(torch.nn.Module):
    """One cache per batch size in a dict, as docs/examples' Llama decode step keeps them."""

    def __init__(self):
        super().__init__()
        self.caches = {2: StaticCacheLike()}

    def forward(self, x):
        layer = self.caches[x.shape[0]].layers[1]
        layer.cumulative_length.fill_(1)
        return x + layer.keys[: x.shape[0]]


def test_a_cache_five_levels_below_the_module_in_slotted_objects_is_watched():
    reason = verdict(DecodeStep(), torch.randn(2, 4))
    assert reason == "the reference writes DecodeStep.caches[2].layers[1].cumulative_length in place"


def test_an_initialized_process_group_keeps_collectives_on_one_stream():
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert verdict(Stateless(), torch.randn(2, 4)).startswith("a process group is initialized")
    finally:
        dist.destroy_process_group()


# a tensor somewhere in nested containers and plain objects, at most three levels down
paths = st.lists(st.sampled_from(["list", "tuple", "dict", "object"]), max_size=3)


class Box:
    def __init__(self, content):
        self.content = content


def nest(value, path):
    for kind in reversed(path):
        value = {"list": lambda v: [0, v], "tuple": lambda v: ("x", v), "dict": lambda v: {"k": v}, "object": Box}[
            kind
        ](value)
    return value


def dig(value, path):
    for kind in path:
        value = value.content if kind == "object" else value["k"] if kind == "dict" else value[1]
    return value


@settings(max_examples=40, deadline=None)
@given(path=paths, writes=st.booleans())
def test_a_tensor_nested_in_containers_is_watched_wherever_it_sits(path, writes):
    holder = nest(torch.zeros(2), path)

    def fn(x):  # reaches the tensor only through holder
        if writes:
            dig(holder, path).add_(1)
        return x

    reason = verdict(fn, torch.ones(2))
    assert (reason is not None) == writes


class RaisesOnRead:
    """An object whose attribute lookup raises something other than AttributeError."""

    __slots__ = ("guarded",)

    def __getattribute__(self, name):
        if name == "guarded":
            raise RuntimeError("not readable here")
        return object.__getattribute__(self, name)


def test_state_that_raises_when_read_keeps_the_check_one_after_the_other():
    holder = RaisesOnRead()

    def fn(x):
        return x + len(type(holder).__name__)

    assert verdict(fn, torch.ones(1)) == "reading the reference's state raised RuntimeError"
