"""No input makes ``compare`` or ``show`` crash, and none makes them exit 1 unless the comparison regressed.

A malformed report is exit 2 with one line naming the file, the field and the fix: a number no float holds, an
integer of thousands of digits, a field of the wrong type, a lone surrogate, a repeated key, absurd nesting.
A hypothesis test feeds mutations of a valid report to both commands, in-process through ``cli.main``.
"""

from __future__ import annotations

import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_reports import sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import dumps_report, load_report, write_report
from pytest_cudagraph.tools import cli
from pytest_cudagraph.tools.cli import main

DECODE = "tests/test_model.py::test_decode_graphs"
DYNAMIC = "tests/test_model.py::test_dynamic_batch"
RECORD = f"tests[{DECODE!r}]"
# what the CLI says when something other than a ReportError escaped: a bug, whatever the input
UNEXPECTED = "this is a bug in pytest-cudagraph"


def run(*args: Any) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=stdout, stderr=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def with_field(nodeid: str, dotted: str, value: Any) -> str:
    """The sample report as JSON text, with ``tests[nodeid]`` at ``dotted`` set to ``value``."""
    report = json.loads(dumps_report(sample_report()))
    target = report["tests"][nodeid]
    *parents, last = dotted.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    target[last] = value
    return json.dumps(report, indent=1)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"deeper": value}
    return value


# (name, JSON text of the bad report, what the one line must say after "report PATH ")
MALFORMED = [
    ("int beyond a float", with_field(DECODE, "graphs.pool_bytes", 10**309), f"has {RECORD}.graphs.pool_bytes = "),
    (
        "int beyond a float, unknown section",
        with_field(DECODE, "future.figure", -(10**400)),
        f"has {RECORD}.future.figure = ",
    ),
    (
        "float beyond a float",
        with_field(DECODE, "graphs.max_abs_err", 0).replace('"max_abs_err": 0', '"max_abs_err": 1e400'),
        f"has {RECORD}.graphs.max_abs_err = inf, a number too large for a float; ",
    ),
    (
        "5000-digit int",
        with_field(DECODE, "graphs.captured", 0).replace('"captured": 0', '"captured": ' + "9" * 5000),
        "holds an integer too long to read, which no report field holds; write it again",
    ),
    (
        "reasons a number",
        with_field(DYNAMIC, "recompiles.reasons", 5),
        f"has tests[{DYNAMIC!r}].recompiles.reasons = 5, which is not a list of strings; ",
    ),
    (
        "sizes a number",
        with_field(DECODE, "graphs.sizes", 5),
        f"has {RECORD}.graphs.sizes = 5, which is not a list of integers; ",
    ),
    (
        "graph break reasons a number",
        with_field(DECODE, "recompiles.graph_breaks.reasons", 7),
        f"has {RECORD}.recompiles.graph_breaks.reasons = 7, which is not a list of strings; ",
    ),
    (
        "a set that is no mapping",
        with_field(DECODE, "graphs.sets", [5]),
        f"has {RECORD}.graphs.sets[0] = 5, which is not a mapping; ",
    ),
    (
        "graph_bytes a list",
        with_field(DECODE, "graphs.graph_bytes", [1, 2]),
        f"has {RECORD}.graphs.graph_bytes = [1, 2], which is not a mapping; ",
    ),
    (
        "a counter that is text",
        with_field(DECODE, "caches.fxgraph.miss", "one"),
        f"has {RECORD}.caches.fxgraph.miss = 'one', which is not an integer; ",
    ),
    # each kind of field the report's types define (records/schema.py) refuses what it must
    (
        "one size's bytes beyond a float",
        with_field(DECODE, "graphs.graph_bytes", {"1": 5, "8": 10**309}),
        f"has {RECORD}.graphs.graph_bytes['8'] = ",
    ),
    (
        "one size's bytes a word no measure is",
        with_field(DECODE, "graphs.graph_bytes", {"1": 5, "8": "lots"}),
        f"has {RECORD}.graphs.graph_bytes['8'] = 'lots', which is not a number, \"nan\", \"inf\" or null; ",
    ),
    (
        "a size that is no integer",
        with_field(DECODE, "graphs.sizes", [1, 2.5]),
        f"has {RECORD}.graphs.sizes = [1, 2.5], which is not a list of integers; ",
    ),
    (
        "a measure that is a word",
        with_field(DECODE, "graphs.pool_bytes", "big"),
        f'has {RECORD}.graphs.pool_bytes = \'big\', which is not a number, "nan", "inf" or null; ',
    ),
    (
        "true as a count",
        with_field(DECODE, "caches.fxgraph.hit", True),
        f"has {RECORD}.caches.fxgraph.hit = True, which is not an integer; ",
    ),
    (
        "limit hits neither a list nor a count",
        with_field(DYNAMIC, "recompiles.limit_hits", {}),
        f"has tests[{DYNAMIC!r}].recompiles.limit_hits = {{}}, which is not a list of strings; ",
    ),
    (
        "an unknown field of a known section beyond a float",
        with_field(DECODE, "graphs.future_bytes", 10**309),
        f"has {RECORD}.graphs.future_bytes = ",
    ),
    (
        "a placement that is a list",
        with_field(DECODE, "placement", {"device": [0]}),
        f"has {RECORD}.placement.device = [0], which is not a string, number, boolean or null; ",
    ),
    (
        "a NaN literal as a count",
        with_field(DECODE, "graphs.captured", 0).replace('"captured": 0', '"captured": NaN'),
        f"has {RECORD}.graphs.captured = 'nan', which is not an integer; ",
    ),
    (
        "lone surrogate in env",
        json.dumps({**sample_report(), "env": {"gpu": "H200\udc80"}}),
        "has env.gpu = 'H200\\udc80', which is not text (a lone surrogate); ",
    ),
    (
        "lone surrogate in a node id",
        json.dumps({**sample_report(), "tests": {"t\ud800": {"outcome": "passed"}}}),
        "has tests['t\\ud800'] = {'outcome': 'passed'}, whose key is not text (a lone surrogate); ",
    ),
    (
        "env value a list",
        json.dumps({**sample_report(), "env": {"gpu": ["H200"]}}),
        "has env.gpu = ['H200'], which is not a string, number, boolean or null; ",
    ),
    (
        "nested 100 deep",
        with_field(DECODE, "extra.notes", nested(100)),
        "which is nested deeper than 64 levels; write it again",
    ),
    (
        "repeated key",
        '{"schema": "pytest-cudagraph/1", "env": {}, "tests": {"a::t": {"outcome": "passed", "outcome": "failed"}}}',
        "repeats the key 'outcome' in one object, so one of its values would be lost; write it again",
    ),
]


@pytest.mark.parametrize("text, fragment", [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_a_malformed_report_is_exit_2_in_one_line_for_compare_and_show(tmp_path, text, fragment):
    good = write_report(tmp_path / "good.json", sample_report())
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    for args in (
        ("compare", good, bad),
        ("compare", bad, good),
        ("show", bad),
        ("show", bad, "--html", tmp_path / "p.html"),
    ):
        code, out, err = run(*args)
        assert (code, out) == (2, ""), (args, err)
        (line,) = err.splitlines()
        assert line.startswith(f"pytest-cudagraph: report {bad} ")
        assert fragment in line, line
        assert UNEXPECTED not in line


def test_a_repeated_key_is_a_report_error_wherever_it_is(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(
        dumps_report(sample_report()).replace('"triton": "3.5.0",', '"triton": "3.5.0", "triton": "3.6.0",')
    )
    with pytest.raises(ReportError, match="repeats the key 'triton' in one object"):
        load_report(path)


def test_every_real_report_still_loads():
    for path in sorted((Path(__file__).parents[1] / "docs" / "reports").glob("*.json")):
        assert load_report(path)["tests"], path


def test_an_unexpected_exception_is_exit_2_in_one_line_with_its_type(tmp_path, monkeypatch):
    good = write_report(tmp_path / "good.json", sample_report())

    def broken(*args, **kwargs):
        raise ValueError("first line\nsecond line")

    monkeypatch.setattr(cli, "compare_reports", broken)
    code, out, err = run("compare", good, good)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(
        f"pytest-cudagraph: compare of {good} and {good} failed with ValueError at test_offline_robustness.py:"
    )
    assert "(first line second line)" in line
    assert line.endswith(
        "; this is a bug in pytest-cudagraph or a report it does not understand, so report it with "
        "the files, or give reports written by this plugin version"
    )


# ----------------------------------------------------------------------------
# hypothesis: mutations of a valid report
# ----------------------------------------------------------------------------

wild_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**320), max_value=10**320)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["nan", "inf", "-inf", "", "1e999", "\ud800", "\udfff x"])
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
# values a newer plugin or a real regression would write: they reach the comparison instead of the validation
plausible_values = (
    st.integers(0, 2**40)
    | st.floats(min_value=0, max_value=1e3)
    | st.sampled_from(["passed", "failed", "error", "crashed", "skipped", "nan", "inf"])
    | st.lists(st.integers(0, 512), max_size=4)
)
json_values = st.integers(0, 2).flatmap(lambda pick: wild_values if pick == 0 else plausible_values)


@st.composite
def mutated_reports(draw) -> str:
    """The sample report with one to three fields replaced, increased, deleted or added, as JSON text.

    Two places in three are inside a test's record, where most fields are.  Replacements
    are wild (NaN literals, lone surrogates, huge integers) one time in three.
    """
    report = json.loads(dumps_report(sample_report()))
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        start = report
        if draw(st.integers(0, 2)) and isinstance(report.get("tests"), dict) and report["tests"]:
            start = report["tests"][draw(st.sampled_from(sorted(report["tests"])))]
        parent, key = _draw_place(draw, start) if isinstance(start, (dict, list)) else (report, "tests")
        action = draw(st.sampled_from(["replace", "bump", "bump", "delete", "add"]))
        value = parent[key] if key is not None else None
        if action == "delete" and key is not None:
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=10))] = draw(json_values)
        elif action == "bump" and type(value) in (int, float):  # a valid report that may have regressed
            parent[key] = value + draw(st.integers(1, 2**30))
        elif key is not None:
            parent[key] = draw(json_values)
    return json.dumps(report)


def _draw_place(draw, start: dict | list) -> tuple[Any, Any]:
    """A container somewhere under ``start`` and one of its keys (None for an empty container)."""
    parent: Any = start
    while True:
        keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
        if not keys:
            return parent, None
        # last key first: hypothesis draws the first choice most, and a report's first keys
        # ("schema", "outcome") only ever make it unreadable
        key = draw(st.sampled_from(keys[::-1]))
        child = parent[key]
        if not isinstance(child, (dict, list)) or draw(st.booleans()):
            return parent, key
        parent = child


def check_run(args: tuple, *, show: bool) -> None:
    code, out, err = run(*args)
    assert "Traceback" not in err
    assert UNEXPECTED not in err, err
    if code == 2:
        assert out == "" and len(err.splitlines()) == 1, err
        return
    assert err == ""
    if show:
        assert code == 0
    elif "--json" in args:
        assert code == (1 if json.loads(out)["regressed"] else 0)
    else:
        last = out.splitlines()[-1]
        # NOTHING COMPARED: a mutation that empties a report's tests leaves no test in both
        regressed = last.startswith(("REGRESSION", "NOTHING COMPARED"))
        assert code == (1 if regressed else 0) and (code == 1 or last.startswith("no regression"))


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_reports())
def test_any_mutation_of_a_report_gives_exit_0_1_or_2_and_1_only_on_a_regression(text):
    with tempfile.TemporaryDirectory() as directory:
        good = write_report(Path(directory) / "good.json", copy.deepcopy(sample_report()))
        mutated = Path(directory) / "mutated.json"
        mutated.write_text(text, encoding="utf-8")
        check_run(("compare", good, mutated, "--json"), show=False)
        check_run(("compare", mutated, good), show=False)
        check_run(("show", mutated), show=True)
        check_run(("show", mutated, "--html", Path(directory) / "page.html"), show=True)
