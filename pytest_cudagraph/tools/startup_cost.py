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

The work is split by job: ``startup_child`` (a run's command, environment and
process), ``records.startup`` (the samples, their statistics, the report); the
table is ``render.startup_text``'s.  This module runs the benchmark; each name is
imported from the module that defines it.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..records.startup import (
    PASSES,
    NodeStartup,
    RunSample,
    StartupResult,
)
from ..render.plain_text import clip, count_noun
from .instructions import INSTRUCTIONS_NOTE
from .startup_child import (
    Interrupts,
    interrupt_words,
    one_run,
    portable_command,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "check_timeout",
    "measure_startup",
    "run_startup",
]

# one child; a cold compile of a large model takes minutes, a hung one must not hold CI forever
DEFAULT_TIMEOUT_S = 1800.0


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
        for kind, index in [(kind, index) for index in range(1, runs + 1) for kind in PASSES]:
            # cold run i fills a directory of its own; every warm run reuses cold run 1's
            cache_dir = work / f"cache-cold-{index if kind == 'cold' else 1}"
            running = (kind, index)
            sample, found, record, child_env, command = one_run(
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
                notes += _skipped_notes(sample, record)
    except KeyboardInterrupt as exc:  # Ctrl-C, or StartupInterrupted: SIGTERM too
        interrupted = _interrupted_sentence(nodeid, running, samples, interrupt_words(exc))
    node = NodeStartup(
        nodeid=name,
        runs=runs,
        samples=tuple(samples),
        errors=tuple(errors),
        notes=tuple(notes + _measured_notes(samples, instructions)),
        sections=sections,
        command=tuple(portable_command(command)),
        interrupted=interrupted,
    )
    return node, env


def _skipped_notes(sample: RunSample, record: Mapping[str, Any]) -> list[str]:
    """A note when the first cold run's test was skipped: nothing was measured."""
    if sample.outcome != "skipped":
        return []
    reason = record.get("skip_reason")
    return [f"the test was skipped{f' ({clip(reason, 120)})' if reason else ''}: nothing was measured"]


def _measured_notes(samples: Sequence[RunSample], instructions: bool) -> list[str]:
    """The notes about what the runs measured: instructions counted, compile time absent."""
    notes = [INSTRUCTIONS_NOTE] if instructions else []
    measured = [s for s in samples if s.ok]
    if measured and all(s.compile_s is None for s in measured):
        notes.append(
            "its records hold no compile_time (the test uses no plugin marker or fixture, compiles nothing, "
            "or this plugin version does not measure it): compile_s not measured"
        )
    return notes


def _interrupted_sentence(
    nodeid: str, running: tuple[str, int] | None, samples: Sequence[RunSample], words: str
) -> str:
    """What an interrupt stopped: the run in progress, or the runs after the last one, or all of them."""
    if running is not None:
        return f"{running[0]} run {running[1]} of {nodeid} was stopped by {words} and not measured"
    if samples:
        return f"the runs of {nodeid} were stopped by {words} after {samples[-1].kind} run {samples[-1].index}"
    return f"the runs of {nodeid} were stopped by {words} before the first one"


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
    with Interrupts() as interrupts:
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
            interrupted = f"the benchmark was stopped by {interrupt_words(exc)}"
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
