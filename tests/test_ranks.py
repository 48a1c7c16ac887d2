"""The multi-rank harness on the CPU: arguments, skip reasons, and the watchdog over real gloo ranks.

The gloo ranks are real processes running real collectives: the same launcher,
watchdog, stack dumps and error reports as NCCL ranks on GPUs, without CUDA.
Every run here is bounded by the harness's own timeout (and the pytester run by
its subprocess timeout), so a broken watchdog fails these tests instead of
hanging CI.  The bodies are module-level functions: the rank processes import
them from this module by name.
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist

from pytest_cudagraph.errors import MisuseError
from pytest_cudagraph.ranks import RanksFailed, gpu_shortfall, run_ranks
from pytest_cudagraph.ranks.launch import RANK_ENV_DEFAULTS, rank_environment
from pytest_cudagraph.ranks.stacks import default_library_dirs, describe_waiting, main_thread_frames
from pytest_cudagraph.report import SCHEMA, validate_report

# --------------------------------------------------------------------------
# bodies (imported by name in the rank processes)
# --------------------------------------------------------------------------


def sum_and_agree(rank, n):
    t = torch.full((n,), float(rank.rank + 1))
    dist.all_reduce(t)
    rank.assert_ranks_agree(t, name="sum")
    print(f"rank {rank.rank} of {rank.world_size} on {rank.device}")
    return t.tolist()


def rank_one_raises(rank):
    if rank.rank == 1:
        raise ValueError("rank one is broken")
    t = torch.ones(3)
    dist.all_reduce(t)


def rank_zero_alone_in_a_collective(rank):
    if rank.rank == 0:
        t = torch.ones(3)
        dist.all_reduce(t)


def _not_importable_by_name():  # replaced below, so the name points elsewhere
    pass


_shadowed = _not_importable_by_name
_not_importable_by_name = None  # noqa: F811


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------
# arguments: refused before anything is spawned
# --------------------------------------------------------------------------


def test_a_lambda_or_local_body_is_refused_with_the_fix():
    def local(rank):
        pass

    for body in (lambda rank: None, local):
        with pytest.raises(MisuseError, match="define it with def at module level"):
            run_ranks(body, world_size=2, backend="gloo")
    with pytest.raises(MisuseError, match="cannot be imported under that name"):
        run_ranks(_shadowed, world_size=2, backend="gloo")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"world_size": 0}, "world_size=0 is not a positive integer"),
        ({"world_size": True}, "world_size=True is not a positive integer"),
        ({"world_size": 2, "timeout": 0}, "timeout=0 is not a positive number of seconds"),
        ({"world_size": 2, "timeout": float("inf")}, "timeout=inf is not a positive number"),
        ({"world_size": 2, "backend": "mpi"}, "backend='mpi' is not supported"),
        ({"world_size": 2, "devices": [0, 1]}, "leave it out with backend='gloo'"),
    ],
)
def test_bad_arguments_are_one_sentence(kwargs, match):
    kwargs.setdefault("backend", "gloo")
    with pytest.raises(MisuseError, match=match):
        run_ranks(sum_and_agree, 4, **kwargs)


def test_arguments_that_cannot_travel_are_refused():
    with pytest.raises(MisuseError, match="cannot be sent to the rank processes"):
        run_ranks(sum_and_agree, lambda: 4, world_size=2, backend="gloo")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_nccl_without_cuda_names_gloo():
    with pytest.raises(MisuseError, match="use backend='gloo' for CPU ranks"):
        run_ranks(sum_and_agree, 4, world_size=2)


def test_gpu_shortfall_reasons():
    assert gpu_shortfall(2, 2) is None
    assert gpu_shortfall(2, 1) == "needs 2 GPUs, sees 1"
    pinned = gpu_shortfall(4, 1, pinned_device="3")
    assert pinned.startswith("needs 4 GPUs, sees 1: --cudagraph-devices pinned this process to GPU 3")
    assert "without --cudagraph-devices" in pinned


def test_rank_environment_keeps_what_the_user_set(monkeypatch):
    for key in RANK_ENV_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    env = rank_environment({"EXTRA": "x"})
    assert "NCCL_NVLS_ENABLE" not in env  # the user's own value reaches the ranks unchanged
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert env["EXTRA"] == "x"


def test_importing_the_harness_and_its_fixture_imports_no_torch():
    code = (
        "import sys; import pytest_cudagraph.ranks, pytest_cudagraph.plugin.ranks; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def waiting_here(path):
    with open(path, "w") as f:
        faulthandler.dump_traceback(f, all_threads=True)


def test_a_stack_dump_names_the_users_line(tmp_path):
    dump = tmp_path / "stacks"
    waiting_here(dump)
    frames = main_thread_frames(dump.read_text(), "waiting_here")
    where = describe_waiting(frames, default_library_dirs())
    assert where.startswith("at test_ranks.py:")
    assert "in waiting_here `faulthandler.dump_traceback(f, all_threads=True)`" in where


# --------------------------------------------------------------------------
# real gloo ranks
# --------------------------------------------------------------------------


def test_two_gloo_ranks_all_reduce_and_agree(capfd):
    result = run_ranks(sum_and_agree, 4, world_size=2, backend="gloo", timeout=60)
    assert result.passed and result.values == [[3.0] * 4, [3.0] * 4]
    assert [r.outcome for r in result.per_rank] == ["passed", "passed"]
    assert [r.agreement_checks for r in result.per_rank] == [1, 1]
    assert all(r.exitcode == 0 and r.stage == "done" for r in result.per_rank)
    assert result[1].placement["device"] == "cpu"
    # each rank's output comes back, prefixed with its rank
    err = capfd.readouterr().err
    assert "[rank 0] rank 0 of 2 on cpu" in err and "[rank 1] rank 1 of 2 on cpu" in err
    # the report's section is valid under the report schema
    entry = json.loads(json.dumps(result.to_json()))
    assert entry["world_size"] == 2 and entry["backend"] == "gloo" and len(entry["per_rank"]) == 2
    validate_report({"schema": SCHEMA, "tests": {"t": {"outcome": "passed", "ranks": entry}}})


def test_a_raising_rank_fails_fast_with_its_own_message():
    start = time.monotonic()
    with pytest.raises(RanksFailed) as info:
        run_ranks(rank_one_raises, world_size=2, backend="gloo", timeout=60)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert message.startswith("rank 1 of 2 failed: ValueError: rank one is broken"), message
    assert "test_ranks.py" in message and 'raise ValueError("rank one is broken")' in message
    # rank 0 was blocked in the collective rank 1 never reached, and the message says where
    assert "rank 0 was waiting in all_reduce" in message and "`dist.all_reduce(t)`" in message
    assert info.value.error_type == "ValueError"
    result = info.value.result
    assert result.first_failure == 1 and [r.outcome for r in result.per_rank] == ["aborted", "failed"]
    assert elapsed < 40, f"the watchdog took {elapsed:.0f} s; it should not wait for the timeout"
    # every rank's process is known and gone, the one stopped while waiting included
    assert all(r.pid for r in result.per_rank)
    assert not any(_alive(r.pid) for r in result.per_rank)


def test_a_collective_on_one_rank_only_ends_at_the_timeout_naming_where():
    start = time.monotonic()
    with pytest.raises(RanksFailed) as info:
        run_ranks(rank_zero_alone_in_a_collective, world_size=2, backend="gloo", timeout=4)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert info.value.result.outcome == "timeout"
    assert message.startswith("rank 0 did not finish within 4 s; it was waiting in all_reduce"), message
    assert "rank_zero_alone_in_a_collective `dist.all_reduce(t)`" in message
    assert "rank 1 had finished its body and was waiting for the other ranks" in message
    assert elapsed < 4 + 30, f"took {elapsed:.0f} s"


# --------------------------------------------------------------------------
# the fixture, seen from outside
# --------------------------------------------------------------------------

FIXTURE_TESTS = """
import pytest
import torch
import torch.distributed as dist


def body(rank):
    t = torch.arange(4.0) * (rank.rank + 1)
    dist.all_reduce(t)
    rank.assert_ranks_agree(t)


def broken(rank):
    if rank.rank == 1:
        raise RuntimeError("rank 1 cannot go on")
    dist.barrier()


def test_gloo(cudagraph_ranks):
    result = cudagraph_ranks.run(body, world_size=2, backend="gloo", timeout=60)
    assert result.passed


def test_gloo_broken(cudagraph_ranks):
    cudagraph_ranks.run(broken, world_size=2, backend="gloo", timeout=60)


@pytest.mark.cudagraph(world_size=2, timeout=30)
def test_nccl_marked(cudagraph_ranks):
    cudagraph_ranks.run(body)


def test_nccl_unmarked(cudagraph_ranks):
    cudagraph_ranks.run(body, world_size=2)
"""


# the fixture's module, registered here until the plugin registers it itself
REGISTER_FIXTURE = """
import pytest_cudagraph.plugin.ranks as ranks


def pytest_configure(config):
    if not config.pluginmanager.is_registered(ranks):
        config.pluginmanager.register(ranks, "cudagraph-ranks")
"""


def test_fixture_runs_gloo_ranks_skips_nccl_and_reports(pytester):
    pytester.makeconftest(REGISTER_FIXTURE)
    pytester.makepyfile(test_user=FIXTURE_TESTS)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(f"--cudagraph-report={report}", "-p", "no:cacheprovider", "-rs", timeout=150)
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    out = result.stdout.str()
    assert "rank 1 of 2 failed: RuntimeError: rank 1 cannot go on" in out
    assert out.count("needs --cudagraph") >= 2
    tests = json.loads(report.read_text())["tests"]
    ranks = tests["test_user.py::test_gloo"]["ranks"]
    assert ranks["outcome"] == "passed" and ranks["world_size"] == 2
    assert [r["agreement_checks"] for r in ranks["per_rank"]] == [1, 1]
    broken = tests["test_user.py::test_gloo_broken"]["ranks"]
    assert broken["outcome"] == "failed" and broken["first_failure"] == 1
    assert broken["per_rank"][1]["error"]["type"] == "RuntimeError"
