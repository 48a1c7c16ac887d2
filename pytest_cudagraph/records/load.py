"""Loading a report: read the file, parse it strictly, validate it against its types."""

from __future__ import annotations

import contextlib
import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ReportError
from .files import read_regular_text
from .older_schemas import report_as_current
from .validate import short, validate_report


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a report written by ``--cudagraph-report``.

    Raises ReportError, with one sentence naming the file, the problem and the fix,
    when the file is missing, not a regular file (a FIFO or a device is refused at
    once, never read), unreadable, not JSON (often: truncated), of another schema,
    or has a field of the wrong type.  Example::

        report = load_report("torch-2.13.json")
        report["tests"]["tests/test_model.py::test_decode"]["recompiles"]["count"]
    """
    data, text, name = read_report_data(path)
    with collector_paused():
        return validate_report(data, name, text=text)


def read_report_data(path: str | os.PathLike[str]) -> tuple[Any, str, str]:
    """(the report's JSON, parsed strictly; its text; its name in errors), not yet checked.

    A file of an older schema is brought up to the current one (``older_schemas.report_as_current``).
    """
    path = Path(path)
    text = read_regular_text(path)
    if not text or text.isspace():
        raise ReportError(f"report {path} is empty; write it again with --cudagraph-report")
    with collector_paused():
        return report_as_current(_parse_json(text, path)), text, str(path)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block (and on again after it, if it was on).

    A 10,000-test report is some 75,000 new mappings and lists (300,000 objects in
    all) and not one reference cycle: the collections that parsing and checking it
    trigger walk them all and find nothing (measured with two such reports in
    memory: up to half the parse, and about 70 ms of a ``compare``).  Reference
    counting still frees every object.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a repeated key raises (json.loads would keep the last value silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


# What the writer stores for non-finite floats; another tool's NaN / Infinity literal reads the same.
_NON_FINITE = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_NON_FINITE.__getitem__)
    except _DuplicateKey as exc:
        raise ReportError(
            f"report {path} repeats the key {short(exc.args[0])} in one object, so one of its values would be "
            f"lost; write it again with --cudagraph-report"
        ) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        # the decoder's whole message: "Unterminated string starting at" needs the place it names
        where = (
            f"{exc.msg}: line {exc.lineno} column {exc.colno} (char {exc.pos})"
            if isinstance(exc, json.JSONDecodeError)
            else "nested too deeply"
        )
        raise ReportError(
            f"report {path} is not valid JSON ({where}); it may be truncated, so write it again with --cudagraph-report"
        ) from None
    except ValueError:  # an integer of more digits than int() converts (4300 since Python 3.11)
        raise ReportError(
            f"report {path} holds an integer too long to read, which no report field holds; "
            f"write it again with --cudagraph-report"
        ) from None
