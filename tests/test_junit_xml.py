"""The plugin's figures in pytest's JUnit XML, read back with an XML parser and checked against the JSON report.

Each test's ``<testcase>`` carries its figures as ``<property>`` elements (docs/reference.md lists
the names).  The suites below make records with every kind of figure without a GPU: a test hands
its record result objects, as the library does, through ``current_record()``.
Every property is checked against the same run's JSON report, field by field, by a mapping written
here from the documented table, so a figure lost or rounded on the way fails.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

# One test per kind of figure: graphs (floats, NaN and a null among them), piecewise, reduce-overhead,
# ranks, recompiles, caches with a cold/warm pair, compile time; and tests with no record.
SUITE = """
import pytest
from pytest_cudagraph.records.record import current_record

MiB = 2 ** 20


class Section:
    def __init__(self, **fields):
        self.fields = fields

    def to_json(self):
        return dict(self.fields)


def record():
    return current_record()


def test_graphs():
    record().add_graph_set(Section(
        sizes=[1, 2, 4, 8], captured=4, pool_bytes=60 * MiB, largest_graph_bytes=42 * MiB,
        first_use_bytes=4 * MiB + 0.5, behind_allocator_bytes=None, max_abs_err=float("nan"), capture_s=1.25,
    ))


def test_two_graph_sets():
    record().add_graph_set(Section(sizes=[1], captured=1, pool_bytes=2 * MiB, largest_graph_bytes=2 * MiB))
    record().add_graph_set(Section(sizes=[8], captured=1, pool_bytes=8 * MiB, largest_graph_bytes=6 * MiB,
                                   behind_allocator_bytes=3))


def test_piecewise_and_trees():
    record().add_piecewise(Section(pieces=3, graphs_captured=2, pool_bytes=5 * MiB, first_use_bytes=0,
                                   behind_allocator_bytes=12345))
    record().set("reduce_overhead", Section(recordings=3, pool_bytes=7 * MiB, skips=0))


def test_ranks():
    per_rank = [
        {"rank": 0, "outcome": "passed", "graphs": {"captured": 2, "pool_bytes": 4 * MiB, "largest_graph_bytes": MiB}},
        {"rank": 1, "outcome": "passed", "graphs": {"captured": 2, "pool_bytes": 5 * MiB, "first_use_bytes": 7}},
    ]
    record().set("ranks", Section(world_size=2, backend="gloo", outcome="passed", per_rank=per_rank))


def test_recompiles_and_caches():
    record().set("recompiles", Section(count=3, reasons=["a", "b", "c"], limit_hits=["f hit the limit"],
                                       graph_breaks={"count": 2, "reasons": ["x"]}))
    record().set("caches", Section(fxgraph={"hit": 1, "miss": 1, "bypass": 0, "saved": 1},
                                   aot_autograd={"hit": 1, "miss": 1, "saved": 1, "guard_miss": 0},
                                   triton={"compiled": 3, "loaded": 0, "bundler_saved_files": 2}))
    record().set("compile_time", Section(total_s=1.0000000000000002, phases={"dynamo_s": 0.1},
                                         passes=[{"label": "m", "cold_s": 0.9, "warm_s": 0.1000000000000001}]))
    record().note("compile_cache", {
        "mode": "inprocess",
        "cold": {"stats": {"fxgraph": {"hit": 0, "miss": 1, "saved": 1}, "triton": {"compiled": 3, "loaded": 0}}},
        "warm": {"stats": {"fxgraph": {"hit": 1, "miss": 0, "saved": 0}, "triton": {"compiled": 0, "loaded": 3}}},
    })


def test_fails_with_figures():
    record().add_graph_set(Section(sizes=[2], captured=1, pool_bytes=MiB, largest_graph_bytes=MiB))
    assert False, "the test's own failure"


def test_nothing_measured():
    pass


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""

GRAPH_FIELDS = {
    "graphs_captured": "captured",
    "pool_bytes": "pool_bytes",
    "largest_graph_bytes": "largest_graph_bytes",
    "first_use_bytes": "first_use_bytes",
    "behind_allocator_bytes": "behind_allocator_bytes",
}
PIECEWISE_FIELDS = {
    "graphs_captured": "graphs_captured",
    "pool_bytes": "pool_bytes",
    "first_use_bytes": "first_use_bytes",
    "behind_allocator_bytes": "behind_allocator_bytes",
}


def _figure(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return str(value) if isinstance(value, int) else repr(value)
    return value if value in ("nan", "inf", "-inf") else None


def expected_properties(record: dict[str, Any]) -> dict[str, str]:
    """docs/reference.md's table of JUnit properties, applied to a record as the JSON report holds it."""
    found: dict[str, str] = {}

    def take(prefix: str, section: Any, fields: dict[str, str]) -> None:
        for name, field in fields.items():
            value = _figure((section or {}).get(field))
            if value is not None:
                found[f"cudagraph.{prefix}{name}"] = value

    take("", record.get("graphs"), GRAPH_FIELDS)
    take("piecewise.", record.get("piecewise"), PIECEWISE_FIELDS)
    take("reduce_overhead.", record.get("reduce_overhead"), {"recordings": "recordings", "pool_bytes": "pool_bytes"})
    for rank in (record.get("ranks") or {}).get("per_rank", []):
        take(f"rank{rank['rank']}.", rank.get("graphs"), GRAPH_FIELDS)
    recompiles = record.get("recompiles")
    if recompiles:
        found["cudagraph.recompiles"] = str(recompiles["count"])
        found["cudagraph.recompile_limit_hits"] = str(len(recompiles["limit_hits"]))
        found["cudagraph.graph_breaks"] = str(recompiles["graph_breaks"]["count"])
    for prefix, caches in [("", record.get("caches") or {})] + [
        (f"{when}.", {layer: counts for layer, counts in record["extra"]["compile_cache"][when]["stats"].items()})
        for when in ("cold", "warm")
        if "compile_cache" in record.get("extra", {})
    ]:
        for layer in ("fxgraph", "aot_autograd", "triton"):
            for counter, count in caches.get(layer, {}).items():
                found[f"cudagraph.{prefix}cache.{layer}.{counter}"] = str(count)
    compile_time = record.get("compile_time") or {}
    take("", compile_time, {"compile_s": "total_s"})
    if compile_time.get("passes"):
        take("cold.", compile_time["passes"][0], {"compile_s": "cold_s"})
        take("warm.", compile_time["passes"][0], {"compile_s": "warm_s"})
    return found


def properties_by_testcase(xml_path: Path) -> dict[str, list[tuple[str, str]]]:
    """``classname::name`` -> the cudagraph properties of each ``<testcase>``, read with an XML parser."""
    cases: dict[str, list[tuple[str, str]]] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        assert key not in cases, f"{key} has two testcases"
        cases[key] = [
            (prop.get("name"), prop.get("value"))
            for prop in case.iter("property")
            if str(prop.get("name")).startswith("cudagraph.")
        ]
    return cases


def assert_xml_holds_the_report(xml_path: Path, report_path: Path) -> dict[str, dict[str, str]]:
    """Every figure of every test of the JSON report is in its testcase, as the same number; nothing else is."""
    report = json.loads(report_path.read_text())
    cases = properties_by_testcase(xml_path)
    seen: dict[str, dict[str, str]] = {}
    for nodeid, record in report["tests"].items():
        module, name = nodeid.split("::")
        properties = cases.pop(f"{module.removesuffix('.py').replace('/', '.')}::{name}")
        assert len({n for n, _ in properties}) == len(properties), f"{nodeid}: a property written twice"
        expected = expected_properties(record)
        assert dict(properties) == expected, nodeid
        seen[nodeid] = dict(properties)
    assert all(not properties for properties in cases.values()), f"figures of tests the report lacks: {cases}"
    return seen


def _run(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> tuple[Any, Path, Path]:
    pytester.makepyfile(test_figures=SUITE)
    report, xml = pytester.path / "report.json", pytester.path / "junit.xml"
    arguments = (f"--cudagraph-report={report}", f"--junitxml={xml}", "-p", "no:cacheprovider", *args)
    result = pytester.runpytest_subprocess(*arguments) if subprocess else pytester.runpytest(*arguments)
    result.assert_outcomes(passed=6, failed=1, skipped=1)
    return result, xml, report


@pytest.mark.parametrize("family", ["xunit2", "xunit1", "legacy"])
def test_each_figure_of_the_report_is_a_property_of_its_testcase(pytester, family):
    _, xml, report = _run(pytester, "-o", f"junit_family={family}")
    seen = assert_xml_holds_the_report(xml, report)
    graphs = seen["test_figures.py::test_graphs"]
    # the documented names, each holding the report's figure to the last digit
    assert graphs["cudagraph.pool_bytes"] == str(60 * 2**20)
    assert graphs["cudagraph.first_use_bytes"] == repr(4 * 2**20 + 0.5)
    assert "cudagraph.behind_allocator_bytes" not in graphs  # null in the report: not measured, no property
    caches = seen["test_figures.py::test_recompiles_and_caches"]
    assert caches["cudagraph.compile_s"] == "1.0000000000000002"
    assert caches["cudagraph.warm.compile_s"] == "0.1000000000000001"
    assert caches["cudagraph.cache.fxgraph.hit"] == "1" and caches["cudagraph.warm.cache.triton.loaded"] == "3"
    assert caches["cudagraph.recompile_limit_hits"] == "1" and caches["cudagraph.graph_breaks"] == "2"
    assert seen["test_figures.py::test_ranks"]["cudagraph.rank1.first_use_bytes"] == "7"
    assert seen["test_figures.py::test_piecewise_and_trees"]["cudagraph.reduce_overhead.recordings"] == "3"
    assert seen["test_figures.py::test_fails_with_figures"]["cudagraph.graphs_captured"] == "1"


@pytest.mark.slow
def test_properties_travel_from_xdist_workers(pytester):
    """Under -n 2 each worker adds its tests' properties; the controller writes them once per testcase."""
    result, xml, report = _run(pytester, "-n", "2", subprocess=True)
    seen = assert_xml_holds_the_report(xml, report)
    assert len(seen) == 6  # the skipped test and the one that measured nothing have no record
    assert seen["test_figures.py::test_two_graph_sets"]["cudagraph.pool_bytes"] == str(8 * 2**20)


OWN_PROPERTY = """
import pytest


@pytest.mark.max_recompiles(0)
def test_owned(record_property):
    record_property("cudagraph.owner", "team-a")
"""


# Under xdist the worker that ran the test sends its properties and the controller writes the XML.  One
# test needs one worker (a second would sit idle), and the controller runs in this process: only the
# worker is a fresh interpreter.
@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["in-process", "xdist"])
def test_a_tests_own_cudagraph_property_leaves_the_plugins_properties_in_place(pytester, workers):
    pytester.makepyfile(test_owned=OWN_PROPERTY)
    xml = pytester.path / "junit.xml"
    arguments = ("--cudagraph-report=r.json", f"--junitxml={xml}", "-p", "no:cacheprovider", *workers)
    result = pytester.runpytest(*arguments)
    result.assert_outcomes(passed=1)
    [properties] = properties_by_testcase(xml).values()
    assert ("cudagraph.owner", "team-a") in properties
    assert ("cudagraph.recompiles", "0") in properties
    assert len(properties) == len(set(properties))  # each written once, by the worker that ran the test


def test_nothing_is_added_without_junitxml(pytester):
    pytester.makepyfile(test_figures=SUITE)
    recorded = pytester.inline_run(f"--cudagraph-report={pytester.path / 'report.json'}", "-p", "no:cacheprovider")
    reports = recorded.getreports("pytest_runtest_logreport")
    assert reports and all(not report.user_properties for report in reports)
    assert json.loads((pytester.path / "report.json").read_text())["tests"]["test_figures.py::test_graphs"]


def test_a_real_recompile_watch_reaches_the_xml(dynamo_modules_loaded, pytester):
    """A recompile Dynamo really made (the eager backend: no Inductor): the count in the XML is the report's."""
    pytester.makepyfile(
        test_watch="""
        import torch

        def test_recompiles(recompiles):
            fn = torch.compile(lambda x: x + 1, backend="eager", dynamic=False)
            fn(torch.ones(2))
            fn(torch.ones(3))
        """
    )
    report, xml = pytester.path / "report.json", pytester.path / "junit.xml"
    result = pytester.runpytest(f"--cudagraph-report={report}", f"--junitxml={xml}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    seen = assert_xml_holds_the_report(xml, report)
    assert seen["test_watch.py::test_recompiles"]["cudagraph.recompiles"] == "1"
