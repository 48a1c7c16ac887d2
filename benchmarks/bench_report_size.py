"""The report file's size for a 10,000-test suite, built from the records of a real report.

Reads a report written by ``--cudagraph-report`` (the main job's:
``pytest docs/examples --cudagraph --cudagraph-report=F``), then builds one report
of ``--tests`` tests with the package's own ``build_report``: the real report's
test records, cycled under new node ids (``docs/examples/test_x.py::test_y`` ->
``docs/examples/test_x_0042.py::test_y``), each with its seconds in ``durations``;
the run-level tables (the environment, the fixtures' compiles, the run's facts)
stay as they were.  So the cache lookups, recompile events and durations are in
it as in a real suite, which the synthetic records of ``bench_compare.py`` are not.

Printed: the bytes of the file as ``--cudagraph-report`` writes it (``dumps_report``:
one line per test record), the bytes of the same report indented (``json.dumps(...,
indent=2)``, what ``jq .`` prints), their ratio; that reading the file back gives
the report that was built; and, each the median of ``--runs`` runs in one process,
``load_report`` of both files.

    python benchmarks/bench_report_size.py REPORT [--tests 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

# the compare benchmark's timer: the cyclic GC off meanwhile, as in ``timeit``
from bench_compare import timed

from pytest_cudagraph.records.cache_components import expand_cache_components
from pytest_cudagraph.records.json_values import json_safe
from pytest_cudagraph.records.report import RUN_FIELDS, build_report, dumps_report, load_report

MiB = 2**20
_MODULE = re.compile(r"\.py(?=::|$)")


def copied_nodeid(nodeid: str, copy_index: int) -> str:
    """``nodeid`` as the ``copy_index``-th copy of its module: ``d/test_x.py::t`` -> ``d/test_x_0003.py::t``."""
    renamed, found = _MODULE.subn(f"_{copy_index:04d}.py", nodeid, count=1)
    return renamed if found else f"copy_{copy_index:04d}/{nodeid}"


def suite_report(source: dict[str, Any], tests: int) -> dict[str, Any]:
    """A report of ``tests`` tests: ``source``'s records cycled under new node ids, its run-level tables kept.

    ``source`` is a report as ``load_report`` gives it.
    The result is what ``build_report`` makes in a run of that suite, so
    ``dumps_report`` writes it as the plugin writes its file.
    """
    records = expand_cache_components(source)
    if not records:
        raise ValueError("the source report has no test records to cycle")
    durations = source.get("durations") or {}
    names = sorted(records)
    cycled: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    for index in range(tests):
        copy_index, which = divmod(index, len(names))
        name = names[which]
        nodeid = copied_nodeid(name, copy_index)
        cycled[nodeid] = copy.deepcopy(records[name])
        if name in durations:
            seconds[nodeid] = durations[name]
    summary = source.get("summary") or {}
    run = {field: summary[field] for field in RUN_FIELDS if field in summary}
    return build_report(
        source["env"],
        cycled,
        exitstatus=summary.get("exitstatus"),
        created=source.get("created"),
        run=run,
        durations=seconds if "durations" in source else None,
        fixture_setups=source.get("fixture_setups") or (),
    )


def indented(written: str) -> str:
    """The file ``written`` indented by two spaces a level, as ``jq .`` prints it."""
    return json.dumps(json.loads(written), indent=2, allow_nan=False) + "\n"


def reads_back(report: dict[str, Any], written: str) -> bool:
    """Whether reading the written file gives back ``report`` as built (as JSON holds it)."""
    return json.loads(written) == json.loads(json.dumps(json_safe(report)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a report written by --cudagraph-report")
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    source = load_report(args.report)
    source_written = args.report.read_bytes()
    source_indented = indented(dumps_report(source)).encode("utf-8")
    report = suite_report(source, args.tests)
    written = dumps_report(report)
    identical = reads_back(report, written)
    with tempfile.TemporaryDirectory() as tmp:
        written_path, indented_path = Path(tmp) / "written.json", Path(tmp) / "indented.json"
        written_path.write_text(written, encoding="utf-8")
        indented_path.write_text(indented(written), encoding="utf-8")
        times: dict[str, list[float]] = {"written": [], "indented": []}
        load_report(written_path), load_report(indented_path)  # warm the page cache
        for _ in range(args.runs):
            times["written"].append(timed(lambda: load_report(written_path)))
            times["indented"].append(timed(lambda: load_report(indented_path)))
        sizes = written_path.stat().st_size, indented_path.stat().st_size
    med = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"source {args.report}: {len(source['tests'])} tests, {len(source_written)} bytes as read, "
        f"{len(source_indented)} bytes indented (ratio {len(source_written) / len(source_indented):.3f})"
    )
    print(
        f"built: {len(report['tests'])} tests ({len(source['tests'])} records cycled), "
        f"{len(report.get('durations') or {})} durations; read back identical: {identical}"
    )
    print(f"as written (pytest-cudagraph/3)       {sizes[0]:>12,} bytes ({sizes[0] / MiB:6.1f} MiB)")
    print(f"indented (jq .)                       {sizes[1]:>12,} bytes ({sizes[1] / MiB:6.1f} MiB)")
    print(f"    ratio written / indented {sizes[0] / sizes[1]:.3f}")
    print(f"load_report, as written               median {med['written'] * 1000:8.1f} ms ({args.runs} runs)")
    print(f"load_report, indented                 median {med['indented'] * 1000:8.1f} ms")
    print(f"    ratio written / indented {med['written'] / med['indented']:.3f}")


if __name__ == "__main__":
    main()
