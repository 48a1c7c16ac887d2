"""The multi-rank harness on the CPU: arguments, skip reasons, and the watchdog over real gloo ranks.

The gloo ranks are real processes running real collectives: the same launcher,
watchdog, stack dumps and error reports as NCCL ranks on GPUs, without CUDA.
Every run here is bounded by the harness's own timeout (and the pytester run by
its subprocess timeout), so a broken watchdog fails these tests instead of
hanging CI.  The bodies are module-level functions: the rank processes import
them from this module by name.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from pytest_cudagraph.errors import MisuseError
from pytest_cudagraph.ranks import RanksFailed, gpu_shortfall, run_ranks
from pytest_cudagraph.ranks.launch import RANK_ENV_DEFAULTS, rank_environment
from pytest_cudagraph.ranks.stacks import default_library_dirs, describe_waiting, main_thread_frames
from pytest_cudagraph.records.report import SCHEMA, validate_report

# --------------------------------------------------------------------------
# bodies (imported by name in the rank processes)
# --------------------------------------------------------------------------


# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal")


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


def sum_then_clean_up(rank):
    """Ends with the tutorials' ``cleanup()``: the body destroys the process group itself."""
    t = torch.full((2,), float(rank.rank + 1))
    dist.all_reduce(t)
    dist.destroy_process_group()
    return t.tolist()


def rank_zero_alone_in_a_collective(rank):
    if rank.rank == 0:
        t = torch.ones(3)
        dist.all_reduce(t)


def start_a_process_then(rank, directory, then):
    """Start a process (it sleeps 300 s), write both ``pid start-time``, then hang, raise on rank 1, or return."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    path = os.path.join(directory, f"rank{rank.rank}.pids")
    with open(path + ".tmp", "w") as f:
        f.write(" ".join(f"{pid} {_start_time(pid)}" for pid in (os.getpid(), child.pid)))
    os.replace(path + ".tmp", path)
    if then == "return":
        return None
    if then == "raise" and rank.rank == 1:
        raise ValueError("rank one is broken")
    if rank.rank == 0:
        while True:  # stuck in Python, never in a collective
            pass
    dist.all_reduce(torch.ones(1))  # blocked in C, waiting on rank 0


class OnlyARankBuildsThis:
    """Pickles anywhere; rebuilding it from its pickle fails (as a class the launcher cannot import does)."""

    def __reduce__(self):
        return (_refuse_to_rebuild, ("only a rank builds this",))


def _refuse_to_rebuild(why):
    raise RuntimeError(why)


def returns_what_cannot_reach_the_launcher(rank):
    dist.barrier()
    if rank.rank == 0:
        return OnlyARankBuildsThis()  # pickled in the rank, not rebuilt in the launcher
    return lambda: 1  # not even pickled in the rank


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


def _start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None once it is gone or a zombie, from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2 :].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def _recorded_pids(directory: Path, world_size: int, limit_s: float, launcher=None) -> dict[int, int]:
    """``{pid: start time}`` of every rank and the process it started, once each rank wrote them (bounded)."""
    deadline = time.monotonic() + limit_s
    paths = [directory / f"rank{rank}.pids" for rank in range(world_size)]
    while not all(path.exists() for path in paths):
        assert launcher is None or launcher.poll() is None, "the launcher ended before the ranks reached their bodies"
        assert time.monotonic() < deadline, f"the ranks did not reach their bodies within {limit_s:g} s"
        time.sleep(0.1)
    return _pids_written(directory)


def _pids_written(directory: Path) -> dict[int, int]:
    numbers = [int(number) for path in sorted(directory.glob("rank*.pids")) for number in path.read_text().split()]
    return dict(zip(numbers[::2], numbers[1::2]))


def _still_running(pids: dict[int, int], within_s: float) -> list[int]:
    """The processes of ``pids`` (the same processes: same start time) still running after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        running = [pid for pid, start in pids.items() if _start_time(pid) == start]
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.1)


def _kill_the_same(directory: Path) -> None:
    """SIGKILL what the ranks recorded that still runs (a failing test leaves nothing behind)."""
    for pid in _still_running(_pids_written(directory), 0):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


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
        "import sys; import pytest_cudagraph.ranks, pytest_cudagraph.plugin.rank_fixture; "
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


def test_a_body_that_destroys_the_process_group_itself_passes_with_its_values():
    result = run_ranks(sum_then_clean_up, world_size=2, backend="gloo", timeout=60)
    assert result.passed and result.values == [[3.0, 3.0], [3.0, 3.0]]
    assert all(r.exitcode == 0 and r.stage == "done" and r.error is None for r in result.per_rank)


def test_an_error_of_the_harness_after_the_body_names_where_it_happened():
    from pytest_cudagraph.ranks.child import _error_of

    try:
        dist.destroy_process_group()  # no group here: torch's own assertion, raised in torch
    except (AssertionError, ValueError, RuntimeError) as exc:
        error = _error_of(exc, [str(Path(__file__).parent), *default_library_dirs()], "destroying the process group")
    assert error.where == "the rank harness while destroying the process group"


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


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
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


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")


@linux_only
@pytest.mark.parametrize("then", ["raise", pytest.param("return", marks=pytest.mark.slow)])
def test_stopping_the_ranks_stops_what_their_bodies_started(tmp_path, then):
    try:
        if then == "raise":
            with pytest.raises(RanksFailed, match="rank 1 of 2 failed: ValueError"):
                run_ranks(start_a_process_then, str(tmp_path), then, world_size=2, backend="gloo", timeout=60)
        else:
            result = run_ranks(start_a_process_then, str(tmp_path), then, world_size=2, backend="gloo", timeout=60)
            assert result.passed
        pids = _recorded_pids(tmp_path, 2, 0)
        running = _still_running(pids, 5)
        assert not running, f"still running after the run: {running} of ranks and what they started {sorted(pids)}"
    finally:
        _kill_the_same(tmp_path)


LAUNCHER = """
import sys
sys.path.insert(0, {tests!r})
from test_ranks import start_a_process_then
from pytest_cudagraph.ranks import run_ranks
run_ranks(start_a_process_then, {directory!r}, "hang", world_size=2, backend="gloo", timeout=120)
"""


@linux_only
@pytest.mark.slow
def test_a_killed_launcher_takes_its_ranks_and_what_they_started_with_it(tmp_path):
    # rank 0 spins in Python, rank 1 waits in a collective, each with a process it started; then
    # the launcher is SIGKILLed: it can neither stop them nor tell them to go
    script = LAUNCHER.format(tests=str(Path(__file__).parent), directory=str(tmp_path))
    log = open(tmp_path / "launcher.log", "wb")  # noqa: SIM115 - closed below
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=log, stderr=log, start_new_session=True)
    try:
        pids = _recorded_pids(tmp_path, 2, 120, launcher)
        launcher.kill()
        launcher.wait(10)
        running = _still_running(pids, 15)
        assert not running, (
            f"still running 15 s after the launcher was killed: {running} of ranks and what they started "
            f"{sorted(pids)}\n{(tmp_path / 'launcher.log').read_text(errors='replace')[-3000:]}"
        )
    finally:
        launcher.kill()
        launcher.wait(10)
        log.close()
        with contextlib.suppress(OSError):
            os.killpg(launcher.pid, signal.SIGKILL)  # whatever stayed in the launcher's own group
        _kill_the_same(tmp_path)


def test_a_value_the_launcher_cannot_rebuild_keeps_the_pass_and_says_why(capfd):
    result = run_ranks(returns_what_cannot_reach_the_launcher, world_size=2, backend="gloo", timeout=60)
    assert result.passed and [r.outcome for r in result.per_rank] == ["passed", "passed"]
    assert all(r.exitcode == 0 and r.error is None for r in result.per_rank)
    rebuilt, sent = result[0].value_error, result[1].value_error
    assert rebuilt == (
        "rank 0's body returned a test_ranks.OnlyARankBuildsThis, which the rank pickled but the launcher could "
        "not rebuild (RuntimeError: only a rank builds this)"
    )
    assert sent.startswith("rank 1's body returned a function, which could not be sent to the launcher (")
    assert "<lambda>" in sent
    with pytest.raises(MisuseError, match="the ranks passed, but their values are not here") as info:
        result.values  # noqa: B018 - the property is what is tested
    assert rebuilt in str(info.value) and sent in str(info.value)
    err = capfd.readouterr().err
    assert f"[rank 0] {rebuilt}" in err and f"[rank 1] {sent}" in err


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
import pytest_cudagraph.plugin.rank_fixture as ranks


def pytest_configure(config):
    if not config.pluginmanager.is_registered(ranks):
        config.pluginmanager.register(ranks, "cudagraph-ranks")
"""


@pytest.mark.slow  # a pytest subprocess that starts gloo ranks
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
