"""A failure names its one cause first: the head's first words are the verdict, the check comes after.

pytest's one-line summary (``-r``) cuts a failure to the terminal's width after the
test id, so ``Failed: @pytest.mark.max_recompiles(0): D...`` and
``InvariantViolation: RecompileWa...`` said nothing.  A warm start whose traced
graph differed listed nine problems that all followed from that one cause, and
its hints pointed at configs and input shapes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_cudagraph.caches.lookups import CacheLookup, lookup_from_event
from pytest_cudagraph.caches.results import CacheStats, PassResult
from pytest_cudagraph.caches.warm_start import ColdWarm, failure_story, format_failure
from pytest_cudagraph.errors import InvariantViolation

# torch 2.13's debug lines of one lookup: the graph's code is the gm component's value
HASH_A, HASH_B, HASH_C = "a" * 51, "b" * 51, "c" * 51


def _code(constant: str) -> str:
    return (
        "GraphModule()\n\n\n\ndef forward(self, p_0 : torch.Tensor):\n    sin = torch.sin(p_0)\n"
        f"    mul = sin * {constant};  sin = None\n    cos = p_0.cos();  p_0 = None\n"
        "    add = mul + cos;  mul = cos = None\n    return (add,)\n    \n"
        "# To see more debug info, please use `graph_module.print_readable()`"
    )


def _lookup(layer: str, pass_name: str, digest: str, constant: str | None) -> CacheLookup:
    lines = [f"[{digest}] gm: {_code(constant)}"] if constant is not None else [f"[{digest}] gm: <code>"]
    lines.append(f"[{HASH_C}] grad_enabled: True")
    event = {"layer": layer, "outcome": "miss", "key": f"{layer}-{digest[:4]}", "components": lines}
    return lookup_from_event(event, pass_name=pass_name)


def _pass(name: str, lookups: tuple, hit: int, recorded: dict | None = None) -> PassResult:
    counts = {"hit": hit, "miss": 1 - hit, "bypass": 0, "saved": 1 - hit}
    stats = CacheStats(fxgraph=dict(counts), aot_autograd={**counts, "guard_miss": 0}, triton={"compiled": 0})
    return PassResult(name, stats, None, recorded or {}, "/d", 0.0, lookups=lookups)


def _graph_changed(with_code: bool = True) -> ColdWarm:
    import torch

    def lookups(pass_name: str, digest: str, constant: str) -> tuple:
        shown = constant if with_code else None
        return (_lookup("aot_autograd", pass_name, digest, shown), _lookup("fxgraph", pass_name, digest, shown))

    cold = _pass("cold", lookups("cold", HASH_A, "1.0"), 0, {"out": torch.ones(4)})
    warm = _pass("warm", lookups("warm", HASH_B, "2.0"), 0, {"out": torch.full((4,), 2.0)})
    return ColdWarm(cold, warm, "inprocess", "/d")


def test_the_gm_component_keeps_the_graphs_code_in_memory_only():
    lookup = _lookup("aot_autograd", "cold", HASH_A, "1.0")
    assert lookup.graph_code is not None and "mul = sin * 1.0" in lookup.graph_code
    assert lookup.components["gm"] == (HASH_A, None)  # the report still keeps the hash alone
    assert "graph_code" not in lookup.to_json() and "graph_code" not in lookup.to_json(full=True)
    # a warm pass in a fresh interpreter sends it back
    assert CacheLookup.from_json(lookup.to_json(full=True, with_code=True)).graph_code == lookup.graph_code


def test_a_graph_that_differs_between_the_passes_is_the_one_cause_and_the_rest_follows():
    pair = _graph_changed()
    problems = pair.problems()
    assert len(problems) == 9  # what the old message listed as nine bullets
    story = failure_story(pair, problems)
    assert story.verdict == "the traced graph differs between the cold and the warm pass" and story.graph_differs
    assert len(story.causes) == 1
    cause, shown = story.causes[0]
    assert cause == "the code the body traced, cold pass -> warm pass (aot_autograd graph 1):"
    assert shown == ("- mul = sin * 1.0", "+ mul = sin * 2.0", "a constant: 1.0 -> 2.0")
    assert story.follows[:2] == (
        "fxgraph: no hit, miss 1, saved 1 on the warm pass",
        "aot_autograd: no hit, miss 1, saved 1 on the warm pass",
    )
    assert story.follows[2].startswith("recorded 'out': not bitwise equal")
    text = format_failure(pair, problems, context="@pytest.mark.compile_cache(mode='inprocess')")
    head = text.splitlines()[0]
    assert head == (
        "the traced graph differs between the cold and the warm pass (@pytest.mark.compile_cache(mode='inprocess'))"
    )
    assert "  what follows from it:" in text and "      + mul = sin * 2.0" in text
    # the hints speak of the graph, not of configs and input shapes, nor of a wrong artifact
    assert "baked into the graph as a constant" in text
    assert "computed other cache keys" not in text and "loads the wrong artifact" not in text
    assert "gm: [" not in text


def test_without_the_code_the_graph_is_still_the_cause_named_by_its_hashes():
    pair = _graph_changed(with_code=False)
    story = failure_story(pair, pair.problems())
    assert story.verdict.startswith("the traced graph differs")
    assert [cause for cause, _ in story.causes] == [
        "fxgraph miss for graph 1 of the warm pass: gm: [aaaaaaaaaaaa] -> [bbbbbbbbbbbb]",
        "aot_autograd miss for graph 1 of the warm pass: gm: [aaaaaaaaaaaa] -> [bbbbbbbbbbbb]",
    ]


def test_a_setting_that_differs_is_named_in_the_head():
    pair = _graph_changed()
    warm = replace(
        pair.warm,
        lookups=tuple(
            replace(lookup, components={**lookup.components, "grad_enabled": ("d" * 51, "False")})
            for lookup in pair.cold.lookups
        ),
        recorded=pair.cold.recorded,
    )
    warm = replace(warm, lookups=tuple(replace(lookup, pass_name="warm", key="other") for lookup in warm.lookups))
    problems = ColdWarm(pair.cold, warm, "inprocess", "/d").problems()
    story = failure_story(ColdWarm(pair.cold, warm, "inprocess", "/d"), problems)
    assert story.verdict == "the cache key differs between the passes in grad_enabled"
    assert not story.graph_differs and "fxgraph: no hit, miss 1, saved 1 on the warm pass" in story.follows


def test_check_raises_the_story():
    with pytest.raises(InvariantViolation, match=r"^the traced graph differs between the cold and the warm pass \("):
        _graph_changed().check()


BROKEN = """
import pytest
import torch


@pytest.mark.max_recompiles(0)
def test_marker():
    step = torch.compile(lambda x: x * 2, backend="eager")
    for batch in (2, 3):
        step(torch.randn(batch, 16))


def test_expect(recompiles):
    step = torch.compile(lambda x: x * 2, backend="eager")
    step(torch.ones(4))
    with recompiles.expect(count=0):
        step(torch.ones(4, dtype=torch.float64))
"""


def test_the_one_line_summary_keeps_the_verdict(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the terminal width the summary line is cut to, and the headline fits
    pytester.makepyfile(test_broken=BROKEN)
    result = pytester.runpytest("-rf", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    lines = result.stdout.lines
    marker = next(line for line in lines if line.startswith("FAILED test_broken.py::test_marker - "))
    expect = next(line for line in lines if line.startswith("FAILED test_broken.py::test_expect - "))
    # the verdict first, without pytest's "Failed:" or the exception's name (the failure section shows them)
    assert marker.split(" - ", 1)[1].startswith("recompiled 1 time (max 0): <lambda> (test_broken.py:")
    assert expect.split(" - ", 1)[1].startswith("count +1 (expected +0) in the block of RecompileWatch.expect(count")
    # the long text leads with the verdict too, the check after it
    result.stdout.re_match_lines(
        [
            r"^recompiled 1 time \(max 0\): <lambda> \(test_broken\.py:\d+\), tensor '.*' size mismatch at index 0 "
            r"\(@pytest\.mark\.max_recompiles\(0\)\)$"
        ]
    )


QUICKSTART_BROKEN = """
import itertools
import os

import pytest
import torch

_calls = itertools.count()


@pytest.mark.compile_cache(mode=MODE)
def test_warm_start(compile_cache):
    scale = SCALE  # differs between the cold and the warm pass
    fn = torch.compile(lambda x: torch.sin(x) * scale + x.cos())
    compile_cache.record("out", fn(torch.randn(8, 8)))
"""
# a fresh interpreter counts from 0 again: there the process id differs
SCALES = {"inprocess": ("float(next(_calls) + 1)", "1.0", "2.0"), "subprocess": ("float(os.getpid())", None, None)}


@pytest.mark.slow  # an Inductor compile, cold and warm, in a fresh interpreter
@pytest.mark.parametrize("mode", ["inprocess", "subprocess"])
def test_the_quickstart_cache_test_broken_by_a_constant_names_the_graph_and_the_constant(pytester, monkeypatch, mode):
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    scale, cold, warm = SCALES[mode]
    pytester.makepyfile(test_quickstart_cache=QUICKSTART_BROKEN.replace("MODE", repr(mode)).replace("SCALE", scale))
    result = pytester.runpytest_subprocess("-rf", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    head = f"the traced graph differs between the cold and the warm pass (@pytest.mark.compile_cache(mode='{mode}'))"
    assert head in text
    # the code the passes traced, from the warm pass's fresh interpreter too
    assert "- mul = sin * " in text and "+ mul = sin * " in text and "a constant: " in text
    if cold is not None:
        assert f"- mul = sin * {cold}" in text and f"+ mul = sin * {warm}" in text
        assert f"a constant: {cold} -> {warm}" in text
    # pytest's -r line and the annotation: the verdict first, the constant that changed at the end, no colon
    assert "FAILED test_quickstart_cache.py::test_warm_start - the traced graph differs between the cold" in text
    annotation = next(line for line in result.outlines if line.startswith("::error "))
    assert annotation.startswith("::error file=test_quickstart_cache.py,line=")
    assert annotation.endswith("%0Ain test_quickstart_cache.py::test_warm_start")
    cause = annotation.split("::", 2)[2].rpartition("%0A")[0]
    if cold is not None:
        assert cause.endswith(f"(aot_autograd graph 1): a constant: {cold} -> {warm}")
    assert not cause.endswith(":") and "a constant: " in cause


def test_the_report_keeps_a_changed_graphs_code_diff_under_its_hashes_for_explain():
    """``explain`` reads the report: the changed lines and the constant come with the gm hashes, as in the failure."""
    from pytest_cudagraph.caches.keys import LookupLog
    from pytest_cudagraph.caches.lookups import explain_miss
    from pytest_cudagraph.render.key_text import one_run_lines

    cold = _lookup("aot_autograd", "cold", HASH_A, "1.0")
    warm = _lookup("aot_autograd", "warm", HASH_B, "2.0")
    log = LookupLog()
    log.add(cold)
    log.add(warm)
    log.annotate(explain_miss(log.lookups[1], [log.lookups[0]], "the cold pass"))
    explained = log.to_json()["lookups"][1]["explained"]
    assert explained == [
        "gm: [aaaaaaaaaaaa] -> [bbbbbbbbbbbb]",
        "  - mul = sin * 1.0",
        "  + mul = sin * 2.0",
        "  a constant: 1.0 -> 2.0",
    ]
    from sample_reports import COMPLETE_RUN, ENV_2_13

    from pytest_cudagraph.records.report import build_report

    record = {"outcome": "failed", "cache_keys": log.to_json()}
    report = build_report(dict(ENV_2_13), {"t.py::test": record}, exitstatus=1, run=COMPLETE_RUN)
    lines = one_run_lines(report, "r.json", "t.py::test")
    assert "        a constant: 1.0 -> 2.0" in lines
    # without the code on both sides (a warm pass of an older plugin): the hashes alone
    log.annotate(explain_miss(replace(log.lookups[1], graph_code=None), [log.lookups[0]], "the cold pass"))
    assert log.to_json()["lookups"][1]["explained"] == ["gm: [aaaaaaaaaaaa] -> [bbbbbbbbbbbb]"]
