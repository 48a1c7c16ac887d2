"""Piecewise compilation on the CPU: the split, the counts, padding and replay-vs-eager.

Without CUDA nothing is captured, so these tests check what the GPU path builds on:
where the graph is cut, how many pieces of each kind there are, how often the
splitting op runs eagerly, and that padded and oversized batches give the eager
answer.  Most use ``backend="eager"`` (Dynamo only); one uses Inductor.
"""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from toy_attention import (
    ATTENTION_OP,
    FUNCTIONAL_ATTENTION_OP,
    ToyModel,
    attention,
    attention_calls,
    make_inputs_for,
)

from pytest_cudagraph import _compat as compat
from pytest_cudagraph.errors import InvariantViolation, MisuseError
from pytest_cudagraph.graphs.capture import GraphSet
from pytest_cudagraph.piecewise import piecewise_compile
from pytest_cudagraph.piecewise.ops import resolve_splitting_ops
from pytest_cudagraph.plugin.handles import PiecewiseFixture
from pytest_cudagraph.records.record import TestRecord
from pytest_cudagraph.strategies import capture_sizes

# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal")


@settings(deadline=None, max_examples=6)
@given(
    layers=st.integers(min_value=1, max_value=3),
    mutating=st.booleans(),
    sizes=capture_sizes(max_size=12, max_count=4),
)
@pytest.mark.slow
def test_toy_attention_split_has_vllms_known_counts(layers, mutating, sizes):
    model = ToyModel(layers=layers, mutating=mutating)
    with piecewise_compile(model, [model.splitting_op], sizes, backend="eager") as compiled:
        compiled.check_replay(make_inputs_for(model))
        stats = compiled.stats
        assert stats.pieces == 2 * layers + 1
        assert stats.capturable_pieces == layers + 1
        assert stats.backend_compilations == layers + 1
        assert stats.graphs_captured == 0  # no CUDA: the pieces run uncaptured
        op = model.splitting_op
        assert stats.splitting_op_calls == {op: layers}
        # the op's own counter agrees with the dispatcher-side count
        before = attention_calls()
        compiled(torch.randn(sizes[0], model.hidden))
        assert attention_calls() - before == layers
        assert compiled.stats.splitting_op_calls_total == layers


def test_padded_and_oversized_batches_give_the_eager_rows():
    model = ToyModel(layers=2)
    make_inputs = make_inputs_for(model, seed=1)
    with piecewise_compile(model, [ATTENTION_OP], [2, 8], backend="eager") as compiled:
        for rows, path in ((2, "split, uncaptured"), (5, "split, uncaptured, padded to 8"), (11, "eager")):
            x = make_inputs(rows)
            out = compiled(x)
            assert out.shape == (rows, model.hidden)  # padding rows sliced off
            torch.testing.assert_close(out, model(x))
            assert compiled.path_for(rows).startswith(path)
        check = compiled.check_replay(make_inputs)
    # captured sizes, the padded size in the gap, and one above the largest
    assert [s.size for s in check.sizes] == [2, 3, 8, 9]
    assert [s.path for s in check.sizes][1] == "split, uncaptured, padded to 8"


class RowMixing(torch.nn.Module):
    """Subtracts the batch mean: padding rows change the real rows (a negative control)."""

    def __init__(self):
        super().__init__()
        self.inner = ToyModel(layers=1)

    def forward(self, x):
        return self.inner(x - x.mean(dim=0, keepdim=True))


def test_check_replay_catches_padding_that_leaks_into_real_rows():
    model = RowMixing()
    with piecewise_compile(model, [ATTENTION_OP], [1, 4], backend="eager") as compiled:
        with pytest.raises(InvariantViolation) as failure:
            compiled.check_replay(make_inputs_for(model.inner))
    message = str(failure.value)
    assert "batch size 2 (split, uncaptured, padded to 4)" in message
    assert "batch size 1 " not in message and "batch size 4 " not in message  # exact sizes agree
    assert "worst element at index" in message


@pytest.mark.parametrize(
    "spelling",
    [
        ATTENTION_OP,
        ATTENTION_OP + ".default",
        torch.ops.cudagraph_toy.attention,
        torch.ops.cudagraph_toy.attention.default,
        attention,  # the torch.library.custom_op object itself
    ],
    ids=["name", "name.overload", "packet", "overload", "custom_op"],
)
def test_every_spelling_of_the_splitting_op_splits_the_same(spelling):
    model = ToyModel(layers=1)
    with piecewise_compile(model, [spelling], [2], backend="eager") as compiled:
        compiled(torch.randn(2, model.hidden))
        assert (compiled.stats.pieces, compiled.stats.capturable_pieces) == (3, 2)


def test_splitting_op_errors_are_one_sentence():
    with pytest.raises(MisuseError, match=r"'cudagraph_toy::nope' is not registered with torch.library"):
        resolve_splitting_ops(["cudagraph_toy::nope"])
    with pytest.raises(MisuseError, match="neither an op nor a 'namespace::op' name"):
        resolve_splitting_ops([42])
    model = ToyModel(layers=1)  # calls the mutating op only
    compiled = piecewise_compile(model, [FUNCTIONAL_ATTENTION_OP], [2], backend="eager")
    with pytest.raises(MisuseError) as problem:
        compiled(torch.randn(2, model.hidden))
    assert "none of the splitting ops ['cudagraph_toy::attention_functional'] occurs" in str(problem.value)
    assert "['cudagraph_toy::attention']" in str(problem.value)  # what the graph does call


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"strategy": "whole"}, "strategy='whole' is not one of fx_split, inductor_partition"),
        ({"capture_sizes": [0, 4]}, r"capture_sizes=\[0, 4\] must be a non-empty list of positive ints"),
        ({"capture_sizes": None}, "needs capture_sizes"),
        ({"batch_dim": -1}, "batch_dim=-1 must be a non-negative int"),
    ],
)
def test_bad_arguments_are_misuse_errors(kwargs, match):
    arguments = {"capture_sizes": [2], "backend": "eager", **kwargs}
    with pytest.raises(MisuseError, match=match):
        piecewise_compile(ToyModel(layers=1), [ATTENTION_OP], **arguments)


@pytest.mark.parametrize("sizes", [[2, 0], [], None, "2 4"])
def test_bad_sizes_read_the_same_as_for_capture_graphs(sizes):
    with pytest.raises(MisuseError) as piecewise:
        piecewise_compile(ToyModel(layers=1), [ATTENTION_OP], sizes, backend="eager")
    with pytest.raises(MisuseError) as graphs:
        GraphSet(lambda x: x, lambda n: torch.randn(n), sizes)

    def argument_named_sizes(text):
        return text.replace("piecewise_compile", "capture_graphs").replace("capture_sizes", "sizes")

    assert argument_named_sizes(str(piecewise.value)) == argument_named_sizes(str(graphs.value))


def test_inductor_partition_refuses_another_backend():
    if compat.inductor_partition_missing():
        pytest.skip(f"this torch lacks Inductor graph partition ({compat.inductor_partition_missing()})")
    with pytest.raises(MisuseError, match="backend='eager' cannot be used"):
        piecewise_compile(ToyModel(layers=1), [ATTENTION_OP], [2], strategy="inductor_partition", backend="eager")


class GraphBreak(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ToyModel(layers=1)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent branch: a Dynamo graph break
            x = x * 2
        return self.inner(x)


def test_a_dynamo_graph_break_is_a_misuse_error_not_a_split():
    # torch 2.6 raises UserError(DYNAMIC_CONTROL_FLOW) here, 2.8+ a graph-break
    # Unsupported: both are a graph break, never a batch-size specialization.
    compiled = piecewise_compile(GraphBreak(), [ATTENTION_OP], [2], backend="eager")
    with pytest.raises(MisuseError, match=r"Dynamo cannot trace GraphBreak.forward as one graph .*fullgraph=True"):
        compiled(torch.randn(2, 32))


def test_later_calls_must_match_the_traced_signature():
    model = ToyModel(layers=1)
    with piecewise_compile(model, [ATTENTION_OP], [2, 4], backend="eager") as compiled:
        compiled(torch.randn(3, model.hidden))
        with pytest.raises(MisuseError, match="was traced for inputs"):
            compiled(torch.randn(3, model.hidden, dtype=torch.float64))
        with pytest.raises(MisuseError, match="was traced for inputs"):
            compiled(torch.randn(3, model.hidden + 1))


class BatchSecond(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ToyModel(layers=1)

    def forward(self, x):  # x: (features, batch)
        return self.inner(x.t().contiguous()).t()


def test_batch_dim_pads_and_slices_along_that_dimension():
    model = BatchSecond()
    with piecewise_compile(model, [ATTENTION_OP], [4, 8], backend="eager", batch_dim=1) as compiled:
        x = torch.randn(32, 5)
        out = compiled(x)
        assert out.shape == (32, 5)
        torch.testing.assert_close(out, model(x))
        compiled.check_replay(lambda n: torch.randn(32, n))


def test_a_replaced_parameter_is_used_on_the_uncaptured_path():
    model = ToyModel(layers=1)
    x = torch.randn(2, model.hidden)
    with piecewise_compile(model, [ATTENTION_OP], [2], backend="eager") as compiled:
        compiled(x)
        model.layers[0].proj.weight = torch.nn.Parameter(torch.zeros_like(model.layers[0].proj.weight))
        torch.testing.assert_close(compiled(x), model(x))


def test_two_instances_of_one_class_get_their_own_trace():
    # Dynamo caches per code object; each piecewise module must still run its own split
    first, second = ToyModel(layers=1, seed=1), ToyModel(layers=2, seed=2)
    with (
        piecewise_compile(first, [ATTENTION_OP], [2], backend="eager") as a,
        piecewise_compile(second, [ATTENTION_OP], [2], backend="eager") as b,
    ):
        x = torch.randn(2, 32)
        torch.testing.assert_close(a(x), first(x))
        torch.testing.assert_close(b(x), second(x))
        assert (a.stats.pieces, b.stats.pieces) == (3, 5)


def test_every_piece_without_a_graph_says_why():
    model = ToyModel(layers=2)
    with piecewise_compile(model, [model.splitting_op], [1, 4], backend="eager") as compiled:
        compiled(torch.randn(3, model.hidden))
        uncaptured = compiled.stats.uncaptured
    # the two splitting pieces name their op; the three others why nothing was captured
    splitting = [p for p in uncaptured if p.reason.startswith("splitting op")]
    assert [p.reason for p in splitting] == [f"splitting op {ATTENTION_OP}: runs eagerly between the graphs"] * 2
    others = [p for p in uncaptured if p not in splitting]
    assert len(others) == 3
    expected = "no CUDA device" if not compat.cuda_available() else "a CPU input ('x' on cpu)"
    assert all(p.reason.startswith(expected) for p in others), others
    assert len({p.piece for p in uncaptured}) == 5  # every piece once, by its name in the split graph


def test_result_goes_into_the_report_record_when_closed():
    record = TestRecord("test_x.py::test_y")
    model = ToyModel(layers=2)
    handle = PiecewiseFixture(record=record, sizes=(1, 4), atol=1e-4)
    compiled = handle(model, [ATTENTION_OP], backend="eager")
    compiled.check_replay(make_inputs_for(model))
    handle.close()
    entry = json.loads(json.dumps(record.to_json()))["piecewise"]
    assert entry["pieces"] == 5 and entry["capturable_pieces"] == 3 and entry["graphs_captured"] == 0
    assert entry["backend_compilations"] == 3
    assert entry["splitting_op_calls"] == {ATTENTION_OP: 2} and entry["splitting_op_calls_total"] == 2
    assert len(entry["uncaptured"]) == 5 and all(set(p) == {"piece", "reason"} for p in entry["uncaptured"])
    assert entry["sizes"] == [1, 4] and entry["strategy"] == "fx_split" and entry["backend"] == "eager"
    assert "pool_bytes" not in entry  # nothing captured
    assert 0 <= entry["max_abs_err"] <= 1e-4
    with pytest.raises(MisuseError, match="was closed"):
        compiled(torch.randn(1, model.hidden))


@pytest.fixture(scope="module")
def inductor_pair():
    """The one Inductor compile of this file: both strategies on the same 2-layer model."""
    model = ToyModel(layers=2)
    compiled = {"fx_split": piecewise_compile(model, [ATTENTION_OP], [2, 4])}
    if not compat.inductor_partition_missing():
        compiled["inductor_partition"] = piecewise_compile(model, [ATTENTION_OP], [2, 4], strategy="inductor_partition")
    yield model, compiled
    for module in compiled.values():
        module.close()


def test_both_strategies_agree_with_eager_and_each_other(inductor_pair):
    model, compiled = inductor_pair
    if "inductor_partition" not in compiled:
        pytest.skip(f"this torch lacks Inductor graph partition ({compat.inductor_partition_missing()})")
    make_inputs = make_inputs_for(model, seed=3)
    for n in (1, 3, 4, 6):
        x = make_inputs(n)
        split, partitioned = compiled["fx_split"](x), compiled["inductor_partition"](x)
        torch.testing.assert_close(split, model(x))
        torch.testing.assert_close(partitioned, split)
    fx, part = compiled["fx_split"].stats, compiled["inductor_partition"].stats
    assert (fx.pieces, fx.capturable_pieces, fx.backend_compilations) == (5, 3, 3)
    # one Inductor compile; on the CPU Inductor makes no cudagraph partitions
    assert (part.backend_compilations, part.capturable_pieces, part.graphs_captured) == (1, 0, 0)
    assert fx.splitting_op_calls == part.splitting_op_calls == {ATTENTION_OP: 2}


PYTESTER_TESTS = """
import pytest
import torch
from toy_attention import ATTENTION_OP, ToyModel, make_inputs_for


def test_fixture_splits_and_checks(piecewise):
    model = ToyModel(layers=2)
    compiled = piecewise(model, [ATTENTION_OP], backend="eager")  # sizes from the ini option
    compiled.check_replay(make_inputs_for(model))
    assert compiled.stats.pieces == 5


def test_fixture_reports_a_padding_leak(piecewise):
    model = ToyModel(layers=1)
    mixing = lambda x: model(x - x.mean(dim=0, keepdim=True))
    wrapper = torch.nn.Module()
    wrapper.forward = mixing
    wrapper.model = model
    compiled = piecewise(wrapper, [ATTENTION_OP], backend="eager")
    compiled.check_replay(make_inputs_for(model))


@pytest.mark.cudagraph(capture_sizes=[1, 2])
def test_gpu_only(piecewise):
    raise AssertionError("must not run without --cudagraph")
"""


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_piecewise_fixture_reports_into_the_run_report(pytester):
    from pathlib import Path

    pytester.makepyfile(toy_attention=Path(__file__).with_name("toy_attention.py").read_text())
    pytester.makepyfile(test_pw=PYTESTER_TESTS)
    pytester.makeini("[pytest]\ncudagraph_capture_sizes = 1 2 4\n")
    result = pytester.runpytest_subprocess("--cudagraph-report=report.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*piecewise replay (fx_split, backend eager) differs from eager Module at 1 of 5 batch sizes:",
            "*batch size 3 (split, uncaptured, padded to 4): output: worst element at index*",
        ]
    )
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    passed = tests["test_pw.py::test_fixture_splits_and_checks"]
    assert passed["outcome"] == "passed"
    assert {
        k: passed["piecewise"][k] for k in ("pieces", "capturable_pieces", "graphs_captured", "backend_compilations")
    } == {
        "pieces": 5,
        "capturable_pieces": 3,
        "graphs_captured": 0,
        "backend_compilations": 3,
    }
    assert passed["piecewise"]["splitting_op_calls"] == {ATTENTION_OP: 2}
    assert passed["piecewise"]["sizes"] == [1, 2, 4]
    failed = tests["test_pw.py::test_fixture_reports_a_padding_leak"]
    assert failed["outcome"] == "failed"
    assert failed["piecewise"]["max_abs_err"] > 1e-3  # the leak is recorded, not only raised
    assert tests["test_pw.py::test_gpu_only"]["outcome"] == "skipped"


class BranchesOnBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ToyModel(layers=1)

    def forward(self, x):
        if x.shape[0] > 4:  # a Dynamo guard on the batch size, not a graph break
            x = x * 2
        return self.inner(x)


def test_a_guard_on_the_batch_size_is_refused_not_silently_dropped():
    compiled = piecewise_compile(BranchesOnBatch(), [ATTENTION_OP], [2, 8], backend="eager")
    with pytest.raises(MisuseError, match=r"under conditions on the batch size \(s\d+ > 4\)"):
        compiled(torch.randn(3, 32))
