"""A report path ending in ``.gz`` is written gzip-compressed, and every command reads it as the report it holds.

The plain ``.json`` file stays the report as documented; ``.json.gz`` is for a run
that must keep its report smaller (a CI artifact).  Reading tells a gzip file by
its first bytes, whatever its name.
"""

from __future__ import annotations

import gzip
import json

import pytest
from sample_reports import ENV_2_13, sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import dumps_report, load_report, write_report
from pytest_cudagraph.tools.cli import main

SHARD = {"splits": 1, "group": 1, "algorithm": "least_duration", "selected": 5}


def test_a_gz_path_is_written_compressed_and_loads_as_the_report(tmp_path):
    report = sample_report()
    path = write_report(tmp_path / "r.json.gz", report)
    data = path.read_bytes()
    assert data[:2] == b"\x1f\x8b"
    assert gzip.decompress(data).decode() == dumps_report(report)
    assert load_report(path) == json.loads(dumps_report(report))
    # the same report gives the same bytes: no time or name in the gzip header
    assert write_report(tmp_path / "again.json.gz", report).read_bytes() == data
    # reading goes by the file's first bytes, not its name
    (tmp_path / "renamed.json").write_bytes(data)
    assert load_report(tmp_path / "renamed.json") == load_report(path)


@pytest.mark.parametrize("cut", [10, 200])
def test_a_truncated_gz_report_is_one_sentence(tmp_path, cut):
    data = gzip.compress(dumps_report(sample_report()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[:cut])
    with pytest.raises(ReportError) as info:
        load_report(path)
    assert str(info.value) == (
        f"report {path} is a gzip file that cannot be decompressed (it may be truncated); "
        f"write it again with --cudagraph-report"
    )


def cli(*args: str, tmp_path) -> tuple[int, str]:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        code = main(list(args), stdout=stdout, stderr=stderr)
    return code, out.read_text() + err.read_text()


def test_every_command_reads_a_gz_report(tmp_path):
    plain = write_report(tmp_path / "r.json", sample_report(run={"complete": True, "shard": SHARD}))
    packed = write_report(tmp_path / "r.json.gz", load_report(plain))
    for command in (["show"], ["show", "--markdown"], ["explain"]):
        code, text = cli(*command, str(packed), tmp_path=tmp_path)
        assert (code, text.replace("r.json.gz", "r.json")) == cli(*command, str(plain), tmp_path=tmp_path)
    code, text = cli("compare", str(plain), str(packed), tmp_path=tmp_path)
    assert code == 0, text
    assert cli("durations", str(packed), "-o", str(tmp_path / "a"), tmp_path=tmp_path)[0] == 0
    assert cli("durations", str(plain), "-o", str(tmp_path / "b"), tmp_path=tmp_path)[0] == 0
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text()
    code, text = cli("merge", str(packed), "-o", str(tmp_path / "all.json.gz"), tmp_path=tmp_path)
    assert code == 0, text
    assert load_report(tmp_path / "all.json.gz")["tests"] == load_report(plain)["tests"]
    assert (tmp_path / "all.json.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_the_plugin_writes_a_gz_report_and_compares_with_it_as_a_baseline(pytester):
    pytester.makepyfile(
        """
        from pytest_cudagraph.records.record import current_record

        class Recompiles:
            def to_json(self):
                return {"count": 0, "reasons": [], "limit_hits": [], "by_function": {}}

        def test_watched():
            current_record().set("recompiles", Recompiles())
        """
    )
    result = pytester.runpytest("--cudagraph-report=r.json.gz", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    report = load_report(pytester.path / "r.json.gz")
    [nodeid] = report["tests"]
    assert nodeid.endswith("::test_watched")
    assert report["env"] and report["env"] != ENV_2_13
    again = pytester.runpytest("--cudagraph-baseline=r.json.gz", "-p", "no:randomly")
    again.assert_outcomes(passed=1)
    assert "no regression" in again.stdout.str()
