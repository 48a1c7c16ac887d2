"""``compile_cache.bundle_cycle()`` and ``compile_cache.precompiled()``: bundles that round-trip, artifacts that load.

The plain tests build cycles by hand (passes with counters and lookups, bundles with
keys): what fails, what is torch's own omission (a note, a failure only with
``strict=True``), how a bundle saved twice reads, what ``show``, the page and
``compare`` make of the record.  The slow ones run real cycles on the CPU: one that
round-trips, one whose second interpreter saves twice and loses the first bundle's
FX graphs, and (torch 2.14+) precompiled artifacts loaded without a compile.
"""

from __future__ import annotations

import copy

import msgspec
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sample_reports import ENV_2_13

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.bundle_cycle import Bundle, BundleCycle
from pytest_cudagraph.caches.keys import CacheLookup
from pytest_cudagraph.caches.probe import cache_probe
from pytest_cudagraph.caches.results import CacheStats, PassResult
from pytest_cudagraph.errors import InvariantViolation, MisuseError
from pytest_cudagraph.records import bundle_schema as schema
from pytest_cudagraph.records.load import load_report
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.bundle_text import bundle_cycle_lines, bundles_html
from pytest_cudagraph.render.record_text import detail_lines
from pytest_cudagraph.tools.compare import compare_reports

needs_bundles = pytest.mark.skipif(
    not compat.has_portable_cache_artifacts(), reason=str(compat.portable_cache_artifacts_missing())
)


# -- importable: the fresh interpreters of a cycle call these by name ----------------------------------------


def double_sin(x):
    return torch.sin(x) * 2 + 1


def cos_less(x):
    return torch.cos(x) - x


def compiled_double_sin(x):
    return torch.compile(double_sin)(x)


def compiled_cos_less(x):
    return torch.compile(cos_less)(x)


def cos_less_saving_after_each_graph(x):
    """A service that saves its bundle after each new graph: one save, then one more graph (saved by the cycle)."""
    y = torch.compile(cos_less)(x)
    torch.compiler.save_cache_artifacts()
    return y, torch.compile(cos_less)(x[:-1])


def matmul_relu(x, w):
    return torch.relu(x @ w) * 2 + 1


# -- cycles built by hand -------------------------------------------------------------------------------------


def _pass(name: str, *, hit: int = 0, miss: int = 0, hit_keys: tuple[str, ...] = ()) -> PassResult:
    stats = CacheStats(fxgraph={"hit": hit, "miss": miss}, aot_autograd={}, triton={})
    lookups = tuple(CacheLookup("fxgraph", "hit", key, None, pass_name=name) for key in hit_keys)
    return PassResult(name, stats, None, {}, "/x", 0.1, label=name, lookups=lookups)


def _cycle(
    first: dict, second: dict, *, reload_hits: tuple[str, ...] = (), strict: bool = False, **bundle
) -> BundleCycle:
    return BundleCycle(
        function="step",
        extend="more",
        cold=_pass("cold", miss=1),
        reload=_pass("reload", hit=1, hit_keys=reload_hits),
        extend_pass=_pass("extend", miss=1),
        second_load=_pass("second_load", hit=1),
        second_extend=_pass("second_extend", hit=1),
        first=Bundle("first", 100, first),
        second=Bundle("second", 200, second, **bundle),
        strict=strict,
        torch="2.13.0",
        rerecording="torch 2.13.0 re-records a loaded artifact only when a lookup hits it",
    )


def test_a_lost_artifact_the_reload_hit_fails_naming_its_layer_and_key():
    cycle = _cycle(
        {"fxgraph": {"fabcdef0123456789": 10}}, {"fxgraph": {"fnew": 12}}, reload_hits=("fabcdef0123456789",)
    )
    with pytest.raises(InvariantViolation) as info:
        cycle.check()
    text = str(info.value)
    assert text.splitlines()[0] == "the cache bundle did not round-trip (compile_cache.bundle_cycle() of step)"
    assert "the second bundle lacks 1 FX graph (fabcdef01234) that the first held and the reload pass hit" in text
    assert cycle.to_json()["lost_though_hit"] == {"fxgraph": ["fabcdef0123456789"]}


def test_a_lost_artifact_nothing_hit_is_torchs_omission_a_note_unless_strict():
    first = {"fxgraph": {"f1": 10}, "autotune": {"t1": 5}}
    second = {"fxgraph": {"f1": 10, "f2": 11}}
    cycle = _cycle(first, second, reload_hits=("f1",))
    assert cycle.problems() == []
    note = cycle.notes()[-1]
    assert "lacks 1 autotune result (t1)" in note and "re-records a loaded artifact only when" in note
    assert "strict=True makes it one" in note and "torch.compiler.load_cache_artifacts(first)" in note
    strict = _cycle(first, second, reload_hits=("f1",), strict=True)
    with pytest.raises(InvariantViolation, match=r"lacks 1 autotune result \(t1\) that the first held \(strict=True\)"):
        strict.check()


def test_a_bundle_saved_twice_says_that_the_load_keeps_the_last_save():
    cycle = _cycle(
        {"fxgraph": {"f1": 10}},
        {"fxgraph": {"f3": 10}},
        reload_hits=("f1",),
        saves=2,
        dropped={"fxgraph": ("f1", "f2")},
    )
    problem = cycle.problems()[-1]
    assert "the process saved 2 times" in problem and "torch's load keeps only the last save's" in problem
    assert "2 FX graphs (f1, f2) dropped" in problem and "save once per process" in problem


@given(st.lists(st.sampled_from(["inductor", "aot_autograd", "autotune"]), max_size=8))
def test_a_load_keeps_the_last_section_of_each_type_and_the_kernels_of_its_fx_graphs(kinds):
    sections = []
    for index, kind in enumerate(kinds):
        sections.append((kind, [(f"{kind}-{index}", index)]))
        if kind == "inductor":
            sections.append((compat.TRITON_LAYER, [(f"kernel-{index}", index)]))
    loaded = compat.loaded_sections(sections)
    plain = {kind: items for kind, items in sections if kind != compat.TRITON_LAYER}
    assert {kind: items for kind, items in loaded.items() if kind != compat.TRITON_LAYER} == plain
    if "inductor" in plain:
        last = plain["inductor"][0][0].split("-")[1]
        assert loaded[compat.TRITON_LAYER] == [(f"kernel-{last}", int(last))]


def _record(cycle: BundleCycle) -> dict:
    return {"outcome": "passed", "bundle_cycle": [cycle.to_json()]}


def test_show_and_the_page_draw_the_bundles_per_layer_and_what_was_lost():
    cycle = _cycle({"fxgraph": {"f1": 1024}}, {"fxgraph": {"f2": 2048}}, reload_hits=("f1",))
    typed = msgspec.convert(cycle.to_json(), schema.BundleCycle)
    lines = bundle_cycle_lines(typed)
    assert lines[0] == "bundle cycle of step, extended by more (torch 2.13.0): FAILED"
    assert lines[1].split() == ["bundle", "size", "fxgraph"]
    assert lines[2].split() == ["first", "100", "B", "1", "(1.0", "KiB)"]
    assert "  the second bundle lacks what the first held: fxgraph 1 (f1)" in lines
    html = bundles_html(_record(cycle))
    assert "<h3>bundle cycle of step, extended by more (torch 2.13.0): FAILED</h3>" in html
    assert "<td>second</td><td>200 B</td><td>1 (2.0 KiB)</td>" in html


def test_compare_flags_a_bundle_that_holds_fewer_artifacts_than_the_base_runs():
    whole = _cycle({"fxgraph": {"f1": 1}}, {"fxgraph": {"f1": 1, "f2": 1}}, reload_hits=("f1",))
    partial = _cycle({"fxgraph": {"f1": 1}}, {"fxgraph": {"f2": 1}}, reload_hits=("f1",))
    base = build_report(ENV_2_13, {"t.py::cycle": _record(whole)})
    new = build_report(ENV_2_13, {"t.py::cycle": _record(partial)})
    messages = [r.message for r in compare_reports(base, new).regressions if r.rule == "cache-miss"]
    assert "bundle cycle of step: the second bundle holds 1 fxgraph artifact, 2 before" in messages
    assert "bundle cycle of step: the second bundle lacks 1 artifact the first held, 0 before" in messages
    assert not compare_reports(base, copy.deepcopy(base)).regressed


@needs_bundles
@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({}, r"needs extend=: a second module-level function"),
        ({"extend": compiled_cos_less, "mode": "inprocess"}, r"bundle_cycle\(mode='inprocess'\) is not a known mode"),
    ],
)
def test_a_cycle_without_extension_or_with_another_mode_is_refused_before_compiling(options, refusal):
    x = torch.arange(8.0)
    with cache_probe() as probe:
        with pytest.raises(MisuseError, match=refusal):
            probe.bundle_cycle(compiled_double_sin, x, **options)
        assert probe.stats().fxgraph.get("miss", 0) == 0


def test_a_lambda_cannot_cross_to_a_fresh_interpreter():
    with cache_probe() as probe:
        with pytest.raises(MisuseError, match="cannot be imported by a fresh interpreter"):
            probe.bundle_cycle(lambda x: x, torch.ones(2), extend=compiled_cos_less)


@pytest.mark.skipif(compat.precompile_missing() is None, reason="this torch has torch.compiler.precompile")
def test_precompiled_on_a_torch_without_precompile_is_refused_in_one_line_naming_the_version():
    with cache_probe() as probe:
        with pytest.raises(MisuseError) as info:
            probe.precompiled(matmul_relu, torch.ones(2, 2), torch.ones(2, 2))
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"compile_cache.precompiled() needs torch.compiler.precompile: torch {torch.__version__} has no "
        "torch.compiler.precompile (torch 2.14 and newer)"
    )


# -- real cycles on the CPU ------------------------------------------------------------------------------------


@needs_bundles
@pytest.mark.slow
def test_a_cycle_with_a_second_function_round_trips_and_its_record_validates():
    with cache_probe() as probe:
        cycle = probe.bundle_cycle(compiled_double_sin, torch.arange(8.0), extend=compiled_cos_less)
    cycle.check()
    assert len(cycle.first.artifacts["fxgraph"]) == 1 and len(cycle.second.artifacts["fxgraph"]) == 2
    assert cycle.first.keys("fxgraph") < cycle.second.keys("fxgraph")
    assert cycle.reload.stats.fxgraph["hit"] == 1 and cycle.second_extend.stats.fxgraph["hit"] == 1
    assert cycle.second.saves == 1 and not cycle.lost()
    typed = msgspec.convert(cycle.to_json(), schema.BundleCycle)
    assert typed.passed is True and typed.bundles["second"].layers["fxgraph"].count == 2


@needs_bundles
@pytest.mark.slow
def test_a_process_that_saves_twice_writes_a_bundle_that_lost_the_first_bundles_fx_graphs():
    with cache_probe() as probe:
        cycle = probe.bundle_cycle(compiled_double_sin, torch.arange(8.0), extend=cos_less_saving_after_each_graph)
    with pytest.raises(InvariantViolation) as info:
        cycle.check()
    text = str(info.value)
    (first_graph,) = cycle.first.keys("fxgraph")
    assert f"the second bundle lacks 1 FX graph ({first_graph[:12]})" in text
    assert "the process saved 2 times" in text
    assert "second load: fn: fxgraph: miss 1 on the warm pass" in text
    assert cycle.second.saves == 2 and first_graph in cycle.second.dropped["fxgraph"]


@pytest.mark.skipif(compat.precompile_missing() is not None, reason=str(compat.precompile_missing()))
@pytest.mark.slow
def test_precompiled_artifacts_load_without_a_compile_and_refuse_a_changed_shape():
    torch.manual_seed(0)
    with cache_probe() as probe:
        check = probe.precompiled(matmul_relu, torch.randn(4, 8), torch.randn(8, 8))
    check.check()
    assert check.load.stats.fxgraph.get("miss", 0) == 0 and check.load.stats.aot_autograd.get("miss", 0) == 0
    assert check.outcome("shape")["outcome"] == "PrecompileError"
    assert check.outcome("dtype")["outcome"] == "PrecompileError"
    assert msgspec.convert(check.to_json(), schema.Precompiled).passed is True


@needs_bundles
@pytest.mark.slow
def test_the_fixtures_cycle_goes_into_the_report_and_show_prints_it(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_ship="""
        import torch

        def scaled_sin(x):
            return torch.compile(lambda a: torch.sin(a) * 2 + 1)(x)

        def test_cycle(compile_cache):
            compile_cache.bundle_cycle(scaled_sin, torch.arange(8.0), extend=(torch.arange(12.0),)).check()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--cudagraph-report=run.json")
    result.assert_outcomes(passed=1)
    (record,) = load_report(pytester.path / "run.json")["tests"].values()
    (cycle,) = record["bundle_cycle"]
    assert cycle["passed"] is True and cycle["bundles"]["second"]["layers"]["fxgraph"]["count"] == 2
    assert set(cycle["steps"]) == {"cold", "reload", "extend", "second_load", "second_extend"}
    shown = "\n".join(detail_lines(load_report(pytester.path / "run.json")))
    assert "bundle cycle of scaled_sin, extended by scaled_sin on new arguments" in shown
