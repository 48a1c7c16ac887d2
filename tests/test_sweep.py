"""``compile_cache.sweep()``: whether the cache keys on each factor the compiled code depends on (false hits).

The plain tests build lookups and results by hand (the verdict, its words, the
report's type, the page); the slow ones compile for real: a custom Inductor pass
whose ``uuid()`` leaves out the setting it reads is a false hit, the same pass
with the setting in its ``uuid()`` a miss, and torch's own default factors give
no false hit.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.caches.keys import CacheLookup
from pytest_cudagraph.caches.probe import CacheProbe, cache_probe
from pytest_cudagraph.caches.results import CacheStats, PassResult
from pytest_cudagraph.caches.sweep import FactorVerdict, SweepResult, SweepsSection, judge
from pytest_cudagraph.caches.sweep_factors import Factor, default_factors, normalized_factors
from pytest_cudagraph.errors import InvariantViolation, MisuseError, ReportError
from pytest_cudagraph.records.json_schema import report_json_schema
from pytest_cudagraph.records.report import build_report, validate_report
from pytest_cudagraph.render.html_caches import sweeps_html
from pytest_cudagraph.render.record_text import detail_lines
from pytest_cudagraph.render.sweep_text import sweep_lines, sweeps_of

H = "a" * 51  # a component hash as torch writes them: 51 base32 characters
G = "b" * 51


def _lookup(layer: str, outcome: str, pass_name: str, **components: tuple[str, str | None]) -> CacheLookup:
    parts = {"gm": ("g" * 51, None), **{name.replace("__", "."): pair for name, pair in components.items()}}
    key = f"k-{pass_name}-{outcome}"
    return CacheLookup(layer=layer, outcome=outcome, key=key, components=parts, pass_name=pass_name)


def _base() -> list[CacheLookup]:
    return [
        _lookup("fxgraph", "miss", "base", post_grad_custom_post_pass=(H, "constant"), size_asserts=(H, "True")),
        _lookup("aot_autograd", "miss", "base", post_grad_custom_post_pass=(H, "constant")),
    ]


def _pass(name: str = "base") -> PassResult:
    stats = CacheStats(fxgraph={"miss": 1}, aot_autograd={}, triton={})
    return PassResult(name=name, stats=stats, outputs=None, recorded={}, cache_dir="/tmp/x", duration_s=0.1)


# ----------------------------------------------------------------------------
# arguments
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factors", "words"),
    [
        (42, "got a int"),
        ("size_asserts", "got a str"),
        ({"": lambda: None}, "not a non-empty string"),
        ({3: lambda: None}, "not a non-empty string"),
        ({"x": 3}, "not callable"),
        ([object()], "not a Factor"),
        ([], "is empty"),
        ({}, "is empty"),
        ([Factor("a"), Factor("a")], "two factors are named 'a'"),
    ],
)
def test_bad_factors_are_refused_in_one_sentence(factors, words):
    with pytest.raises(MisuseError) as info:
        normalized_factors(factors, ())
    assert words in str(info.value)
    assert "\n" not in str(info.value) and str(info.value).startswith("sweep(")


def test_a_factor_that_returns_no_context_manager_or_no_tuple_is_refused():
    with pytest.raises(MisuseError, match="returned int, not a context manager"):
        Factor("f", context=lambda: 3).entered()
    with pytest.raises(MisuseError, match="into a list; return a tuple"):
        Factor.inputs("g", lambda args: list(args)).arguments((1,))
    with pytest.raises(MisuseError, match="has no entry 'no_such_entry'"):
        Factor.config("no_such_entry", 1)


def test_the_mapping_form_keeps_its_names_and_the_defaults_depend_on_the_inputs():
    import torch

    factors = normalized_factors({"x": lambda: None, "y": Factor.env("A", "1")}, ())
    assert [f.name for f in factors] == ["x", "y"]
    names = [f.name for f in default_factors((torch.ones(3),))]
    assert "inputs' dtype" in names and "inputs' stride" in names and len(names) >= 3
    assert not any(name.startswith("inputs'") for name in (f.name for f in default_factors((3,))))


def test_the_input_factors_keep_the_values_and_change_dtype_or_strides():
    import torch

    (x,) = (torch.arange(6.0).reshape(2, 3),)
    by_name = {f.name: f for f in default_factors((x,))}
    (strided,) = by_name["inputs' stride"].arguments((x,))
    (other,) = by_name["inputs' dtype"].arguments((x,))
    assert torch.equal(strided, x) and not strided.is_contiguous() and strided.stride() == (6, 2)
    assert other.dtype == torch.float64 and torch.equal(other.float(), x)


def test_sweep_outside_its_probe_is_refused():
    with pytest.raises(MisuseError, match="outside its 'with cache_probe\\(\\)' block"):
        CacheProbe().sweep(lambda: None)


# ----------------------------------------------------------------------------
# the verdict
# ----------------------------------------------------------------------------


def test_every_lookup_missing_is_a_miss_naming_the_component_that_changed():
    lookups = [_lookup("fxgraph", "miss", "f", post_grad_custom_post_pass=(H, "constant"), size_asserts=(G, "False"))]
    verdict = judge("size_asserts=False", _base(), lookups, None)
    assert verdict.verdict == "miss" and not verdict.reference
    assert verdict.changed == ("fxgraph: size_asserts: True -> False",)


def test_a_hit_with_other_outputs_is_a_false_hit_naming_layer_and_what_stayed_equal():
    lookups = [
        _lookup("aot_autograd", "hit", "f", post_grad_custom_post_pass=(H, "constant")),
        _lookup("fxgraph", "hit", "f", post_grad_custom_post_pass=(H, "constant")),
    ]
    verdict = judge("scale=2", _base(), lookups, ["returned: not bitwise equal"], ["inductor_config[scale]"])
    assert verdict.verdict == "false-hit" and verdict.layers == ("fxgraph", "aot_autograd")
    assert "fxgraph: post_grad_custom_post_pass = 'constant'" in verdict.stayed_equal
    assert "fxgraph: inductor_config[scale] is not in the key" in verdict.stayed_equal
    assert verdict.differences == ("returned: not bitwise equal",)


def test_a_hit_with_equal_outputs_is_a_hit_and_a_partial_miss_a_miss():
    hit = _lookup("fxgraph", "hit", "f", post_grad_custom_post_pass=(H, "constant"))
    assert judge("f", _base(), [hit], []).verdict == "hit"
    missed = _lookup("aot_autograd", "miss", "f", post_grad_custom_post_pass=(G, "setting 2"))
    partial = judge("f", _base(), [hit, missed], [])
    assert partial.verdict == "miss" and partial.layers == ("fxgraph",)
    assert partial.changed == ("aot_autograd: post_grad_custom_post_pass: constant -> setting 2",)


def test_nothing_cached_is_a_bypass_and_a_hit_needs_its_reference():
    bypass = CacheLookup("fxgraph", "bypass", None, None, bypass_reason="unpicklable", pass_name="f")
    verdict = judge("f", _base(), [bypass], None)
    assert verdict.verdict == "bypass" and "unpicklable" in verdict.note
    with pytest.raises(ValueError):
        judge("f", _base(), [_lookup("fxgraph", "hit", "f")], None)


@given(
    outcomes=st.lists(st.sampled_from(["hit", "miss", "bypass"]), min_size=1, max_size=4),
    differ=st.booleans(),
)
def test_a_false_hit_is_exactly_a_hit_whose_outputs_differ(outcomes, differ):
    lookups = [
        _lookup("fxgraph", o, "f") if o != "bypass" else CacheLookup("fxgraph", "bypass", None, None) for o in outcomes
    ]
    hit = "hit" in outcomes
    verdict = judge("f", _base(), lookups, (["differs"] if differ else []) if hit else None)
    assert (verdict.verdict == "false-hit") == (hit and differ)
    assert (verdict.verdict == "miss") == ("miss" in outcomes and not (hit and differ))
    assert verdict.verdict in ("miss", "hit", "false-hit", "bypass")


# ----------------------------------------------------------------------------
# words, the report's type, the page
# ----------------------------------------------------------------------------


def _result() -> SweepResult:
    return SweepResult(
        "step",
        _pass(),
        (
            FactorVerdict(
                "size_asserts=False", "miss", (), changed=("fxgraph: inductor_config[size_asserts]: True -> False",)
            ),
            FactorVerdict(
                "scale=2",
                "false-hit",
                (),
                layers=("fxgraph", "aot_autograd"),
                stayed_equal=(
                    "fxgraph: post_grad_custom_post_pass = 'constant'",
                    "aot_autograd: post_grad_custom_post_pass = 'constant'",
                ),
                differences=("returned: not bitwise equal: 1 of 1 elements differ",),
                reference=True,
            ),
        ),
    )


def test_check_names_each_false_hit_its_layer_what_stayed_equal_and_what_to_do():
    result = _result()
    assert result.verdicts == {"size_asserts=False": "miss", "scale=2": "false-hit"}
    with pytest.raises(InvariantViolation) as info:
        result.check()
    text = str(info.value)
    assert "compile_cache.sweep(step): 1 false hit" in text
    assert "factor 'scale=2': a false hit in fxgraph and aot_autograd" in text
    assert "key component that stayed equal: post_grad_custom_post_pass = 'constant' (fxgraph, aot_autograd)" in text
    assert "put the setting into the pass's uuid()" in text
    SweepResult("step", _pass(), result.factors[:1]).check()  # no false hit: nothing raised


def test_the_text_names_each_factor_its_verdict_and_for_misses_the_component():
    lines = sweep_lines(_result().typed())
    assert lines[0] == "cache sweep of step: 2 factors: 1 miss, 1 false hit"
    row = next(line for line in lines if "size_asserts=False" in line)
    assert "miss" in row and "inductor_config[size_asserts]: True -> False (fxgraph)" in row
    assert "FALSE HIT" in next(line for line in lines if "scale=2" in line)


def test_a_sweep_in_a_record_validates_renders_and_a_wrong_type_is_refused():
    jsonschema = pytest.importorskip("jsonschema")
    record = {"outcome": "passed", "cache_sweeps": json.loads(json.dumps(SweepsSection((_result(),)).to_json()))}
    report = json.loads(json.dumps(build_report({"torch": "2.13.0"}, {"t::sweep": record})))
    validate_report(report)
    jsonschema.validate(report, report_json_schema())
    assert sweeps_of(report["tests"]["t::sweep"]["cache_sweeps"])[0].function == "step"
    assert any("cache sweep of step" in line for line in detail_lines(report))
    page = sweeps_html(report["tests"]["t::sweep"])
    assert "FALSE HIT" in page and "inductor_config[size_asserts]: True -&gt; False" in page
    report["tests"]["t::sweep"]["cache_sweeps"][0]["factors"][0]["verdict"] = 3
    with pytest.raises(ReportError, match="cache_sweeps"):
        validate_report(report)


def test_the_page_draws_the_sweep_once():
    from pytest_cudagraph.render.show import render_html

    record = {"outcome": "passed", "cache_sweeps": SweepsSection((_result(),)).to_json()}
    page = render_html(json.loads(json.dumps(build_report({}, {"t::sweep": record}))))
    assert page.count("cache sweep of step") == 1


# ----------------------------------------------------------------------------
# compiled for real
# ----------------------------------------------------------------------------

PASSES = """
import contextlib

import pytest
import torch

from pytest_cudagraph import _compat as compat

SETTING = {"scale": 1.0}


@contextlib.contextmanager
def scale(value):
    old, SETTING["scale"] = SETTING["scale"], value
    try:
        yield
    finally:
        SETTING["scale"] = old


class ScaleOutput(compat.custom_graph_pass_class()):
    '''Multiplies the graph's first output by SETTING["scale"].'''

    def __call__(self, graph):
        out = next(node for node in graph.nodes if node.op == "output")
        first = out.args[0][0]
        with graph.inserting_before(out):
            scaled = graph.call_function(torch.ops.aten.mul.Tensor, (first, SETTING["scale"]))
        out.args = ((scaled, *out.args[0][1:]),)


class ConstantUuid(ScaleOutput):
    def uuid(self):
        return "constant"


class SettingInUuid(ScaleOutput):
    def uuid(self):
        return f"scale {SETTING['scale']}"


def step(x):
    return torch.compile(lambda a: (a.sin() * 2).sum())(x)


def test_constant_uuid(compile_cache):
    with compat.inductor_config_patch({"post_grad_custom_post_pass": ConstantUuid()}):
        result = compile_cache.sweep(step, torch.ones(4), factors={"scale=2": lambda: scale(2.0)})
    result.check()


def test_setting_in_uuid(compile_cache):
    with compat.inductor_config_patch({"post_grad_custom_post_pass": SettingInUuid()}):
        result = compile_cache.sweep(step, torch.ones(4), factors={"scale=2": lambda: scale(2.0)})
    assert result.verdicts == {"scale=2": "miss"}
    result.check()


def test_default_factors(compile_cache):
    result = compile_cache.sweep(step, torch.ones(4))
    print(result.text())
    assert "false-hit" not in result.verdicts.values(), result.text()
    assert "miss" in result.verdicts.values(), result.text()
    result.check()
"""


@pytest.mark.slow
@pytest.mark.usefixtures("wide_terminal")  # the key component's line is read whole
@pytest.mark.skipif(compat.custom_graph_pass_missing() is not None, reason=str(compat.custom_graph_pass_missing()))
def test_a_pass_whose_uuid_leaves_out_its_setting_is_a_false_hit_and_torch_keys_on_the_defaults(pytester):
    pytester.makepyfile(test_passes=PASSES)
    result = pytester.runpytest_subprocess("-s", "--cudagraph-report=report.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "test_passes.py::test_constant_uuid FAILED" in text or "FAILED test_passes.py::test_constant_uuid" in text
    assert "compile_cache.sweep(step): 1 false hit" in text
    assert "factor 'scale=2': a false hit in fxgraph" in text
    assert "post_grad_custom_post_pass = 'constant'" in text
    assert "put the setting into the pass's uuid()" in text
    report = json.loads((pytester.path / "report.json").read_text())
    validate_report(report)
    sweeps = {nodeid.split("::")[-1]: rec["cache_sweeps"] for nodeid, rec in report["tests"].items()}
    assert sweeps["test_constant_uuid"][0]["factors"][0]["verdict"] == "false-hit"
    assert sweeps["test_setting_in_uuid"][0]["factors"][0]["verdict"] == "miss"
    defaults = sweeps["test_default_factors"][0]["factors"]
    assert all(factor["verdict"] != "false-hit" for factor in defaults)
    assert any(factor["verdict"] == "miss" and factor.get("changed") for factor in defaults)


@pytest.mark.slow
def test_the_default_sweep_in_this_process_finds_misses_that_name_their_component():
    import torch

    def step(x):
        return torch.compile(lambda a: (a.cos() + 1).sum())(x)

    with cache_probe() as probe:
        result = probe.sweep(step, torch.ones(4))
    assert probe.sweeps == (result,)
    assert set(result.verdicts.values()) == {"miss"}, result.text()
    size_asserts = next(f for f in result.factors if f.name == "size_asserts=False")
    assert "fxgraph: inductor_config[size_asserts]: True -> False" in size_asserts.changed
    assert any(lookup.layer == "fxgraph" for lookup in size_asserts.lookups)


# ----------------------------------------------------------------------------
# what a function records, and a function that hands back nothing
# ----------------------------------------------------------------------------


def test_a_function_that_returns_and_records_nothing_is_refused_saying_so():
    with cache_probe() as probe:
        with pytest.raises(MisuseError) as info:
            probe.sweep(lambda x: None, 1, factors={"nothing": contextlib.nullcontext})
    message = str(info.value)
    assert message.startswith("compile_cache.sweep(") and "\n" not in message
    assert "returned nothing and recorded nothing, so a cache hit cannot be told from a false hit" in message
    assert "compile_cache.record(name, value)" in message


@pytest.mark.slow  # a cold compile for the base and another for the reference (about 10 s on two cores)
@pytest.mark.skipif(compat.custom_graph_pass_missing() is not None, reason=str(compat.custom_graph_pass_missing()))
def test_a_false_hit_in_what_the_function_records_is_a_false_hit():
    import torch

    setting = {"scale": 1.0}

    @contextlib.contextmanager
    def scale(value):
        old, setting["scale"] = setting["scale"], value
        try:
            yield
        finally:
            setting["scale"] = old

    class ConstantUuid(compat.custom_graph_pass_class()):
        """Scales the graph's first output by the setting; its uuid() leaves the setting out."""

        def __call__(self, graph):
            out = next(node for node in graph.nodes if node.op == "output")
            first = out.args[0][0]
            with graph.inserting_before(out):
                scaled = graph.call_function(torch.ops.aten.mul.Tensor, (first, setting["scale"]))
            out.args = ((scaled, *out.args[0][1:]),)

        def uuid(self):
            return "constant"

    with cache_probe() as probe:

        def step(x):
            probe.record("y", torch.compile(lambda a: (a.sin() * 2).sum())(x))

        with compat.inductor_config_patch({"post_grad_custom_post_pass": ConstantUuid()}):
            result = probe.sweep(step, torch.ones(4), factors={"scale=2": lambda: scale(2.0)})
    assert result.verdicts == {"scale=2": "false-hit"}, result.text()
    (differences,) = [factor.differences for factor in result.false_hits]
    assert differences[0].startswith("recorded 'y': not bitwise equal"), differences
    assert "(reference " in differences[0] and "from the cache " in differences[0]
    with pytest.raises(InvariantViolation, match="1 false hit"):
        result.check()
