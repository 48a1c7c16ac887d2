"""What the run did before the plugin was switched on: collection errors, deselected, failed and finished tests.

``activation`` registers it at configure in every run, so it imports nothing but
pytest; once the plugin is switched on, ``recording`` starts the run's progress
from it.
"""

from __future__ import annotations

import pytest


class RunSoFar:
    """What the run did before the plugin was switched on, for the recorder's progress.

    Registered as a plugin until ``activate`` hands it to the recorder and
    unregisters it: from then on the recorder counts.
    """

    def __init__(self) -> None:
        self.collection_errors = 0
        self.deselected: int | None = None
        self.failures = 0
        self.finished: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """After each collector: a module that does not import, a bad marker argument."""
        if report.failed:
            self.collection_errors += 1

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """When -k, -m or a plugin deselects tests."""
        self.deselected = (self.deselected or 0) + len(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """After each phase of each test: failures, as pytest counts them for -x, and finished tests."""
        if report.failed and not hasattr(report, "wasxfail"):
            self.failures += 1
        if report.when == "teardown":
            self.finished.append(report.nodeid)
