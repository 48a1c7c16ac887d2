"""Cache keys without compiling: parsing torch's debug lines, matching graphs, diffing, the index, the gateway.

The lookups here are built by hand in torch's own formats (a 51-character base32
hash per component, ``[hash] name: value`` lines, the structured-trace record
torch writes for each lookup); the compiles are in test_plugin_cache_keys.py.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_cudagraph import _compat
from pytest_cudagraph.caches.keys import (
    CacheLookup,
    KeyIndex,
    LookupLog,
    capture_lookups,
    clip,
    component_differences,
    difference_lines,
    explain_across_runs,
    explain_miss,
    explain_misses,
    index_directory_name,
    index_file_name,
    lookups_from_json,
    lookups_to_json,
    parse_component_line,
    parse_components,
    pass_scope,
    same_graph,
    split_debug_text,
)

BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
hashes = st.text(alphabet=BASE32, min_size=51, max_size=51)
# a component name as torch writes one: one line, no ": " (config names, "example_inputs[3]", ...)
names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=1, max_size=40
).filter(lambda name: ": " not in name and not name.endswith(":") and name.strip() == name and name)
# any value, multi-line ones included (the graph code is)
values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


def h(seed: str) -> str:
    """A component hash in torch's format (51 base32 characters), made from ``seed``."""
    import base64
    import hashlib

    return base64.b32encode(hashlib.sha256(seed.encode()).digest()).decode().lower()[:51]


def lookup(layer: str = "fxgraph", outcome: str = "miss", graph: int = 1, pass_name: str | None = "cold", **values):
    """A lookup whose components are ``values`` (name -> readable value), hashed from name and value."""
    components = {name.replace("__", "."): (h(f"{name}={value}"), value) for name, value in values.items()}
    key = ("f" if layer == "fxgraph" else "a") + h(repr(sorted(components.items())))
    return CacheLookup(layer, outcome, key, components, pass_name=pass_name, graph=graph)


# ----------------------------------------------------------------------------
# parsing
# ----------------------------------------------------------------------------


@given(digest=hashes, name=names, value=values)
def test_a_debug_line_parses_into_its_name_hash_and_whole_value(digest, name, value):
    assert parse_component_line(f"[{digest}] {name}: {value}") == (name, digest, value)


@given(parts=st.lists(st.tuples(hashes, names, values), min_size=1, max_size=6))
def test_debug_text_splits_only_where_the_next_component_starts(parts):
    lines = [f"[{digest}] {name}: {value}" for digest, name, value in parts]
    # a value holding a newline followed by something that looks like the next component would be ambiguous
    for _, _, value in parts:
        assume(not any(piece[:1] == "[" and piece[52:54] == "] " for piece in value.split("\n")[1:]))
    assert split_debug_text("\n".join(lines)) == lines
    parsed = parse_components(lines)
    last = {name: (digest, value) for digest, name, value in parts}
    assert {name: digest for name, (digest, _) in parsed.items()} == {n: d for n, (d, _) in last.items()}


@given(digest=hashes, name=names, value=values)
def test_a_kept_value_is_one_printable_line_of_at_most_1024_characters(digest, name, value):
    (kept_hash, kept) = parse_components([f"[{digest}] {name}: {value}"])[name]
    assert kept_hash == digest
    if kept is not None:
        assert kept == value and "\n" not in kept and len(kept) <= 1024 and name != "gm"


def test_the_graph_code_and_huge_values_keep_only_their_hash():
    parsed = parse_components(
        [
            f"[{h('gm')}] gm: GraphModule()\n\ndef forward(self, x):\n    return x",
            f"[{h('cfg')}] aot_config: ({'x' * 2000})",
            f"[{h('v')}] torch_version: \x10\x07garbage\ufffd",
            f"[{h('ok')}] inductor_config[max_autotune]: False",
            "not a component line",
        ]
    )
    assert parsed == {
        "gm": (h("gm"), None),
        "aot_config": (h("cfg"), None),
        "torch_version": (h("v"), None),
        "inductor_config[max_autotune]": (h("ok"), "False"),
    }


def test_the_report_form_cuts_hashes_to_12_and_values_to_160_characters():
    long = "TensorMetadata(" + "x" * 400 + ")"
    item = CacheLookup("fxgraph", "hit", "fkey", {"example_inputs[0]": (h("a"), long), "gm": (h("gm"), None)})
    out = item.to_json()
    assert out["components"] == {"example_inputs[0]": [h("a")[:12], clip(long)], "gm": [h("gm")[:12], None]}
    assert len(out["components"]["example_inputs[0]"][1]) == 160
    assert out["pass"] is None and out["graph"] == 1 and "detail" not in out
    # the full form reads back as it was
    assert lookups_from_json(lookups_to_json([item], full=True)) == (item,)


# ----------------------------------------------------------------------------
# matching and diffing
# ----------------------------------------------------------------------------


def test_the_same_graph_is_found_by_its_code_first_then_by_compile_order():
    cold = [
        lookup(graph=1, gm="forward", x="1"),
        lookup(graph=2, gm="backward", x="1"),
        lookup("aot_autograd", graph=1, gm="forward", x="1"),
    ]
    # the warm pass compiled the backward first: its code finds it anyway
    assert same_graph(cold, lookup(graph=1, pass_name="warm", gm="backward", x="2")) is cold[1]
    # the code changed: compile order decides
    assert same_graph(cold, lookup(graph=2, pass_name="warm", gm="other", x="2")) is cold[1]
    # only the layer's own lookups count
    assert same_graph(cold, lookup("aot_autograd", graph=1, gm="other")) is cold[2]
    assert same_graph(cold, lookup(graph=3, gm="third")) is None
    # one code compiled twice (two shapes): the graph number tells them apart
    twice = [lookup(graph=1, gm="f", x="1"), lookup(graph=2, gm="f", x="2")]
    assert same_graph(twice, lookup(graph=2, gm="f", x="3")) is twice[1]


def test_differences_are_by_hash_and_an_absent_name_is_one():
    a = lookup(gm="f", flag="False", only_cold="1", same="x")
    b = lookup(gm="f", flag="True", only_warm="2", same="x")
    assert component_differences(a, b) == [
        ("flag", "False", "True"),
        ("only_cold", "1", "(absent)"),
        ("only_warm", "(absent)", "2"),
    ]
    # equal readable values with other hashes (clipped, "<bytes>") get their hashes shown
    c = CacheLookup("fxgraph", "miss", "f1", {"torch_version": (h("1"), "<bytes>"), "gm": (h("g1"), None)})
    d = CacheLookup("fxgraph", "miss", "f2", {"torch_version": (h("2"), "<bytes>"), "gm": (h("g2"), None)})
    assert component_differences(c, d) == [
        ("torch_version", f"<bytes> [{h('1')[:12]}]", f"<bytes> [{h('2')[:12]}]"),
        ("gm", f"[{h('g1')[:12]}]", f"[{h('g2')[:12]}]"),
    ]
    assert component_differences(a, CacheLookup("fxgraph", "hit", "f", None)) == []


def test_an_autograd_config_difference_names_functorch_entries_when_snapshots_tell():
    def aot(blob: str, config: dict | None) -> CacheLookup:
        return CacheLookup(
            "aot_autograd", "miss", "a" + blob, {"autograd_config": (h(blob), None)}, functorch_config=config
        )

    before = aot("1", {"donated_buffer": "True", "cse": "True"})
    after = aot("2", {"donated_buffer": "False", "cse": "True"})
    assert component_differences(before, after) == [("autograd_config[donated_buffer]", "True", "False")]
    assert component_differences(aot("1", None), aot("2", None)) == [
        ("autograd_config", "(functorch's config)", "changed")
    ]


def test_a_long_value_is_cut_to_the_fields_that_differ():
    meta = "TensorMetadata(dtype=torch.float32, shape=torch.Size([4, 8]), stride=(8, 1), device=device(type='cpu'))"
    a = lookup(**{"example_inputs[0]": meta})
    b = lookup(**{"example_inputs[0]": meta.replace("stride=(8, 1)", "stride=(1, 4)")})
    assert difference_lines(a, b) == [
        "example_inputs[0]: TensorMetadata(stride=(8, 1), ...) -> TensorMetadata(stride=(1, 4), ...)"
    ]


def test_a_warm_miss_is_explained_by_components_or_by_what_no_component_can_say():
    cold = [lookup(graph=1, gm="f", flag="False"), lookup(graph=2, gm="g", flag="False")]
    changed = lookup(graph=2, pass_name="warm", gm="g", flag="True")
    [explanation] = explain_misses(cold, [lookup(graph=1, outcome="hit", gm="f", flag="False"), changed])
    assert explanation.text() == "fxgraph miss for graph 2 of the warm pass: flag: False -> True"
    assert explanation.compared_with == "the cold pass" and explanation.matched is cold[1]

    same = CacheLookup("fxgraph", "miss", cold[0].key, cold[0].components, pass_name="warm", graph=1)
    assert explain_miss(same, cold, "the cold pass").explained == (
        "same key as the cold pass's graph 1, yet it missed: the entry was evicted or deleted, or never written",
    )
    guarded = CacheLookup("fxgraph", "miss", cold[0].key, cold[0].components, detail="guard_miss")
    assert "shape guards failed" in explain_miss(guarded, cold, "the cold pass").explained[0]
    bypassed = [CacheLookup("fxgraph", "bypass", None, None, bypass_reason="Can't pickle", graph=2)]
    assert explain_miss(changed, bypassed, "the cold pass").explained == (
        "the cold pass bypassed the cache for the cold pass's graph 2: Can't pickle, so nothing was stored",
    )
    bare = CacheLookup("fxgraph", "miss", "fother", None, graph=1, note="torch 2.6 gives none")
    assert explain_miss(bare, cold, "the cold pass").explained == (
        "the key differs from the cold pass's graph 1's, and torch gave no components to compare (torch 2.6 gives none)",
    )
    assert explain_miss(lookup(graph=5, gm="new"), cold, "the cold pass").explained == (
        "the cold pass looked up no graph to match it (by graph code or compile order)",
    )
    many = lookup(graph=1, gm="f", **{f"c{i}": str(i) for i in range(12)})
    assert explain_miss(many, [lookup(graph=1, gm="f")], "the cold pass").text().endswith("; and 4 more")


# ----------------------------------------------------------------------------
# logs and passes
# ----------------------------------------------------------------------------


def test_a_log_numbers_graphs_per_pass_and_layer_and_keeps_explanations():
    log = LookupLog()
    for item in (
        lookup(pass_name=None),
        lookup("aot_autograd", pass_name="cold"),
        lookup(pass_name="cold"),
        lookup(pass_name="cold"),
        lookup(pass_name="warm", flag="x"),
    ):
        log.add(item)
    assert [(x.pass_name, x.layer, x.graph) for x in log.lookups] == [
        (None, "fxgraph", 1),
        ("cold", "aot_autograd", 1),
        ("cold", "fxgraph", 1),
        ("cold", "fxgraph", 2),
        ("warm", "fxgraph", 1),
    ]
    for explanation in explain_misses(log.of_pass("cold"), log.of_pass("warm")):
        log.annotate(explanation)
    log.add_note("a note")
    out = log.to_json()
    assert out["note"] == "a note"
    assert out["lookups"][-1]["explained"] == ["flag: (absent) -> x"]
    assert out["lookups"][-1]["compared_with"] == "the cold pass"
    assert "explained" not in out["lookups"][0]


def _trace_record(name: str, payload: dict) -> None:
    """What torch's ``trace_structured("artifact", ...)`` logs for a cache lookup (2.6-2.14)."""
    logging.getLogger("torch.__trace").debug(
        "", extra={"metadata": {"artifact": {"name": name, "encoding": "json"}}, "payload": json.dumps(payload)}
    )


def _lines(**values: str) -> list[str]:
    return [f"[{h(name + value)}] {name}: {value}" for name, value in values.items()]


def test_the_gateway_hands_over_each_lookup_record_and_puts_the_loggers_back():
    from pytest_cudagraph.plugin.torch_trace import detach_pytest_handlers_from_torch_trace

    trace = logging.getLogger("torch.__trace")
    aot_logger = logging.getLogger("torch._functorch._aot_autograd.autograd_cache")
    handlers, level, filters = list(trace.handlers), aot_logger.level, list(aot_logger.filters)
    with capture_lookups() as outer:
        assert aot_logger.level == logging.DEBUG
        # the plugin takes pytest's handlers off this logger at every phase: ours stays
        detach_pytest_handlers_from_torch_trace()
        # torch's LazyTraceHandler takes itself off at its first record, and the logger then skips the next
        # handler for that one record (a list changed while logging walks it): a compile starts with others
        _trace_record("dynamo_start", {})
        with pass_scope("cold") as inner:
            _trace_record("fx_graph_cache_miss", {"key": "fk1", "cache_state": "miss", "components": _lines(a="1")})
            _trace_record("aotautograd_cache_hash", {"key": "ak", "cache_state": "hit", "components": _lines(b="2")})
            _trace_record("aotautograd_cache_pickle_failure", {"error": "x", "field": "y"})
            _trace_record("fx_graph_cache_bypass", {"cache_state": "bypass", "cache_bypass_reason": "Can't pickle"})
            _trace_record("dynamo_output_graph", {"cache_state": "miss"})
        # torch sets its loggers again (set_logs): the next trace record lowers it again
        aot_logger.setLevel(logging.INFO)
        _trace_record("fx_graph_cache_hit", {"key": "fk1", "cache_state": "hit", "components": []})
        assert aot_logger.level == logging.DEBUG
    # torch's own LazyTraceHandler may have taken itself off at the first record; nothing of ours is left
    assert [x for x in trace.handlers if x not in handlers] == [] and list(aot_logger.filters) == filters
    assert aot_logger.level == logging.INFO  # the level torch set last is the one put back
    aot_logger.setLevel(level)
    assert [(x.layer, x.outcome, x.key, x.pass_name, x.graph) for x in inner.lookups] == [
        ("fxgraph", "miss", "fk1", "cold", 1),
        ("aot_autograd", "hit", "ak", "cold", 1),
        ("fxgraph", "bypass", None, "cold", 2),
    ]
    assert inner.lookups[0].components == {"a": (h("a1"), "1")}
    assert inner.lookups[2].bypass_reason == "Can't pickle" and inner.lookups[2].components is None
    assert inner.lookups[1].functorch_config == _compat.functorch_config_snapshot()
    hit = outer.lookups[-1]
    assert (hit.pass_name, hit.graph, hit.components) == (None, 1, None)
    assert hit.note  # torch gave no components: the record says so
    assert len(outer.lookups) == 4


def test_gateway_captures_nest_and_each_gets_every_record():
    aot_logger = logging.getLogger("torch._functorch._aot_autograd.autograd_cache")
    level = aot_logger.level
    outer, inner = [], []
    _trace_record("dynamo_start", {})
    with _compat.capturing_cache_lookups(outer.append):
        with _compat.capturing_cache_lookups(inner.append):
            _trace_record("aotautograd_cache_miss", {"key": "a1", "cache_state": "miss", "components": _lines(x="1")})
        assert aot_logger.level == logging.DEBUG, "the outer capture still needs it"
        _trace_record("aotautograd_cache_bypass", {"cache_state": "bypass", "cache_bypass_reason": ""})
    assert aot_logger.level == level and not aot_logger.filters
    assert [(e["layer"], e["outcome"], e["key"]) for e in outer] == [
        ("aot_autograd", "miss", "a1"),
        ("aot_autograd", "bypass", None),
    ]
    assert inner == outer[:1]
    assert outer[1]["components"] is None and outer[1]["note"] == _compat.cache_lookup_gaps()["bypass"]


def test_the_aot_logger_prints_nothing_more_while_lowered(capsys):
    aot_logger = logging.getLogger("torch._functorch._aot_autograd.autograd_cache")
    seen = []

    class Sink(logging.Handler):
        def emit(self, record):
            seen.append(record.levelno)

    sink = Sink(logging.DEBUG)
    aot_logger.addHandler(sink)
    try:
        with capture_lookups():
            aot_logger.debug("Autograd graph cache hash details for key %s", "a")
            aot_logger.warning("shown as before")
    finally:
        aot_logger.removeHandler(sink)
    assert seen == [logging.WARNING]


# ----------------------------------------------------------------------------
# across runs
# ----------------------------------------------------------------------------


def test_the_index_keeps_the_last_key_of_each_graph_privately_and_explains_a_later_miss(tmp_path: Path):
    directory = tmp_path / "cache-keys" / index_directory_name("tests/test_a.py::test_b")
    index = KeyIndex(directory)
    earlier = [
        lookup(pass_name=None, graph=1, gm="f", fallback_random="False"),
        lookup(pass_name="cold", graph=1, gm="f", fallback_random="False"),
        CacheLookup("fxgraph", "bypass", None, None, graph=2),
    ]
    assert index.store(earlier, "2025-01-31T12:00:00+00:00", "2.13.0", "run-1") == 2
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert {stat.S_IMODE(os.stat(p).st_mode) for p in directory.glob("*.json")} == {0o600}
    stored = index.load()
    assert sorted(stored) == ["fxgraph-cold-1.json", "fxgraph-test-1.json"]
    assert stored["fxgraph-test-1.json"].lookup == earlier[0]

    now = [
        lookup(pass_name=None, graph=1, gm="f", fallback_random="True"),
        lookup(pass_name="cold", graph=1, gm="f", fallback_random="False"),  # same key in a fresh probe: expected
    ]
    explained = explain_across_runs(now, stored, "run-2", probe_passes=True)
    assert [(e.lookup.pass_name, e.explained, e.compared_with) for e in explained] == [
        (None, ("fallback_random: False -> True",), "an earlier run (2025-01-31T12:00:00+00:00, torch 2.13.0)")
    ]
    # the same key outside a pass (the run's persistent cache): it was there, and is not now
    [gone] = explain_across_runs([earlier[0]], stored, "run-2", probe_passes=True)
    assert gone.explained == (
        "same key as the earlier run's graph 1, yet it missed: the entry was evicted or deleted, or never written",
    )
    # a run never compares with itself
    assert explain_across_runs(now, stored, "run-1", probe_passes=True) == []
    assert index_file_name(lookup(pass_name="cold/2", graph=3)) == "fxgraph-cold_2-3.json"


# ----------------------------------------------------------------------------
# the index read as a report is: what is not a file the plugin wrote is a note
# ----------------------------------------------------------------------------


def _index_with_one_good_entry(tmp_path: Path) -> tuple[KeyIndex, Path]:
    directory = tmp_path / "cache-keys" / index_directory_name("tests/test_a.py::test_b")
    index = KeyIndex(directory)
    assert index.store([lookup(pass_name=None, gm="f")], "2025-01-31T12:00:00+00:00", "2.13.0", "run-1") == 1
    return index, directory


def _read_within(index: KeyIndex, seconds: float, fifo: Path | None = None):
    """``index.read()`` in a thread given ``seconds``; a FIFO it blocks on is opened for writing, to let it go."""
    import threading

    result: list = []
    worker = threading.Thread(target=lambda: result.append(index.read()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the blocked open() returns, then reads EOF
        worker.join(10)
    assert result, f"the index was not read within {seconds} s"
    return result[0]


def test_a_fifo_in_the_index_is_a_note_not_a_hang(tmp_path: Path):
    index, directory = _index_with_one_good_entry(tmp_path)
    os.mkfifo(directory / "fxgraph-cold-1.json")
    contents = _read_within(index, 5, fifo=directory / "fxgraph-cold-1.json")
    assert sorted(contents.stored) == ["fxgraph-test-1.json"] and contents.refused is None
    assert contents.notes == (
        f"ignored 1 entry of the key index {directory} that no run of this plugin wrote "
        f"(fxgraph-cold-1.json: a FIFO (named pipe), not a regular file)",
    )


def test_a_link_to_dev_zero_and_a_huge_file_in_the_index_are_not_read(tmp_path: Path):
    import tracemalloc

    index, directory = _index_with_one_good_entry(tmp_path)
    os.symlink("/dev/zero", directory / "fxgraph-cold-1.json")
    with open(directory / "fxgraph-cold-2.json", "wb") as fh:  # sparse: 64 MiB of zeros on no disk
        fh.truncate(64 * 2**20)
    tracemalloc.start()
    try:
        contents = _read_within(index, 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
    assert sorted(contents.stored) == ["fxgraph-test-1.json"]
    assert "fxgraph-cold-1.json: a character device, not a regular file" in contents.notes[0]
    assert "fxgraph-cold-2.json: larger than 4,194,304 bytes" in contents.notes[0]


def test_deep_malformed_or_foreign_index_files_are_ignored_each_with_its_reason(tmp_path: Path):
    index, directory = _index_with_one_good_entry(tmp_path)
    good = json.loads((directory / "fxgraph-test-1.json").read_text())
    planted = {
        "fxgraph-cold-1.json": "[" * 200_000 + "]" * 200_000,
        "fxgraph-cold-2.json": "{not json",
        "fxgraph-cold-3.json": json.dumps({**good, "lookup": {**good["lookup"], "components": {"x": ["h", {"a": 1}]}}}),
        "fxgraph-cold-4.json": json.dumps({**good, "lookup": {**good["lookup"], "graph": "1"}}),
        "fxgraph-cold-5.json": json.dumps({**good, "created": "\x1b[8m"}).replace("\\u001b", "\\ud800"),
        "fxgraph-cold-6.json": "1" * 5000,
    }
    for name, text in planted.items():
        (directory / name).write_text(text)
    contents = index.read()
    assert sorted(contents.stored) == ["fxgraph-test-1.json"]
    [note] = contents.notes
    assert note.startswith(f"ignored 6 entries of the key index {directory} that no run of this plugin wrote (")
    assert "fxgraph-cold-1.json: not JSON: nested too deeply; fxgraph-cold-2.json: not JSON; " in note
    assert "fxgraph-cold-3.json: the value of x is not a string; and 3 more)" in note
    # every one alone names its reason
    reasons = {}
    for name, text in planted.items():
        single = tmp_path / "single" / name.removesuffix(".json")
        single.mkdir(parents=True, mode=0o700)
        (single / name).write_text(text)
        [reasons[name]] = KeyIndex(single).read().notes
    assert "lookup.graph is not a graph number" in reasons["fxgraph-cold-4.json"]
    assert "created is not text" in reasons["fxgraph-cold-5.json"]
    assert "fxgraph-cold-6.json: not JSON" in reasons["fxgraph-cold-6.json"]


@pytest.mark.parametrize(
    "field, value, reason",
    [
        ("components", ["gm", "h"], "lookup.components is not a mapping"),
        ("components", {"gm": ["h"]}, "component gm is not a [hash, value] pair"),
        ("functorch_config", "donated_buffer=True", "lookup.functorch_config is not a mapping"),
        ("functorch_config", {"donated_buffer": True}, "a functorch config value is not a string"),
        ("components", None, None),
        ("functorch_config", None, None),
    ],
)
def test_the_mappings_of_an_index_entrys_lookup_are_checked_and_null_is_none(tmp_path: Path, field, value, reason):
    index, directory = _index_with_one_good_entry(tmp_path)
    good = json.loads((directory / "fxgraph-test-1.json").read_text())
    (directory / "fxgraph-cold-1.json").write_text(json.dumps({**good, "lookup": {**good["lookup"], field: value}}))
    contents = index.read()
    if reason is None:
        assert sorted(contents.stored) == ["fxgraph-cold-1.json", "fxgraph-test-1.json"] and not contents.notes
    else:
        assert contents.notes == (
            f"ignored 1 entry of the key index {directory} that no run of this plugin wrote "
            f"(fxgraph-cold-1.json: {reason})",
        )


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a file to another uid takes root")
def test_an_index_entry_of_another_user_is_not_read(tmp_path: Path):
    index, directory = _index_with_one_good_entry(tmp_path)
    os.chown(directory / "fxgraph-test-1.json", 12345, 12345)
    contents = index.read()
    assert contents.stored == {}
    assert contents.notes[0].endswith("(fxgraph-test-1.json: owned by uid 12345, not by you (uid 0))")


@pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a directory to another uid takes root"
)
def test_an_index_directory_another_user_owns_is_refused_before_anything_in_it_is_read(tmp_path: Path):
    index, directory = _index_with_one_good_entry(tmp_path)
    os.chown(directory, 12345, 12345)
    contents = index.read()
    assert contents.stored == {} and contents.notes == ()
    assert contents.refused == (
        f"cache-key index directory {directory} is owned by uid 12345, not by you (uid 0); compile caches hold "
        f"code that is executed on load, so use a directory you own"
    )
    # a directory others can write is refused the same way
    os.chown(directory, 0, 0)
    os.chmod(directory, 0o777)
    assert "is writable by group or others (mode 0777)" in index.read().refused
