"""What wider-scoped fixtures compile: kept out of the test that happened to set them up, and recorded apart.

A session- or module-scoped fixture that compiles (the usual way to share a compiled
model) is set up during the setup of whichever test first asks for it: another test
under pytest-randomly, another under ``-n 2``.  Charged to that test, its cache
misses would move from test to test between two runs of one build (a ``cache-miss``
"regression"), and a test that measured nothing else would have a record in one run
and none in the other ("vanished").  So around the setup of every fixture wider than
a function:

- the cache counters it moved are taken out of the running test's counters (its
  starting snapshot moves by them), and its lookups out of the test's ``cache_keys``
  (they are made in a pass of their own, so the test's own graphs keep their numbers);
- they are kept in the report's top-level ``fixture_setups`` list, one entry per
  setup: the fixture, its scope, the test it was set up for, the counters and the
  lookups (layer, outcome, key).  No compare rule reads them.

The entries travel to the process that writes the report on the test's teardown
report, as the records do (``recording``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .items import CACHE_KEYS_KEY, CACHE_SNAPSHOT_KEY, report_nodeid

# the teardown report's attribute that carries the setups made during the test's setup
REPORT_SETUPS_ATTR = "cudagraph_fixture_setups"
_WIDER_SCOPES = ("class", "module", "package", "session")


class FixtureCompileWatch:
    """Registered in every process that runs tests; ``item`` is the test being set up, run or torn down."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        # the setups made since the running test started, handed over at its teardown
        self.pending: list[dict[str, Any]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
        """Around each fixture's setup: a wider-scoped one's compiles measured apart from the test's own."""
        item = self.item
        if item is None or fixturedef.scope not in _WIDER_SCOPES:
            return (yield)
        with self._measured(item, fixturedef.argname, fixturedef.scope):
            return (yield)

    @contextlib.contextmanager
    def _measured(self, item: pytest.Item, name: str, scope: str) -> Iterator[None]:
        before = _snapshot() if "torch" in sys.modules else None
        captured = item.stash.get(CACHE_KEYS_KEY, None)
        pass_name = f"{scope}-scoped fixture {name}"
        with contextlib.ExitStack() as stack:
            if captured is not None:
                from ..caches.keys import pass_scope

                # a pass of its own: its graphs are numbered apart, and the test's keep their numbers
                stack.enter_context(pass_scope(pass_name))
            try:
                yield
            finally:
                stack.close()
                lookups = _take_lookups(captured[0], pass_name) if captured is not None else []
                counters = _take_counters(item, before) if "torch" in sys.modules else None
                if counters is not None or lookups:
                    self.pending.append(
                        {
                            "fixture": name,
                            "scope": scope,
                            "set_up_for": report_nodeid(item),
                            **({"caches": counters} if counters is not None else {}),
                            **({"lookups": lookups} if lookups else {}),
                        }
                    )

    def take(self) -> list[dict[str, Any]]:
        """The setups made since the last call (the running test's), for its teardown report."""
        pending, self.pending = self.pending, []
        return pending


def _snapshot() -> Any:
    from ..caches.counters import counter_snapshot

    return counter_snapshot()


def _take_counters(item: pytest.Item, before: Any) -> dict[str, Any] | None:
    """The counters the fixture moved (None: none), taken out of the test's by moving its starting snapshot."""
    from ..caches.counters import CounterSnapshot, counter_snapshot, delta_between

    after = counter_snapshot()
    start = before if before is not None else counter_snapshot(empty=True)
    delta = delta_between(start, after)
    test_start = item.stash.get(CACHE_SNAPSHOT_KEY, None)
    if test_start is None:
        # torch came with the fixture: the test's counters start after it
        item.stash[CACHE_SNAPSHOT_KEY] = after
    elif delta.any:
        moved = {key: after.values.get(key, 0) - start.values.get(key, 0) for key in after.values}
        dirs = test_start.kernel_dirs
        if dirs is not None and after.kernel_dirs is not None and start.kernel_dirs is not None:
            dirs = dirs | (after.kernel_dirs - start.kernel_dirs)
        item.stash[CACHE_SNAPSHOT_KEY] = CounterSnapshot(
            {key: test_start.values.get(key, 0) + moved.get(key, 0) for key in {*test_start.values, *moved}}, dirs
        )
    return delta.to_json() if delta.any else None


def _take_lookups(log: Any, pass_name: str) -> list[dict[str, Any]]:
    """The fixture's lookups, taken out of the test's log: (layer, outcome, key) each."""
    mine = [lookup for lookup in log.lookups if lookup.pass_name == pass_name]
    if mine:
        log.lookups[:] = [lookup for lookup in log.lookups if lookup.pass_name != pass_name]
    return [{"layer": one.layer, "outcome": one.outcome, "key": one.key} for one in mine]


def watch_of(config: pytest.Config) -> FixtureCompileWatch | None:
    return config.stash.get(WATCH_KEY, None)


WATCH_KEY = pytest.StashKey[FixtureCompileWatch]()


def register(config: pytest.Config) -> None:
    """Wire the watch in (once per process): the plugin switched on."""
    if WATCH_KEY not in config.stash:
        watch = config.stash[WATCH_KEY] = FixtureCompileWatch()
        config.pluginmanager.register(watch, "cudagraph-fixture-compiles")
