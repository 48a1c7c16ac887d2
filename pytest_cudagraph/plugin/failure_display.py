"""A failure of the plugin's checks in pytest's terminal: its cause on the ``-r`` line, its lines in the terminal's width.

pytest's one-line summary (``-r``) prints the first line of the exception's text
after the test's id, cut to the terminal's width: at 80 columns, a long test id left
``Failed: the traced graph d...``, and in a CI log (not cut) the line ran on with
the check's name before the cause.  For a failure of one of the plugin's checks
(``failure_site`` names the rule), the crash line becomes the failure's one line
(``render.failure_line.crash_line``): the verdict in its first words, without
pytest's ``Failed:``, then the fact to fix, the check's name last.  The record
keeps the whole message (read before), and pytest's failure section prints it.

That section prints the message's lines as they are; some ran to 280 characters (a
hint, a path).  In the process that prints (the xdist controller, or the only
one), each line of the plugin's failure wider than the terminal is broken at spaces,
its pieces indented under it.  A failure of the test's own code is pytest's alone:
neither is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from .items import is_worker

__all__ = ["RULE_ATTRIBUTE", "FailureDisplay", "fit_failure_lines", "mark_plugin_failure", "register"]

# the report's attribute naming the plugin's check that failed it: xdist carries it to the controller
RULE_ATTRIBUTE = "cudagraph_rule"
# pytest's prefix of a line of the exception's text in a traceback
EXCEPTION_PREFIX = "E   "


def mark_plugin_failure(report: pytest.TestReport, failure: Mapping[str, Any] | None) -> None:
    """After ``failure_site`` named the check: the crash line is the one-line cause, and the report says which check."""
    rule = failure.get("rule") if failure is not None else None
    crash = getattr(report.longrepr, "reprcrash", None)
    if not rule or not report.failed or crash is None:
        return
    from ..render.failure_line import crash_line

    line = crash_line({"failure": failure})
    if line:
        crash.message = line
    setattr(report, RULE_ATTRIBUTE, str(rule))


def fit_failure_lines(longrepr: Any, width: int) -> None:
    """Each line of the exception's text wider than ``width`` broken at spaces, pytest's ``E`` kept on each piece."""
    from ..render.plain_text import wrap_line

    chain = getattr(longrepr, "chain", None)
    tracebacks = [element[0] for element in chain] if chain else [getattr(longrepr, "reprtraceback", None)]
    for traceback in tracebacks:
        for entry in getattr(traceback, "reprentries", None) or ():
            lines = getattr(entry, "lines", None)
            style = getattr(entry, "style", None)  # "value": pytest.fail(pytrace=False), the message's lines alone
            if not isinstance(lines, list) or all(len(line) <= width for line in lines):
                continue
            fitted = []
            for line in lines:  # the exception's text; the source lines above it are the user's code, as written
                if line.startswith(EXCEPTION_PREFIX) or style == "value":
                    prefix = EXCEPTION_PREFIX if line.startswith(EXCEPTION_PREFIX) else ""
                else:
                    fitted.append(line)
                    continue
                fitted += [prefix + piece for piece in wrap_line(line[len(prefix) :], width - len(prefix))]
            lines[:] = fitted


class FailureDisplay:
    """In the process that prints: the plugin's failures fitted to the terminal before pytest stores them."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Each report as it arrives (from a worker too): a failure of the plugin's checks, its lines fitted."""
        if not report.failed or not getattr(report, RULE_ATTRIBUTE, None):
            return
        if self.config.pluginmanager.get_plugin("terminalreporter") is None:
            return  # -p no:terminal: nothing prints it
        fit_failure_lines(report.longrepr, self.config.get_terminal_writer().fullwidth)


def register(config: pytest.Config) -> None:
    """At start-up, in the process that prints the failures (never an xdist worker)."""
    if not is_worker(config):
        config.pluginmanager.register(FailureDisplay(config), "cudagraph-failure-display")
