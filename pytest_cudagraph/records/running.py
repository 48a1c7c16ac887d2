"""The test that is running, as the plugin marks it before each test: a slot that costs nothing to fill.

A run that uses no plugin feature still gives each test a record, so that a test
which imports the plain API itself (``capture_graphs`` in its body) reports into
its own entry.  Making that record current at every setup would import the record
(``records/record.py``) and the registry of open plain-API objects
(``graphs/open_objects.py``) in every run.  Instead the plugin puts here how to
get the running test's record (``begin``), and both modules take it from here the
first time something asks: ``current_record()``, or an object that registers to be
closed at the test's end.  Imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable

# one more at each test's begin(): the open-object registry starts afresh when it changes
serial = 0
# The record is an object here: ``records/record.py`` reads it back as its ``TestRecord``
# (this module sits below the record, so that marking a test imports nothing).
_record_of: Callable[[], object] | None = None


def begin(record_of: Callable[[], object]) -> None:
    """A test starts; ``record_of()`` gives its record (made on first call)."""
    global serial, _record_of
    serial += 1
    _record_of = record_of


def end() -> None:
    """The running test has finished."""
    global _record_of
    _record_of = None


def running() -> bool:
    """Whether a test marked by ``begin`` is running."""
    return _record_of is not None


def record() -> object | None:
    """The running test's record (made now if it was not), or None outside a test."""
    return _record_of() if _record_of is not None else None
