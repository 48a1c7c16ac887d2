"""benchmarks/bench_report_size.py builds a suite's report from a real report's records, and the file reads back whole.

The benchmark's figures (the file as written against the same report indented) mean
something only if the report it builds has the requested tests, keeps the real
records' lookups, recompile events and durations, and reads back as it was built.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.records.report import dumps_report, load_report

ROOT = Path(__file__).resolve().parent.parent
# a real run of docs/examples on a CPU: cache lookups, recompile events (a failing one too), durations
REAL = ROOT / "docs" / "reports" / "examples-failing-cpu.json"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT / "benchmarks"))
        return importlib.import_module("bench_report_size")


@pytest.fixture(scope="module")
def source() -> dict[str, Any]:
    return load_report(REAL)


def test_the_built_report_has_the_requested_tests_and_reads_back_whole(bench, source):
    report = bench.suite_report(source, 50)
    names = sorted(source["tests"])
    assert len(report["tests"]) == 50 and report["summary"]["tests"] == 50
    assert set(report["durations"]) <= set(report["tests"])
    # every real record is in it, under its module's copies' names
    assert all(bench.copied_nodeid(name, copy) in report["tests"] for name in names for copy in (0, 1))
    assert report["tests"][bench.copied_nodeid(names[0], 1)] == report["tests"][bench.copied_nodeid(names[0], 0)]
    written = dumps_report(report)
    assert json.loads(written) == json.loads(json.dumps(report))
    assert bench.reads_back(report, written)
    # the file holds one line per test record; indented, the same report takes more lines and bytes
    assert len(written.splitlines()) < len(report["tests"]) + len(report["durations"]) + 2000
    assert json.loads(bench.indented(written)) == json.loads(written)
    assert len(written) < len(bench.indented(written))


@settings(max_examples=8, deadline=None)
@given(tests=st.integers(min_value=1, max_value=60))
def test_any_count_of_tests_is_built_and_round_trips(bench, source, tests):
    report = bench.suite_report(source, tests)
    assert len(report["tests"]) == tests
    assert bench.reads_back(report, dumps_report(report))


@pytest.mark.parametrize(
    ("nodeid", "copied"),
    [
        ("docs/examples/test_x.py::test_y[a.py::b]", "docs/examples/test_x_0007.py::test_y[a.py::b]"),
        ("docs/examples/test_x.py", "docs/examples/test_x_0007.py"),
        ("test_doc.txt::line 3", "copy_0007/test_doc.txt::line 3"),
    ],
)
def test_copied_node_ids_rename_the_module(bench, nodeid, copied):
    assert bench.copied_nodeid(nodeid, 7) == copied
