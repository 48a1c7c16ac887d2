"""A pass's compiler start-up (interpreter, imports, the CPU probe) is measured apart from its compile.

A warm pass in a fresh interpreter used to carry the process's one-time start-up in
its compile figure (``26s -> 4.5s`` on this CPU, ``1.1s -> 54s`` on an H200), so a
warm start looked slower than it was.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph.caches.probe import cache_probe
from pytest_cudagraph.caches.warm_start import startup_text


def compiled_sin(x: torch.Tensor) -> torch.Tensor:
    """Importable for the fresh interpreter of subprocess mode."""
    return torch.compile(lambda a: torch.sin(a) * 2)(x)


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_a_pass_reports_its_compiler_start_up_apart():
    with cache_probe() as probe:
        one = probe.run_pass("cold", lambda: None, 0, probe.new_pass_directory("t"))
    assert set(one.startup) == {"imports_s", "cpu_isa_s"}
    assert one.to_json()["startup_s"] == one.startup_s >= 0
    assert one.to_json()["startup"] == dict(one.startup)


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
