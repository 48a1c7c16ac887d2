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
  a test with a record that did not finish (it has no duration for pytest-split);
- a lookup whose components an earlier lookup of its test holds alike (a warm pass
  looks up the keys its cold pass made) has ``components_of``: that lookup's index;
  within a lookup's components, a [hash, value] pair held under an earlier name too
  (inputs of one shape) is that name;
- a compile time (the test's, each pass's) whose ``total_s`` and ``phases`` are its
  frames' sums has ``sums_of_frames: ["total_s", "phases"]`` in their place;
- what a test's cold/warm passes (under ``extra``) give is left out: ``cache_passes``
  (each pass's counters), ``compile_time.passes`` (each pass's total), and the
  counters of ``caches`` where they are both passes added up (``sum_of_passes: true``
  in their place); ``null`` stands for such a field the record did not have;
- a recompile event at an earlier event's call site has ``call_site_of``: its index.

``components_of``, ``sums_of_frames``, ``sum_of_passes`` and ``call_site_of`` are the
file's own names: no reader sees them, and the plugin writes none in a record.

A field is left out only where putting it back gives exactly what was there, so
a file read back is the report that was written.  A ``pytest-cudagraph/1`` file
(an older plugin's) is read too: its fields are all spelled out already, and its
compile-time phase ``triton_s`` is read as ``kernel_compile_s``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from .cold_warm import added_up, extra_keys_read_whole, pass_pairs, pass_times, passes_apart

SCHEMA_V1 = "pytest-cudagraph/1"
SCHEMA_V2 = "pytest-cudagraph/2"
# the compile-time phase pytest-cudagraph/1 named for Triton, though on a CPU it timed C++ kernels
OLD_KERNEL_PHASE = "triton_s"
KERNEL_PHASE = "kernel_compile_s"
# the stored form's own fields, each in place of what it names (no reader sees them)
COMPONENTS_OF = "components_of"
SUMS_OF_FRAMES = "sums_of_frames"
SUM_OF_PASSES = "sum_of_passes"
CALL_SITE_OF = "call_site_of"

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
    if not isinstance(record, Mapping):
        return record
    out = dict(record)
    if isinstance(out.get("recompiles"), Mapping):
        out["recompiles"] = _recompiles_stored(out["recompiles"])
    # what is derived from the passes under extra, decided on the record as it was given
    passes_derived = _passes_derived(record)
    if isinstance(out.get("compile_time"), Mapping):
        out["compile_time"] = _compile_time_stored(out["compile_time"], passes_derived["compile_time.passes"])
    for key in ("cache_passes",):
        _derived_stored(out, key, passes_derived[key])
    caches = out.get("caches")
    if isinstance(caches, Mapping) and passes_derived["caches"] is not None:
        out["caches"] = _caches_stored(caches, passes_derived["caches"])
    if isinstance(out.get("cache_keys"), Mapping) and isinstance(out["cache_keys"].get("lookups"), list):
        out["cache_keys"] = {**out["cache_keys"], "lookups": _lookups_stored(out["cache_keys"]["lookups"])}
    if pass_pairs(record):
        out["extra"] = _extra_stored(out["extra"])
    return out


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


def _derived_stored(section: dict[str, Any], key: str, derived: Any) -> None:
    """Leave ``key`` out where it is ``derived`` and last (where reading puts it back); ``null`` where it is absent.

    ``null`` says that the field was not there though the passes give it, so
    reading does not put it back: the field's own form is never null.
    """
    if derived is None:
        return
    if key not in section:
        section[key] = None
    elif list(section)[-1] == key and _same(section[key], derived):
        del section[key]


def _derived_read(section: dict[str, Any], key: str, derived: Any) -> None:
    if key in section:
        if section[key] is None:
            del section[key]
    elif derived is not None:
        section[key] = derived


def _compile_time_stored(section: Mapping[str, Any], passes: Any) -> dict[str, Any]:
    out = _totals_stored(section)
    _derived_stored(out, "passes", passes)
    return out


def _totals_stored(section: Mapping[str, Any]) -> dict[str, Any]:
    """A compile time with ``total_s`` and ``phases`` (next to each other) left out where they are its frames' sums.

    ``sums_of_frames`` takes their place and names them; reading adds the frames up again.
    """
    keys = list(section)
    if "total_s" not in keys or keys.index("total_s") + 1 >= len(keys) or keys[keys.index("total_s") + 1] != "phases":
        return dict(section)
    sums = _sums_of_frames(section.get("frames"))
    if sums is None or not _same({"total_s": section["total_s"], "phases": section["phases"]}, sums):
        return dict(section)
    out: dict[str, Any] = {}
    for name, value in section.items():
        if name == "total_s":
            out[SUMS_OF_FRAMES] = list(sums)
        elif name != "phases":
            out[name] = value
    return out


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


def _caches_stored(caches: Mapping[str, Any], passes_sum: dict[str, Any]) -> dict[str, Any]:
    """The test's counters left out where they are its passes' added up (the layers first, as the probe writes them).

    ``sum_of_passes`` takes their place; what is not a layer's counters (``start``) stays.
    """
    layers = [name for name, value in caches.items() if isinstance(value, Mapping)]
    if SUM_OF_PASSES in caches or list(caches)[: len(layers)] != layers:
        return dict(caches)
    if not layers or not _same({name: caches[name] for name in layers}, passes_sum):
        return dict(caches)
    return {SUM_OF_PASSES: True, **{name: value for name, value in caches.items() if name not in layers}}


def _lookups_stored(lookups: list[Any]) -> list[Any]:
    """Each lookup whose components an earlier lookup of the test holds alike names that one (``components_of``).

    A warm pass looks up the keys the cold pass made: the same components, hash for hash.
    """
    if any(isinstance(one, Mapping) and COMPONENTS_OF in one for one in lookups):
        return list(lookups)
    out: list[Any] = []
    for index, lookup in enumerate(lookups):
        components = lookup.get("components") if isinstance(lookup, Mapping) else None
        earlier = _earlier_alike(lookups, index, components) if isinstance(components, Mapping) and components else None
        if earlier is None:
            out.append(_pairs_stored(lookup))
        else:
            out.append(
                {
                    (COMPONENTS_OF if name == "components" else name): (earlier if name == "components" else value)
                    for name, value in lookup.items()
                }
            )
    return out


def _pairs_stored(lookup: Any) -> Any:
    """A lookup whose components hold one [hash, value] pair under several names: the later names name the first.

    A graph's inputs of one shape and dtype have one metadata text (``example_inputs[3]``
    and ``example_inputs[8]``); a component is otherwise a list, so a name in its place
    says which component it is the same as.
    """
    components = lookup.get("components") if isinstance(lookup, Mapping) else None
    if not isinstance(components, Mapping):
        return lookup
    first: dict[str, str] = {}
    stored: dict[str, Any] = {}
    for name, pair in components.items():
        text = json.dumps(pair) if isinstance(pair, list) else None
        if text is not None and text in first:
            stored[name] = first[text]
        else:
            if text is not None:
                first[text] = name
            stored[name] = pair
    return {**lookup, "components": stored}


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


def _earlier_alike(lookups: list[Any], index: int, components: Mapping[str, Any]) -> int | None:
    for earlier in range(index):
        other = lookups[earlier]
        if isinstance(other, Mapping) and isinstance(other.get("components"), Mapping):
            if _same(other["components"], components):
                return earlier
    return None


def _extra_stored(extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` with each pass's compile time stored once (its totals are its frames' sums)."""
    return _map_pass_compile_times(extra, _totals_stored)


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


def _recompiles_stored(section: Mapping[str, Any]) -> dict[str, Any]:
    events: Any = section.get("events")
    out = dict(section)
    if not _events_readable(events):
        return out
    derived = _derived_from_events(events)
    for key in ("reasons", "limit_hits", "by_function"):
        if key in out and _same(out[key], derived[key]):
            del out[key]
    out["events"] = _call_sites_stored(
        [
            {name: value for name, value in event.items() if not (name == "verbatim" and value == event.get("reasons"))}
            for event in events
        ]
    )
    return out


def _call_sites_stored(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event recompiled at an earlier event's call site names that event (``call_site_of``).

    A loop that recompiles one function recompiles it at one line, event after event.
    """
    if any(CALL_SITE_OF in event for event in events):
        return events
    out = []
    for index, event in enumerate(events):
        site = event.get("call_site")
        earlier = next(
            (i for i in range(index) if site is not None and _same(events[i].get("call_site"), site)),
            None,
        )
        if earlier is None or not isinstance(site, Mapping):
            out.append(event)
        else:
            out.append(
                {
                    (CALL_SITE_OF if name == "call_site" else name): (earlier if name == "call_site" else value)
                    for name, value in event.items()
                }
            )
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
        if isinstance(record, dict):
            _record_read(record)
    if isinstance(data.get("durations"), dict):
        data["durations"] = _durations_read(data["durations"], tests)
    return data


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
