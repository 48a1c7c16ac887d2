"""pytest-rerunfailures beside the plugin: a test run again is recorded as its last attempt.

The runs are in-process through pytester (torch is already imported by
tests/conftest.py) with backend="eager", and pytest-rerunfailures is the real
plugin, installed with the test extra.
"""

from __future__ import annotations

import json

import pytest

# in-process runs that compile (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("dynamo_modules_loaded")

pytest.importorskip("pytest_rerunfailures")

# Fails its first attempt after one recompile, and passes its second after one recompile.
FLAKY = """
import pytest
import torch

ATTEMPTS = []


@pytest.mark.max_recompiles(1)
def test_flaky():
    ATTEMPTS.append(1)
    double = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    double(torch.ones(2))
    double(torch.ones(3))
    assert len(ATTEMPTS) > 1, "the first attempt fails"
"""


def _record(pytester: pytest.Pytester, name: str) -> dict:
    report = json.loads((pytester.path / name).read_text())  # the file is the report as documented
    return report["tests"]["test_flaky.py::test_flaky"]


def test_a_test_that_passes_on_its_rerun_is_recorded_passed_with_its_earlier_attempt_apart(pytester):
    pytester.makepyfile(test_flaky=FLAKY)
    result = pytester.runpytest("-p", "no:randomly", "--reruns", "1", "--cudagraph-report=base.json")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}, result.stdout.str()
    record = _record(pytester, "base.json")
    assert record["outcome"] == "passed"
    assert record["recompiles"]["count"] == 1  # the last attempt's, not both added up
    assert "failure" not in record
    [earlier] = record["reruns"]
    assert earlier["outcome"] == "failed"
    assert earlier["recompiles"]["count"] == 1
    assert "the first attempt fails" in earlier["failure"]["message"]
    # the same build again, compared with the first run: no regression
    result = pytester.runpytest(
        "-p", "no:randomly", "--reruns", "1", "--cudagraph-report=new.json", "--cudagraph-baseline=base.json"
    )
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}, result.stdout.str()
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*no regression*"])


def test_a_test_that_fails_every_attempt_is_recorded_failed_once(pytester):
    pytester.makepyfile(test_flaky=FLAKY.replace("len(ATTEMPTS) > 1", "len(ATTEMPTS) > 5"))
    result = pytester.runpytest("-p", "no:randomly", "--reruns", "2", "--cudagraph-report=r.json")
    assert result.parseoutcomes() == {"failed": 1, "rerun": 2}, result.stdout.str()
    record = _record(pytester, "r.json")
    assert record["outcome"] == "failed"
    assert record["recompiles"]["count"] == 1
    assert [(attempt["outcome"], attempt["recompiles"]["count"]) for attempt in record["reruns"]] == [("failed", 1)] * 2
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["summary"]["recompiles"] == 1
