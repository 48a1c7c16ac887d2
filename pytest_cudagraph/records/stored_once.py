"""The report as its file holds it: each fact once; and back to the form every reader takes.

A report in memory (``build_report``) spells out what its readers want at hand: a
recompile's reason in the section's ``reasons``, in its function's ``by_function``
entry and in its event, beside torch's ``verbatim`` text; every finished test's
seconds in ``durations`` beside its record's ``duration_s``; per layer, the cache-key
components every lookup of the layer shares, though both layers share most of
them (some 600 ``inductor_config`` entries).  The file (``pytest-cudagraph/2``)
stores each of these once, and ``report_as_read`` gives the spelled-out form
back when a file is read, so every reader sees what it saw before:

- ``cache_components_all_layers``: the components every layer's table holds with
  the same hash and value, once; ``cache_components[layer]`` keeps the rest;
- ``recompiles``: each event keeps its ``reasons``; the section's ``reasons`` and
  ``limit_hits`` and its ``by_function`` are left out where they are what the
  events give, and an event's ``verbatim`` where it is its ``reasons``;
- ``durations``: only what no record gives: a test without a record, a test whose
  seconds are not its record's ``duration_s`` to the millisecond, and ``null`` for
  a test with a record that did not finish (it has no duration for pytest-split).

A field is left out only where putting it back gives exactly what was there, so
a file read back is the report that was written.  A ``pytest-cudagraph/1`` file
(an older plugin's) is read too: its fields are all spelled out already, and its
compile-time phase ``triton_s`` is read as ``kernel_compile_s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEMA_V1 = "pytest-cudagraph/1"
SCHEMA_V2 = "pytest-cudagraph/2"
# the compile-time phase pytest-cudagraph/1 named for Triton, though on a CPU it timed C++ kernels
OLD_KERNEL_PHASE = "triton_s"
KERNEL_PHASE = "kernel_compile_s"

__all__ = ["KERNEL_PHASE", "SCHEMA_V1", "SCHEMA_V2", "report_as_read", "report_as_stored"]


# ----------------------------------------------------------------------------
# writing: each fact once
# ----------------------------------------------------------------------------


def report_as_stored(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` (as ``build_report`` makes it) with each fact stored once; ``report`` is not changed."""
    out = dict(report)
    tables = out.get("cache_components")
    if isinstance(tables, Mapping) and len(tables) > 1 and "cache_components_all_layers" not in out:
        common, rest = _components_all_layers(tables)
        if common:
            out["cache_components_all_layers"] = common
            out["cache_components"] = rest
            out = _after(out, "cache_components", "cache_components_all_layers")
    tests = out.get("tests")
    if isinstance(tests, Mapping):
        out["tests"] = {nodeid: _record_stored(record) for nodeid, record in tests.items()}
        if isinstance(out.get("durations"), Mapping):
            out["durations"] = _durations_stored(out["durations"], tests)
    return out


def _after(report: dict[str, Any], anchor: str, key: str) -> dict[str, Any]:
    """``report`` with ``key`` moved to just before ``anchor`` (the file reads the run's table first)."""
    value = report.pop(key)
    out = {}
    for name, item in report.items():
        if name == anchor:
            out[key] = value
        out[name] = item
    return out


def _components_all_layers(tables: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the components every layer's table holds alike, each layer's table without them)."""
    layers = [table for table in tables.values() if isinstance(table, Mapping)]
    if len(layers) != len(tables) or not layers:
        return {}, dict(tables)
    first, *others = layers
    common = {name: pair for name, pair in first.items() if all(other.get(name) == pair for other in others)}
    rest = {
        layer: {name: pair for name, pair in table.items() if name not in common} for layer, table in tables.items()
    }
    return common, rest


def _record_stored(record: Any) -> Any:
    if not isinstance(record, Mapping) or not isinstance(record.get("recompiles"), Mapping):
        return record
    return {**record, "recompiles": _recompiles_stored(record["recompiles"])}


def _recompiles_stored(section: Mapping[str, Any]) -> dict[str, Any]:
    events: Any = section.get("events")
    out = dict(section)
    if not _events_readable(events):
        return out
    derived = _derived_from_events(events)
    for key in ("reasons", "limit_hits", "by_function"):
        if key in out and _same(out[key], derived[key]):
            del out[key]
    out["events"] = [
        {name: value for name, value in event.items() if not (name == "verbatim" and value == event.get("reasons"))}
        for event in events
    ]
    return out


def _same(stored: Any, derived: Any) -> bool:
    """Equal, and in the same order (a mapping's keys too: the file keeps the order it was given)."""
    if isinstance(stored, Mapping) and isinstance(derived, Mapping):
        return list(stored) == list(derived) and all(_same(stored[key], derived[key]) for key in stored)
    return type(stored) is type(derived) and stored == derived


def _events_readable(events: Any) -> bool:
    """Whether every event has what the section's lists are made from (a function and its reasons)."""
    return isinstance(events, list) and all(
        isinstance(event, Mapping)
        and isinstance(event.get("function"), str)
        and isinstance(event.get("reasons"), list)
        and (event.get("limit_hit") is None or isinstance(event.get("limit_hit"), str))
        for event in events
    )


def _derived_from_events(events: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The section's ``reasons``, ``limit_hits`` and ``by_function`` as the recompile watch makes them from its events."""
    reasons: list[Any] = []
    limit_hits: list[Any] = []
    by_function: dict[str, dict[str, Any]] = {}
    for event in events:
        function = by_function.setdefault(event["function"], {"count": 0, "reasons": [], "limit_hits": []})
        if event.get("limit_hit") is None:
            reasons.extend(event["reasons"])
            function["count"] += 1
            function["reasons"].extend(event["reasons"])
        else:
            limit_hits.append(event["limit_hit"])
            function["limit_hits"].append(event["limit_hit"])
    return {"reasons": reasons, "limit_hits": limit_hits, "by_function": by_function}


def _durations_stored(durations: Mapping[str, Any], tests: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for nodeid in sorted(set(durations) | set(tests)):
        given = _record_seconds(tests.get(nodeid))
        if nodeid not in durations:
            if given is not None:
                out[nodeid] = None  # a record, but the test did not finish
        elif given is None or given != durations[nodeid]:
            out[nodeid] = durations[nodeid]
    return out


def _record_seconds(record: Any) -> float | None:
    """A record's ``duration_s`` to the millisecond, as ``durations`` holds it; None where it has none."""
    seconds = record.get("duration_s") if isinstance(record, Mapping) else None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds:
        return None
    if abs(seconds) == float("inf"):
        return None
    return round(float(seconds), 3)


# ----------------------------------------------------------------------------
# reading: every fact where its readers look for it
# ----------------------------------------------------------------------------


def report_as_read(data: Any) -> Any:
    """A parsed report file in the form readers take: a ``/2`` file's facts spelled out, a ``/1`` file brought up.

    Anything else (not a mapping, another schema) is returned as it is, for the
    validator to name what is wrong.  The mapping is changed in place.
    """
    if not isinstance(data, dict):
        return data
    if data.get("schema") == SCHEMA_V1:
        _rename_kernel_phase(data)
        data["schema"] = SCHEMA_V2
        return data
    if data.get("schema") != SCHEMA_V2:
        return data
    common = data.pop("cache_components_all_layers", None)
    tables = data.get("cache_components")
    if isinstance(common, dict) and isinstance(tables, dict):
        data["cache_components"] = {
            layer: dict(sorted({**common, **table}.items())) if isinstance(table, Mapping) else table
            for layer, table in tables.items()
        }
    elif common is not None:  # malformed: keep it for the validator to name
        data["cache_components_all_layers"] = common
    tests = data.get("tests")
    if not isinstance(tests, dict):
        return data
    for record in tests.values():
        if isinstance(record, dict) and isinstance(record.get("recompiles"), dict):
            _recompiles_read(record["recompiles"])
    if isinstance(data.get("durations"), dict):
        data["durations"] = _durations_read(data["durations"], tests)
    return data


def _recompiles_read(section: dict[str, Any]) -> None:
    """Put back the section's lists and each event's ``verbatim``, where the recompile watch writes them."""
    events: Any = section.get("events")
    if not _events_readable(events):
        return
    events[:] = [
        event
        if "verbatim" in event
        else _inserted(event, "verbatim", list(event["reasons"]), after=_EVENT_BEFORE_VERBATIM)
        for event in events
    ]
    derived = _derived_from_events(events)
    missing = {key: derived[key] for key in ("reasons", "limit_hits", "by_function") if key not in section}
    if missing:
        rebuilt = {key: section[key] for key in ("count",) if key in section}
        rebuilt.update({key: section.get(key, derived.get(key)) for key in ("reasons", "limit_hits", "by_function")})
        rebuilt.update(section)
        section.clear()
        section.update(rebuilt)


# the fields an event holds before its verbatim text (RecompileEvent.to_json's order)
_EVENT_BEFORE_VERBATIM = ("function", "call_site", "reasons", "guards")


def _inserted(mapping: Mapping[str, Any], key: str, value: Any, after: tuple[str, ...]) -> dict[str, Any]:
    """``mapping`` with ``key`` placed after the last of ``after`` it holds, as the writer orders its fields."""
    out: dict[str, Any] = {}
    placed = False
    for name, item in mapping.items():
        if not placed and name not in after:
            out[key] = value
            placed = True
        out[name] = item
    if not placed:
        out[key] = value
    return out


def _durations_read(stored: Mapping[str, Any], tests: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for nodeid in sorted(set(stored) | set(tests)):
        if nodeid in stored:
            if stored[nodeid] is not None:
                out[nodeid] = stored[nodeid]
            continue
        seconds = _record_seconds(tests[nodeid])
        if seconds is not None:
            out[nodeid] = seconds
    return out


def _rename_kernel_phase(data: dict[str, Any]) -> None:
    """Rename ``triton_s`` under every ``phases`` and in every ``unavailable`` list of the records."""
    stack: list[Any] = [data.get("tests")]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in list(value.items()):
                if key == "phases" and isinstance(item, dict) and OLD_KERNEL_PHASE in item:
                    value[key] = {KERNEL_PHASE if name == OLD_KERNEL_PHASE else name: v for name, v in item.items()}
                elif key == "unavailable" and isinstance(item, list):
                    value[key] = [KERNEL_PHASE if name == OLD_KERNEL_PHASE else name for name in item]
                stack.append(value[key])
        elif isinstance(value, list):
            stack.extend(value)
