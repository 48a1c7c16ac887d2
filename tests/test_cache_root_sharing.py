"""Two runs on one persistent cache root: neither deletes what the other is using.

Every process that makes cache probes holds a lock on its own tagged directory under
``<root>/probes`` for its whole life; a run's start-up prunes only the directories
whose lock it can take at once, those of processes that have ended (the OS frees a
lock when its process dies, SIGKILL included).

Every wait here is bounded and every child process is killed on the way out, so a
broken lock makes these tests fail, never hang.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_cudagraph.caches.cache_root import PLUGIN_TAG, CacheRoot, ensure_private_dir

# Upper bounds, far above the normal times (run 1: about 10 s on two busy cores).
START_S = 120
RUN_S = 180

# Run 1: a compile_cache test whose cold pass lets run 2 start on the same root and
# waits, between its cold and warm pass, until run 2 is past its start-up (and so
# past its prune of the root).  A pure view compiles through Inductor and its
# FX-graph cache without any C++ compile.
RUN1_TEST = """
import os
import time
from pathlib import Path

import pytest
import torch

COLD_STARTED = Path(os.environ["CUDAGRAPH_TEST_COLD_STARTED"])
OTHER_RUN_STARTED = Path(os.environ["CUDAGRAPH_TEST_OTHER_RUN_STARTED"])
WAIT_S = 60


@pytest.mark.compile_cache
def test_warm_start_while_another_run_starts(compile_cache):
    out = torch.compile(lambda a: a.t())(torch.arange(6.0).reshape(2, 3))
    compile_cache.record("out", out)
    if COLD_STARTED.exists():
        return  # the warm pass
    COLD_STARTED.write_text(str(compile_cache.cache_dir))
    deadline = time.monotonic() + WAIT_S
    while not OTHER_RUN_STARTED.exists():
        assert time.monotonic() < deadline, f"the other run did not start within {WAIT_S} s"
        time.sleep(0.05)
"""

# Run 2: a plain run on the same root.  pytest_sessionstart comes after every
# plugin's pytest_configure, where the cudagraph plugin checks and prunes the root.
RUN2_CONFTEST = """
import os
from pathlib import Path


def pytest_sessionstart(session):
    Path(os.environ["CUDAGRAPH_TEST_OTHER_RUN_STARTED"]).write_text("past start-up")
"""


def _pytest_run(pytester: pytest.Pytester, directory: Path, root: Path, log: Path) -> subprocess.Popen:
    args = [
        sys.executable,
        "-m",
        "pytest",
        f"--cudagraph-cache-dir={root}",
        "-p",
        "no:cacheprovider",
        f"--rootdir={directory}",
        f"--basetemp={directory / 'basetemp'}",
        "-q",
    ]
    with open(log, "w") as out:
        return pytester.popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=str(directory))


def _wait_for(path: Path, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"run 1 ended (exit {proc.returncode}) before its cold pass started:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"run 1's cold pass did not start within {timeout} s:\n{log.read_text()}")
        time.sleep(0.05)


def _finish(proc: subprocess.Popen, log: Path, name: str) -> str:
    try:
        proc.wait(timeout=RUN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} did not finish within {RUN_S} s:\n{log.read_text()}")
    return log.read_text()


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_a_run_starting_between_another_runs_cold_and_warm_pass_leaves_its_probe_alone(pytester, monkeypatch):
    root = pytester.path / "shared-root"
    run1, run2 = pytester.mkdir("run1"), pytester.mkdir("run2")
    (run1 / "test_warm.py").write_text(RUN1_TEST)
    (run2 / "conftest.py").write_text(RUN2_CONFTEST)
    (run2 / "test_plain.py").write_text("def test_plain():\n    pass\n")
    cold_started, other_started = pytester.path / "cold-started", pytester.path / "other-started"
    monkeypatch.setenv("CUDAGRAPH_TEST_COLD_STARTED", str(cold_started))
    monkeypatch.setenv("CUDAGRAPH_TEST_OTHER_RUN_STARTED", str(other_started))
    logs = {"run 1": pytester.path / "run1.log", "run 2": pytester.path / "run2.log"}
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_pytest_run(pytester, run1, root, logs["run 1"]))
        _wait_for(cold_started, procs[0], logs["run 1"], START_S)
        procs.append(_pytest_run(pytester, run2, root, logs["run 2"]))
        out2 = _finish(procs[1], logs["run 2"], "run 2")
        out1 = _finish(procs[0], logs["run 1"], "run 1")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert procs[1].returncode == 0 and "1 passed" in out2, out2
    assert other_started.exists()
    assert procs[0].returncode == 0 and "1 passed" in out1, out1
    probe = Path(cold_started.read_text())
    assert probe.is_dir(), "run 2 deleted the probe run 1 was using"
    # run 1 has ended: the next start-up prunes its probes, and only those
    owner = probe.parent
    assert CacheRoot(root, persistent=True).prune_probes() == [owner]
    assert not owner.exists() and (root / "inductor").is_dir()


HOLDER = """
import sys
from pathlib import Path

from pytest_cudagraph.caches.cache_root import CacheRoot

probe = CacheRoot(Path(sys.argv[1]), persistent=True).new_probe_dir("held")
print(probe, flush=True)
sys.stdin.read()  # keep the lock until this process is killed
"""


def _start_holder(root: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready, _, _ = select.select([proc.stdout], [], [], START_S)
    if not ready:
        proc.kill()
        proc.wait(timeout=30)
        pytest.fail(f"the probe-holding process printed nothing within {START_S} s")
    line = proc.stdout.readline().strip()
    if proc.poll() is not None or not line.startswith("/"):
        proc.kill()
        pytest.fail(f"the probe-holding process failed: {line}{proc.stdout.read()}")
    return proc, Path(line)


def test_prune_deletes_the_probes_of_a_killed_process_and_keeps_a_live_ones(tmp_path):
    root = ensure_private_dir(tmp_path / "root", "cache root")
    killed, killed_probe = _start_holder(root)
    alive, alive_probe = _start_holder(root)
    try:
        assert CacheRoot(root, persistent=True).prune_probes() == []
        killed.send_signal(signal.SIGKILL)  # no cleanup runs: only the OS releases its lock
        killed.wait(timeout=30)
        assert CacheRoot(root, persistent=True).prune_probes() == [killed_probe.parent]
        assert not killed_probe.parent.exists()
        assert alive_probe.is_dir() and (alive_probe.parent / PLUGIN_TAG).is_file()
    finally:
        for proc in (killed, alive):
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stdin.close()
    assert CacheRoot(root, persistent=True).prune_probes() == [alive_probe.parent]
    assert sorted(p.name for p in (root / "probes").iterdir()) == []


def test_a_directory_half_deleted_by_a_killed_pruner_is_finished_off(tmp_path):
    root = CacheRoot(ensure_private_dir(tmp_path / "root", "cache root"), persistent=True)
    leftover = ensure_private_dir(root.probes_dir / f"{PLUGIN_TAG}-deleting-main-1-abcd-ef01", "probe")
    (leftover / "rest").write_text("")
    root.prune_probes()
    assert not leftover.exists()


def test_every_xdist_worker_and_the_controller_own_their_probes_apart(tmp_path, monkeypatch):
    """Processes sharing a root (xdist workers get the controller's path) each get their own owner."""
    root = ensure_private_dir(tmp_path / "root", "cache root")
    mine = CacheRoot(root, persistent=True).new_probe_dir("here")
    again = CacheRoot(root, persistent=True).new_probe_dir("here")
    assert mine.parent == again.parent, "one owner per process and root, whichever CacheRoot object asks"
    assert mine.parent.name.startswith(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}-")
