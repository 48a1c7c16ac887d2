"""The published JSON Schema and ``load_report`` accept the same files: those the plugin writes, and the docs' reports.

Hypothesis draws the records of a run (recompiles, cache lookups whose components
repeat across lookups and within one, cold/warm passes with compile times, graph
sets, observed graphs, failures); a test module puts each drawn section into its
test's record through the plugin's own record API, the real plugin runs it
(pytester) and writes the report, and the file is validated with ``jsonschema``
against the schema ``pytest-cudagraph schema`` prints, and loaded with
``load_report``.  Each record reads back as drawn.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_reports import call_site, failed_guard, graph_set_record, warm_start_record

from pytest_cudagraph.graphs.observe_verdict import ObservedCapture, ObservedGraphs, ObserveOptions
from pytest_cudagraph.records.cache_components import full_components
from pytest_cudagraph.records.report import load_report

ROOT = Path(__file__).resolve().parent.parent
DOCS_REPORTS = sorted((ROOT / "docs" / "reports").glob("*.json"))
MiB = 2**20


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.Draft202012Validator:
    """The schema as a user gets it: ``python -m pytest_cudagraph schema`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", "schema"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return jsonschema.Draft202012Validator(json.loads(done.stdout))


# ----------------------------------------------------------------------------
# drawn sections, each as the part of the plugin that makes it writes it
# ----------------------------------------------------------------------------

FUNCTIONS = ("forward (m.py:12)", "decode (m.py:40)")
GUARDS = ("tensor 'x' size mismatch at index 0", "n == 2", "L['x'].dtype == torch.float32")


@st.composite
def recompiles(draw: st.DrawFn) -> dict[str, Any]:
    """A recompile watch's section: its events, and the lists made from them (compile/recompiles.py)."""
    events = []
    for index in range(draw(st.integers(0, 4))):
        function = draw(st.sampled_from(FUNCTIONS))
        if draw(st.integers(0, 4)) == 0:
            line = f"{function}: hit config.recompile_limit (8); ran it eagerly"
            events.append(
                {
                    "function": function,
                    "call_site": None,
                    "reasons": [],
                    "guards": [],
                    "verbatim": [],
                    "limit_hit": line,
                }
            )
            continue
        guard = draw(st.sampled_from(GUARDS))
        reasons = [f"0/{index}: {guard}"]
        site = call_site(draw(st.sampled_from([10, 11])))  # two events at one call site, often
        guards = [failed_guard(f"0/{index}", "size", guard, "4", "8")]
        events.append(
            {
                "function": function,
                "call_site": site,
                "reasons": reasons,
                "guards": guards,
                "verbatim": reasons,
                "limit_hit": None,
            }
        )
    by_function: dict[str, dict[str, Any]] = {}
    for event in events:
        entry = by_function.setdefault(event["function"], {"count": 0, "reasons": [], "limit_hits": []})
        if event["limit_hit"] is None:
            entry["count"] += 1
            entry["reasons"] += event["reasons"]
        else:
            entry["limit_hits"].append(event["limit_hit"])
    return {
        "count": sum(entry["count"] for entry in by_function.values()),
        "reasons": [r for event in events for r in event["reasons"]],
        "limit_hits": [event["limit_hit"] for event in events if event["limit_hit"] is not None],
        "by_function": by_function,
        "graph_breaks": {"count": 0, "reasons": []},
        "events": events,
    }


# a pool of [hash, value] pairs: lookups draw from it, so components repeat across lookups and within one
PAIRS = [
    ["b2a3uetdnaem", "TensorMetadata(dtype=torch.float32, shape=torch.Size([16, 16]))"],
    ["kea4psg3vf5g", "(0, True, False)"],
    ["tquy2we2efmo", "None"],
    ["5kblct25nk2h", "True"],
    ["2r7azaux7sob", None],
]
NAMES = ("example_inputs[0]", "example_inputs[1]", "aot_config", "inductor_config[max_autotune]", "gm", "torch_version")


@st.composite
def cache_keys(draw: st.DrawFn) -> dict[str, Any]:
    lookups = []
    for graph in range(1, draw(st.integers(1, 4)) + 1):
        layer = draw(st.sampled_from(["fxgraph", "aot_autograd"]))
        outcome = draw(st.sampled_from(["hit", "miss", "bypass"]))
        lookup: dict[str, Any] = {
            "layer": layer,
            "outcome": outcome,
            "key": None if outcome == "bypass" else ("f" if layer == "fxgraph" else "a") + "q" * 51,
            "pass": draw(st.sampled_from([None, "cold", "warm"])),
            "graph": graph,
        }
        if outcome == "bypass":
            lookup.update(components=None, bypass_reason="Unsupported call_function target flex_attention")
        else:
            names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
            lookup["components"] = {name: list(draw(st.sampled_from(PAIRS))) for name in names}
        lookups.append(lookup)
    return {"lookups": lookups}


def observed(sizes: list[int], pools: int) -> dict[str, Any]:
    """An engine's own captures, as the observe verdict writes them (graphs/observe_verdict.py)."""
    captures = tuple(
        ObservedCapture(
            index=i,
            call_site=None,
            pool=(0, 1 + i % pools),
            pool_bytes_before=0,
            pool_bytes_after=20 * MiB,
            live_after=(),
            behind_allocator_bytes=0,
            capture_s=0.002,
            input_shapes=((size, 256),),
            replays=3,
        )
        for i, size in enumerate(sizes)
    )
    return ObservedGraphs(captures, ObserveOptions(expect_sizes=tuple(sizes)), hooks="wrapper").to_json()


@st.composite
def drawn_test(draw: st.DrawFn) -> dict[str, Any]:
    """One test's drawn sections (set on its record), graph sets, passes (under extra), and whether it fails."""
    test: dict[str, Any] = {"sections": {}, "graph_sets": [], "extra": {}, "fails": draw(st.booleans())}
    if draw(st.booleans()):
        test["sections"]["recompiles"] = draw(recompiles())
    if draw(st.booleans()):
        test["sections"]["cache_keys"] = draw(cache_keys())
    if draw(st.booleans()):
        passes = warm_start_record(draw(st.sampled_from(["inprocess", "subprocess"])))
        test["sections"]["caches"] = passes["caches"]
        test["extra"] = passes["extra"]
    for _ in range(draw(st.integers(0, 2))):
        sizes = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4, unique=True))
        test["graph_sets"].append(graph_set_record(sizes, [MiB * s for s in sizes], 64 * MiB, 4 * MiB))
    if draw(st.booleans()):
        sizes = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4, unique=True))
        test["sections"]["observed_graphs"] = observed(sizes, draw(st.integers(1, 2)))
    return test


# the test module the plugin runs: each test puts its drawn sections into its record, as the plugin's parts do
MODULE = """
import json

import pytest

from pytest_cudagraph.records.record import current_record

TESTS = json.loads({tests!r})


class Section:
    def __init__(self, value):
        self.value = value

    def to_json(self):
        return json.loads(json.dumps(self.value))


@pytest.mark.parametrize("name", sorted(TESTS))
def test_drawn(name):
    drawn, record = TESTS[name], current_record()
    for section, value in drawn["sections"].items():
        record.set(section, Section(value))
    for graph_set in drawn["graph_sets"]:
        record.add_graph_set(Section(graph_set))
    for key, value in drawn["extra"].items():
        record.note(key, value)
    assert not drawn["fails"], "the drawn test fails here"
"""


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(tests=st.lists(drawn_test(), min_size=1, max_size=4))
def test_every_report_the_plugin_writes_is_valid_for_the_schema_and_load_report(pytester, schema_validator, tests):
    drawn = {f"t{i}": test for i, test in enumerate(tests)}
    pytester.makepyfile(test_drawn=MODULE.format(tests=json.dumps(drawn)))
    result = pytester.runpytest("test_drawn.py", "--cudagraph-report=drawn.json", "-p", "no:randomly")
    failing = sum(test["fails"] for test in tests)
    result.assert_outcomes(passed=len(tests) - failing, failed=failing)
    written = json.loads((pytester.path / "drawn.json").read_text())
    schema_validator.validate(written)
    report = load_report(pytester.path / "drawn.json")
    assert report == written and report["schema"] == "pytest-cudagraph/3"
    for name, test in drawn.items():
        record = report["tests"].get(f"test_drawn.py::test_drawn[{name}]")
        if record is None:  # a test that put nothing into its record has none, failed or not
            assert not (test["sections"] or test["graph_sets"] or test["extra"])
            continue
        assert record["outcome"] == ("failed" if test["fails"] else "passed")
        if test["fails"]:
            assert "the drawn test fails here" in record["failure"]["message"]
        for section, value in test["sections"].items():
            if section == "cache_keys":
                whole = [{**one, "components": full_components(report, one)} for one in record["cache_keys"]["lookups"]]
                assert whole == value["lookups"]
            elif section == "caches":  # the plugin adds how the caches started: from empty, for a warm start
                assert record["caches"] == {**value, "start": "empty"}
            else:
                assert record[section] == value
        assert ("graphs" in record) == bool(test["graph_sets"])
        if test["extra"]:
            assert record["extra"] == test["extra"] and set(record["cache_passes"]) == {"cold", "warm"}
    assert report["durations"].keys() == {f"test_drawn.py::test_drawn[{name}]" for name in drawn}


@pytest.mark.parametrize("path", DOCS_REPORTS, ids=[path.name for path in DOCS_REPORTS])
def test_every_report_under_docs_is_valid_for_the_schema_and_load_report(schema_validator, path):
    written = json.loads(path.read_text())
    schema_validator.validate(written)
    assert load_report(path) == written
