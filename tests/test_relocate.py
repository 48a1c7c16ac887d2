"""``compile_cache.relocate()``: a warm start after the cache, the project, HOME and TMPDIR moved.

The plain tests build lookups by hand (which differing component holds a moved
path, the check's words, the refusals); the slow one relocates for real: a plain
module-level function hits everywhere, and a custom pass whose ``uuid()`` holds the
working directory misses, named as holding a path.
"""

from __future__ import annotations

import pytest

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.keys import CacheLookup
from pytest_cudagraph.caches.probe import cache_probe
from pytest_cudagraph.caches.relocate import Move, RelocatedPair, path_components
from pytest_cudagraph.caches.results import CacheStats, PassResult
from pytest_cudagraph.errors import InvariantViolation, MisuseError

H, G, C = "a" * 51, "b" * 51, "c" * 51
MOVES = (
    Move("the working directory", "/old/work", "/new/work"),
    Move("the cache directory", "/old/cache", "/new/cache"),
)


def _lookup(outcome: str, pass_name: str, key: str, **components: tuple[str, str | None]) -> CacheLookup:
    return CacheLookup("fxgraph", outcome, key, {"gm": (C, None), **components}, pass_name=pass_name)


def _pass(name: str, lookups: tuple[CacheLookup, ...], **fxgraph: int) -> PassResult:
    stats = CacheStats(fxgraph=fxgraph, aot_autograd={}, triton={})
    return PassResult(name, stats, None, {}, "/x", 0.1, lookups=lookups, label=name)


def test_a_differing_component_that_holds_a_moved_path_is_named_as_such():
    cold = [_lookup("miss", "cold", "k1", my_pass=(H, "pass /old/work/x"), other=(H, "1"))]
    warm = [_lookup("miss", "relocated", "k2", my_pass=(G, "pass /new/work/x"), other=(G, "2"))]
    lines = path_components(cold, warm, MOVES)
    assert lines == ["fxgraph: my_pass holds a path: /old/work -> /new/work (the working directory)"]
    # a component that stayed equal, or a hit, holds no path that matters
    assert path_components(cold, [_lookup("hit", "relocated", "k1", my_pass=(H, "pass /old/work/x"))], MOVES) == []


def test_check_fails_naming_the_component_and_passes_on_hits_only():
    cold = (_lookup("miss", "cold", "k1", my_pass=(H, "cwd /old/work")),)
    warm = (_lookup("miss", "relocated", "k2", my_pass=(G, "cwd /new/work")),)
    pair = RelocatedPair(
        cold=_pass("cold", cold, miss=1, saved=1),
        warm=_pass("relocated", warm, miss=1, saved=1),
        mode="relocate",
        cache_dir="/new/cache",
        moves=MOVES,
    )
    with pytest.raises(InvariantViolation) as info:
        pair.check()
    text = str(info.value)
    assert text.startswith("the cache key differs between the passes in my_pass (compile_cache.relocate())")
    assert "fxgraph: my_pass holds a path: /old/work -> /new/work (the working directory)" in text
    assert "my_pass: cwd /old/work -> cwd /new/work" in text
    assert pair.to_json()["moved"]["the working directory"] == ["/old/work", "/new/work"]


def test_relocate_refuses_a_function_a_fresh_interpreter_cannot_import():
    with cache_probe() as probe:
        with pytest.raises(MisuseError) as info:
            probe.relocate(lambda x: x, 1)
    assert str(info.value).startswith("compile_cache.relocate(): ") and "\n" not in str(info.value)


RELOCATED = """
import os

import pytest
import torch

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.errors import InvariantViolation


class CwdInUuid(compat.custom_graph_pass_class()):
    def __call__(self, graph):
        return None

    def uuid(self):
        return f"cwd-pass {os.getcwd()}"


def plain(x):
    return torch.compile(lambda a: (a.sin() * 2).sum())(x)


def with_cwd_pass(x):
    with compat.inductor_config_patch({"post_grad_custom_post_pass": CwdInUuid()}):
        return torch.compile(lambda a: (a.cos() * 3).sum())(x)


def test_plain_function_hits(compile_cache):
    pair = compile_cache.relocate(plain, torch.ones(4))
    assert pair.warm.process.startswith("a fresh interpreter")
    assert pair.warm.stats.fxgraph["hit"] >= 1
    pair.check()


def test_cwd_in_uuid_misses(compile_cache):
    pair = compile_cache.relocate(with_cwd_pass, torch.ones(4))
    with pytest.raises(InvariantViolation) as info:
        pair.check()
    text = str(info.value)
    print(text)
    assert "fxgraph: post_grad_custom_post_pass holds a path: " + os.getcwd() in text
    assert "(the working directory)" in text
"""


@pytest.mark.slow
@pytest.mark.skipif(compat.custom_graph_pass_missing() is not None, reason=str(compat.custom_graph_pass_missing()))
def test_a_plain_function_hits_after_relocation_and_a_cwd_in_a_uuid_misses_named(pytester):
    pytester.makepyfile(test_relocated=RELOCATED)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "post_grad_custom_post_pass: cwd-pass " in result.stdout.str()


PACKAGE_INIT = """
import torch

from . import shapes


def step(x):
    from .scales import FACTOR  # a submodule imported at call time too

    return torch.compile(lambda a: (a.sin() * FACTOR + shapes.OFFSET).sum())(x)
"""


@pytest.mark.slow  # the warm pass compiles again in a child interpreter (about 20 s on two cores)
def test_a_function_in_a_packages_init_keeps_its_submodules_after_relocation(tmp_path, monkeypatch):
    import importlib
    import sys

    import torch

    package = tmp_path / "relocated_package"
    package.mkdir()
    (package / "__init__.py").write_text(PACKAGE_INIT)
    (package / "shapes.py").write_text("OFFSET = 1.0\n")
    (package / "scales.py").write_text("FACTOR = 3.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        step = importlib.import_module("relocated_package").step
        with cache_probe() as probe:
            pair = probe.relocate(step, torch.ones(4))
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == "relocated_package"]:
            del sys.modules[name]
    pair.check()
    assert pair.warm.stats.fxgraph["hit"] >= 1
    assert {move.what: move.new for move in pair.moves}["the function's module"].endswith("code")
