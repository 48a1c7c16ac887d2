"""--cudagraph-devices on real GPUs: each xdist worker sees one device, round-robin.

Runs on any GPU machine: with one GPU every worker is pinned to it; with two or
more, the workers' devices differ.  The two-GPU run is the one that shows the
round-robin.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cudagraph

# Every test writes which GPU it saw, through the only CUDA device it can see.
PLACEMENT_TESTS = """
import json
import os

import pytest
import torch


def make_inputs(n):
    return torch.randn(n, 32, device="cuda")


@pytest.mark.cudagraph(capture_sizes=[1, 2, 4])
@pytest.mark.parametrize("n", range({tests}))
def test_placement(n, cudagraphs):
    assert torch.cuda.device_count() == 1, os.environ.get("CUDA_VISIBLE_DEVICES")
    graphs = cudagraphs.capture(lambda x: (x * 2).relu(), make_inputs)
    graphs.check_replay()
    line = {{
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "uuid": str(torch.cuda.get_device_properties(0).uuid),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }}
    with open(os.path.join({out!r}, f"{{os.getpid()}}-{{n}}.json"), "w") as f:
        json.dump(line, f)
"""


def _uuid(index: int) -> str:
    import torch

    return str(torch.cuda.get_device_properties(index).uuid)


def _visible_count() -> int:
    import torch

    return torch.cuda.device_count()


def _placements(directory) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]


def test_each_worker_is_pinned_to_one_gpu_round_robin(pytester: pytest.Pytester, tmp_path) -> None:
    count = _visible_count()
    workers = max(2, count)
    out = tmp_path / "placements"
    out.mkdir()
    tests = 4 * workers
    pytester.makepyfile(test_placement=PLACEMENT_TESTS.format(tests=tests, out=str(out)))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "-n",
        str(workers),
        "--cudagraph",
        "--cudagraph-devices=auto",
        f"--cudagraph-report={report}",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=tests)
    result.stdout.fnmatch_lines(["cudagraph devices: xdist workers pinned round-robin to CUDA_VISIBLE_DEVICES *"])

    placements = _placements(out)
    assert len(placements) == tests
    by_worker: dict[str, set[str]] = {}
    for placement in placements:
        by_worker.setdefault(placement["worker"], set()).add(placement["uuid"])
    assert all(len(uuids) == 1 for uuids in by_worker.values()), by_worker
    used = set().union(*by_worker.values())
    # every visible GPU is used once there are at least as many workers as GPUs
    assert used == {_uuid(index) for index in range(count)}, (used, count)

    records = json.loads(report.read_text())["tests"]
    assert len(records) == tests
    for nodeid, record in records.items():
        assert record["outcome"] == "passed", nodeid
        assert record["placement"]["worker"].startswith("gw")
    workers_seen = {record["placement"]["worker"] for record in records.values()}
    devices_seen = {record["placement"]["cuda_visible_devices"] for record in records.values()}
    assert len(devices_seen) == min(count, len(workers_seen))


def test_without_xdist_the_run_is_pinned_to_the_first_listed_device(pytester: pytest.Pytester, tmp_path) -> None:
    last = _visible_count() - 1
    out = tmp_path / "placements"
    out.mkdir()
    pytester.makepyfile(test_placement=PLACEMENT_TESTS.format(tests=2, out=str(out)))
    result = pytester.runpytest_subprocess("--cudagraph", f"--cudagraph-devices={last}", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    assert {placement["uuid"] for placement in _placements(out)} == {_uuid(last)}


def test_a_device_the_run_does_not_see_is_a_usage_error(pytester: pytest.Pytester) -> None:
    count = _visible_count()
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-n", "2", f"--cudagraph-devices=0,{count}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*device {count} does not exist, this run sees {count} CUDA device(s)*"])
    assert "Traceback" not in result.stderr.str()


CUDA_RNG_TESTS = """
import pytest
import torch

BEFORE = {}


def test_0_remember():
    torch.cuda.manual_seed_all(11)
    BEFORE["rng"] = torch.cuda.get_rng_state_all()


@pytest.mark.cudagraph(capture_sizes=[2])
def test_5_reseeds_and_draws(cudagraphs):
    torch.cuda.manual_seed_all(12345)
    torch.rand(100, device="cuda")
    graphs = cudagraphs.capture(lambda x: x + 1, lambda n: torch.randn(n, 8, device="cuda"))
    graphs.check_replay()


def test_9_cuda_rng_is_back():
    now = torch.cuda.get_rng_state_all()
    assert all(torch.equal(a, b) for a, b in zip(now, BEFORE["rng"]))
"""


def test_cuda_rng_state_is_back_after_a_plugin_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rng=CUDA_RNG_TESTS)
    result = pytester.runpytest_subprocess("--cudagraph", "-p", "no:randomly", "-p", "no:xdist")
    result.assert_outcomes(passed=3)
