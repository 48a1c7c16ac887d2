"""The report's published JSON Schema: what ``pytest-cudagraph schema`` prints validates real reports, old and new.

The schema is generated from the report's types (records/schema.py), the same types
``load_report`` validates against, so a dashboard that validates with a standard
JSON Schema validator and the plugin's own loader agree on what a report is.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import (
    cache_keys_record,
    graph_record,
    graph_set_record,
    piecewise_uncaptured_record,
    ranks_record,
    recompile_events_record,
    reduce_overhead_record,
    sample_report,
    warm_start_record,
)

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.cache_components import full_components
from pytest_cudagraph.records.json_schema import report_json_schema
from pytest_cudagraph.records.report import build_report, load_report, validate_report, write_report

# the test extra installs it; a runner that installs the package alone skips these, saying why
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (pip install -e '.[test]')")

# a report the plugin wrote before the report had types (commit 0519093, docs/examples on the CPU)
REPORT_BEFORE_TYPES = Path(__file__).parent / "data" / "report_before_types.json"


@pytest.fixture(scope="module")
def printed_schema() -> dict[str, Any]:
    """The schema as a user gets it: ``python -m pytest_cudagraph schema`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", "schema"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def schema_validator(printed_schema) -> jsonschema.Draft202012Validator:
    """A validator of the printed schema, made once: ``jsonschema.validate`` checks the schema itself on every call
    (0.7 s each), which test_the_printed_schema_is_a_valid_draft_2020_12_schema does once."""
    return jsonschema.Draft202012Validator(printed_schema)


def every_kind_of_record() -> dict[str, dict[str, Any]]:
    """One record of every section the plugin writes, with the figures it writes there."""
    return {
        "t::graphs": graph_record(),
        "t::graph_sets": graph_record(
            graphs={
                **graph_set_record([1, 2], [3, 4], 8, 1),
                "sets": [graph_set_record([1], [3], 4, 1), graph_set_record([2], [4], 4, 1)],
            }
        ),
        "t::recompile_events": recompile_events_record(),
        "t::cache_keys": cache_keys_record(),
        "t::reduce_overhead": reduce_overhead_record(),
        "t::piecewise": piecewise_uncaptured_record(),
        "t::ranks": ranks_record(),
        "t::warm_start": warm_start_record(),
    }


def test_the_printed_schema_is_a_valid_draft_2020_12_schema(printed_schema):
    jsonschema.Draft202012Validator.check_schema(printed_schema)
    assert printed_schema == json.loads(json.dumps(report_json_schema()))
    assert printed_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_a_report_the_plugin_writes_validates_against_the_printed_schema(
    dynamo_modules_loaded, pytester, schema_validator
):
    """A real run of the plugin (recompiles on the CPU, in-process), then every section the plugin writes."""
    pytester.makepyfile(
        """
        import torch
        from pytest_cudagraph import watch_recompiles

        def test_recompiles():
            fn = torch.compile(lambda x: x * 2, backend="eager")
            with watch_recompiles() as w:
                fn(torch.ones(2))
                fn(torch.ones(3))
            assert w.result().count == 1

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest("--cudagraph", "--cudagraph-report=report.json", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    written = json.loads((pytester.path / "report.json").read_text())
    schema_validator.validate(written)

    built = json.loads(json.dumps(build_report({"torch": "2.13.0"}, every_kind_of_record())))
    schema_validator.validate(built)


def test_a_report_written_before_the_types_validates_loads_and_compares(schema_validator, tmp_path):
    from pytest_cudagraph.tools.cli import main

    old = json.loads(REPORT_BEFORE_TYPES.read_text())
    assert old["schema"] == "pytest-cudagraph/1"
    # read as pytest-cudagraph/3: the same records, the kernel compile phase under its new name
    as_read = load_report(REPORT_BEFORE_TYPES)
    schema_validator.validate(as_read)
    renamed = json.loads(json.dumps(old["tests"]).replace('"triton_s"', '"kernel_compile_s"'))
    for nodeid, record in renamed.items():
        assert {k: v for k, v in as_read["tests"][nodeid].items() if k != "cache_keys"} == {
            k: v for k, v in record.items() if k != "cache_keys"
        }
        # each lookup's whole set of components: its layer's table with its own over it then, the run's now
        for then, now in zip(
            record.get("cache_keys", {}).get("lookups", []),
            as_read["tests"][nodeid].get("cache_keys", {}).get("lookups", []),
        ):
            whole = (
                None if then["components"] is None else {**old["cache_components"][then["layer"]], **then["components"]}
            )
            assert full_components(as_read, now) == whole
    fresh = write_report(tmp_path / "fresh.json", build_report(old["env"], every_kind_of_record()))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        code = main(["compare", str(REPORT_BEFORE_TYPES), str(REPORT_BEFORE_TYPES)], stdout=stdout, stderr=stderr)
    assert code == 0, err.read_text()
    with open(out, "w") as stdout, open(err, "w") as stderr:
        code = main(["compare", str(REPORT_BEFORE_TYPES), str(fresh)], stdout=stdout, stderr=stderr)
    assert code in (0, 1), err.read_text()  # a verdict, whichever it is; never a refusal of the old file


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("graphs", "sizes"), 5),
        (("graphs", "sizes"), [1, "2"]),
        (("graphs", "pool_bytes"), "lots"),
        (("caches", "fxgraph", "miss"), "one"),
        (("recompiles", "by_function"), ["f"]),
        (("outcome",), 1),
    ],
)
def test_a_report_with_a_wrong_type_is_refused_by_the_schema_and_by_load_report(
    schema_validator, tmp_path, field, value
):
    report = json.loads(json.dumps(sample_report()))
    report["tests"]["t::bad"] = record = graph_record()
    *parents, last = field
    for key in parents:
        record = record[key]
    record[last] = value
    with pytest.raises(jsonschema.ValidationError):
        schema_validator.validate(report)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ReportError, match=rf"\.{last} = .*, which is not "):
        load_report(path)


# values of every JSON kind, finite and within a float's range (the loader's own extra rules aside).
# No float with a zero fraction: JSON Schema counts 2.0 as an integer, the loader refuses it where
# an integer belongs (test_an_integer_field_refuses_a_float_that_json_schema_calls_an_integer).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda number: not number.is_integer())
    | st.text(max_size=5)
    | st.sampled_from(["nan", "inf", "-inf"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)
KNOWN_FIELDS = [
    ("graphs", "sizes"),
    ("graphs", "captured"),
    ("graphs", "pool_bytes"),
    ("graphs", "graph_bytes"),
    ("graphs", "keep_outputs"),
    ("graphs", "sets"),
    ("recompiles", "limit_hits"),
    ("recompiles", "by_function"),
    ("recompiles", "events"),
    ("caches", "fxgraph"),
    ("caches", "bypass_reasons"),
    ("cache_keys", "lookups"),
    ("compile_time", "frames"),
    ("ranks", "per_rank"),
    ("placement",),
    ("failure",),
    ("extra",),
]


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(KNOWN_FIELDS), value=json_values)
def test_the_schema_and_load_report_agree_on_every_value(schema_validator, field, value):
    """Whatever a field holds, the published schema accepts it exactly when ``load_report`` does."""
    report = copy.deepcopy(sample_report())
    report["tests"]["t::any"] = record = graph_record()
    for key in field[:-1]:
        record = record.setdefault(key, {})
    record[field[-1]] = value
    text = json.dumps(report)
    schema_accepts = schema_validator.is_valid(json.loads(text))
    try:
        validate_report(json.loads(text), "report.json", text=text)  # what load_report does after reading
        loader_accepts = True
    except ReportError:
        loader_accepts = False
    assert schema_accepts == loader_accepts, (field, value)


def test_an_integer_field_refuses_a_float_that_json_schema_calls_an_integer(schema_validator):
    """The one value the two disagree on: JSON Schema's "integer" is a number with no fraction, so 2.0 passes there.

    The loader keeps integers integers (a count of 2.0 is a writer's bug, and compare's
    arithmetic on counts is exact), so ``docs/reference.md`` names this among the checks
    the schema cannot state.
    """
    report = json.loads(json.dumps(sample_report()))
    report["tests"]["t::float"] = graph_record(graphs={**graph_record()["graphs"], "captured": 4.0})
    assert schema_validator.is_valid(report)
    with pytest.raises(ReportError, match=r"graphs\.captured = 4\.0, which is not an integer"):
        validate_report(report, "report.json")


def test_a_report_read_without_msgspec_says_what_to_install(tmp_path):
    """An install with --no-deps leaves msgspec out: loading a report says so in one sentence."""
    path = write_report(tmp_path / "r.json", sample_report())
    code = (
        "import sys; sys.modules['msgspec'] = None\n"  # what an import of a package that is not there meets
        "from pytest_cudagraph.errors import ReportError\n"
        "from pytest_cudagraph.records.report import load_report\n"
        f"try:\n    load_report({str(path)!r})\nexcept ReportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("checking a report needs msgspec, which is not installed: pip install msgspec")
