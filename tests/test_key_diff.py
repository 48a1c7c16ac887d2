"""key_diff: two runs' cache lookups paired, their components diffed, and the texts compare and explain print."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from cache_key_samples import DECODE, DYNAMIC, WARM, key_report_pair, tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, cache_key_report_pair, fake_hash

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records import key_diff
from pytest_cudagraph.records.cache_components import full_components
from pytest_cudagraph.records.key_diff import diff_reports, diff_test, lookups_of, shared_components
from pytest_cudagraph.records.loaded import typed_report
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render import key_text
from pytest_cudagraph.render.key_text import component_change_text, run_wide_lines
from pytest_cudagraph.render.show import render_html
from pytest_cudagraph.tools.compare import compare_reports

T = "tests/test_k.py::test_k"


def entry(name: str, value: str | None) -> list[Any]:
    return [fake_hash(f"{name}={value}"), value]


def one_lookup(components: dict[str, list[Any]] | None, *, layer="fxgraph", outcome="miss", graph=1, pass_name=None):
    return {
        "layer": layer,
        "outcome": outcome,
        "key": "f" + fake_hash(json.dumps(components, sort_keys=True)) * 4 if components is not None else None,
        "pass": pass_name,
        "graph": graph,
        "components": components,
    }


def report_of(tests: dict[str, list[dict[str, Any]]], caches: dict[str, Any] | None = None) -> dict[str, Any]:
    """A report whose tests hold these lookups (build_report factors the shared components out)."""
    records = {}
    for nodeid, lookups in tests.items():
        records[nodeid] = {"outcome": "passed", "cache_keys": {"lookups": copy.deepcopy(lookups)}}
        if caches is not None:
            records[nodeid]["caches"] = copy.deepcopy(caches)
    return build_report(ENV_2_13, records, exitstatus=0)


# ----------------------------------------------------------------------------
# pairing
# ----------------------------------------------------------------------------


def test_lookups_pair_by_layer_pass_and_graph_whatever_their_order():
    parts = {"gm": entry("gm", "g")}
    base = report_of(
        {
            T: [
                one_lookup(parts, pass_name="cold"),
                one_lookup(parts, layer="aot_autograd", pass_name="cold"),
                one_lookup(parts, pass_name="warm", outcome="hit"),
            ]
        }
    )
    new = report_of(
        {
            T: [
                one_lookup(parts, pass_name="warm", outcome="miss"),
                one_lookup(parts, layer="aot_autograd", pass_name="cold"),
                one_lookup(parts, pass_name="cold"),
            ]
        }
    )
    diff = diff_reports(base, new).tests[T]
    assert [(p.base.label, p.new.label, p.paired_by) for p in diff.pairs] == [
        ("fxgraph graph 1 (cold)", "fxgraph graph 1 (cold)", "pass and graph"),
        ("aot_autograd graph 1 (cold)", "aot_autograd graph 1 (cold)", "pass and graph"),
        ("fxgraph graph 1 (warm)", "fxgraph graph 1 (warm)", "pass and graph"),
    ]
    assert [p.outcome_changed for p in diff.pairs] == [False, False, True]
    assert diff.behaviour_changed and not diff.only_base and not diff.only_new


def test_lookups_without_a_pass_and_graph_partner_pair_by_their_graph_code_and_the_rest_is_listed():
    a, b, c = ({"gm": entry("gm", code)} for code in ("graph a", "graph b", "graph c"))
    base = report_of({T: [one_lookup(a, graph=1), one_lookup(b, graph=2), one_lookup(c, graph=4)]})
    new = report_of(
        {T: [one_lookup(a, graph=1), one_lookup(b, graph=3), one_lookup({"gm": entry("gm", "d")}, graph=5)]}
    )
    diff = diff_reports(base, new).tests[T]
    assert [(p.base.graph, p.new.graph, p.paired_by) for p in diff.pairs] == [(1, 1, "pass and graph"), (2, 3, "gm")]
    assert [x.graph for x in diff.only_base] == [4] and [x.graph for x in diff.only_new] == [5]
    text = "\n".join(key_text.compare_lines(diff, "CMD", ("a.json", "b.json")))
    assert "    only in a.json: fxgraph graph 4 miss" in text and "    only in b.json: fxgraph graph 5 miss" in text
    explained = "\n".join(key_text.one_test_lines(diff, ("a.json", "b.json")))
    assert "fxgraph graph 2 / fxgraph graph 3, paired by its graph's code: miss" in explained


# ----------------------------------------------------------------------------
# the components that differ
# ----------------------------------------------------------------------------

NAMES = ["gm", "example_inputs[0]", "fx_kwargs[cudagraphs]", "torch_version", "inductor_config[max_autotune]"]
NAMES += [f"inductor_config[option_{i}]" for i in range(5)]
values = st.sampled_from(["False", "True", "0", "1", "", "x" * 80, None])


@st.composite
def lookup_and_changes(draw):
    """Base components, the changes drawn (name -> (before, after), None where absent), other tests' lookups."""
    base = {name: draw(values) for name in draw(st.sets(st.sampled_from(NAMES), min_size=1))}
    new = dict(base)
    changes = {}
    for name in NAMES:
        what = draw(st.sampled_from(["same", "same", "change", "remove", "add"]))
        if what == "change" and name in base:
            after = draw(values.filter(lambda v, before=base[name]: v != before))
            new[name], changes[name] = after, (base[name], after)
        elif what == "remove" and name in base:
            del new[name]
            changes[name] = (base[name], None)
        elif what == "add" and name not in base:
            new[name] = draw(values)
            changes[name] = (None, new[name])
    # other tests, the same in both runs: they decide what the runs' lookups share
    others = draw(st.lists(st.dictionaries(st.sampled_from(NAMES), values, min_size=1), max_size=2))
    return base, new, changes, others


@settings(deadline=None, max_examples=150)
@given(drawn=lookup_and_changes())
def test_any_set_of_component_changes_between_two_lookups_is_reported_exactly(drawn):
    base_values, new_values, changes, others = drawn

    def parts(values_: dict[str, str | None]) -> dict[str, list[Any]]:
        # one component never changes: a lookup with none at all reads as "torch recorded none"
        return {"cache_key_tag": entry("cache_key_tag", ""), **{n: entry(n, v) for n, v in values_.items()}}

    other_tests = {f"tests/test_o.py::test_{i}": [one_lookup(parts(o))] for i, o in enumerate(others)}
    base = report_of({T: [one_lookup(parts(base_values))], **other_tests})
    new = report_of({T: [one_lookup(parts(new_values))], **other_tests})
    diff = diff_reports(base, new)
    (pair,) = diff.tests[T].pairs
    # the differences every lookup shares apply to this one too: said once, counted here
    run_wide = [c.change for c in diff.run_wide if "fxgraph" in c.layers]
    assert pair.run_wide == len(run_wide)
    reported = [(c.name, c.base, c.new) for c in [*pair.changes, *run_wide]]
    expected = {
        name: (
            tuple(entry(name, before)) if name in base_values else None,
            tuple(entry(name, after)) if name in new_values else None,
        )
        for name, (before, after) in changes.items()
    }
    assert len(reported) == len(expected)
    assert {name: (before, after) for name, before, after in reported} == expected
    # the same, from the whole sets put together by report.full_components
    whole_base = full_components(base, base["tests"][T]["cache_keys"]["lookups"][0])
    whole_new = full_components(new, new["tests"][T]["cache_keys"]["lookups"][0])
    names = {*whole_base, *whole_new}
    assert {n for n in names if (whole_base.get(n) or [None])[0] != (whole_new.get(n) or [None])[0]} == set(changes)


def test_a_difference_every_lookup_shares_is_said_once_and_not_repeated_per_lookup():
    base, new = key_report_pair()
    diff = diff_reports(base, new)
    assert [(c.change.name, c.layers) for c in diff.run_wide] == [
        ("torch_version", ("fxgraph", "aot_autograd")),
        ("system_info[hash]", ("fxgraph",)),
        ("system_info[version]", ("fxgraph",)),
        ("autograd_config", ("aot_autograd",)),
        # names 2.14.1 added: absent from every lookup of the 2.13 run
        ("inductor_config[compile_on_one_rank]", ("fxgraph",)),
        ("nested_inductor_config_patches", ("fxgraph",)),
        ("provenance_tracking_to_timeline", ("fxgraph",)),
    ]
    decode = diff.tests[DECODE]
    assert [(p.label, p.changes, p.run_wide) for p in decode.pairs] == [
        ("fxgraph graph 1", (), 7 - 1),
        ("aot_autograd graph 1", (), 2),
    ]
    dynamic = diff.tests[DYNAMIC]
    assert [c.name for c in dynamic.pairs[0].changes] == ["example_inputs[0]"]
    # a config entry one warm pass changed is no run-wide difference: it shows on that lookup only
    warm = {p.label: p for p in diff.tests[WARM].pairs}
    assert [component_change_text(c) for c in warm["fxgraph graph 1 (warm)"].changes] == [
        "inductor_config[max_autotune]: False -> True"
    ]
    assert warm["fxgraph graph 1 (cold)"].changes == ()
    assert warm["aot_autograd graph 1 (warm)"].changes is None  # 2.14.1 recorded none


def test_a_name_the_other_runs_lookups_hold_each_their_own_value_of_is_no_run_wide_difference():
    one = {"gm": entry("gm", "a"), "inductor_config[x]": entry("inductor_config[x]", "1")}
    two = {"gm": entry("gm", "b"), "inductor_config[x]": entry("inductor_config[x]", "1")}
    base = report_of({T: [one_lookup(one)], "t::other": [one_lookup(two)]})
    two_changed = {**two, "inductor_config[x]": entry("inductor_config[x]", "2")}
    new = report_of({T: [one_lookup(one)], "t::other": [one_lookup(two_changed)]})
    diff = diff_reports(base, new)
    assert diff.run_wide == ()
    assert diff.tests[T].pairs[0].changes == ()
    assert [component_change_text(c) for c in diff.tests["t::other"].pairs[0].changes] == ["inductor_config[x]: 1 -> 2"]


def test_lookups_read_back_the_components_report_full_components_puts_together():
    for report in (*key_report_pair(), *cache_key_report_pair()):
        shared = shared_components(report)
        for record in report["tests"].values():
            raw = (record.get("cache_keys") or {}).get("lookups") or []
            for lookup, read in zip(raw, lookups_of(record, shared), strict=True):
                whole = full_components(report, lookup)
                assert (read.components is None) == (whole is None)
                if whole is not None:
                    assert {n: list(v) for n, v in read.components.items()} == whole


def test_a_test_recorded_by_a_torch_without_components_or_bypassed_says_so():
    base, new = cache_key_report_pair()
    decode = diff_reports(base, new).tests[DECODE]
    aot = decode.pairs[1]
    assert aot.changes is None and aot.new.outcome == "bypass"
    lines = key_text.compare_lines(decode, "CMD", ("base.json", "new.json"))
    assert lines == [
        "  cache keys:",
        "    fxgraph graph 1: hit -> miss; inductor_config[max_autotune]: False -> True; "
        "torch_version: 2.13.0+cu128 -> 2.14.1+cu130",
        "    aot_autograd graph 1: hit -> bypass; bypassed: Unsupported call_function target flex_attention",
    ]


def test_a_guard_miss_is_said_to_be_one_the_components_cannot_explain():
    parts = {"gm": entry("gm", "g")}
    base = report_of({T: [one_lookup(parts, outcome="hit")]}, caches={"fxgraph": {"hit": 1, "miss": 0}})
    miss = one_lookup(parts, outcome="miss")
    miss["detail"] = "guard_miss"
    new = report_of({T: [miss]}, caches={"fxgraph": {"hit": 0, "miss": 1}})
    diff = diff_reports(base, new).tests[T]
    assert diff.counters_changed
    assert key_text.compare_lines(diff, "CMD") == [
        "  cache keys:",
        "    fxgraph graph 1: hit -> miss (guard_miss); same key, its shape guards failed",
    ]


# ----------------------------------------------------------------------------
# values for people
# ----------------------------------------------------------------------------


def test_long_values_are_shown_around_where_they_differ():
    change = key_diff.ComponentChange("example_inputs[0]", ["h1", tensor((4, 64))], ["h2", tensor((8, 64))])
    assert component_change_text(change) == (
        "example_inputs[0]: TensorMetadata(shape=torch.Size([4, 64]), ...) -> TensorMetadata(shape=torch.Size([8, 64]), ...)"
    )
    grad = key_diff.ComponentChange("example_inputs[1]", ["h1", tensor((4, 64))], ["h2", tensor((4, 64), True)])
    assert component_change_text(grad) == (
        "example_inputs[1]: TensorMetadata(requires_grad=False, ...) -> TensorMetadata(requires_grad=True, ...)"
    )
    # the report clips a value to 160 characters: then the item around the difference
    clipped = key_diff.ComponentChange(
        "example_inputs[0]", ["h1", tensor((4, 64))[:159] + "\u2026"], ["h2", tensor((8, 64))[:159] + "\u2026"]
    )
    assert (
        component_change_text(clipped)
        == "example_inputs[0]: ...shape=torch.Size([4, 64])... -> ...shape=torch.Size([8, 64])..."
    )
    code = key_diff.ComponentChange(
        "gm",
        ["h1", "def forward(self, x):\n    y = x + 1\n    return (y,)"],
        ["h2", "def forward(self, x):\n    y = x * 2\n    return (y,)"],
    )
    assert component_change_text(code) == "gm: line 2: y = x + 1 -> line 2: y = x * 2"
    assert key_text._change_lines(code, "  ") == [
        "  gm: its code differs (5 diff lines):",
        "    @@ -1,3 +1,3 @@",
        "     def forward(self, x):",
        "    -    y = x + 1",
        "    +    y = x * 2",
        "         return (y,)",
    ]


def test_absent_unrecorded_and_opaque_values_show_what_is_known():
    assert component_change_text(key_diff.ComponentChange("x", None, ["abc", "False"])) == "x: (absent) -> False"
    assert (
        component_change_text(key_diff.ComponentChange("gm", ["abc", None], ["def", None]))
        == "gm: (hash abc) -> (hash def)"
    )
    pickled = key_diff.ComponentChange("autograd_config", ["abc", "\x80\x04\ufffd"], ["def", "<bytes>"])
    assert component_change_text(pickled) == "autograd_config: (opaque, hash abc) -> (opaque, hash def)"
    assert (
        component_change_text(key_diff.ComponentChange("cache_key_tag", ["a", ""], ["b", "v2"]))
        == "cache_key_tag: '' -> v2"
    )
    # a value the report clipped where the two differ: the same text, other hashes
    clipped = "TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 64]), stride=(64, 1), dev\u2026"
    assert component_change_text(
        key_diff.ComponentChange("example_inputs[0]", ["aaaa", clipped], ["bbbb", clipped])
    ) == (
        "example_inputs[0]: prints the same in both runs as far as the report keeps it (TensorMetadata(dtype=torch."
        "float32, shape=tor...), but torch's hash of it differs (aaaa -> bbbb)"
    )


def test_hashes_decide_not_readable_values():
    same_hash = {"fx_kwargs[get_decomp_fn]": ["abc", "<function select_decomp_table at 0x7f01>"]}
    other_address = {"fx_kwargs[get_decomp_fn]": ["abc", "<function select_decomp_table at 0x7f99>"]}
    base = report_of({T: [one_lookup(same_hash)], "t::b": [one_lookup({"gm": entry("gm", "b")})]})
    new = report_of({T: [one_lookup(other_address)], "t::b": [one_lookup({"gm": entry("gm", "b")})]})
    assert diff_reports(base, new).tests[T].pairs[0].changes == ()


# ----------------------------------------------------------------------------
# compare's lines
# ----------------------------------------------------------------------------


def test_compare_lines_stop_at_five_components_and_point_at_explain():
    many = {f"inductor_config[o{i}]": entry(f"inductor_config[o{i}]", "0") for i in range(8)}
    flipped = {name: entry(name, "1") for name in many}
    keep = {"t::b": [one_lookup({"gm": entry("gm", "b")})]}
    base = report_of({T: [one_lookup(many, outcome="hit")], **keep})
    new = report_of({T: [one_lookup(flipped, outcome="miss")], **keep})
    lines = key_text.compare_lines(diff_reports(base, new).tests[T], "pytest-cudagraph explain a b 't::x[1]'")
    assert lines[:2] == ["  cache keys:", "    fxgraph graph 1: hit -> miss:"]
    assert lines[2:7] == [f"      inductor_config[o{i}]: 0 -> 1" for i in range(5)]
    assert lines[7:] == ["    ... and 3 more differing components: pytest-cudagraph explain a b 't::x[1]'"]


def test_run_wide_lines_name_the_components_once_with_both_values():
    base, new = key_report_pair()
    lines = run_wide_lines(diff_reports(base, new).run_wide, "pytest-cudagraph explain a.json b.json")
    assert lines == [
        "cache keys: every fxgraph and aot_autograd lookup's key differs between the runs in:",
        "  torch_version: 2.13.0+cu128 -> 2.14.1+cu128",
        "  system_info[hash]: 2f1e0c6b -> 7ab39d20 (fxgraph)",
        "  system_info[version]: {'triton': '3.5.0', 'cuda': '12.8'} -> {'triton': '3.6.0', 'cuda': '12.8'} (fxgraph)",
        f"  autograd_config: (opaque, hash {shared_components(base)['aot_autograd']['autograd_config'][0]}) -> "
        f"(opaque, hash {shared_components(new)['aot_autograd']['autograd_config'][0]}) (aot_autograd)",
        "  inductor_config[compile_on_one_rank]: (absent) -> False (fxgraph)",
        "  ... and 2 more components: pytest-cudagraph explain a.json b.json",
    ]


def test_explain_command_is_quoted_for_a_shell():
    assert key_text.explain_command("a b.json", "n.json", "t.py::test[1-x]") == (
        "pytest-cudagraph explain 'a b.json' n.json 't.py::test[1-x]'"
    )


# ----------------------------------------------------------------------------
# malformed sections read as absent
# ----------------------------------------------------------------------------

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=10,
)


@settings(deadline=None, max_examples=150)
@given(
    where=st.sampled_from(["section", "lookups", "lookup", "components", "component", "shared", "field"]),
    value=junk,
)
def test_any_malformed_cache_keys_section_reads_or_is_one_sentence_naming_it(where, value):
    base, new = key_report_pair()
    new = copy.deepcopy(new)
    record = new["tests"][WARM]
    lookup = record["cache_keys"]["lookups"][2]
    if where == "section":
        record["cache_keys"] = value
    elif where == "lookups":
        record["cache_keys"]["lookups"] = value
    elif where == "lookup":
        record["cache_keys"]["lookups"][0] = value
    elif where == "components":
        lookup["components"] = value
    elif where == "component":
        lookup["components"] = {"gm": value}
    elif where == "shared":
        new["cache_components"] = value if not isinstance(value, dict) else {"fxgraph": value}
    else:
        lookup[str(value)[:6] or "graph"] = value
    try:
        typed_report(new)
    except ReportError as error:  # the typed readers refuse it in one sentence, naming the field
        message = str(error)
        assert message.startswith("report ") and ("cache_keys" in message or "cache_components" in message), message
        assert "\n" not in message
        for call in (
            lambda: diff_reports(base, new),
            lambda: compare_reports(base, new),
            lambda: key_text.show_lines(new),
        ):
            with pytest.raises(ReportError):
                call()
        return
    for one, other in ((base, new), (new, base)):
        diff = diff_reports(one, other)
        key_text.explain_lines(diff, ("a", "b"))
        for test in diff.tests.values():
            key_text.compare_lines(test, "CMD")
            test.to_json()
        key_text.one_run_lines(one, "a")
        key_text.show_lines(one)
        compare_reports(one, other).format_text()
        render_html(one)


def test_a_test_without_cache_keys_in_either_run_is_not_diffed():
    base, new = key_report_pair()
    assert "tests/test_model.py::test_prefill_no_recompile" not in diff_reports(base, new).tests
    assert diff_test(T, {"outcome": "passed"}, {"outcome": "passed"}).pairs == ()


@pytest.mark.parametrize("layer", ["fxgraph", "aot_autograd"])
def test_a_layer_one_run_never_looked_up_differs_in_nothing_run_wide(layer):
    base, new = key_report_pair()
    new = copy.deepcopy(new)
    for record in new["tests"].values():
        section = record.get("cache_keys")
        if section:
            section["lookups"] = [x for x in section["lookups"] if x["layer"] != layer]
    new.get("cache_components", {}).pop(layer, None)
    assert all(layer not in c.layers for c in diff_reports(base, new).run_wide)


@pytest.mark.parametrize("shown", ["clipped", "whole"])
def test_a_component_that_prints_the_same_on_both_sides_is_said_so_not_shown_as_a_change(tmp_path, shown):
    """Same build, ``--import-mode=importlib``: torch pickles ``torch.contiguous_format`` through another module,
    so ``example_inputs[0]``'s hash differs while its value prints the same."""
    import io

    from cache_key_samples import WARM, key_report

    from pytest_cudagraph.records.report import write_report
    from pytest_cudagraph.tools.cli import main

    base, new = key_report("2.13.0+cu128"), key_report("2.13.0+cu128")
    value = "TensorMetadata(dtype=torch.float32, shape=torch.Size([16, 16]))"
    for report, digest in ((base, "uzyh23rgth4m"), (new, "k2p7w3qx5dna")):
        for lookup in report["tests"][WARM]["cache_keys"]["lookups"]:
            if lookup["layer"] == "fxgraph" and lookup["pass"] == "warm":
                if shown == "whole":
                    lookup["components"]["example_inputs[0]"] = [digest, value]
                else:
                    lookup["components"]["example_inputs[0]"][0] = digest
                lookup["key"] = "f" + digest
                if report is new:  # a warm miss: the key moved though nothing it prints did
                    lookup["outcome"], lookup["detail"] = "miss", "full_miss"
    paths = [str(write_report(tmp_path / name, report)) for name, report in (("a.json", base), ("b.json", new))]
    out = io.StringIO()
    assert main(["explain", *paths, WARM], stdout=out, stderr=io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    kept = " as far as the report keeps it" if shown == "clipped" else ""
    said = next(line for line in lines if "example_inputs[0]" in line)
    assert said.strip().startswith(f"example_inputs[0]: prints the same in both runs{kept} (TensorMetadata(")
    assert said.endswith("), but torch's hash of it differs (uzyh23rgth4m -> k2p7w3qx5dna)"), said
    assert " -> TensorMetadata(" not in said
    hint = lines[lines.index(said) + 1].strip()
    assert hint.startswith("torch hashed something its printed value does not show: under --import-mode=importlib")
    # compare's few lines for the test whose warm lookup now misses say the same
    out = io.StringIO()
    main(["compare", *paths], stdout=out, stderr=io.StringIO())
    assert "example_inputs[0]: prints the same in both runs" in out.getvalue()


def test_explain_clips_a_long_component_around_its_first_difference(tmp_path):
    """Two values that differ past the first 400 characters: the base and new lines show the difference."""
    import io

    from cache_key_samples import WARM, key_report

    from pytest_cudagraph.records.report import write_report
    from pytest_cudagraph.tools.cli import main

    base, new = key_report("2.13.0+cu128"), key_report("2.13.0+cu128")
    # the difference in the middle of a long value, where cutting both at the same place loses it
    head = "TensorMetadata(dtype=torch.float32, " + ", ".join(f"stride_{i}=1" for i in range(60))
    tail = ", ".join(f"flag_{i}=False" for i in range(60))
    for report, digest, size in ((base, "uzyh23rgth4m", 16), (new, "k2p7w3qx5dna", 32)):
        for lookup in report["tests"][WARM]["cache_keys"]["lookups"]:
            if lookup["layer"] == "fxgraph" and lookup["pass"] == "warm":
                value = f"{head}, shape=torch.Size([{size}, 16]), {tail})"
                lookup["components"]["example_inputs[0]"] = [digest, value]
                lookup["key"] = "f" + digest
                if report is new:
                    lookup["outcome"], lookup["detail"] = "miss", "full_miss"
    assert len(head) > 600 and len(tail) > 600
    paths = [str(write_report(tmp_path / name, report)) for name, report in (("a.json", base), ("b.json", new))]
    out = io.StringIO()
    assert main(["explain", *paths, WARM], stdout=out, stderr=io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    shown_base = next(line for line in lines if line.strip().startswith("base: TensorMetadata") or "base: ..." in line)
    shown_new = next(line for line in lines if line.strip().startswith("new:") and "Size" in line)
    assert shown_base.replace("base: ", "") != shown_new.replace("new:  ", ""), out.getvalue()
    assert "Size([16, 16])" in shown_base and "Size([32, 16])" in shown_new
