"""Which of the plugin's checks failed a test, and the line of the user's code it points at.

A test failed by one of the plugin's checks gets, in its record's ``failure``, the
check's name (``rule``) and the user's line (``file``, ``line``), found in the
process that ran the test, where the exception and its traceback still exist.  The
record carries them to the report, the job summary and the CI annotations
(``failure_annotations``).  The rules, and the line each points at:

=================  ===============================================  ==========================================
rule               failed by                                        line
=================  ===============================================  ==========================================
max_recompiles     ``@pytest.mark.max_recompiles(n)``                the first recompile's call site (a limit
                                                                    hit's first)
compile_cache      ``@pytest.mark.compile_cache``, a probe's check   the test function
trees              ``@pytest.mark.cudagraph(trees="all")``          the op of the first cudagraph skip
max_rerecords      ``@pytest.mark.cudagraph(max_rerecords=n)``      the test function
recompiles         a ``RecompileWatch``'s check                     the first recompile's call site
capture            ``CaptureError``                                  the op that failed (else the capture call)
stale-graph        ``StaleGraphError``                               the user's line that replayed
replay, pool,      the check of that name (``check_replay``,        the user's line that called it
agree, piecewise,  ``check_pool``, ``agree_modes``, piecewise,
ranks              ``cudagraph_ranks``)
misuse             ``MisuseError``                                   the user's line that called the API
=================  ===============================================  ==========================================

A failure of the test's own code (an ``assert``, an exception of the model) is not
the plugin's: it gets no rule, and CI shows it through pytest's own report.
Nothing here imports torch.
"""

from __future__ import annotations

import os
import sysconfig
from functools import lru_cache
from typing import Any

import pytest

from ..compile.call_site import innermost_user_frame, relative_path
from ..errors import CaptureError, CudagraphError, InvariantViolation, MisuseError, StaleGraphError
from .items import FAILURE_KEY

# a marker's check that failed: (rule, the user's line or None), noted before it fails the test
CHECK_FAILURE_KEY = pytest.StashKey[tuple]()

# an InvariantViolation's rule, by the module that raised it (the first prefix that matches)
_RULES_BY_MODULE = (
    ("pytest_cudagraph.compile.", "recompiles"),
    ("pytest_cudagraph.caches.", "compile_cache"),
    ("pytest_cudagraph.graphs.pool_check", "pool"),
    ("pytest_cudagraph.graphs.reduce_overhead", "trees"),
    ("pytest_cudagraph.graphs.rerecords", "max_rerecords"),
    ("pytest_cudagraph.graphs.agree", "agree"),
    ("pytest_cudagraph.graphs.", "replay"),
    ("pytest_cudagraph.piecewise.", "piecewise"),
    ("pytest_cudagraph.ranks.", "ranks"),
)
_RULES_BY_TYPE: tuple[tuple[type[CudagraphError], str], ...] = (
    (CaptureError, "capture"),
    (StaleGraphError, "stale-graph"),
    (MisuseError, "misuse"),
)


def note_check_failure(item: pytest.Item, rule: str, site: tuple[str, int] | None) -> None:
    """Before a marker's check fails the test (``pytest.fail``): which check, and the user's line if it found one."""
    item.stash[CHECK_FAILURE_KEY] = (rule, site)


def locate_failure(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """After a failed phase: the check and the user's line into the test's first failure, where the plugin failed it."""
    failure = item.stash.get(FAILURE_KEY, None)
    if failure is None or "rule" in failure:
        return
    noted = item.stash.get(CHECK_FAILURE_KEY, None)
    if noted is not None:
        del item.stash[CHECK_FAILURE_KEY]
        rule, site = noted
    else:
        found = _rule_of(excinfo.value, excinfo.tb)
        if found is None:
            return  # the test's own failure: pytest's report is the place for it
        rule, site = found, excinfo.value.site if isinstance(excinfo.value, CudagraphError) else None
        if site is None:
            frame = innermost_user_frame(excinfo.tb, skip=_installed)
            site = (frame.filename, frame.lineno) if frame is not None and frame.lineno else None
    file, line = site if site is not None else _test_line(item)
    failure.update(rule=rule, file=relative_path(os.path.abspath(file)), line=int(line))


def _rule_of(exc: BaseException, tb: Any) -> str | None:
    if not isinstance(exc, CudagraphError):
        return None
    for kind, rule in _RULES_BY_TYPE:
        if isinstance(exc, kind):
            return rule
    if not isinstance(exc, InvariantViolation):
        return None
    raised_in = ""
    while tb is not None:  # the innermost frame of the package: the module whose check raised
        name = str(tb.tb_frame.f_globals.get("__name__", ""))
        if name.startswith("pytest_cudagraph.") and not name.startswith("pytest_cudagraph.plugin"):
            raised_in = name
        tb = tb.tb_next
    for prefix, rule in _RULES_BY_MODULE:
        if raised_in.startswith(prefix):
            return rule
    return "check"


def _test_line(item: pytest.Item) -> tuple[str, int]:
    """The test function's own line: where a check that names no line of its own points."""
    path = str(getattr(item, "path", "") or item.location[0])
    return path, int(item.location[1] or 0) + 1


@lru_cache(maxsize=1)
def _site_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[key]) + os.sep for key in ("purelib", "platlib") if key in paths})


def _installed(filename: str) -> bool:
    """A file of an installed package (pytest's, pluggy's): never the line a CI annotation should point at."""
    return os.path.abspath(filename).startswith(_site_dirs())


def site_of_location(location: str | None) -> tuple[str, int] | None:
    """``(file, line)`` of a ``"file:line"`` the library recorded (a cudagraph skip's op); None if it names none."""
    if not location:
        return None
    file, _, line = location.rpartition(":")
    return (file, int(line)) if file and line.isdigit() and int(line) > 0 else None
