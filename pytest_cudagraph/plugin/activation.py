"""The hooks every run registers, and the switch that registers the rest once the run uses the plugin.

pytest loads the plugin in every run where it is installed, so a suite that uses
none of its features pays for the entry point's options, the markers'
documentation (``marker_docs``), this module, ``fixtures`` (a fixture must be known
before collection; what it hands to a test is imported when a test asks for it) and
``state_isolation``.  The rest (the run's options and state, the recorder and
summary, the markers' argument types, the marker checks, torch's log handlers,
xdist's and pytest-split's sides) is imported and registered by ``activate``, at
the first of:

- an option or ini value of the plugin, the environment of one of its own child
  processes, an xdist run, a pytest-split shard or the ``cudagraph`` Hypothesis
  profile (``wanted_from_start``, at configure: everything is as it always was);
- a collected test that carries one of the plugin's markers (or a mark one edit
  away from one) or requests one of its fixtures (``pytest_make_collect_report``),
  or is given such a marker after collection (``pytest_collection_modifyitems``,
  ``pytest_runtest_setup``);
- torch in the process, at the end of collection or at any phase of a test: a test
  that compiles gets its cache deltas in the run's summary, marker or not.

Until then each hook here checks one thing and returns.  The hooks that carry a
test's record (its setup and its reports) live here whether or not the plugin is
switched on, so that a test's outcome is kept from its first phase, and what the
run did before the switch (collection errors, deselected and finished tests,
failures) is handed to the recorder when it starts (``run_so_far``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

from ..records import running
from .items import (
    FAILURE_KEY,
    NODEID_KEY,
    OUTCOME_KEY,
    PLUGIN_FIXTURES,
    PLUGIN_MARKERS,
    SKIP_REASON_KEY,
    record_of,
    registered_marks,
    start_attempt,
    xdist_workers,
)
from .run_so_far import RunSoFar

# set on config.stash once the feature modules are registered
ACTIVE_KEY = pytest.StashKey[bool]()
# the RunSoFar of a run not yet switched on (registered in configure)
SO_FAR_KEY: pytest.StashKey[RunSoFar] = pytest.StashKey()
# A failure message longer than this is clipped in the middle; the terminal output keeps it whole.
FAILURE_MESSAGE_LIMIT = 4000
# the ini values of the plugin: any of them set switches it on at configure (they are checked there)
INI_VALUES = ("cudagraph_capture_sizes", "cudagraph_rtol", "cudagraph_atol", "cudagraph_baseline_fail_on")
# unregistered mark name -> the sentence for it if it is one edit away from a plugin marker, else None
_UNREGISTERED_KEY = pytest.StashKey[dict]()


def is_active(config: pytest.Config) -> bool:
    return ACTIVE_KEY in config.stash


def activate(config: pytest.Config, session: pytest.Session | None = None, collected: bool = False) -> None:
    """Register the feature modules (once).

    ``session`` once the session has started (switched on at collection or later),
    ``collected`` once collection has finished (a test is running).
    """
    if ACTIVE_KEY in config.stash:
        return
    config.stash[ACTIVE_KEY] = True
    so_far = config.stash.get(SO_FAR_KEY, None)
    if so_far is not None and config.pluginmanager.is_registered(so_far):
        config.pluginmanager.unregister(so_far)
    from .startup import start_features

    start_features(config, so_far, session, collected)


def _option(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:  # the plugin that adds it (xdist, pytest-split, hypothesis) is not installed
        return None


def wanted_from_start(config: pytest.Config) -> bool:
    """True when the run asks for the plugin before any test is collected: options, ini, env, xdist, shards."""
    option = config.option
    if option.cudagraph or option.cudagraph_require_gpu or option.cudagraph_group != "none":
        return True
    if option.cudagraph_summary == "github":
        return True  # the summary is written, and its option checked, whether or not a test uses the plugin
    paths = (option.cudagraph_report, option.cudagraph_baseline, option.cudagraph_cache_dir, option.cudagraph_devices)
    if any(value is not None for value in paths):
        return True  # an empty path too: it is refused, with its sentence
    if any(str(config.getini(name) or "").strip() for name in INI_VALUES):
        return True
    if any(name.startswith("PYTEST_CUDAGRAPH_") for name in os.environ):
        from ..envvars import CHILD_PASS_ENV, INSTRUCTIONS_ENV  # the plugin's own child processes

        if os.environ.get(CHILD_PASS_ENV) or os.environ.get(INSTRUCTIONS_ENV):
            return True
    if getattr(config, "workerinput", None) is not None or xdist_workers(config) > 0:
        return True  # the controller hands every worker the run's cache root and devices
    if _option(config, "splits") and _option(config, "group"):
        return True  # pytest-split's counting must be registered before pytest-split's own hooks
    return _option(config, "hypothesis_profile") == "cudagraph"


def _misspelled(config: pytest.Config, name: str, registered: set[str]) -> bool:
    """An unregistered mark one edit away from a plugin marker (decided once per name and run)."""
    known = config.stash.setdefault(_UNREGISTERED_KEY, {})
    if name not in known:
        from .marker_docs import misspelled_marker_message

        known[name] = misspelled_marker_message(name, registered)
    return known[name] is not None


def _uses_a_feature(collector: pytest.Collector, items: list[pytest.Item]) -> bool:
    """Whether a test among ``items`` carries a plugin marker or a near miss of one, or requests a plugin fixture."""
    config = collector.config
    registered = registered_marks(config)
    names = {mark.name for mark in collector.iter_markers()}  # the module's and class's marks: every item's
    for item in items:
        for mark in item.own_markers:
            names.add(mark.name)
        if not PLUGIN_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
            return True
    if not PLUGIN_MARKERS.isdisjoint(names):
        return True
    return any(_misspelled(config, name, registered) for name in names - registered)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """When a module or class has been collected: look for the plugin's markers and fixtures in its tests.

    Once the plugin is on, its checks of the marks (a bad argument fails the
    module's collection, every problem of the file at once) run here for every
    module and class (``collection.check_collected_items``).
    """
    report = yield
    config = collector.config
    if report.passed and isinstance(collector, (pytest.Module, pytest.Class)):
        items = [node for node in report.result if isinstance(node, pytest.Item)]
        for item in items:
            # as collected: ``--dist loadgroup`` appends "@group" on workers, and a record names the test as collected
            item.stash[NODEID_KEY] = item.nodeid
        if items and (is_active(config) or _uses_a_feature(collector, items)):
            activate(config, collector.session)
            from .collection import check_collected_items

            check_collected_items(collector, report, items)
    return report


def _marked_after_collection(items: list[pytest.Item]) -> bool:
    """A plugin marker given to a test after it was collected (``item.add_marker`` in a conftest hook)."""
    for item in items:
        for mark in item.own_markers:
            if mark.name in PLUGIN_MARKERS:
                return True
    return False


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """After collection: torch loaded, or a plugin marker added to a test, switches the plugin on; then its gating."""
    if not is_active(config) and ("torch" in sys.modules or _marked_after_collection(items)):
        activate(config, session)
    if is_active(config):
        from .collection import gate_collected_items

        gate_collected_items(session, config, items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before each test's setup: the test's record made current (the plain API reports into it).

    With the plugin on, also its markers checked again (a marker added after
    collection) and what a test of the plugin measures started (``recording``).
    """
    config = item.config
    start_attempt(item)
    # Dynamo's compile count as the test begins, where Dynamo is loaded: a plain recompile watch starts from an
    # empty Dynamo cache only while the test has compiled nothing (compile/recompiles.py)
    running.begin_frames(_compiled_frames())
    if not is_active(config) and (
        "torch" in sys.modules or not PLUGIN_MARKERS.isdisjoint(m.name for m in item.iter_markers())
    ):
        activate(config, item.session, collected=True)
    if is_active(config):
        from .recording import start_test

        start_test(item)
        return
    # A test that imports torch itself and uses the plain API: its results go to its record,
    # made when the plain API first asks for it (records/running.py), so a run that never
    # does imports neither the record nor the registry of open objects.
    running.begin(lambda: record_of(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """After each phase of a test: track its outcome; after teardown, put its finished record on the report."""
    report = yield
    short_crash_line(call, report)
    keep_outcome(item, call, report)
    config = item.config
    if not is_active(config) and "torch" in sys.modules:
        activate(config, item.session, collected=True)  # this test imported torch
    if report.failed and call.excinfo is not None and is_active(config):
        from .failure_site import locate_failure  # only for a failed phase: which check, and the user's line

        locate_failure(item, call.excinfo)
        from .failure_display import mark_plugin_failure

        mark_plugin_failure(report, item.stash.get(FAILURE_KEY, None))
    if call.when == "teardown":
        running.end()
        running.end_frames()
        if is_active(config):
            from .recording import attach_record

            attach_record(item, report)
    return report


def _compiled_frames() -> int:
    """Dynamo's process-wide count of frames it compiled; 0 while Dynamo is not loaded (nothing compiled)."""
    if "torch._dynamo.utils" not in sys.modules:
        return 0
    from .. import _compat

    return _compat.counter_value("frames", "total")


def short_crash_line(call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """Our exception's crash line without its module path: ``InvariantViolation: count changed by +1, ...``.

    pytest's one-line summary (``-r``) prints the crash line cut to the terminal's
    width after the test id; ``pytest_cudagraph.errors.`` took 24 of those characters
    before the message's verdict.
    """
    excinfo = call.excinfo
    crash = getattr(report.longrepr, "reprcrash", None)
    if excinfo is None or crash is None or not isinstance(getattr(crash, "message", None), str):
        return
    kind = excinfo.type
    qualified = f"{kind.__module__}.{kind.__qualname__}: "
    if kind.__module__.startswith("pytest_cudagraph.") and crash.message.startswith(qualified):
        crash.message = f"{kind.__qualname__}: {crash.message.removeprefix(qualified)}"


def keep_outcome(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """The test's outcome, time, and first failure or skip reason, from each phase's report."""
    # Kept for every test (a few fields, no torch): a test that compiles without using
    # the plugin still gets a record at teardown, and it needs the outcome then.
    outcome, duration = item.stash.get(OUTCOME_KEY, (None, 0.0))
    duration += report.duration
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    elif report.failed and outcome not in ("failed", "error"):
        outcome = "failed" if call.when == "call" else "error"
    elif report.skipped and outcome is None:
        outcome = "skipped"
    elif call.when == "call" and outcome is None:
        outcome = "passed"
    item.stash[OUTCOME_KEY] = (outcome, duration)
    if report.failed and not hasattr(report, "wasxfail") and FAILURE_KEY not in item.stash:
        item.stash[FAILURE_KEY] = {"when": call.when, "message": failure_message(report)}
    elif report.skipped and not hasattr(report, "wasxfail") and SKIP_REASON_KEY not in item.stash:
        item.stash[SKIP_REASON_KEY] = skip_reason(report)


def skip_reason(report: pytest.TestReport) -> str:
    """The reason given to ``pytest.skip()`` or a skip mark, without pytest's "Skipped: " prefix."""
    from ..render.plain_text import clip_middle

    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return clip_middle(str(reason).removeprefix("Skipped: ").strip(), FAILURE_MESSAGE_LIMIT)


def failure_message(report: pytest.TestReport) -> str:
    """What the test failed with: pytest's crash line (the exception and its message), else the long text."""
    from ..render.plain_text import clip_middle

    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if not isinstance(message, str) or not message.strip():
        message = report.longreprtext
    return clip_middle(message.strip(), FAILURE_MESSAGE_LIMIT)
