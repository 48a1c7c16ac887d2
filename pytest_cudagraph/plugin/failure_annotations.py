"""GitHub annotations: each failure of the plugin's checks as an ``::error`` line at the user's line.

Under GitHub Actions (``GITHUB_ACTIONS=true``), at the end of the run, the process
that writes the report prints one line per test that a check of the plugin failed::

    ::error file=tests/test_mlp.py,line=15,title=max_recompiles::@pytest.mark.max_recompiles(0): Dynamo ...

GitHub shows it on the pull request's diff at that line: the capture failure's op,
the recompile's call site, the line that replayed a stale graph
(``failure_site``).  The message is the failure's one line
(``render.failure_line``) and the test's id; escaping is GitHub's
(``render.workflow_commands``).  A regression against ``--cudagraph-baseline`` is
printed too, at the test's file.  Each is printed once, however many workers or
runs of the test (``--dist each``) reported it.  ``--cudagraph-annotations=off``
prints none; ``=github`` prints them outside GitHub Actions too (another CI that
reads GitHub's workflow commands).  A failure of the test's own code is not the
plugin's: GitHub's test reporters show those from the JUnit XML.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..render.failure_line import failure_cause, failure_rule, failure_site
from ..render.workflow_commands import error_command
from .items import is_worker
from .options import ANNOTATION_CHOICES  # --cudagraph-annotations's values, defined with the options
from .ran_no_test import ran_no_test
from .session import RunState

__all__ = ["ANNOTATION_CHOICES", "Annotations", "annotation_lines", "annotation_path", "register", "wanted"]


def wanted(config: pytest.Config) -> bool:
    """``github``, or ``auto`` in a GitHub Actions job."""
    choice = config.getoption("cudagraph_annotations")
    return choice == "github" or (choice == "auto" and os.environ.get("GITHUB_ACTIONS") == "true")


def register(config: pytest.Config, state: RunState) -> None:
    """In the process that writes the report (never an xdist worker), where annotations are wanted."""
    if not is_worker(config) and wanted(config):
        config.pluginmanager.register(Annotations(state), "cudagraph-annotations")


class Annotations:
    """Prints the run's annotations after pytest's summary."""

    def __init__(self, state: RunState):
        self.state = state

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """At the end of pytest's summary: one ``::error`` line per failure of the plugin's checks."""
        if ran_no_test(config, exitstatus) is not None:
            return
        workspace = os.environ.get("GITHUB_WORKSPACE") or None
        regressions = getattr(self.state.baseline_comparison, "regressions", ())
        for line in annotation_lines(self.state.records, regressions, Path(str(config.rootpath)), workspace):
            terminalreporter.write_line(line)


def annotation_lines(
    records: Mapping[str, Mapping[str, Any]], regressions: Iterable[Any], rootdir: Path, workspace: str | None
) -> list[str]:
    """The ``::error`` lines of the records' plugin failures, then of the baseline's regressions, each once."""
    lines: dict[str, None] = {}
    for nodeid, record in sorted(records.items()):
        rule = failure_rule(record)
        if rule is None:
            continue
        site = failure_site(record)
        file = annotation_path(site[0], workspace) if site is not None else None
        line = site[1] if site is not None and file is not None else None
        message = f"{failure_cause(record)}\nin {nodeid}"
        lines[error_command(message, file=file, line=line, title=rule)] = None
    for regression in regressions:
        nodeid = str(regression.nodeid or "")
        path = nodeid.split("::", 1)[0]
        file = annotation_path(str(rootdir / path), workspace) if "::" in nodeid else None
        message = f"{regression.message}\nin {nodeid}" if nodeid else str(regression.message)
        lines[error_command(message, file=file, title=f"{regression.rule} (baseline)")] = None
    return list(lines)


def annotation_path(file: str, workspace: str | None) -> str | None:
    """``file`` as GitHub places it: relative to the checkout (``GITHUB_WORKSPACE``), else to the working directory.

    None for a file outside it: GitHub cannot show a line of a file the pull request does not hold.
    """
    path = os.path.abspath(file)  # a record's file is relative to the working directory of the run
    base = os.path.abspath(workspace) if workspace else os.getcwd()
    try:
        relative = os.path.relpath(path, base)
    except ValueError:  # another drive
        return None
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    return relative.replace(os.sep, "/")
