"""The startup benchmark's child processes: one run's command and environment, running it, reading its report.

- ``child_command`` / ``child_environment``: a fresh ``python -m pytest NODEID`` with
  its own report, and Inductor's and Triton's caches under the run's cache directory;
- ``one_run``: run it once (under callgrind with ``--instructions``), in a process
  group of its own that a timeout or an interrupt stops whole, and read its figures
  (``figures_from_report``) into a ``RunSample``;
- ``Interrupts``: SIGINT and SIGTERM become ``StartupInterrupted`` while the benchmark runs;
- ``portable_command``: the command as the report keeps it, without temporary paths.

Runs subprocesses and reads JSON only; never imports torch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..records.comparison import mapping_of
from ..records.json_values import number
from ..records.report import load_report
from ..records.startup import RunSample
from ..render.plain_text import clip
from .instructions import INSTRUCTIONS_ENV, callgrind_command, callgrind_total

__all__ = [
    "INDUCTOR_SUBDIR",
    "TRITON_SUBDIR",
    "Interrupts",
    "StartupInterrupted",
    "child_command",
    "child_environment",
    "figures_from_report",
    "interrupt_words",
    "one_run",
    "portable_command",
]

# the layers under a cache root, as pytest_cudagraph.cacheroot lays them out (the plugin sets the same)
INDUCTOR_SUBDIR = "inductor"
TRITON_SUBDIR = "triton"
# pytest's exit statuses, for the sentence about a child that did not pass
_EXIT_WORDS = {
    1: "the test failed",
    2: "pytest was interrupted",
    3: "pytest hit an internal error",
    4: "pytest refused its command line (usage error)",
    5: "pytest collected no test: check the node id",
}


def child_command(
    nodeid: str, report_path: Path, cache_dir: Path, pytest_args: Sequence[str], python: str = sys.executable
) -> list[str]:
    """The command line of one run (a fresh interpreter)."""
    return [
        python,
        "-m",
        "pytest",
        nodeid,
        "-p",
        "no:randomly",
        # the benchmark must leave the user's --lf / --ff state as it found it
        "-p",
        "no:cacheprovider",
        "-q",
        f"--cudagraph-report={report_path}",
        "--cudagraph",
        f"--cudagraph-cache-dir={cache_dir}",
        *pytest_args,
    ]


def child_environment(cache_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the caller's, with Inductor's and Triton's caches under ``cache_dir``."""
    env = dict(os.environ if base is None else base)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / INDUCTOR_SUBDIR)
    env["TRITON_CACHE_DIR"] = str(cache_dir / TRITON_SUBDIR)
    return env


class StartupInterrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM reached the benchmark: the run in progress is stopped, the report written incomplete."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def words(self) -> str:
        return "Ctrl-C (SIGINT)" if self.signum == signal.SIGINT else signal.Signals(self.signum).name


def interrupt_words(exc: BaseException) -> str:
    return exc.words if isinstance(exc, StartupInterrupted) else "Ctrl-C (SIGINT)"


class Interrupts:
    """While active (main thread only): the first SIGINT or SIGTERM raises StartupInterrupted, the next are ignored.

    ``calm()`` ignores every later one too, so that stopping a child and removing the
    work directory run to their end however often the user presses Ctrl-C.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.armed = False
        self.previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.armed:
            self.armed = False
            raise StartupInterrupted(signum)

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self.previous[signum] = signal.getsignal(signum)
                signal.signal(signum, self._handle)
            self.armed = True
        return self

    def calm(self) -> None:
        self.armed = False

    def __exit__(self, *exc: object) -> None:
        self.armed = False
        for signum, handler in self.previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _stop_group(child: subprocess.Popen) -> None:
    """Kill the child's whole process group (it leads one: its compile workers, whatever its test started) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _run_child(command: list[str], env: Mapping[str, str], log: Path, timeout: float) -> tuple[int | None, float]:
    """(exit status, or None when killed at ``timeout``; wall seconds).  Output goes to ``log``.

    The child leads a process group of its own, so that a timeout also ends the compile
    workers it started (they would otherwise keep running, holding the CPU).  Being in a
    session of its own, it gets no Ctrl-C from the terminal: an interrupt here (any
    exception) stops its group before it goes on, so no run outlives the benchmark.
    """
    with open(log, "wb") as out:
        start = time.perf_counter()
        child = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
        try:
            code: int | None = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(child)
            code = None
        except BaseException:
            _stop_group(child)
            raise
        return code, time.perf_counter() - start


def _last_line(log: Path) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return clip(lines[-1], 200) if lines else ""


def _outcome_of_exit(code: int | None) -> str | None:
    """What a child's exit status says of its test where its record does not (a test without a plugin record)."""
    if code == 0:
        return None
    if code is None or code < 0:
        return "crashed"
    return "failed" if code == 1 else "error"


def _exit_text(code: int | None, timeout: float) -> str:
    if code is None:
        return f"was killed after the {timeout:g} s timeout"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name} (exit status {code})"
    return f"exited with status {code} ({_EXIT_WORDS.get(code, 'not a pytest exit status')})"


def figures_from_report(report: Mapping[str, Any], nodeid: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(the node id the child's report names, the test's figures, its record) from one child's report.

    A node id that selected several tests (a file, a class) adds their figures up.
    """
    durations = mapping_of(report.get("durations"))
    tests = mapping_of(report.get("tests"))
    ids = list(dict.fromkeys([*durations, *tests]))
    chosen = [nodeid] if nodeid in ids else ids
    figures: dict[str, Any] = {"outcome": None, "duration_s": None, "compile_s": None, "capture_s": None, "phases": {}}

    def add(key: str, value: Any) -> None:
        value = number(value, finite=True)
        if value is not None:
            figures[key] = (figures[key] or 0.0) + value

    outcomes = []
    for test in chosen:
        record = mapping_of(tests.get(test))
        outcomes.append(record.get("outcome"))
        add("duration_s", record.get("duration_s", durations.get(test)))
        compile_time = mapping_of(record.get("compile_time"))
        add("compile_s", compile_time.get("total_s"))
        phases = mapping_of(compile_time.get("phases"))
        for name, value in phases.items():
            value = number(value, finite=True)
            if value is not None:
                figures["phases"][str(name)] = figures["phases"].get(str(name), 0.0) + value
        for section in ("graphs", "piecewise"):
            part = mapping_of(record.get(section))
            add("capture_s", part.get("capture_s"))
    known = [o for o in outcomes if o]
    figures["outcome"] = next((o for o in ("error", "failed") if o in known), known[0] if known else None)
    name = chosen[0] if len(chosen) == 1 else nodeid
    record = mapping_of(tests.get(name)) if len(chosen) == 1 else {}
    return name, figures, dict(record)


def one_run(
    nodeid: str,
    kind: str,
    index: int,
    cache_dir: Path,
    work: Path,
    pytest_args: Sequence[str],
    timeout: float,
    instructions: bool = False,
) -> tuple[RunSample, str, dict[str, Any], dict[str, Any], list[str]]:
    """Run the child once: (its sample, the node id its report names, its record, its env, its command).

    With ``instructions`` the child runs under callgrind, collecting only while a
    frame compiles (``INSTRUCTIONS_ENV``), and its count is the sample's.
    """
    report_path = work / f"{kind}-{index}.json"
    command = child_command(nodeid, report_path, cache_dir, pytest_args)
    env = child_environment(cache_dir)
    counts = work / f"{kind}-{index}.callgrind"
    if instructions:
        command = callgrind_command(command, counts)
        env[INSTRUCTIONS_ENV] = "1"
    code, wall = _run_child(command, env, work / f"{kind}-{index}.log", timeout)
    try:
        report = load_report(report_path)
    except ReportError:
        report = None
    name = nodeid
    record: dict[str, Any] = {}
    env_of_report: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    if report is not None:
        name, figures, record = figures_from_report(report, nodeid)
        env_of_report = dict(report.get("env") or {})
    error = None
    if code != 0:
        tail = _last_line(work / f"{kind}-{index}.log")
        error = (
            f"{kind} run {index} of {nodeid} {_exit_text(code, timeout)}"
            + (f": {tail}" if tail else "")
            + "; run it alone with python -m pytest to see why"
        )
    elif report is None:
        error = f"{kind} run {index} of {nodeid} passed but wrote no report; check that the plugin is installed"
    counted = callgrind_total(counts) if instructions else None
    if instructions and error is None and counted is None:
        error = f"{kind} run {index} of {nodeid} passed but callgrind wrote no count ({counts.name}); see its log"
    sample = RunSample(
        kind=kind,
        index=index,
        exitcode=code,
        wall_s=wall,
        outcome=figures.get("outcome") or _outcome_of_exit(code),
        duration_s=figures.get("duration_s"),
        compile_s=figures.get("compile_s"),
        capture_s=figures.get("capture_s"),
        phases=figures.get("phases") or {},
        error=error,
        compile_instructions=counted,
    )
    return sample, name, record, env_of_report, command


def portable_command(command: Sequence[str]) -> list[str]:
    """The child's command as the report keeps it: the temporary paths replaced by what they stand for."""
    out = []
    if command and Path(command[0]).name == "valgrind":  # startup --instructions: the measured python is after it
        start = next((i for i, arg in enumerate(command) if not arg.startswith("-") and i > 0), len(command))
        command = command[start:]
    for arg in command[1:]:
        if arg.startswith("--cudagraph-report="):
            arg = "--cudagraph-report=<run>.json"
        elif arg.startswith("--cudagraph-cache-dir="):
            arg = "--cudagraph-cache-dir=<cold: fresh, warm: cold run 1's>"
        out.append(arg)
    return ["python", *out]
