"""--cudagraph-devices and --cudagraph-group: parsing, round-robin, and what a CPU run does with them.

The pinning itself (each xdist worker seeing one GPU) needs GPUs and is checked
in tests/gpu/test_devices_gpu.py.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdist_output import workers_by_test

from pytest_cudagraph.errors import UsageProblem
from pytest_cudagraph.plugin.devices import (
    AUTO,
    device_for_worker,
    parse_device_spec,
    resolve_devices,
    visible_device_ids,
    worker_index,
)


@given(st.lists(st.integers(min_value=0, max_value=63), min_size=1, max_size=8, unique=True))
def test_a_list_of_indices_parses_in_order(indices: list[int]) -> None:
    assert parse_device_spec(",".join(map(str, indices))) == tuple(indices)
    assert parse_device_spec(" , ".join(map(str, indices))) == tuple(indices)


@pytest.mark.parametrize("raw", ["auto", "AUTO", " auto "])
def test_auto_parses(raw: str) -> None:
    assert parse_device_spec(raw) == AUTO


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("", "empty entry"),
        ("0,,1", "empty entry"),
        ("0,", "empty entry"),
        ("-1", "'-1' is not a device index"),
        ("cuda:0", "'cuda:0' is not a device index"),
        ("0.5", "'0.5' is not a device index"),
        ("all", "'all' is not a device index"),
        ("0,1,0", "names device 0 twice"),
    ],
)
def test_a_bad_device_list_is_one_sentence_naming_the_entry(raw: str, named: str) -> None:
    with pytest.raises(UsageProblem) as info:
        parse_device_spec(raw)
    message = str(info.value)
    assert named in message
    assert "\n" not in message
    assert "--cudagraph-devices" in message


def test_visible_ids_follow_cuda_visible_devices() -> None:
    assert visible_device_ids(3, environ={}) == ["0", "1", "2"]
    assert visible_device_ids(2, environ={"CUDA_VISIBLE_DEVICES": "5,3,7"}) == ["5", "3"]
    assert visible_device_ids(2, environ={"CUDA_VISIBLE_DEVICES": "GPU-aa, GPU-bb"}) == ["GPU-aa", "GPU-bb"]
    assert visible_device_ids(0, environ={"CUDA_VISIBLE_DEVICES": ""}) == []


def test_list_indices_map_through_the_runs_visible_devices() -> None:
    assert resolve_devices((1, 0), ["5", "3"], "1,0") == ["3", "5"]
    assert resolve_devices(AUTO, ["5", "3"], "auto") == ["5", "3"]
    # no CUDA device: nothing to pin, GPU tests skip as without the option
    assert resolve_devices((4,), [], "4") == []
    with pytest.raises(UsageProblem, match=r"device 2 does not exist, this run sees 2 CUDA device\(s\) \(0\.\.1\)"):
        resolve_devices((0, 2), ["0", "1"], "0,2")


@given(
    devices=st.lists(st.text("0123456789", min_size=1, max_size=2), min_size=1, max_size=8, unique=True),
    workers=st.integers(min_value=1, max_value=32),
)
def test_round_robin_uses_every_device_and_balances_workers(devices: list[str], workers: int) -> None:
    assigned = [device_for_worker(devices, f"gw{n}") for n in range(workers)]
    assert set(assigned) == set(devices[:workers])
    per_device = [assigned.count(device) for device in devices]
    assert max(per_device) - min(per_device) <= 1


def test_worker_index_of_the_main_process_is_zero() -> None:
    assert worker_index("gw12") == 12
    assert worker_index("main") == 0
    assert worker_index("") == 0


GPU_AND_CPU_TESTS = """
import os
import pytest


@pytest.mark.parametrize("n", range(10))
def test_cpu_before(n, recompiles):
    pass


@pytest.mark.cudagraph
@pytest.mark.parametrize("n", range(10))
def test_gpu(n):
    pass


@pytest.mark.parametrize("n", range(10))
def test_cpu(n, recompiles):
    pass
"""


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_group_module_runs_the_gpu_tests_of_each_module_on_one_worker(pytester: pytest.Pytester) -> None:
    modules = ("test_first", "test_second", "test_third")
    pytester.makepyfile(**dict.fromkeys(modules, GPU_AND_CPU_TESTS))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "-n", "2", "-v", "-p", "no:randomly", "--cudagraph", "--cudagraph-group=module", f"--cudagraph-report={report}"
    )
    # the GPU tests run on a GPU machine and skip elsewhere; grouped either way
    if _cuda_visible():
        result.assert_outcomes(passed=90)
    else:
        result.assert_outcomes(passed=60, skipped=30)
    result.stdout.fnmatch_lines(["*GPU tests of each module run on one xdist worker*"])
    workers = workers_by_test(result.outlines)
    assert len(workers) == 90, result.stdout.str()
    for module in modules:
        gpu = set().union(*(workers[f"{module}.py::test_gpu[{n}]"] for n in range(10)))
        assert len(gpu) == 1, f"{module}'s GPU tests ran on {gpu}"
    # the report names each test once, as collected
    tests = json.loads(report.read_text())["tests"]
    assert sorted(tests) == sorted(workers)


@pytest.mark.slow
def test_group_module_leaves_no_scheduling_files_in_a_persistent_root(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_first=GPU_AND_CPU_TESTS)
    root = pytester.path / "root"
    for _ in range(2):
        result = pytester.runpytest_subprocess(
            "-n", "2", "-p", "no:randomly", "--cudagraph-group=module", f"--cudagraph-cache-dir={root}"
        )
        assert result.ret == 0, result.stdout.str()
        assert not (root / "groups").exists(), sorted(p.name for p in (root / "groups").rglob("*"))


@pytest.mark.parametrize("dist", ["loadfile", "loadgroup"])
def test_group_module_refuses_another_scheduling(pytester: pytest.Pytester, dist: str) -> None:
    pytester.makepyfile(test_one=GPU_AND_CPU_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", dist, "--cudagraph-group=module")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--cudagraph-group=module schedules the tests itself, in place of xdist's default --dist load, "
            f"but the run asks for --dist {dist}; drop --dist or drop --cudagraph-group"
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_group_with_a_bad_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("--cudagraph-group=class")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --cudagraph-group: invalid choice: 'class'*"])


@pytest.mark.parametrize(
    ("value", "named"),
    [("0,x", "'x' is not a device index"), ("1,1", "names device 1 twice"), (",", "has an empty entry")],
)
def test_bad_devices_stop_the_run_with_one_sentence(pytester: pytest.Pytester, value: str, named: str) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest(f"--cudagraph-devices={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and named in errors[0], result.stderr.str()


@pytest.mark.slow
@pytest.mark.skipif(_cuda_visible(), reason="checks what a machine without a CUDA device does")
@pytest.mark.parametrize("devices", ["auto", "3"])
def test_without_cuda_devices_pin_nothing_and_gpu_tests_skip_as_usual(pytester: pytest.Pytester, devices: str) -> None:
    pytester.makepyfile(test_one=GPU_AND_CPU_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "--cudagraph", f"--cudagraph-devices={devices}", "-rs")
    result.assert_outcomes(passed=20, skipped=10)
    result.stdout.fnmatch_lines(
        [
            f"cudagraph devices: {devices} given, but no CUDA device is visible; nothing pinned",
            "*no CUDA device*",
        ]
    )
