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
# Dynamo's count of frames it had compiled when the running test began (None: no test is running), and whether
# the test already started from an empty Dynamo cache: its first recompile watch does, as the marker's test does
frames_at_begin: int | None = None
started_from_empty = False


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


def begin_frames(frames: int) -> None:
    """A test (plugin or plain) begins; Dynamo had compiled ``frames`` frames so far in the process."""
    global frames_at_begin, started_from_empty
    frames_at_begin, started_from_empty = frames, False


def end_frames() -> None:
    global frames_at_begin
    frames_at_begin = None
