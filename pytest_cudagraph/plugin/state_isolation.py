"""Global torch state put back after each test that uses the plugin (the snapshot is isolation.py's).

Only what the test body and its function-scoped fixtures changed: the snapshot is
taken once the fixtures of wider scope are set up (pytest sets those up first), at
the first function-scoped fixture or, without one, when the call starts; it is put
back by a finalizer of the test item, which runs after the function-scoped fixtures
are torn down and before any module or session fixture is.  A session fixture that
sets ``cache_size_limit`` for the whole run therefore keeps its setting.  A skipped
test sets up no fixture, so it takes no snapshot and imports no torch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .items import STATE_SNAPSHOT_KEY, record_of, uses_plugin


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    """Before each fixture is set up: snapshot before the first function-scoped one of a test."""
    if fixturedef.scope != "function":
        from ..graphs import open_objects  # here, not at import: pytest registers this module in every run

        # what a module- or session-scoped fixture opens is not the running test's to close
        with open_objects.suspended():
            return (yield)
    _snapshot_before_test(request.node)
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """When the test body starts: snapshot here if no function-scoped fixture did."""
    _snapshot_before_test(item)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """After the test's teardown: close what a test without a snapshot (plain API only) left open."""
    try:
        return (yield)
    finally:
        _close_left_open(item)


def _close_left_open(item: pytest.Item) -> None:
    """Close and record the plain-API objects the test left open (a no-op once done)."""
    if "pytest_cudagraph.graphs.open_objects" not in sys.modules:
        return  # nothing of the plain API was imported: nothing can be open
    from ..graphs import open_objects

    closed, errors = open_objects.close_left_open()
    if closed:
        record_of(item).note("closed_by_plugin", closed)
    if errors:
        record_of(item).note("close_errors", errors)


def _snapshot_before_test(item: Any) -> None:
    if not isinstance(item, pytest.Item) or STATE_SNAPSHOT_KEY in item.stash or not uses_plugin(item):
        return
    from .isolation import TorchStateSnapshot

    snapshot = item.stash[STATE_SNAPSHOT_KEY] = TorchStateSnapshot.take()

    def restore() -> None:
        del item.stash[STATE_SNAPSHOT_KEY]
        leaked = [name for name in snapshot.restore() if name != "Dynamo caches"]
        if leaked:
            record_of(item).note("restored_after_test", leaked)

    item.addfinalizer(restore)
    # finalizers run last-in first-out: objects left open are closed after the
    # function-scoped fixtures, while the test's state is still in place, then restored
    item.addfinalizer(lambda: _close_left_open(item))
