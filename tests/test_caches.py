"""pytest_cudagraph.caches.probe: cache probes, cold/warm passes, the warm-start invariant.

The FX-graph and AOTAutograd caches are real on the CPU, so these tests compile for
real.  A cold CPU compile costs seconds, so one forward+backward function is run
cold/warm once per mode (module-scoped) and inspected by several tests; under
xdist the in-process pair is run once for all the workers (``inprocess_run``).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import pickle

import pytest
import torch
import torch._functorch.config  # LAYER_FLAGS: torch 2.6 loads it only on first compile (2.8+ with Inductor's config)
import torch._inductor.config
from filelock import FileLock
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.probe import (
    CacheStats,
    ColdWarm,
    PassResult,
    cache_probe,
    cold_warm_differences,
    importable_name,
    seeded_rngs,
)
from pytest_cudagraph.errors import InvariantViolation, MisuseError


def train_step(x: torch.Tensor, w: torch.Tensor):
    """Forward and backward of a tiny compiled function (importable: used in subprocess mode)."""
    w = w.detach().requires_grad_(True)
    compiled = torch.compile(lambda a, b: (torch.sin(a @ b) * 2).sum())
    loss = compiled(x, w)
    loss.backward()
    return loss.detach(), w.grad


@pytest.fixture(scope="module")
def inputs():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(4, 8, generator=gen), torch.randn(8, 8, generator=gen)


def _inprocess_pair(inputs):
    with cache_probe() as probe:
        pair = probe.cold_warm(train_step, *inputs)
        moved = probe.portable(train_step, *inputs) if compat.has_portable_cache_artifacts() else None
        whole = probe.result()
    return pair, moved, whole


@pytest.fixture(scope="module")
def inprocess_run(request, tmp_path_factory, inputs):
    """One cold/warm pair in one interpreter, then the same cache moved (portable).

    Under xdist this module's tests are spread over the workers, and each worker would
    set this fixture up again: a second cold compile that shows nothing more.  The
    first worker to need it runs it and leaves the result for the others, under the
    run's own temporary root (the workers' roots' parent, made for this run).  Nothing
    read from it is about which process ran it (``subprocess_run`` is, and is not shared).
    """
    if not hasattr(request.config, "workerinput"):  # no xdist worker: nobody to share with
        return _inprocess_pair(inputs)
    shared = tmp_path_factory.getbasetemp().parent / "test_caches-inprocess_run.pickle"
    with FileLock(f"{shared}.lock"):
        if shared.is_file():
            return pickle.loads(shared.read_bytes())
        result = _inprocess_pair(inputs)
        shared.write_bytes(pickle.dumps(result))
    return result


@pytest.fixture(scope="module")
def subprocess_run(inputs):
    with cache_probe() as probe:
        return probe.cold_warm(train_step, *inputs, mode="subprocess")


@pytest.mark.slow
@pytest.mark.parametrize("run", ["inprocess_run", "subprocess_run"])
def test_cold_pass_compiles_and_saves_forward_and_backward(request, run):
    result = request.getfixturevalue(run)
    pair = result[0] if isinstance(result, tuple) else result
    cold = pair.cold.stats
    # forward and backward graphs: two FX-graph entries, one AOTAutograd entry
    assert cold.fxgraph["miss"] == 2 and cold.fxgraph["saved"] == 2 and cold.fxgraph["hit"] == 0
    assert cold.aot_autograd["miss"] == 1 and cold.aot_autograd["saved"] == 1


# the fresh-interpreter pass compiles again in a child: slow on two cores (the in-process pass stays)
@pytest.mark.parametrize("run", ["inprocess_run", pytest.param("subprocess_run", marks=pytest.mark.slow)])
def test_warm_pass_only_hits_and_matches_cold_outputs(request, run):
    result = request.getfixturevalue(run)
    pair = result[0] if isinstance(result, tuple) else result
    warm = pair.warm.stats
    assert warm.fxgraph == {"hit": 2, "miss": 0, "bypass": 0, "saved": 0}
    assert warm.aot_autograd["hit"] == 1 and warm.aot_autograd["miss"] == warm.aot_autograd["saved"] == 0
    assert warm.triton["compiled"] == 0
    loss_cold, grad_cold = pair.cold.outputs
    loss_warm, grad_warm = pair.warm.outputs
    assert torch.equal(loss_cold, loss_warm) and torch.equal(grad_cold, grad_warm)
    assert pair.problems() == []
    pair.check()


# the fresh interpreter's pass is a slow test (the README's test command stays under 5 minutes)
@pytest.mark.parametrize("run", ["inprocess_run", pytest.param("subprocess_run", marks=pytest.mark.slow)])
def test_each_pass_carries_its_lookups_with_their_keys_components_and_graph_numbers(request, run):
    result = request.getfixturevalue(run)
    pair = result[0] if isinstance(result, tuple) else result
    cold, warm = pair.cold.lookups, pair.warm.lookups
    assert sorted((x.layer, x.outcome, x.graph) for x in cold) == [
        ("aot_autograd", "miss", 1),
        ("fxgraph", "miss", 1),
        ("fxgraph", "miss", 2),
    ]
    assert {x.pass_name for x in cold} == {"cold"} and {x.pass_name for x in warm} == {pair.warm.pass_label}
    # the warm pass (in a child interpreter too) looked up the cold pass's keys and hit them
    assert sorted((x.layer, x.outcome, x.key) for x in warm) == sorted((x.layer, "hit", x.key) for x in cold)
    for lookup in cold:
        assert lookup.key and lookup.key[0] == ("f" if lookup.layer == "fxgraph" else "a")
        assert "gm" in lookup.components and "inductor_config[fallback_random]" in lookup.components
    assert pair.explanations() == []


@pytest.mark.slow  # its fixture compiles again in a child interpreter (about 20 s on two cores)
def test_subprocess_warm_pass_ran_in_another_interpreter(subprocess_run):
    assert subprocess_run.mode == "subprocess"
    assert subprocess_run.warm.process.startswith("a fresh interpreter (pid ")
    assert str(os.getpid()) not in subprocess_run.warm.process
    assert subprocess_run.warm.cache_dir == subprocess_run.cold.cache_dir


def test_cold_warm_unpacks_and_serialises(inprocess_run):
    pair, _, whole = inprocess_run
    cold, warm = pair
    assert (cold.name, warm.name) == ("cold", "warm")
    data = pair.to_json()
    assert data["warm"]["stats"]["fxgraph"]["hit"] == 2
    assert set(whole.to_json()) >= {"fxgraph", "aot_autograd", "triton"}
    # whole-probe counters are the sum of its passes (cold, warm, portable source and moved)
    assert whole.stats.fxgraph["hit"] == sum(p.stats.fxgraph["hit"] for p in whole.passes)


@pytest.mark.skipif(
    not compat.has_portable_cache_artifacts(), reason="torch.compiler.save_cache_artifacts needs torch 2.7+"
)
def test_portable_cache_gives_only_hits_in_an_empty_directory(inprocess_run):
    pair, moved, _ = inprocess_run
    assert moved.warm.cache_dir != pair.cache_dir
    assert moved.warm.stats.fxgraph["hit"] == 2 and moved.warm.stats.fxgraph["miss"] == 0
    moved.check()


def test_probe_restores_environment_config_and_loggers(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/else")
    logger = logging.getLogger("torch._inductor.codecache")
    level, filters = logger.level, list(logger.filters)
    fx_flag = torch._inductor.config.fx_graph_cache
    from torch._inductor import codecache

    write_atomic = codecache.write_atomic
    with cache_probe() as probe:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(probe.cache_dir)
        assert os.environ["TRITON_CACHE_DIR"] == str(probe.cache_dir / "triton")
        assert logger.isEnabledFor(logging.INFO)
        inside = probe.cache_dir
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/else"
    assert (logger.level, logger.filters) == (level, filters)
    assert torch._inductor.config.fx_graph_cache == fx_flag
    assert codecache.write_atomic is write_atomic, "the FX-graph write counter is unwrapped"
    assert not inside.exists(), "a probe without a root deletes its temporary directory"


def test_disabled_caches_fail_before_compiling(inputs):
    owner = compat.force_disable_caches_owner()
    with cache_probe() as probe, owner.patch(force_disable_caches=True):
        with pytest.raises(InvariantViolation, match="compile caches are disabled: .*force_disable_caches is True"):
            probe.cold_warm(train_step, *inputs)
        assert probe.stats().fxgraph["miss"] == 0


def test_an_entry_deleted_during_the_probe_still_counts_as_saved():
    """The write is counted as it happens, not as a file still there at the end."""
    from torch._inductor.codecache import FxGraphCache

    with cache_probe() as probe:
        torch.compile(lambda a: a.t())(torch.arange(6.0).reshape(2, 3))  # a pure view: no C++ to compile
        FxGraphCache.clear()
        stats = probe.stats()
    assert stats.fxgraph["miss"] == 1 and stats.fxgraph["saved"] == 1


LAYER_FLAGS = {
    "fxgraph": (torch._inductor.config, "fx_graph_cache"),
    "aot_autograd": (torch._functorch.config, "enable_autograd_cache"),
}


@contextlib.contextmanager
def _config_entry_kept(module, flag):
    """Put back a config entry's own override (unset included) after the block.

    ``ConfigModule.patch`` puts back the prior *value* by assignment on exit (2.6-2.14),
    leaving the flag "set in code"; this keeps that from reaching later tests.
    """
    entry = module._config[flag]
    is_var = isinstance(entry.user_override, contextvars.ContextVar)  # a ContextVar from 2.8, plain in 2.6
    before = entry.user_override.get() if is_var else entry.user_override
    try:
        yield
    finally:
        if is_var:
            entry.user_override.set(before)
        else:
            entry.user_override = before


# AOTAutograd's cache alone off runs a real cold and warm compile: slow on two cores
@pytest.mark.parametrize(
    "layer",
    [
        pytest.param(layer, marks=pytest.mark.slow) if layer == "aot_autograd" else layer
        for layer in sorted(LAYER_FLAGS)
    ],
)
def test_a_layer_turned_off_in_code_stays_off_and_is_reported_as_disabled(layer, inputs):
    module, flag = LAYER_FLAGS[layer]
    on_by_default = getattr(module, flag)
    with _config_entry_kept(module, flag):
        with module.patch(**{flag: False}):
            with cache_probe() as probe:
                assert getattr(module, flag) is False, "the probe turned back on a layer the user turned off"
                stats = probe.stats()
                if layer == "fxgraph":
                    # every layer is off with it: no compile happens, the warm start cannot be shown, said first
                    with pytest.raises(
                        InvariantViolation, match=rf"{module.__name__}\.{flag} is False \(set in code\)"
                    ):
                        probe.cold_warm(train_step, *inputs)
                    assert probe.stats().fxgraph["miss"] == 0
                else:
                    # AOTAutograd's cache alone off: the FX-graph cache is still checked, and hits
                    cold, warm = probe.cold_warm(train_step, *inputs)
                    assert warm.stats.fxgraph["hit"] >= 1 and warm.stats.fxgraph["miss"] == 0
                    assert (
                        warm.stats.disabled
                        == cold.stats.disabled
                        == {layer: f"{module.__name__}.{flag} is False (set in code)"}
                    )
        expected = f"{module.__name__}.{flag} is False (set in code)"
        assert stats.disabled == {layer: expected}
        assert stats.to_json()["disabled"] == {layer: expected}
        assert CacheStats.from_json(stats.to_json()).disabled == {layer: expected}
        if on_by_default:
            assert layer not in compat.cache_layers_off_by_user(), "nothing is left off once the user's patch is undone"
        else:
            # torch 2.6: AOTAutograd's cache is off by default, and the user's own patch puts
            # that False back by assignment, so torch itself now holds it as set in code
            assert compat.cache_layers_off_by_user() == {layer: expected}


def test_a_layer_off_during_the_passes_is_disabled_and_the_other_layers_are_still_checked():
    why = "torch._functorch.config.enable_autograd_cache is False (set in code)"
    cold = _pass("cold", {"miss": 1, "saved": 1}, {}, disabled={"aot_autograd": why})
    warm = _pass("warm", {"hit": 1}, {}, disabled={"aot_autograd": why})
    result = ColdWarm(cold, warm, "inprocess", "/d")
    assert result.problems() == []  # the FX-graph cache hit: that is checked, and holds
    result.check()
    assert result.to_json()["warm"]["stats"]["disabled"] == {"aot_autograd": why}
    # ... and a warm FX-graph miss still fails with AOTAutograd's cache off
    missed = _pass("warm", {"miss": 1, "saved": 1}, {}, disabled={"aot_autograd": why})
    assert "fxgraph: no hit on the warm pass" in ColdWarm(cold, missed, "inprocess", "/d").problems()
    # with the FX-graph cache off nothing reaches it: not "the cold pass compiled nothing", not a backend hint
    fx_why = "torch._inductor.config.fx_graph_cache is False (set in code)"
    cold = _pass("cold", {}, {"bypass": 1}, disabled={"fxgraph": fx_why})
    warm = _pass("warm", {}, {"bypass": 1}, disabled={"fxgraph": fx_why})
    problems = ColdWarm(cold, warm, "inprocess", "/d").problems()
    assert problems == [
        f"every compile cache layer was off during the passes ({fx_why}), so the warm pass cannot hit any"
    ]
    with pytest.raises(InvariantViolation) as info:
        ColdWarm(cold, warm, "inprocess", "/d").check()
    text = str(info.value)
    assert text.count(problems[0]) == 1  # said once, in the head, not again as a bullet under it
    nothing = str(_failure(_pass("cold", {}, {}), _pass("warm", {}, {})))
    assert nothing.startswith("the cold pass compiled nothing with Inductor (no FX-graph cache lookup at all) (")
    assert nothing.count("compiled nothing with Inductor") == 1
    assert "a cache layer you turn off cannot show a warm start" in text
    assert "computed other cache keys" not in text and "no hit" not in text


def test_subprocess_mode_needs_an_importable_function(inputs):
    with cache_probe() as probe:
        with pytest.raises(MisuseError, match="cannot be imported by a fresh interpreter"):
            probe.cold_warm(lambda x, w: x, *inputs, mode="subprocess")
        with pytest.raises(MisuseError, match="cannot be imported"):
            probe.cold_warm("no_such_module_here:fn", *inputs, mode="subprocess")
        with pytest.raises(MisuseError, match="not a known mode"):
            probe.cold_warm(train_step, *inputs, mode="fork")
    assert importable_name(train_step) == f"{__name__}:train_step"


def test_record_twice_in_one_pass_is_a_usage_error():
    with cache_probe() as probe:
        probe.record("y", torch.ones(2))
        with pytest.raises(MisuseError, match="called twice"):
            probe.record("y", torch.zeros(2))


def test_seeded_rngs_repeat_and_restore():
    torch.manual_seed(7)
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    with seeded_rngs(99):
        first = torch.randn(5)
    with seeded_rngs(99):
        second = torch.randn(5)
    assert torch.equal(first, second)
    assert torch.equal(torch.rand(3), expected_next), "the caller's RNG stream continues where it was"


def _pass(
    name: str, fx: dict, aot: dict, triton: dict | None = None, outputs=None, reasons=(), disabled: dict | None = None
) -> PassResult:
    stats = CacheStats(
        fxgraph={"hit": 0, "miss": 0, "bypass": 0, "saved": 0, **fx},
        aot_autograd={"hit": 0, "miss": 0, "bypass": 0, "saved": 0, "guard_miss": 0, **aot},
        triton={"compiled": 0, "loaded": 0, **(triton or {})},
        bypass_reasons=tuple(reasons),
        disabled=disabled or {},
    )
    return PassResult(name=name, stats=stats, outputs=outputs, recorded={}, cache_dir="/d", duration_s=0.0)


def test_warm_resave_and_triton_compile_are_reported_with_hints():
    cold = _pass("cold", {"miss": 1, "saved": 1}, {"miss": 1, "saved": 1}, {"compiled": 3})
    warm = _pass("warm", {"hit": 1}, {"hit": 1, "saved": 1}, {"compiled": 2})
    pair = ColdWarm(cold=cold, warm=warm, mode="inprocess", cache_dir="/d")
    with pytest.raises(InvariantViolation) as info:
        pair.check(context="@pytest.mark.compile_cache(mode='inprocess')")
    text = str(info.value)
    assert "aot_autograd: saved 1 on the warm pass" in text
    assert "triton: 2 kernels compiled on the warm pass" in text
    assert "re-saves what it loaded" in text and "TRITON_ALWAYS_COMPILE" in text
    # the cause first: Triton compiled on the warm pass; then the check
    assert text.startswith("Triton compiled kernels on the warm pass (@pytest.mark.compile_cache(mode='inprocess'))")


def _failure(cold: PassResult, warm: PassResult) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as info:
        ColdWarm(cold, warm, "inprocess", "/d").check()
    return info.value


def test_bypass_reason_and_custom_pass_hint_in_message():
    reason = "Unsupported post grad custom pass"
    cold = _pass("cold", {"bypass": 1}, {"bypass": 1}, reasons=[("fxgraph", reason)])
    warm = _pass("warm", {"bypass": 1}, {"bypass": 1}, reasons=[("fxgraph", reason), ("fxgraph", reason)])
    text = "\n".join(ColdWarm(cold, warm, "inprocess", "/d").problems())
    assert "fxgraph: no hit on the warm pass" in text and "fxgraph: bypass 1 on the warm pass" in text
    with pytest.raises(InvariantViolation) as info:
        ColdWarm(cold, warm, "inprocess", "/d").check()
    text = str(info.value)
    assert "bypass reason (fxgraph, warm pass): Unsupported post grad custom pass" in text
    assert text.count("Unsupported post grad custom pass") == 2, "each pass names a repeated reason once"
    assert "subclass CustomGraphPass and return a uuid()" in text
    # AOTAutograd's bypass, counted with no reason logged: said plainly, pointing at the FX-graph cache's
    assert (
        "bypass reason (aot_autograd, warm pass): none: this torch counted the bypass but logged no reason "
        "(the FX-graph cache's reason in this pass is the line above)"
    ) in text
    alone = str(_failure(_pass("cold", {}, {"bypass": 1}), _pass("warm", {"hit": 1}, {"bypass": 1})))
    assert (
        "bypass reason (aot_autograd, warm pass): none: this torch counted the bypass but logged no reason\n" in alone
    )


_dtypes = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64, torch.bool])
_shapes = st.lists(st.integers(1, 5), min_size=0, max_size=3)


@settings(deadline=None, max_examples=30)
@given(shape=_shapes, dtype=_dtypes, data=st.data())
def test_outputs_compare_bitwise_and_name_the_differing_element(shape, dtype, data):
    base = (torch.rand(shape) * 10).to(dtype)
    assert cold_warm_differences("out", (base, {"k": base}), (base.clone(), {"k": base.clone()})) == []
    if base.numel() == 0:
        return
    flat = data.draw(st.integers(0, base.numel() - 1))
    changed = base.clone().reshape(-1)
    changed[flat] = ~changed[flat] if dtype == torch.bool else changed[flat] + 1
    changed = changed.reshape(base.shape)
    problems = cold_warm_differences("out", base, changed)
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), base.shape)) if base.dim() else ()
    assert len(problems) == 1 and "1 of" in problems[0] and f"index {index}" in problems[0]
    if dtype.is_floating_point:
        assert cold_warm_differences("out", base, changed, atol=1.0 + 1e-2) == []


def test_bitwise_compare_sees_signed_zero_and_matches_nan():
    nan = torch.tensor([float("nan"), 1.0])
    assert cold_warm_differences("y", nan, nan.clone()) == []
    assert cold_warm_differences("y", torch.tensor([0.0]), torch.tensor([-0.0]))
    assert cold_warm_differences("y", torch.ones(2), torch.ones(3))[0].startswith("y: shape/dtype (2,)")


def _transpose(a):
    return a.t()  # a pure view: no C++ to compile


def test_expect_checks_each_named_figure_over_a_block():
    x = torch.arange(6.0).reshape(2, 3)
    with cache_probe() as probe:
        with probe.expect(fxgraph_miss=1, fxgraph_saved=1, fxgraph_hit=0) as inside:
            torch.compile(_transpose)(x)
        assert inside is probe
        compat.reset_dynamo()  # drop the in-memory entry: the next call must come from the disk cache
        with probe.expect(fxgraph_hit=1, fxgraph_miss=0, fxgraph_saved=0, triton_compiled=0):
            torch.compile(_transpose)(x)


def test_expect_names_the_figures_that_differ_with_before_and_after():
    x = torch.arange(6.0).reshape(2, 3)
    with cache_probe() as probe:
        with pytest.raises(InvariantViolation) as failure:
            with probe.expect(fxgraph_hit=1, fxgraph_saved=1):
                torch.compile(_transpose)(x)  # cold: a miss, not a hit
    message = str(failure.value)
    assert message.startswith(
        "fxgraph_hit +0 (expected +1) in the block of CacheProbe.expect(fxgraph_hit=1, fxgraph_saved=1)\n"
    )
    lines = message.splitlines()
    assert lines[2].split() == ["figure", "before", "after", "expected", "change", "change"]
    assert lines[3].split() == ["fxgraph_hit", "0", "0", "+1", "+0", "<-", "differs"]
    assert lines[4].split() == ["fxgraph_saved", "0", "1", "+1", "+1"]


@pytest.mark.parametrize(
    ("deltas", "match"),
    [
        ({"fx_hit": 1}, "unknown figure.*'fx_hit'.*fxgraph_hit"),
        ({}, "was given no figure"),
        ({"fxgraph_hit": -1}, r"CacheProbe.expect\(fxgraph_hit=-1\): the expected change is not a non-negative int"),
    ],
)
def test_expect_refuses_figures_it_cannot_check(deltas, match):
    with cache_probe() as probe:
        with pytest.raises(MisuseError, match=match):
            probe.expect(**deltas)


def test_expect_needs_an_active_probe():
    probe = cache_probe()
    with pytest.raises(MisuseError, match="needs an active probe"):
        with probe.expect(fxgraph_hit=1):
            pass


def _lookups(pass_name: str, *specs: tuple) -> tuple:
    """Lookups of one pass: (layer, outcome, key, {name: value}, detail) each, graph numbers in order per layer."""
    from pytest_cudagraph.caches.keys import CacheLookup

    out, numbers = [], {}
    for layer, outcome, key, values, detail in specs:
        numbers[layer] = numbers.get(layer, 0) + 1
        components = {
            name: (name.ljust(51, "a")[:40] + value.ljust(11, "b")[:11], value) for name, value in values.items()
        }
        out.append(CacheLookup(layer, outcome, key, components, detail, pass_name=pass_name, graph=numbers[layer]))
    return tuple(out)


def test_each_warm_miss_names_the_components_that_differ_from_the_cold_pass():
    from dataclasses import replace

    from pytest_cudagraph.caches.keys import MissExplanation

    cold = replace(
        _pass("cold", {"miss": 2, "saved": 2}, {"miss": 1, "saved": 1}),
        lookups=_lookups(
            "cold",
            ("fxgraph", "miss", "f1", {"gm": "one", "inductor_config[fallback_random]": "False"}, "full_miss"),
            ("fxgraph", "miss", "f2", {"gm": "two", "inductor_config[fallback_random]": "False"}, "full_miss"),
            ("aot_autograd", "miss", "a1", {"gm": "aot"}, "full_miss"),
        ),
    )
    warm = replace(
        _pass("warm", {"hit": 1, "miss": 1, "saved": 1}, {"miss": 1}),
        lookups=_lookups(
            "warm",
            ("fxgraph", "hit", "f1", {"gm": "one", "inductor_config[fallback_random]": "False"}, "hit"),
            ("fxgraph", "miss", "f3", {"gm": "two", "inductor_config[fallback_random]": "True"}, "full_miss"),
            ("aot_autograd", "miss", "a1", {"gm": "aot"}, "guard_miss"),
        ),
    )
    pair = ColdWarm(cold, warm, "inprocess", "/d")
    problems = pair.problems()
    assert "fxgraph miss for graph 2 of the warm pass: inductor_config[fallback_random]: False -> True" in problems
    assert (
        "aot_autograd miss for graph 1 of the warm pass: the key matched a stored entry, but the stored graph's "
        "shape guards failed for these inputs" in problems
    )
    earlier = MissExplanation(
        cold.lookups[0], None, ("torch_version: 2.13.0 -> 2.14.1",), "an earlier run (t, torch 2.13.0)"
    )
    with pytest.raises(InvariantViolation) as info:
        pair.check(across_runs=(earlier,))
    assert (
        "  compared with an earlier run (t, torch 2.13.0): fxgraph miss for graph 1 of the cold pass: "
        "torch_version: 2.13.0 -> 2.14.1" in str(info.value)
    )
    # the same key as the cold pass, yet a miss: no component to name
    gone = replace(warm, lookups=_lookups("warm", ("fxgraph", "miss", "f1", {"gm": "one"}, "full_miss")))
    assert (
        "fxgraph miss for graph 1 of the warm pass: same key as the cold pass's graph 1, yet it missed: "
        "the entry was evicted or deleted, or never written" in ColdWarm(cold, gone, "inprocess", "/d").problems()
    )
