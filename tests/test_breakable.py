"""Breakable CUDA graphs, the parts that need no GPU: ``break_at`` validation, eager steps, the record, the summary cell.

The captures themselves are in tests/gpu/test_breakable_gpu.py.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from toy_attention import ATTENTION_OP, FUNCTIONAL_ATTENTION_OP, attention, attention_calls

from pytest_cudagraph import MisuseError
from pytest_cudagraph.graphs.break_ops import break_at_entries, is_op_name
from pytest_cudagraph.graphs.breakable import EagerStep, GraphChain, chain_result, resolve_break_at
from pytest_cudagraph.graphs.capture import GraphSet, GraphSetResult
from pytest_cudagraph.graphs.capture_failure import break_at_hint
from pytest_cudagraph.graphs.pool_check import SizeMemory
from pytest_cudagraph.plugin.markers import MarkerArgumentError, parse_cudagraph
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.records.validate import checked_report
from pytest_cudagraph.render.graph_mode_text import breakable_graphs_cell, segment_count
from pytest_cudagraph.render.summary import HEADER, summary_row

# ---------------------------------------------------------------------------
# break_at: the form at collection, the op at capture
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("attention", "'attention' is not a 'namespace::op' name"),
        (("cudagraph_toy::attention", "attention"), "'attention' is not a 'namespace::op' name"),
        (("ns::op::more",), "is not a 'namespace::op' name"),
        (42, "break_at=42 is not a list of op names"),
        ({"a::b": 1}, "is not a list of op names"),
    ],
)
def test_a_break_at_that_is_not_op_names_is_one_sentence_naming_the_fix(value, fragment):
    with pytest.raises(MisuseError, match=fragment) as info:
        GraphSet(lambda x: x, lambda n: torch.randn(n), [1, 2], break_at=value)
    message = str(info.value)
    assert "break_at=('mylib::attention',)" in message and "\n" not in message


def test_an_unregistered_break_op_names_the_import_to_add():
    with pytest.raises(MisuseError, match=r"'nosuchlib::attention' is not registered with torch\.library; import"):
        GraphSet(lambda x: x, lambda n: torch.randn(n), [1], break_at=("nosuchlib::attention",))
    with pytest.raises(MisuseError, match=r"'cudagraph_toy::attention\.nosuch' is not registered"):
        resolve_break_at("cudagraph_toy::attention.nosuch")


def test_an_entry_that_is_no_op_and_no_name_is_refused():
    with pytest.raises(MisuseError, match="break_at entry 3 is a int, not an op"):
        resolve_break_at([ATTENTION_OP, 3])


def test_names_ops_and_custom_op_objects_resolve_to_the_same_break_op():
    by_name = resolve_break_at(ATTENTION_OP)
    assert [str(op) for op in by_name] == [ATTENTION_OP]
    [from_object] = resolve_break_at([attention])  # a custom op object is its default overload
    assert from_object.packet == by_name[0].packet == ATTENTION_OP and from_object.overload == "default"
    assert resolve_break_at([torch.ops.cudagraph_toy.attention.default])[0].overload == "default"
    assert resolve_break_at(None) == resolve_break_at(()) == ()
    both = resolve_break_at([ATTENTION_OP, FUNCTIONAL_ATTENTION_OP, ATTENTION_OP])
    assert [str(op) for op in both] == [ATTENTION_OP, FUNCTIONAL_ATTENTION_OP]
    assert both[0].matches(torch.ops.cudagraph_toy.attention.default)
    assert not both[0].matches(torch.ops.aten.add.Tensor)


def test_resolved_break_ops_resolve_to_themselves():
    # agree() resolves the marker's break ops once and hands them to each mode's capture
    resolved = resolve_break_at([ATTENTION_OP, FUNCTIONAL_ATTENTION_OP])
    assert resolve_break_at(resolved) == resolved
    assert resolve_break_at([resolved[0], ATTENTION_OP]) == resolved[:1]


def test_the_form_check_needs_no_torch_and_keeps_the_order():
    assert break_at_entries(("b::y", "a::x", "b::y")) == ("b::y", "a::x")
    assert is_op_name("mylib::attention.default") and not is_op_name("mylib.attention")


def test_the_marker_takes_break_at_names_and_refuses_others_at_collection():
    assert parse_cudagraph((), {"break_at": ATTENTION_OP}).break_at == (ATTENTION_OP,)
    assert parse_cudagraph((), {"break_at": [ATTENTION_OP]}).break_at == (ATTENTION_OP,)
    assert parse_cudagraph((), {}).break_at is None
    with pytest.raises(MarkerArgumentError, match=r"@pytest\.mark\.cudagraph: break_at=\['attention'\]"):
        parse_cudagraph((), {"break_at": "attention"})
    with pytest.raises(MarkerArgumentError, match="not a 'namespace::op' name"):
        parse_cudagraph((), {"break_at": [torch.ops.cudagraph_toy.attention]})  # the marker takes names


# ---------------------------------------------------------------------------
# a failed capture: would a break op have covered it?
# ---------------------------------------------------------------------------


def test_a_custom_op_that_fails_in_a_segment_is_offered_as_a_break_op():
    hint = break_at_hint("mylib::paged_attention", ["mylib::rope"])
    assert "registered op that cannot be captured" in hint
    assert "break_at=('mylib::rope', 'mylib::paged_attention',)" in hint
    assert "break_at=('mylib::paged_attention',)" in break_at_hint("mylib::paged_attention", [])


def test_an_aten_op_is_not_offered_as_a_break_op():
    hint = break_at_hint("aten::_local_scalar_dense", ["mylib::attention"])
    assert "torch's own" in hint and "no break_at op covers it" in hint
    assert "custom op" in hint
    assert "no break op would cover it" in break_at_hint(None, ["mylib::attention"])


# ---------------------------------------------------------------------------
# eager steps: run again on the capture-time tensors, the output where the next graph reads
# ---------------------------------------------------------------------------


def test_an_eager_step_writes_a_new_output_into_the_captured_one():
    q, k, v = (torch.randn(4, 8) for _ in range(3))
    op = torch.ops.cudagraph_toy.attention_functional.default
    captured_out = op(q, k, v, 2)
    step = EagerStep(op, (q, k, v, 2), {}, captured_out)
    assert step.name == FUNCTIONAL_ATTENTION_OP
    address = captured_out.data_ptr()
    q.copy_(torch.randn(4, 8))  # the graph before the op wrote new values into its input
    before = attention_calls(FUNCTIONAL_ATTENTION_OP.split("::")[1])
    step.run()
    assert attention_calls(FUNCTIONAL_ATTENTION_OP.split("::")[1]) == before + 1
    assert captured_out.data_ptr() == address  # the next graph reads this address
    torch.testing.assert_close(captured_out, op(q, k, v, 2), rtol=0, atol=0)


def test_an_eager_step_of_a_mutating_op_writes_in_place_and_copies_nothing():
    q, k, v = (torch.randn(4, 8) for _ in range(3))
    out = torch.zeros(4, 8)
    op = torch.ops.cudagraph_toy.attention.default
    step = EagerStep(op, (q, k, v, out, 2), {}, op(q, k, v, out, 2))
    assert step.results == []
    out.zero_()
    step.run()
    assert bool(out.abs().sum() > 0)


def test_a_chain_counts_its_eager_calls_and_a_reset_lets_everything_go():
    q = torch.randn(2, 4)
    op = torch.ops.cudagraph_toy.attention_functional.default
    chain = GraphChain()
    chain.steps += [EagerStep(op, (q, q, q, 1), {}, op(q, q, q, 1)) for _ in range(3)]
    assert chain.eager_calls == {FUNCTIONAL_ATTENTION_OP: 3} and chain.segments == 0
    chain.replay()
    assert "eager calls {'cudagraph_toy::attention_functional': 3}" in repr(chain)
    held = chain.steps[0]
    chain.reset()
    assert chain.steps == [] and held.args == () and held.results == []


# ---------------------------------------------------------------------------
# the record, its schema, the summary cell
# ---------------------------------------------------------------------------


def _graph_set_with_chains(chains: dict[int, GraphChain]) -> SimpleNamespace:
    """What ``chain_result`` reads of a GraphSet: its break ops, sizes, each size's chain, the meter's rows."""
    rows = {size: SizeMemory(size, order, (8 - order) * 2**20) for order, size in enumerate(chains)}
    return SimpleNamespace(
        break_at=resolve_break_at(FUNCTIONAL_ATTENTION_OP),
        capture_order=tuple(chains),
        graphs={size: SimpleNamespace(graph=chain) for size, chain in chains.items()},
        meter=SimpleNamespace(rows=rows),
    )


def _result(breakable: dict | None) -> GraphSetResult:
    return GraphSetResult(
        sizes=(1, 2),
        captured=2,
        pool_bytes=8 * 2**20,
        largest_graph_bytes=8 * 2**20,
        max_abs_err=0.0,
        capture_s=0.5,
        order="largest_first",
        pool="shared",
        keep_outputs=False,
        cublas_workspace_bytes=0,
        breakable=breakable,
    )


def test_the_record_of_a_breakable_set_keeps_its_chains_and_validates():
    q = torch.randn(2, 4)
    op = torch.ops.cudagraph_toy.attention_functional.default
    chains = {}
    for size in (2, 1):
        chains[size] = GraphChain()
        chains[size].steps += [EagerStep(op, (q, q, q, 1), {}, op(q, q, q, 1)) for _ in range(2)]
    breakable = chain_result(_graph_set_with_chains(chains))
    assert breakable["break_at"] == [FUNCTIONAL_ATTENTION_OP]
    assert [c["size"] for c in breakable["chains"]] == [2, 1]
    assert breakable["chains"][0] == {
        "size": 2,
        "segments": 0,
        "eager_calls": {FUNCTIONAL_ATTENTION_OP: 2},
        "pool_bytes": 8 * 2**20,
    }
    written = _result(breakable).to_json()
    report = json.loads(
        json.dumps(build_report({"torch": "2.13.0"}, {"t::b": {"outcome": "passed", "graphs": written}}))
    )
    typed = checked_report(report, "report.json").tests["t::b"].graphs
    assert typed.break_at == [FUNCTIONAL_ATTENTION_OP] and typed.segments == 0
    assert typed.chains[1].size == 1 and typed.chains[1].eager_calls == {FUNCTIONAL_ATTENTION_OP: 2}


def test_a_full_set_has_no_breakable_fields():
    assert chain_result(SimpleNamespace(break_at=())) is None
    assert "segments" not in _result(None).to_json()


@pytest.mark.parametrize(
    "value",
    [
        {"segments": "five"},
        {"chains": [{"size": "1"}]},
        {"chains": [{"eager_calls": {"a::b": 1.5}}]},
        {"break_at": "a::b"},
    ],
)
def test_a_breakable_field_of_the_wrong_type_is_refused_naming_it(value):
    from pytest_cudagraph.errors import ReportError

    graphs = {"sizes": [1], "captured": 1, **value}
    report = json.loads(json.dumps(build_report({}, {"t::b": {"outcome": "passed", "graphs": graphs}})))
    with pytest.raises(ReportError, match=r"tests\['t::b'\]\.graphs\.(segments|chains|break_at)"):
        checked_report(report, "report.json")


def _cells(graphs: dict) -> dict[str, str]:
    return dict(zip(HEADER, summary_row("t.py::test", {"outcome": "passed", "graphs": graphs})))


def test_the_summary_cell_of_a_breakable_set_shows_graphs_and_segments():
    graphs = {
        "sizes": [1, 2, 4, 8, 16, 32, 64, 128],
        "captured": 8,
        "segments": 24,
        "pool_bytes": 1,
        "largest_graph_bytes": 1,
    }
    assert _cells(graphs)["graphs"] == "8 graphs (24 segments)"
    # a full set beside it counts one segment a size; full sets alone keep their cell
    both = {
        "sizes": [1, 2],
        "captured": 4,
        "sets": [{"sizes": [1, 2], "captured": 2, "segments": 6}, {"sizes": [1, 2], "captured": 2}],
    }
    assert segment_count(both) == 8 and breakable_graphs_cell(both) == "4 graphs (8 segments)"
    assert _cells({"sizes": [1, 2, 4, 8], "captured": 4})["graphs"] == "4 (1-8)"
    assert breakable_graphs_cell({"captured": 1, "segments": 1}) == "1 graph (1 segment)"
