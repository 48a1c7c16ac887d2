"""The startup benchmark: what a test costs to start, cold and warm, each run in a fresh interpreter.

::

    pytest-cudagraph startup tests/test_model.py::test_decode --runs 5 --report startup.json [-- -x]

Each run is a fresh ``python -m pytest NODEID`` (nothing compiled in the process
before it, as at a real start), with ``--cudagraph-report`` pointed at a file of
its own:

- a **cold** run gets an empty compile-cache directory of its own
  (``--cudagraph-cache-dir``, and TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR in its
  environment pointing at the same layers, so that a conftest that compiles at
  import is cold too);
- a **warm** run reuses the directory the first cold run filled.

The runs alternate (cold 1, warm 1, cold 2, warm 2, ...), so that a machine that
slows down or speeds up during the benchmark moves both kinds alike.  Each run
gives the wall seconds of the whole child process and, from its report, the test's
``duration_s``, ``compile_time.total_s`` and its phases, and ``capture_s``
(GraphSets and piecewise together), each where the record has it.

Per kind the statistic is the **median** over the runs, and the noise is the
**spread, max - min** of the same runs: with 3 to 10 runs a quartile is one or
two samples away from the extremes, so the range is the honest, simple measure,
and a difference larger than two runs' ranges is not noise (``compare``'s time
rules read exactly this).

The result is a report (schema ``pytest-cudagraph/1``) whose records carry a
``startup`` section, so ``pytest-cudagraph compare`` reads two of them.  A child
that fails, crashes or times out ends the runs of its node id with one sentence
naming it and its exit status; every run measured before it is kept, and the
report says the run is incomplete.  Ctrl-C or SIGTERM of the benchmark stops the
run in progress with its whole process group (the child leads one of its own, so
nothing else would), keeps every run measured before it, says which runs and node
ids were not measured, and removes the work directory: the report is written,
incomplete.  It is a measurement, not a timed assertion.  Reads and writes JSON
and runs subprocesses only; never imports torch.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..records.report import build_report, load_report
from ..text import clip, count_noun, format_table, number
from .instructions import INSTRUCTIONS_ENV, INSTRUCTIONS_NOTE, callgrind_command, callgrind_total

STATISTIC = "median"
SPREAD = "max - min"
TRIMMED_SPREAD = "max - min of the runs without the one farthest from the median (3 runs or more)"
ORDER = "cold 1, warm 1, cold 2, warm 2, ...: a warm run reuses the compile caches of cold run 1"
# one child; a cold compile of a large model takes minutes, a hung one must not hold CI forever
DEFAULT_TIMEOUT_S = 1800.0
# the layers under a cache root, as pytest_cudagraph.cacheroot lays them out (the plugin sets the same)
INDUCTOR_SUBDIR = "inductor"
TRITON_SUBDIR = "triton"
PASSES = ("cold", "warm")
# the figures of one run, in the order the table prints them
FIGURES = ("wall_s", "duration_s", "compile_s", "capture_s", "compile_instructions")
_FIGURE_WORDS = {
    "wall_s": "the child process, start to exit",
    "duration_s": "the test (setup + call + teardown)",
    "compile_s": "torch.compile, all phases",
    "capture_s": "CUDA graph capture",
    "compile_instructions": "instructions torch.compile executed (callgrind)",
}
# pytest's exit statuses, for the sentence about a child that did not pass
_EXIT_WORDS = {
    1: "the test failed",
    2: "pytest was interrupted",
    3: "pytest hit an internal error",
    4: "pytest refused its command line (usage error)",
    5: "pytest collected no test: check the node id",
}


# ----------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSample:
    """One child run: its kind (cold/warm), exit status, and what it measured (None: not measured)."""

    kind: str
    index: int
    exitcode: int | None
    wall_s: float
    outcome: str | None = None
    duration_s: float | None = None
    compile_s: float | None = None
    capture_s: float | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    # instructions torch.compile executed in the run, counted by callgrind (startup --instructions)
    compile_instructions: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def figure(self, name: str) -> float | None:
        return getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        return {
            "pass": self.kind,
            "index": self.index,
            "exitcode": self.exitcode,
            "outcome": self.outcome,
            "wall_s": round(self.wall_s, 4),
            "duration_s": _rounded(self.duration_s),
            "compile_s": _rounded(self.compile_s),
            "capture_s": _rounded(self.capture_s),
            "phases": {name: round(value, 4) for name, value in self.phases.items()},
            "error": self.error,
            **({"compile_instructions": self.compile_instructions} if self.compile_instructions is not None else {}),
        }


@dataclass(frozen=True)
class Stats:
    """The median of some runs' figure, with their spread (max - min), the spread one outlier cannot move, and count."""

    median: float
    min: float
    max: float
    n: int
    # max - min without the run farthest from the median (3 runs or more; the full range below that)
    trimmed_spread: float | None = None

    @property
    def spread(self) -> float:
        return self.max - self.min

    @classmethod
    def of(cls, values: Iterable[float]) -> Stats | None:
        values = [v for v in values if v is not None and math.isfinite(v)]
        if not values:
            return None
        median = statistics.median(values)
        return cls(median, min(values), max(values), len(values), trimmed_spread(values, median))

    def to_json(self) -> dict[str, Any]:
        return {
            "median": round(self.median, 4),
            "min": round(self.min, 4),
            "max": round(self.max, 4),
            "spread": round(self.spread, 4),
            "trimmed_spread": round(self.spread if self.trimmed_spread is None else self.trimmed_spread, 4),
            "n": self.n,
        }


def trimmed_spread(values: list[float], median: float) -> float:
    """max - min of the runs without the one farthest from the median; the full range of fewer than 3 runs.

    One slow run (the first cold run on a fresh machine) would otherwise widen the
    range by as much as it is slow, and a range that wide hides a real regression.
    """
    if len(values) < 3:
        return max(values) - min(values)
    rest = sorted(values, key=lambda v: abs(v - median))[:-1]
    return max(rest) - min(rest)


@dataclass(frozen=True)
class NodeStartup:
    """Every run of one node id, and the sections of its first cold run's record worth keeping."""

    nodeid: str
    runs: int
    samples: tuple[RunSample, ...]
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # graphs / piecewise of the first cold run's record: memory is deterministic-ish, one run is enough
    sections: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    # what stopped the runs from outside (Ctrl-C, SIGTERM), one sentence; None when nothing did
    interrupted: str | None = None

    @property
    def complete(self) -> bool:
        return (
            not self.errors
            and self.interrupted is None
            and all(len(self.of_kind(kind)) == self.runs for kind in PASSES)
        )

    def of_kind(self, kind: str) -> list[RunSample]:
        return [s for s in self.samples if s.kind == kind and s.ok]

    def stats(self, kind: str, figure: str) -> Stats | None:
        return Stats.of(s.figure(figure) for s in self.of_kind(kind))

    def phase_stats(self, kind: str) -> dict[str, Stats]:
        names = list(dict.fromkeys(name for s in self.of_kind(kind) for name in s.phases))
        out = {}
        for name in names:
            stats = Stats.of(s.phases.get(name) for s in self.of_kind(kind))
            if stats is not None:
                out[name] = stats
        return out

    def warm_over_cold(self) -> dict[str, float]:
        out = {}
        for figure in FIGURES:
            cold, warm = self.stats("cold", figure), self.stats("warm", figure)
            if cold is not None and warm is not None and cold.median > 0:
                out[figure] = round(warm.median / cold.median, 4)
        return out

    @property
    def outcome(self) -> str:
        outcomes = [s.outcome for s in self.samples]
        for worst in ("crashed", "error", "failed"):
            if worst in outcomes:
                return worst
        if any(s.error for s in self.samples):
            return "error"
        return next((o for o in outcomes if o), "passed")

    def to_record(self) -> dict[str, Any]:
        section: dict[str, Any] = {
            "runs": self.runs,
            "complete": self.complete,
            "statistic": STATISTIC,
            "spread": SPREAD,
            "trimmed_spread": TRIMMED_SPREAD,
            "order": ORDER,
            "command": list(self.command),
        }
        for kind in PASSES:
            part: dict[str, Any] = {"runs": len(self.of_kind(kind))}
            for figure in FIGURES:
                stats = self.stats(kind, figure)
                if stats is not None:
                    part[figure] = stats.to_json()
            phases = self.phase_stats(kind)
            if phases:
                part["phases"] = {name: stats.to_json() for name, stats in phases.items()}
            part["samples"] = [s.to_json() for s in self.samples if s.kind == kind]
            section[kind] = part
        section["warm_over_cold"] = self.warm_over_cold()
        section["errors"] = list(self.errors)
        section["notes"] = list(self.notes)
        if self.interrupted is not None:
            section["interrupted"] = self.interrupted
        record: dict[str, Any] = {"outcome": self.outcome, **self.sections, "startup": section}
        if self.errors:
            record["failure"] = {"when": "startup", "message": self.errors[0]}
        return record


@dataclass(frozen=True)
class StartupResult:
    """The startup benchmark of some node ids: what ``pytest-cudagraph startup`` writes and prints."""

    nodes: tuple[NodeStartup, ...]
    env: Mapping[str, Any] = field(default_factory=dict)
    # what stopped the benchmark from outside (Ctrl-C, SIGTERM), one sentence; None when nothing did
    interrupted: str | None = None
    # node ids the interrupt left without one finished run: not among the report's tests, listed as not run
    not_run: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.interrupted is None and not self.not_run and all(node.complete for node in self.nodes)

    @property
    def errors(self) -> list[str]:
        """Every run that did not pass, and what interrupted the benchmark, one sentence each."""
        out = [error for node in self.nodes for error in node.errors]
        return out + ([self.interrupted] if self.interrupted is not None else [])

    def to_report(self) -> dict[str, Any]:
        """A pytest-cudagraph/1 report: one record per node id measured, with its ``startup`` section."""
        reasons = self.errors or [
            f"{node.nodeid}: {len(node.of_kind('cold'))} cold and {len(node.of_kind('warm'))} warm runs "
            f"of the {node.runs} asked for"
            for node in self.nodes
            if not node.complete
        ]
        run: dict[str, Any] = {"complete": self.complete, "incomplete_reasons": reasons}
        if self.not_run:
            run["not_run"] = list(self.not_run)
        return build_report(
            self.env,
            {node.nodeid: node.to_record() for node in self.nodes},
            exitstatus=0 if self.complete else 1,
            run=run,
        )

    def table_lines(self) -> list[str]:
        """Per node id: one row per figure and phase, cold and warm median and spread, and warm/cold."""
        lines: list[str] = []
        for node in self.nodes:
            cold, warm = len(node.of_kind("cold")), len(node.of_kind("warm"))
            lines.append(
                f"{node.nodeid}: {count_noun(cold, 'cold run')} and {count_noun(warm, 'warm run')} "
                f"({STATISTIC}, spread = {SPREAD}, seconds)"
            )
            rows = [["figure", "cold", "spread", "warm", "spread", "warm/cold"]]
            ratios = node.warm_over_cold()
            cold_phases, warm_phases = node.phase_stats("cold"), node.phase_stats("warm")
            for figure in FIGURES:
                rows.append(_row(figure, node.stats("cold", figure), node.stats("warm", figure), ratios.get(figure)))
                if figure != "compile_s":
                    continue
                for name in dict.fromkeys([*cold_phases, *warm_phases]):  # the phases of the compile, under it
                    c, w = cold_phases.get(name), warm_phases.get(name)
                    ratio = w.median / c.median if c is not None and w is not None and c.median > 0 else None
                    rows.append(_row(f"  {name}", c, w, ratio))
            lines += format_table(rows, align="<>>>>>", indent="  ")
            lines += [f"  note: {note}" for note in node.notes]
            lines += [f"  ERROR: {error}" for error in node.errors]
        if self.interrupted is not None:
            lines.append(f"INTERRUPTED: {self.interrupted}")
        lines += [f"{nodeid}: not measured" for nodeid in self.not_run]
        if not self.complete:
            lines.append("INCOMPLETE: the report keeps every run measured and says which are missing")
        return lines


def _row(name: str, cold: Stats | None, warm: Stats | None, ratio: float | None) -> list[str]:
    counted = name == "compile_instructions"

    def cells(stats: Stats | None) -> list[str]:
        if stats is None:
            return ["-", ""]
        if counted:
            return [f"{stats.median:,.0f}", f"{stats.spread:,.0f}"]
        return [f"{stats.median:.3f}", f"{stats.spread:.3f}"]

    return [name, *cells(cold), *cells(warm), "-" if ratio is None else f"{ratio:.2f}"]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# ----------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------


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


def _interrupt_words(exc: BaseException) -> str:
    return exc.words if isinstance(exc, StartupInterrupted) else "Ctrl-C (SIGINT)"


class _Interrupts:
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

    def __enter__(self) -> _Interrupts:
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
    durations = report.get("durations") if isinstance(report.get("durations"), Mapping) else {}
    tests = report.get("tests") if isinstance(report.get("tests"), Mapping) else {}
    ids = list(dict.fromkeys([*durations, *tests]))
    chosen = [nodeid] if nodeid in ids else ids
    figures: dict[str, Any] = {"outcome": None, "duration_s": None, "compile_s": None, "capture_s": None, "phases": {}}

    def add(key: str, value: Any) -> None:
        value = number(value, finite=True)
        if value is not None:
            figures[key] = (figures[key] or 0.0) + value

    outcomes = []
    for test in chosen:
        record = tests.get(test) if isinstance(tests.get(test), Mapping) else {}
        outcomes.append(record.get("outcome"))
        add("duration_s", record.get("duration_s", durations.get(test)))
        compile_time = record.get("compile_time") if isinstance(record.get("compile_time"), Mapping) else {}
        add("compile_s", compile_time.get("total_s"))
        phases = compile_time.get("phases") if isinstance(compile_time.get("phases"), Mapping) else {}
        for name, value in phases.items():
            value = number(value, finite=True)
            if value is not None:
                figures["phases"][str(name)] = figures["phases"].get(str(name), 0.0) + value
        for section in ("graphs", "piecewise"):
            part = record.get(section) if isinstance(record.get(section), Mapping) else {}
            add("capture_s", part.get("capture_s"))
    known = [o for o in outcomes if o]
    figures["outcome"] = next((o for o in ("error", "failed") if o in known), known[0] if known else None)
    name = chosen[0] if len(chosen) == 1 else nodeid
    record = tests.get(name) if len(chosen) == 1 and isinstance(tests.get(name), Mapping) else {}
    return name, figures, dict(record)


def _one_run(
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
    name, record, env_of_report = nodeid, {}, {}
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


def measure_startup(
    nodeid: str,
    runs: int,
    *,
    pytest_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
    work_dir: Path,
    progress: Callable[[str], None] | None = None,
    instructions: bool = False,
) -> tuple[NodeStartup, dict[str, Any]]:
    """``runs`` cold and ``runs`` warm runs of ``nodeid``, alternating; (the result, the env of its reports).

    The first run that does not pass ends the node's runs: a test that fails once will
    fail again, and every further run would cost a cold start.  Ctrl-C (or SIGTERM,
    under ``run_startup``) ends them too: the run in progress is stopped with its
    process group and not measured, the runs before it are kept, and the result's
    ``interrupted`` says so.
    """
    samples: list[RunSample] = []
    errors: list[str] = []
    notes: list[str] = []
    env: dict[str, Any] = {}
    sections: dict[str, Any] = {}
    name = nodeid
    command: list[str] = []
    running: tuple[str, int] | None = None
    interrupted = None
    try:
        work = Path(tempfile.mkdtemp(prefix="node-", dir=work_dir))
        schedule = [(kind, index) for index in range(1, runs + 1) for kind in PASSES]
        for kind, index in schedule:
            # cold run i fills a directory of its own; every warm run reuses cold run 1's
            cache_dir = work / f"cache-cold-{index if kind == 'cold' else 1}"
            running = (kind, index)
            sample, found, record, child_env, command = _one_run(
                nodeid, kind, index, cache_dir, work, pytest_args, timeout, instructions
            )
            samples.append(sample)
            running = None
            if progress is not None:
                progress(
                    f"{nodeid}: {kind} run {index}/{runs}: {sample.wall_s:.2f} s" + (" FAILED" if sample.error else "")
                )
            if sample.error:
                errors.append(sample.error)
                break
            if kind == "cold" and index == 1:
                name, env = found, child_env
                sections = {key: record[key] for key in ("graphs", "piecewise") if isinstance(record.get(key), Mapping)}
                if sample.outcome == "skipped":
                    reason = record.get("skip_reason")
                    notes.append(
                        f"the test was skipped{f' ({clip(reason, 120)})' if reason else ''}: nothing was measured"
                    )
    except KeyboardInterrupt as exc:  # Ctrl-C, or StartupInterrupted: SIGTERM too
        words = _interrupt_words(exc)
        if running is not None:
            interrupted = f"{running[0]} run {running[1]} of {nodeid} was stopped by {words} and not measured"
        elif samples:
            interrupted = (
                f"the runs of {nodeid} were stopped by {words} after {samples[-1].kind} run {samples[-1].index}"
            )
        else:
            interrupted = f"the runs of {nodeid} were stopped by {words} before the first one"
    measured = [s for s in samples if s.ok]
    if instructions:
        notes.append(INSTRUCTIONS_NOTE)
    if measured and all(s.compile_s is None for s in measured):
        notes.append(
            "its records hold no compile_time (the test uses no plugin marker or fixture, compiles nothing, "
            "or this plugin version does not measure it): compile_s not measured"
        )
    node = NodeStartup(
        nodeid=name,
        runs=runs,
        samples=tuple(samples),
        errors=tuple(errors),
        notes=tuple(notes),
        sections=sections,
        command=tuple(_portable(command)),
        interrupted=interrupted,
    )
    return node, env


def _portable(command: Sequence[str]) -> list[str]:
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


def check_timeout(timeout: float) -> str | None:
    """Why ``timeout`` is no limit on a run (zero, negative, NaN, infinite), in one sentence; None when it is one."""
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and math.isfinite(timeout) and timeout > 0:
        return None
    shown = f"{timeout:g}" if isinstance(timeout, (int, float)) else repr(timeout)
    return f"--timeout {shown}: give a positive, finite number of seconds for one run (default {DEFAULT_TIMEOUT_S:g})"


def run_startup(
    nodeids: Sequence[str],
    runs: int,
    *,
    pytest_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
    keep: Path | None = None,
    progress: Callable[[str], None] | None = None,
    instructions: bool = False,
) -> StartupResult:
    """Measure every node id in turn (see the module docstring); the caches are removed afterwards unless ``keep``.

    Called from the main thread, SIGINT and SIGTERM end the benchmark instead of the
    process: the run in progress is stopped with its process group, the work
    directory is removed (unless ``keep``), and the result is incomplete, saying
    what was interrupted (``interrupted``) and which node ids were not measured
    (``not_run``).  Later signals are ignored until that cleanup is done.
    """
    if runs < 1:
        raise ValueError(f"--runs {runs}: give at least 1 (3 or more for a spread)")
    problem = check_timeout(timeout)
    if problem is not None:
        raise ValueError(problem)
    with _Interrupts() as interrupts:
        nodes: list[NodeStartup] = []
        env: dict[str, Any] = {}
        pending = list(nodeids)
        interrupted: str | None = None
        work_dir: Path | None = None
        try:
            work_dir = Path(tempfile.mkdtemp(prefix="pytest-cudagraph-startup-", dir=keep))
            while pending:
                node, node_env = measure_startup(
                    pending[0],
                    runs,
                    pytest_args=pytest_args,
                    timeout=timeout,
                    work_dir=work_dir,
                    progress=progress,
                    instructions=instructions,
                )
                if node.samples or node.interrupted is None:
                    nodes.append(node)
                    pending.pop(0)
                env = env or node_env
                if node.interrupted is not None:
                    interrupted = node.interrupted + ("; the runs before it are kept" if node.samples else "")
                    later = len(pending) - (0 if node.samples else 1)
                    if later:
                        interrupted += f"; {count_noun(later, 'more node id')} not measured"
                    break
        except KeyboardInterrupt as exc:  # between two node ids
            interrupted = f"the benchmark was stopped by {_interrupt_words(exc)}"
            if pending:
                interrupted += f"; {count_noun(len(pending), 'node id')} not measured"
        finally:
            interrupts.calm()  # the cleanup runs to its end, however often the user presses Ctrl-C
            if work_dir is not None and keep is None:
                shutil.rmtree(work_dir, ignore_errors=True)
            elif work_dir is not None and progress is not None:
                progress(f"kept the runs' caches, reports and logs in {work_dir}")
        return StartupResult(
            tuple(nodes), env, interrupted=interrupted, not_run=tuple(pending) if interrupted is not None else ()
        )
