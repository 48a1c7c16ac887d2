"""The plugin's figures in pytest's JUnit XML: each test's as properties of its ``<testcase>``.

Under ``--junitxml`` every test that has a record gets its figures
(``render.junit_properties``: graphs, pool and largest graph, first use and
behind the allocator, recompiles, cache counters per layer, compile seconds) in
its report's ``user_properties``, pytest's own mechanism: the junitxml plugin
writes them as ``<property>`` elements under ``junit_family`` xunit1 and xunit2
alike, and pytest-xdist carries them from the worker that ran the test to the
controller that writes the file.  A test's record reaches its teardown report
(``recording.attach_record``); the properties are added there, in the process
that ran the test, before any other plugin reads the report.  Without
``--junitxml`` nothing is added.
"""

from __future__ import annotations

import pytest

from ..render.junit_properties import junit_properties
from .recording import carried_record

ADDED_ATTR = "cudagraph_properties_added"


def register(config: pytest.Config) -> None:
    """With ``--junitxml`` (the controller's option, which xdist's workers see too): add the properties."""
    if getattr(config.option, "xmlpath", None):
        config.pluginmanager.register(JunitProperties(), "cudagraph-junit-properties")


class JunitProperties:
    """Adds each test's figures to its teardown report's ``user_properties``."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """After each phase, before junitxml reads it (or xdist sends it): the teardown's record as properties."""
        carried = carried_record(report)
        if carried is None or report.when != "teardown":
            return
        if getattr(report, ADDED_ATTR, False):
            return  # added by the worker that ran the test: this is the controller reading its report
        # Marked on the report, not told by the properties' names: a test's own
        # record_property("cudagraph.owner", ...) must not stand for the plugin's.
        report.user_properties.extend(junit_properties(carried["record"]))
        setattr(report, ADDED_ATTR, True)  # xdist sends a report's attributes to the controller
