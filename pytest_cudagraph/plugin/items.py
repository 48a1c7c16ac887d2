"""What the plugin keeps on pytest's objects, and which tests it concerns.

The stash keys of the run and of each test item, the markers and fixture sets that
put a test under the plugin, the record of a test, the marks pytest knows, and which
xdist process this is.  Every module of the plugin
layer reads these, and a run that uses no feature of the plugin loads this module
too: it imports nothing but pytest (the types of the stash keys are named, not
imported), and none of it imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .marker_docs import MARKER_DOCS

if TYPE_CHECKING:
    from ..records.progress import RunProgress
    from ..records.record import TestRecord
    from .session import RunState

STATE_KEY: pytest.StashKey[RunState] = pytest.StashKey()
PROGRESS_KEY: pytest.StashKey[RunProgress] = pytest.StashKey()
RECORD_KEY: pytest.StashKey[TestRecord] = pytest.StashKey()
MARKERS_KEY = pytest.StashKey[dict]()
CACHE_SNAPSHOT_KEY = pytest.StashKey[Any]()
RECOMPILE_WATCH_KEY = pytest.StashKey[Any]()
OUTCOME_KEY = pytest.StashKey[tuple]()
STATE_SNAPSHOT_KEY = pytest.StashKey[Any]()
# the test's cache-key capture: (cache_keys.LookupLog, the ExitStack that ends it)
CACHE_KEYS_KEY = pytest.StashKey[tuple]()
# the earlier runs' keys of the test's graphs (cache_keys.IndexContents: a StoredKey per index file, and notes),
# read once per test
STORED_KEYS_KEY = pytest.StashKey[Any]()
# this run's id in the cross-run key index and its time (one per pytest process: a run never compares with itself)
RUN_ID_KEY = pytest.StashKey[tuple]()
# The node id as collected: ``--dist loadgroup`` appends "@group" to it on workers,
# and the report must name a test the same way however the run was distributed.
NODEID_KEY = pytest.StashKey[str]()
# the registered marks' names, and how many ``markers`` lines they were read from
REGISTERED_MARKS_KEY = pytest.StashKey[tuple]()
# The first failed phase's message, for the record (the report page shows failed tests with it).
FAILURE_KEY = pytest.StashKey[dict]()
# Why the test skipped (the terminal section counts the GPU tests the plugin skipped).
SKIP_REASON_KEY = pytest.StashKey[str]()
# The finished record of the test's last attempt, and those of its earlier attempts: a rerun plugin
# (pytest-rerunfailures) runs one item's setup, call and teardown again, and the record is the last attempt's.
ATTEMPT_KEY = pytest.StashKey[dict]()
RERUNS_KEY = pytest.StashKey[list]()
# what one attempt of a test keeps on its item; a rerun starts without it
ATTEMPT_KEYS: tuple[pytest.StashKey[Any], ...] = (OUTCOME_KEY, FAILURE_KEY, SKIP_REASON_KEY, RECORD_KEY, ATTEMPT_KEY)

# the names of the plugin's markers, and of its fixtures
PLUGIN_MARKERS = frozenset(MARKER_DOCS)
PLUGIN_FIXTURES = frozenset({"cudagraphs", "recompiles", "compile_cache", "piecewise", "cudagraph_ranks"})
# Fixtures of CUDA graph work: with --cudagraph-group=module their tests stay on one worker, marked or not.
# Only the cudagraphs fixture is also gated by --cudagraph: piecewise runs on the CPU too, its pieces uncaptured,
# and cudagraph_ranks with the gloo backend (it gates its NCCL runs itself).
GPU_FIXTURES = frozenset({"cudagraphs", "piecewise", "cudagraph_ranks"})
GATED_FIXTURES = frozenset({"cudagraphs"})


def is_worker(config: pytest.Config) -> bool:
    """True in an xdist worker process (the controller, or a run without xdist, writes the report)."""
    return getattr(config, "workerinput", None) is not None


def xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers this (controller) process starts; 0 without xdist or with -n 0."""
    count = _option(config, "numprocesses")
    return int(count) if isinstance(count, int) and config.getoption("dist") != "no" else 0


def _option(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:  # the plugin that adds it (xdist) is not installed
        return None


def registered_marks(config: pytest.Config) -> set[str]:
    """The names of the marks pytest knows: its own, the plugins', and the ini file's ``markers``.

    Read again only when a line was added (a conftest file collected later may register marks), not
    for every collected function.
    """
    lines = config.getini("markers")
    cached = config.stash.get(REGISTERED_MARKS_KEY, None)
    if cached is None or cached[0] != len(lines):
        cached = config.stash[REGISTERED_MARKS_KEY] = (
            len(lines),
            {line.split(":")[0].split("(")[0].strip() for line in lines},
        )
    return cached[1]


def uses_plugin(item: pytest.Item) -> bool:
    """A test with a marker or a fixture of the plugin: it gets a record and state isolation."""
    if item.stash.get(MARKERS_KEY, None):
        return True
    return bool(PLUGIN_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def marked_cudagraph_or_using(item: pytest.Item, fixtures: frozenset[str]) -> bool:
    return item.get_closest_marker("cudagraph") is not None or bool(
        fixtures.intersection(getattr(item, "fixturenames", ()))
    )


def report_nodeid(item: pytest.Item) -> str:
    return item.stash.get(NODEID_KEY, item.nodeid)


def start_attempt(item: pytest.Item) -> None:
    """Before a test's setup: where an earlier attempt of the same item ran, set its record apart (``reruns``).

    A rerun plugin (pytest-rerunfailures, flaky) calls the item's setup, call and
    teardown again in the same session; the record is of the attempt that counts,
    the last, and an earlier attempt's figures are never added to it.  Told by what
    an attempt leaves on the item, whatever plugin reran it.
    """
    if OUTCOME_KEY not in item.stash:
        return  # the first attempt
    earlier = item.stash.get(ATTEMPT_KEY, None)
    if earlier is not None:
        item.stash.setdefault(RERUNS_KEY, []).append(earlier)
    for key in ATTEMPT_KEYS:
        if key in item.stash:
            del item.stash[key]


def record_of(item: pytest.Item) -> TestRecord:
    """The test's record, created on first use."""
    record = item.stash.get(RECORD_KEY, None)
    if record is None:
        from ..records.record import TestRecord

        record = item.stash[RECORD_KEY] = TestRecord(report_nodeid(item))
    return record
