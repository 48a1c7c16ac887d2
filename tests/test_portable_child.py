"""``compile_cache.portable(mode="subprocess")``: Mega-Cache artifacts loaded and run in a fresh interpreter.

The plain tests build passes by hand: a moved pass that compiled Triton kernels
fails naming the Triton layer and Mega-Cache, and a source pass without any Triton
kernel (a CPU) says so without calling it a pass or a failure.  The slow one moves
a cache for real on the CPU.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.portable import PortablePair
from pytest_cudagraph.caches.probe import cache_probe
from pytest_cudagraph.caches.results import CacheStats, PassResult
from pytest_cudagraph.errors import InvariantViolation, MisuseError


def small_step(x):
    """Importable: the fresh interpreter of subprocess mode calls it by name."""
    return torch.compile(lambda a: (a.tanh() * 3).sum())(x)


def _pass(name: str, *, triton: dict[str, int], **fxgraph: int) -> PassResult:
    stats = CacheStats(fxgraph=fxgraph, aot_autograd={}, triton=triton)
    return PassResult(name, stats, None, {}, "/x", 0.1, label=name)


def test_a_moved_pass_that_compiled_triton_kernels_fails_naming_the_triton_layer():
    pair = PortablePair(
        cold=_pass("source", triton={"compiled": 0, "loaded": 3}, hit=2),
        warm=_pass("moved", triton={"compiled": 3, "loaded": 0}, hit=2),
        mode="portable",
        cache_dir="/moved",
    )
    assert pair.triton_note == "triton: the moved pass loaded 0 and compiled 3 kernels"
    with pytest.raises(InvariantViolation) as info:
        pair.check()
    text = str(info.value)
    # the cause first, then the check
    assert text.splitlines()[0].endswith(" (compile_cache.portable())")
    assert "triton: this torch's Mega-Cache (torch.compiler.save_cache_artifacts) left the Triton kernels out" in text


def test_without_triton_kernels_the_note_says_so_and_the_triton_layer_is_not_judged():
    pair = PortablePair(
        cold=_pass("source", triton={"compiled": 0, "loaded": 0, "new_kernel_dirs": 0}, hit=1),
        warm=_pass("moved", triton={"compiled": 0, "loaded": 0}, hit=1),
        mode="portable",
        cache_dir="/moved",
    )
    assert pair.triton_note.startswith("triton: not used") and "neither a pass nor a failure" in pair.triton_note
    assert not any(problem.startswith("triton") for problem in pair.problems())
    assert pair.to_json()["triton"] == pair.triton_note


@pytest.mark.skipif(not compat.has_portable_cache_artifacts(), reason=str(compat.portable_cache_artifacts_missing()))
def test_an_unknown_mode_is_refused():
    with cache_probe() as probe:
        with pytest.raises(MisuseError, match=r"portable\(mode='elsewhere'\) is not a known mode"):
            probe.portable(small_step, torch.ones(3), mode="elsewhere")


@pytest.mark.slow
@pytest.mark.skipif(not compat.has_portable_cache_artifacts(), reason=str(compat.portable_cache_artifacts_missing()))
def test_a_cache_moved_into_a_fresh_interpreter_gives_only_hits():
    x = torch.ones(5)
    with cache_probe() as probe:
        probe.cold_warm(small_step, x)
        pair = probe.portable(small_step, x, mode="subprocess")
    assert pair.warm.process.startswith("a fresh interpreter")
    assert pair.warm.stats.fxgraph["hit"] >= 1 and pair.warm.stats.fxgraph["miss"] == 0, pair.warm.stats
    if not torch.cuda.is_available():
        assert pair.triton_note.startswith("triton: not used")
    pair.check()
    assert probe.pairs[-1] is pair
