"""A pass's compiler start-up (interpreter, imports, the CPU probe) is measured apart from its compile.

A warm pass in a fresh interpreter used to carry the process's one-time start-up in
its compile figure (``26s -> 4.5s`` on this CPU, ``1.1s -> 54s`` on an H200), so a
warm start looked slower than it was.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.probe import CacheStats, ColdWarm, PassResult, cache_probe
from pytest_cudagraph.caches.warm_start import startup_text
from pytest_cudagraph.compile.compile_time import CompileTime


def compiled_sin(x: torch.Tensor) -> torch.Tensor:
    """Importable for the fresh interpreter of subprocess mode."""
    return torch.compile(lambda a: torch.sin(a) * 2)(x)


def _timed_pass(name: str, compile_s: float, startup: dict[str, float]) -> PassResult:
    stats = CacheStats(fxgraph={"hit": 1}, aot_autograd={}, triton={})
    return PassResult(
        name=name,
        stats=stats,
        outputs=None,
        recorded={},
        cache_dir="/d",
        duration_s=compile_s,
        compile_time=CompileTime(total_s=compile_s),
        startup=startup,
    )


def test_the_start_up_line_names_each_part_in_words_and_leaves_out_a_pass_that_started_nothing():
    cold = _timed_pass("cold", 2.19, {"imports_s": 1.41, "cpu_isa_s": 11.2})
    warm = _timed_pass("warm", 0.12, {})  # in this interpreter: the compiler was started already
    assert startup_text(ColdWarm(cold, warm, "inprocess", "/d")) == (
        "compile 2.19s -> 0.12s; start-up, not counted in it: cold pass 13s (imports 1.41s, "
        "Inductor's CPU capability probe 11s)"
    )
    fresh = _timed_pass("warm", 0.3, {"interpreter_s": 4.0, "imports_s": 1.0, "cpu_isa_s": 2.0})
    assert startup_text(ColdWarm(_timed_pass("cold", 2.0, {}), fresh, "subprocess", "/d")) == (
        "compile 2.00s -> 0.30s; start-up, not counted in it: warm pass 7.00s (interpreter start 4.00s, "
        "imports 1.00s, Inductor's CPU capability probe 2.00s)"
    )
    assert startup_text(ColdWarm(_timed_pass("cold", 2.0, {}), _timed_pass("warm", 0.1, {}), "inprocess", "/d")) is None


def test_a_start_up_part_done_already_in_this_process_is_left_out_not_timed_as_zero():
    compat.start_compiler()  # whatever this process had not done yet
    assert compat.start_compiler() == {}


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_a_pass_reports_its_compiler_start_up_apart():
    with cache_probe() as probe:
        one = probe.run_pass("cold", lambda: None, 0, probe.new_pass_directory("t"))
    # in this interpreter a part done already (an earlier test's compile) has nothing to time
    assert set(one.startup) <= {"imports_s", "cpu_isa_s"}
    assert one.to_json().get("startup_s", 0) == one.startup_s >= 0
    assert one.to_json().get("startup", {}) == dict(one.startup)


@pytest.mark.slow
def test_a_fresh_interpreter_warm_pass_names_its_start_up_and_keeps_it_out_of_its_compile():
    with cache_probe() as probe:
        pair = probe.cold_warm(compiled_sin, torch.randn(8), mode="subprocess")
    pair.check()
    warm = pair.warm
    assert set(warm.startup) == {"interpreter_s", "imports_s", "cpu_isa_s"}
    # the interpreter's start (Python, import torch) is seconds, the pass's compile is what is left
    assert warm.startup["interpreter_s"] > 0.2
    assert warm.compile_time is not None and warm.compile_time.total_s < pair.cold.compile_time.total_s
    text = startup_text(pair)
    assert text.startswith("compile ") and "warm pass" in text and "interpreter" in text
