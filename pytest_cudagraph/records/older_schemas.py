"""Reports of older plugins (``pytest-cudagraph/1`` and ``/2``), read as the current form (``/3``).

The current file is the report as ``docs/reference.md`` documents it, every field
where it says.  Older files differ:

- ``/1`` named the compile-time phase of kernel compiles ``triton_s`` (read as
  ``kernel_compile_s``), and kept ``cache_components`` per layer;
- ``/2`` stored some facts once and left them for its reader to put back:
  ``cache_components_all_layers`` (what both layers' tables held alike), a
  recompile section without the ``reasons``, ``limit_hits`` and ``by_function``
  its events give and events without a ``verbatim`` equal to their ``reasons``,
  ``durations`` without the seconds a record's ``duration_s`` gives (``null``: a
  record's test that did not finish), and back-references in place of what they
  name: ``components_of`` (an earlier lookup's components), a component pair named
  by an earlier component's name, ``sums_of_frames`` (a compile time's totals are
  its frames' sums), ``sum_of_passes`` (a test's counters are its passes' added
  up), ``call_site_of`` (an earlier event's call site), and ``cache_passes`` and
  ``compile_time.passes`` left out where the passes under ``extra`` give them;
- both kept ``cache_components`` per layer (``{layer: {name: [hash, value]}}``),
  where ``/3`` keeps one table for the run.

``report_as_current`` puts each of these back, so every reader sees one form.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .cache_components import factor_cache_components
from .cold_warm import added_up, extra_keys_read_whole, pass_pairs, pass_times, passes_apart

SCHEMA_V1 = "pytest-cudagraph/1"
SCHEMA_V2 = "pytest-cudagraph/2"
# the schema this pytest-cudagraph writes
SCHEMA_V3 = "pytest-cudagraph/3"
# the compile-time phase pytest-cudagraph/1 named for Triton, though on a CPU it timed C++ kernels
OLD_KERNEL_PHASE = "triton_s"
KERNEL_PHASE = "kernel_compile_s"
# the /2 file's own fields, each in place of what it names
COMPONENTS_OF = "components_of"
SUMS_OF_FRAMES = "sums_of_frames"
SUM_OF_PASSES = "sum_of_passes"
CALL_SITE_OF = "call_site_of"

__all__ = ["KERNEL_PHASE", "SCHEMA_V1", "SCHEMA_V2", "SCHEMA_V3", "report_as_current"]


def _passes_derived(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the record's cold/warm passes (under ``extra``) give: ``cache_passes``, ``compile_time.passes``, ``caches``.

    A value is None where the record has no pair to derive it from.
    """
    pairs = pass_pairs(record)
    if not pairs:
        return {"cache_passes": None, "compile_time.passes": None, "caches": None}
    counted = passes_apart([record]) or {}
    counted.pop("tests", None)
    return {
        "cache_passes": counted,
        "compile_time.passes": pass_times(record) or None,
        "caches": added_up([pair.cold for pair in pairs] + [pair.warm for pair in pairs]),
    }


def _derived_read(section: dict[str, Any], key: str, derived: Any) -> None:
    if key in section:
        if section[key] is None:
            del section[key]
    elif derived is not None:
        section[key] = derived


def _sums_of_frames(frames: Any) -> dict[str, Any] | None:
    """``total_s`` and ``phases`` as the compile-time watch adds its frames up; None where they cannot be added."""
    if not isinstance(frames, list) or not frames:
        return None
    names: list[str] | None = None
    for frame in frames:
        if not isinstance(frame, Mapping) or not _is_number(frame.get("total_s")):
            return None
        phases = frame.get("phases")
        if not isinstance(phases, Mapping) or not all(_is_number(value) for value in phases.values()):
            return None
        if names is None:
            names = list(phases)
        elif list(phases) != names:
            return None
    return {
        "total_s": round(sum(frame["total_s"] for frame in frames), 6),
        "phases": {name: round(sum(frame["phases"][name] for frame in frames), 6) for name in names or ()},
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _pairs_read(lookup: Any) -> Any:
    components = lookup.get("components") if isinstance(lookup, dict) else None
    if not isinstance(components, dict) or not any(isinstance(pair, str) for pair in components.values()):
        return lookup
    read: dict[str, Any] = {}
    for name, pair in components.items():
        same = read.get(pair) if isinstance(pair, str) else None
        read[name] = list(same) if isinstance(same, list) else pair
    lookup["components"] = read
    return lookup


def _map_pass_compile_times(extra: Mapping[str, Any], change: Any) -> dict[str, Any]:
    """``extra`` with ``change`` applied to the compile time of each pass of each pair ``pass_pairs`` reads."""
    whole = extra_keys_read_whole({"extra": extra})
    out = dict(extra)

    def pair_changed(entry: Mapping[str, Any]) -> dict[str, Any]:
        changed = dict(entry)
        for name in ("cold", "warm"):
            one = dict(changed[name])
            if isinstance(one.get("compile_time"), Mapping):
                one["compile_time"] = change(one["compile_time"])
            changed[name] = one
        return changed

    if "compile_cache" in whole:
        out["compile_cache"] = pair_changed(out["compile_cache"])
    if "cold_warm" in whole:
        out["cold_warm"] = [pair_changed(entry) for entry in out["cold_warm"]]
    return out


def _call_sites_read(events: list[Any]) -> None:
    for index, event in enumerate(events):
        earlier = event.get(CALL_SITE_OF) if isinstance(event, dict) else None
        if isinstance(earlier, bool) or not isinstance(earlier, int) or not 0 <= earlier < index:
            continue
        site = events[earlier].get("call_site") if isinstance(events[earlier], dict) else None
        if isinstance(site, Mapping) and "call_site" not in event:
            events[index] = {
                ("call_site" if name == CALL_SITE_OF else name): (
                    copy.deepcopy(site) if name == CALL_SITE_OF else value
                )
                for name, value in event.items()
            }


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


def _record_seconds(record: Any) -> float | None:
    """A record's ``duration_s`` to the millisecond, as ``durations`` holds it; None where it has none."""
    seconds = record.get("duration_s") if isinstance(record, Mapping) else None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds:
        return None
    if abs(seconds) == float("inf"):
        return None
    return round(float(seconds), 3)


# ----------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------


def report_as_current(data: Any) -> Any:
    """A parsed report file in the current form (``pytest-cudagraph/3``): a ``/1`` or ``/2`` file brought up.

    A ``/2`` file's facts stored once are spelled out, a ``/1`` file's kernel phase
    renamed, and both files' per-layer ``cache_components`` tables made the one
    run-wide table of ``/3``.  Anything else (not a mapping, the current schema or
    another) is returned as it is, for the validator to name what is wrong.  The
    mapping is changed in place.
    """
    if not isinstance(data, dict) or data.get("schema") not in (SCHEMA_V1, SCHEMA_V2):
        return data
    if data["schema"] == SCHEMA_V1:
        _rename_kernel_phase(data)
    else:
        _spelled_out(data)
    _one_run_table(data)
    data["schema"] = SCHEMA_V3
    return data


def _spelled_out(data: dict[str, Any]) -> None:
    """A ``/2`` file's facts stored once put back where ``/1`` and ``/3`` hold them."""
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
        return
    for record in tests.values():
        if isinstance(record, dict):
            _record_read(record)
    if isinstance(data.get("durations"), dict):
        data["durations"] = _durations_read(data["durations"], tests)


def _one_run_table(data: dict[str, Any]) -> None:
    """Per-layer ``cache_components`` made the run's one table; malformed tables are left for the validator to name.

    Each lookup gets its whole set of components back from its layer's table, and
    the components every lookup of the run shares are factored out again, as the
    writer of ``/3`` does.
    """
    tables = data.get("cache_components", {})
    tests = data.get("tests")
    if not isinstance(tables, dict) or not all(isinstance(table, dict) for table in tables.values()):
        return
    if not isinstance(tests, dict) or not all(isinstance(record, dict) for record in tests.values()):
        return
    data.pop("cache_components", None)
    for record in tests.values():
        section = record.get("cache_keys") if isinstance(record, dict) else None
        lookups = section.get("lookups") if isinstance(section, dict) else None
        for lookup in lookups if isinstance(lookups, list) else ():
            if isinstance(lookup, dict) and isinstance(lookup.get("components"), dict):
                lookup["components"] = {**tables.get(str(lookup.get("layer")), {}), **lookup["components"]}
    shared = factor_cache_components(tests)
    if shared:
        data["cache_components"] = shared


def _record_read(record: dict[str, Any]) -> None:
    """Put back what the file stores once in a record, in the order the writer gave its fields."""
    if isinstance(record.get("recompiles"), dict):
        _recompiles_read(record["recompiles"])
    if isinstance(record.get("extra"), dict):
        record["extra"] = _map_pass_compile_times(record["extra"], _totals_read)
    section = record.get("cache_keys")
    if isinstance(section, dict) and isinstance(section.get("lookups"), list):
        section["lookups"] = _lookups_read(section["lookups"])
    passes_derived = _passes_derived(record)
    if isinstance(record.get("compile_time"), dict):
        record["compile_time"] = _totals_read(record["compile_time"])
        _derived_read(record["compile_time"], "passes", passes_derived["compile_time.passes"])
    _derived_read(record, "cache_passes", passes_derived["cache_passes"])
    caches = record.get("caches")
    if isinstance(caches, dict) and caches.get(SUM_OF_PASSES) is True and passes_derived["caches"] is not None:
        rest = {name: value for name, value in caches.items() if name != SUM_OF_PASSES}
        record["caches"] = {**passes_derived["caches"], **rest}


def _totals_read(section: Mapping[str, Any]) -> Any:
    names = section.get(SUMS_OF_FRAMES)
    sums = _sums_of_frames(section.get("frames"))
    if names != ["total_s", "phases"] or sums is None:
        return section
    out: dict[str, Any] = {}
    for name, value in section.items():
        if name == SUMS_OF_FRAMES:
            out.update(sums)
        else:
            out[name] = value
    return out


def _lookups_read(lookups: list[Any]) -> list[Any]:
    """Each lookup that names an earlier one (``components_of``) given its own copy of that one's components."""
    out: list[Any] = []
    for lookup in map(_pairs_read, lookups):
        earlier = lookup.get(COMPONENTS_OF) if isinstance(lookup, Mapping) else None
        components = _components_at(out, earlier)
        if components is None or "components" in lookup:
            out.append(lookup)
            continue
        out.append(
            {
                ("components" if name == COMPONENTS_OF else name): (
                    _copied(components) if name == COMPONENTS_OF else value
                )
                for name, value in lookup.items()
            }
        )
    return out


def _components_at(lookups: list[Any], index: Any) -> Mapping[str, Any] | None:
    """The components of ``lookups[index]``; None where ``index`` names no lookup with components."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(lookups):
        return None
    components = lookups[index].get("components") if isinstance(lookups[index], Mapping) else None
    return components if isinstance(components, Mapping) else None


def _copied(components: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a lookup's components (``{name: [hash, value]}``) that shares no list with it."""
    return {name: list(pair) if isinstance(pair, list) else copy.deepcopy(pair) for name, pair in components.items()}


def _recompiles_read(section: dict[str, Any]) -> None:
    """Put back the section's lists and each event's ``verbatim``, where the recompile watch writes them."""
    events: Any = section.get("events")
    if isinstance(events, list):
        _call_sites_read(events)
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
