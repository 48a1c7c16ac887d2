"""The report file on disk: special files are written into, links stay links, leftovers of killed writers go,
and loading refuses anything that is not a regular file without blocking.

Everything here runs as root too, so no test may point old, replacing code at a system path: every special
file is reached through a link or a device node made in ``tmp_path``.  A FIFO is opened by the test first,
non-blocking, so that no writer ever waits for a reader, and a reader that could wait runs in a subprocess
with a timeout.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sample_reports import sample_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records import files as files_module
from pytest_cudagraph.records import report as report_module
from pytest_cudagraph.records.report import dumps_report, load_report, write_report

IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0
HANG_GUARD_S = 60  # a subprocess that might block (a FIFO without a writer) is killed after this


def run_python(code: str, **kwargs) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with this checkout importable; killed if it blocks."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), str(Path(__file__).parent)])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, timeout=HANG_GUARD_S, **kwargs)


def read_fifo_nonblocking(fd: int) -> bytes:
    """Everything a writer (already gone) left in the FIFO behind ``fd``."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


# ----------------------------------------------------------------------------
# writing: special files are written into, links stay links
# ----------------------------------------------------------------------------


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    # the reader opens first (non-blocking), so the writer's open never waits
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_report(fifo, sample_report())
        received = read_fifo_nonblocking(reader)
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert json.loads(received) == json.loads(dumps_report(sample_report()))


def test_a_fifo_nobody_reads_fails_at_once_instead_of_hanging_the_run(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    result = run_python(  # in a child with a timeout: the code before the fix blocked here for ever
        f"""
        from pathlib import Path
        from pytest_cudagraph.records.report import write_report
        from sample_reports import sample_report
        try:
            write_report(Path({str(fifo)!r}), sample_report())
        except OSError as exc:
            print(exc.errno, exc.strerror)
        """,
        capture_output=True,
        text=True,
    )
    assert result.stdout.strip() == f"{errno.ENXIO} no process is reading this FIFO", result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_dev_null_stays_a_link_and_dev_null_a_device(tmp_path):
    link = tmp_path / "null.json"
    link.symlink_to(os.devnull)
    write_report(link, sample_report())
    assert link.is_symlink() and os.readlink(link) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert report_module.check_report_path_writable(link) is None


@pytest.mark.skipif(not IS_ROOT, reason="making a device node (os.mknod) needs root")
def test_a_character_device_is_written_into_not_replaced(tmp_path):
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the numbers of /dev/null
    write_report(device, sample_report())
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_link_to_dev_stdout_on_a_pipe_writes_the_report_to_stdout(tmp_path):
    link = tmp_path / "stdout.json"
    link.symlink_to("/dev/stdout")
    result = run_python(
        f"""
        from sample_reports import sample_report
        from pytest_cudagraph.records.report import write_report
        write_report({str(link)!r}, sample_report())
        """,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(dumps_report(sample_report()))
    assert link.is_symlink()


def test_dev_stdout_redirected_to_a_file_appends_to_that_file(tmp_path):
    """``pytest --cudagraph-report=/dev/stdout > out.txt``: what came before stays, the shell's file stays."""
    link = tmp_path / "stdout.json"
    link.symlink_to("/dev/stdout")
    out = tmp_path / "out.txt"
    with open(out, "w") as stdout:
        inode = os.fstat(stdout.fileno()).st_ino
        result = run_python(
            f"""
            from pathlib import Path
            print("pytest's own output", flush=True)
            from pytest_cudagraph.records.report import write_text_atomically
            write_text_atomically(Path({str(link)!r}), "the report\\n")
            """,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "pytest's own output\nthe report\n"
    assert out.stat().st_ino == inode


def test_a_dev_fd_pipe_gets_the_report(tmp_path):
    """``--cudagraph-report=>(jq .)``: bash hands the plugin /dev/fd/63, the write end of a pipe."""
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"from pathlib import Path; from pytest_cudagraph.records.report import write_text_atomically; "
                f"write_text_atomically(Path('/dev/fd/{write_end}'), 'through the pipe\\n')",
            ],
            pass_fds=(write_end,),
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        os.close(write_end)
        write_end = -1
        assert child.wait(timeout=HANG_GUARD_S) == 0, child.stderr.read()
        child.stderr.close()
        with os.fdopen(read_end, "rb") as pipe:
            read_end = -1
            assert pipe.read() == b"through the pipe\n"
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)


def test_a_link_to_a_report_stays_a_link_and_its_target_is_replaced(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "17.json").write_text("the previous run\n")
    latest = tmp_path / "latest.json"
    latest.symlink_to(Path("runs") / "17.json")
    write_report(latest, sample_report())
    assert latest.is_symlink() and os.readlink(latest) == str(Path("runs") / "17.json")
    assert load_report(runs / "17.json")["tests"] == sample_report()["tests"]
    assert sorted(p.name for p in runs.iterdir()) == ["17.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.json", "runs"]


def test_the_writable_check_accepts_what_the_write_writes_into(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    check = report_module.check_report_path_writable
    assert check(fifo) is None
    assert check(os.devnull) is None
    assert check("/dev/stdout") is None
    read_end, write_end = os.pipe()
    try:
        assert check(f"/dev/fd/{write_end}") is None
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_writable_check_looks_where_a_link_points(tmp_path):
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "runs" / "17.json")  # runs/ does not exist
    problem = report_module.check_report_path_writable(link)
    assert problem is not None
    assert problem.startswith(f"--cudagraph-report={link} (a link to {tmp_path / 'runs' / '17.json'})")
    assert f"directory {tmp_path / 'runs'} does not exist; create it or give another path" in problem


# ----------------------------------------------------------------------------
# writing: temporary files of killed writers
# ----------------------------------------------------------------------------


def temp_name(name: str, pid: int | None, random_part: str = "abcd1234") -> str:
    if pid is None:  # the names of versions that wrote no pid
        return f".{name}.{random_part}.tmp"
    return f".{name}.{pid}@{files_module._HOST}.{random_part}.tmp"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=HANG_GUARD_S)
    return child.pid


def test_a_writer_killed_mid_write_leaves_a_temp_file_the_next_write_removes(tmp_path):
    path = tmp_path / "run.json"
    write_report(path, sample_report())
    result = run_python(
        f"""
        import os, signal
        from pathlib import Path
        from pytest_cudagraph.records.report import write_text_atomically
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # killed between write and rename
        write_text_atomically(Path({str(path)!r}), "half")
        """
    )
    assert result.returncode == -signal.SIGKILL
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "run.json"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".run.json.") and leftovers[0].endswith(".tmp")
    write_report(path, sample_report())  # too young to be judged: its pid may live in another container
    assert len([p for p in tmp_path.iterdir()]) == 2
    two_minutes_ago = time.time() - 120
    os.utime(tmp_path / leftovers[0], (two_minutes_ago, two_minutes_ago))
    write_report(path, sample_report())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_only_temp_files_of_dead_writers_and_old_nameless_ones_are_removed(tmp_path):
    path = tmp_path / "run.json"
    two_hours_ago = time.time() - 2 * 3600
    files = {
        "live writer": temp_name("run.json", os.getpid()),
        "dead writer": temp_name("run.json", dead_pid(), "dead0000"),
        "old, no pid": temp_name("run.json", None, "old00000"),
        "new, no pid": temp_name("run.json", None, "new00000"),
        "another report's": temp_name("other.json", dead_pid(), "other000"),
        "not a temp file": ".run.json.notes",
    }
    for name in files.values():
        (tmp_path / name).write_text("x")
    for kind in ("old, no pid", "dead writer", "live writer", "another report's"):
        os.utime(tmp_path / files[kind], (two_hours_ago, two_hours_ago))
    write_report(path, sample_report())
    left = {kind for kind, name in files.items() if (tmp_path / name).exists()}
    assert left == {"live writer", "new, no pid", "another report's", "not a temp file"}


def test_a_temp_file_of_another_host_goes_only_when_old(tmp_path):
    path = tmp_path / "run.json"
    fresh = tmp_path / ".run.json.1@elsewhere.aaaa1111.tmp"
    old = tmp_path / ".run.json.2@elsewhere.bbbb2222.tmp"
    for leftover in (fresh, old):
        leftover.write_text("x")
    os.utime(old, (time.time() - 2 * 3600,) * 2)
    write_report(path, sample_report())
    assert fresh.exists() and not old.exists()


# ----------------------------------------------------------------------------
# loading: only regular files, never blocking
# ----------------------------------------------------------------------------


def test_loading_a_fifo_without_a_writer_fails_at_once(tmp_path):
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    result = run_python(
        f"""
        from pytest_cudagraph.errors import ReportError
        from pytest_cudagraph.records.report import load_report
        try:
            load_report({str(fifo)!r})
        except ReportError as exc:
            print(exc)
        """,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"report {fifo} is a FIFO (named pipe), not a regular file; give the path of a JSON report file "
        f"(save a stream to a file first)\n"
    )


def test_loading_dev_zero_fails_at_once_instead_of_reading_forever():
    # the address-space limit turns reading an endless file into a MemoryError instead of a swapping machine
    result = run_python(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
        from pytest_cudagraph.errors import ReportError
        from pytest_cudagraph.records.report import load_report
        try:
            load_report("/dev/zero")
        except ReportError as exc:
            print(exc)
        """,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "report /dev/zero is a character device, not a regular file" in result.stdout


def test_loading_dev_null_names_it_a_device_not_an_empty_report():
    with pytest.raises(ReportError) as info:
        load_report(os.devnull)
    assert str(info.value).startswith(f"report {os.devnull} is a character device, not a regular file; give ")


def test_compare_of_a_fifo_exits_2_in_one_line(tmp_path):
    good = write_report(tmp_path / "good.json", sample_report())
    fifo = tmp_path / "new.json"
    os.mkfifo(fifo)
    result = run_python(
        f"import sys; from pytest_cudagraph.tools.cli import main; sys.exit(main(['compare', {str(good)!r}, {str(fifo)!r}]))",
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"pytest-cudagraph: report {fifo} is a FIFO (named pipe), not a regular file; give the path of a JSON "
        f"report file (save a stream to a file first)"
    ]
