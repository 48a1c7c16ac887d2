"""Plain-API objects that a test opened and did not close.

``capture_graphs(...)`` and ``piecewise_compile(...)`` used without ``with`` or
``close()`` would keep their graph pools alive into later tests, and their results
would never reach the report, because both are recorded on close.  Each such object
registers here when it is created while a test runs; at the end of the test the
plugin closes whatever is still open (which records it) and names it in the test's
record under ``extra.closed_by_plugin``.

Objects created while a fixture of a wider scope is set up are not tracked: a
module-scoped GraphSet is meant to outlive the test that first needed it.  The
registry holds weak references: an object the test dropped is collected (and its
pool freed) as before; only what is still alive and open at the end is closed.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

from ..records import running


class Closable(Protocol):
    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...


_opened: list[weakref.ref[Closable]] = []
_tracking = False
_suspended = 0
# the test records/running.py marked when tracking last started lazily (a run without plugin features)
_started_for: int | None = None


def start_test() -> None:
    """Begin tracking for the test about to run (called by the plugin)."""
    global _tracking
    _opened.clear()
    _tracking = True


def _tracking_now() -> bool:
    """Whether the running test's objects are tracked; starts tracking for a test marked in records/running."""
    global _tracking, _started_for
    if not _tracking and running.running() and _started_for != running.serial:
        _opened.clear()
        _tracking = True
        _started_for = running.serial
    return _tracking


def track(obj: Closable) -> None:
    """Register an object that owns graphs or pools; a no-op outside a test."""
    if _tracking_now() and not _suspended:
        # drop what is gone or closed, so a loop creating thousands keeps the list short
        _opened[:] = [ref for ref in _opened if (alive := ref()) is not None and not alive.closed]
        _opened.append(weakref.ref(obj))


class suspended:
    """``with suspended():`` objects created inside are not the running test's (wider-scoped fixtures)."""

    def __enter__(self) -> None:
        global _suspended
        _suspended += 1

    def __exit__(self, *exc: Any) -> None:
        global _suspended
        _suspended -= 1


def close_left_open() -> tuple[list[str], list[str]]:
    """Stop tracking; close what the test left open.

    Returns the ``repr`` of every object closed here, and one line per object whose
    ``close()`` raised (the others are still closed).
    """
    global _tracking
    _tracking = False
    left_open = [obj for obj in (ref() for ref in _opened) if obj is not None and not obj.closed]
    _opened.clear()
    closed, errors = [], []
    for obj in left_open:
        name = repr(obj)
        try:
            obj.close()
        except Exception as exc:  # close the rest; the caller reports the error in the record
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        closed.append(name)
    return closed, errors
