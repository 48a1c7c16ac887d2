"""A loaded report for readers: its typed view (``schema.Report``) and, beside it, every field as the file holds it.

The offline readers (``compare``, ``explain``, ``merge``, ``show``) read the
sections this plugin names as attributes of the types in ``schema.py``
(``record.graphs.captured``), checked by mypy.  A ``msgspec.Struct`` keeps only
the fields its type names, yet a report is the record of its run: a field a
newer plugin wrote, or a section another plugin added, must still be shown,
compared and merged.  So a ``LoadedReport`` keeps the mapping it was read from
too (``data``, the file's order), and ``data_of(section)`` / ``unknown(section)``
give any typed section's mapping and the fields its type does not name.  Readers
use the typed view, and reach the mappings only where they walk every field (a
comparison's table, show's "other fields", merging).

``read_report(path)`` loads and checks a file (``load_report``'s errors, one
sentence each); ``typed_report(data)`` checks a report built in memory (a live
run's ``build_report``) and gives its view.  Importing this module imports no
msgspec: the types load with the first report.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .json_values import json_safe
from .load import collector_paused, read_report_data
from .validate import checked_report

if TYPE_CHECKING:
    from msgspec import Struct, UnsetType

    from .schema import Report, TestRecord

__all__ = [
    "LoadedReport",
    "RecordRead",
    "filled",
    "given",
    "is_set",
    "read_report",
    "section_or_empty",
    "typed_record",
    "typed_section",
    "typed_report",
    "unknown_fields",
]

S = TypeVar("S", bound="Struct")
T = TypeVar("T")


class LoadedReport:
    """A checked report: ``report``, its typed view, and ``data``, every field as read, in the file's order."""

    __slots__ = ("_mappings", "data", "name", "report")

    def __init__(self, report: Report, data: Mapping[str, Any], name: str = "report"):
        self.report = report
        self.data = data
        self.name = name
        self._mappings: dict[int, Mapping[str, Any]] | None = None

    @property
    def tests(self) -> dict[str, TestRecord]:
        return self.report.tests

    def record_data(self, nodeid: str) -> Mapping[str, Any]:
        """A test's record as read: every section, those no type names included."""
        record: Mapping[str, Any] = self.data["tests"][nodeid]
        return record

    def record(self, nodeid: str) -> RecordRead:
        return RecordRead(self.report.tests[nodeid], self.record_data(nodeid))

    def data_of(self, section: Struct) -> Mapping[str, Any]:
        """The mapping ``section`` (a Struct of this report's typed view) was read from: every field it holds."""
        if self._mappings is None:
            self._mappings = dict(_paired_mappings(self.report, self.data))
        return self._mappings.get(id(section), {})

    def unknown(self, section: Struct) -> dict[str, Any]:
        """The fields of ``section``'s mapping that its type does not name (a newer plugin's), in the file's order."""
        return unknown_fields(section, self.data_of(section))


class RecordRead(NamedTuple):
    """One test's record: its typed view, and the mapping it was read from (every section, named or not)."""

    typed: TestRecord
    data: Mapping[str, Any]


def unknown_fields(section: Struct, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``data`` (what ``section`` was read from) that ``section``'s type does not name."""
    named = type(section).__struct_encode_fields__
    return {key: value for key, value in data.items() if key not in named}


def _paired_mappings(section: Struct, data: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(id of each Struct under ``section``, the mapping it was read from): the two trees walked side by side."""
    stack: list[tuple[Any, Any]] = [(section, data)]
    while stack:
        typed, raw = stack.pop()
        if hasattr(typed, "__struct_fields__"):
            if not isinstance(raw, Mapping):
                continue
            yield id(typed), raw
            for attribute, key in zip(typed.__struct_fields__, typed.__struct_encode_fields__):
                value = getattr(typed, attribute)
                if _may_hold_sections(value):
                    stack.append((value, raw.get(key)))
        elif isinstance(typed, list) and isinstance(raw, list):
            stack.extend((item, raw_item) for item, raw_item in zip(typed, raw) if _may_hold_sections(item))
        elif isinstance(typed, dict) and isinstance(raw, Mapping):
            stack.extend((item, raw.get(key)) for key, item in typed.items() if _may_hold_sections(item))


def _may_hold_sections(value: Any) -> bool:
    """A Struct, or a list or mapping that is not of plain values (a list of reasons holds no section)."""
    if hasattr(value, "__struct_fields__"):
        return True
    if isinstance(value, list):
        return bool(value) and not isinstance(value[0], _PLAIN)
    if isinstance(value, dict):
        return bool(value) and not isinstance(next(iter(value.values())), _PLAIN)
    return False


_PLAIN = (str, int, float, type(None))


def read_report(path: str | os.PathLike[str]) -> LoadedReport:
    """Read and check a report written by ``--cudagraph-report``; its typed view beside every field it holds.

    The same checks and one-sentence ReportErrors as ``load_report``::

        loaded = read_report("torch-2.13.json")
        loaded.tests["tests/test_model.py::test_decode"].graphs.captured
    """
    data, text, name = read_report_data(path)
    with collector_paused():
        return LoadedReport(checked_report(data, name, text=text), data, name)


def typed_report(data: Mapping[str, Any] | LoadedReport, name: str = "report") -> LoadedReport:
    """A report built in memory (``build_report``), checked as a loaded one is; a LoadedReport as it is.

    The report is taken as its file would hold it (``json_safe``: NaN as ``"nan"``,
    tuples as lists), so a live run compares with a loaded one value for value.
    ReportError, naming ``name`` and the field, when it breaks the types.
    """
    if isinstance(data, LoadedReport):
        return data
    safe = json_safe(data)
    with collector_paused():
        return LoadedReport(checked_report(safe, name), safe, name)


def typed_record(record: TestRecord | Mapping[str, Any]) -> TestRecord:
    """A test's record as its type (``schema.TestRecord``); a mapping (a live or hand-made record) is checked first."""
    from .schema import TestRecord

    if isinstance(record, TestRecord):
        return record
    return typed_section(record, TestRecord, ())


def typed_section(value: Any, kind: type[S], path: tuple[Any, ...], name: str = "record") -> S:
    """``value`` (a section as a mapping) as its type; ReportError naming ``name``, the field and the fix otherwise."""
    from ..errors import ReportError
    from .validate import Malformed, check_types

    try:
        typed: S = check_types(json_safe(value), kind, path)
    except Malformed as problem:
        raise ReportError(f"{name} has {problem.describe()}; correct that field") from None
    return typed


def given(value: T | UnsetType) -> T | None:
    """A field's value, or None where the report leaves it out (``UNSET``)."""
    return None if value is _unset() else value


def is_set(value: object) -> bool:
    """Whether the report holds the field at all (a ``null`` included): ``"field" in section`` of the mapping."""
    return value is not _unset()


def filled(value: S | UnsetType) -> S | None:
    """A section that holds a field its type names; None where the record has none, or holds nothing named."""
    unset = _unset()
    if value is unset or not any(getattr(value, name) is not unset for name in value.__struct_fields__):
        return None
    return value


@functools.cache
def _unset() -> UnsetType:
    """msgspec's UNSET, imported on first use: the library imports records without msgspec."""
    from msgspec import UNSET

    return UNSET


def section_or_empty(value: S | UnsetType, kind: type[S]) -> S:
    """A section, or an empty one of its type where the record has none: every field then reads as absent."""
    return value if isinstance(value, kind) else kind()
