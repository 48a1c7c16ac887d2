"""The run's cache-key components: the ones every lookup of the run shares, in one table, and each lookup's own.

A test's ``cache_keys.lookups`` list every FX-graph and AOTAutograd cache lookup
it made, each with the components torch hashed into its key, ``{name: [hash12,
readable value or null]}``.  Most of them are the same in every lookup of a run:
torch's config (some 600 ``inductor_config[...]`` entries), ``torch_version``,
``system_info[...]``.  The report keeps those once, in its top-level
``cache_components`` (the run's table, as pytest-benchmark keeps ``machine_info``
once), and each lookup keeps the rest: a lookup's whole set is the run's table
with its own components over it (``full_components``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["expand_cache_components", "factor_cache_components", "full_components"]


def factor_cache_components(records: dict[str, dict[str, Any]]) -> dict[str, list[Any]]:
    """Move the cache-key components every lookup of the run shares out of ``records``; return them.

    A lookup's ``components`` is either a mapping or null (torch gave none: a
    bypass, or a version that leaves them out).  The names whose hash is the same
    in every lookup with components, of every layer, go into the returned table,
    which build_report writes as the report's ``cache_components``; each lookup
    keeps only the rest, so a lookup that shares everything keeps ``{}``.  An empty
    mapping is turned into null first (it holds nothing, and after factoring ``{}``
    means "all shared").

    ``records`` is changed in place: the records whose ``cache_keys`` section is
    rewritten get their own copies of that section, never a caller's dicts.
    Records that are already factored must be expanded first (expand_cache_components).
    """
    sections = {}
    with_components: list[dict[str, Any]] = []
    for nodeid, record in records.items():
        section = record.get("cache_keys")
        if not isinstance(section, Mapping) or not isinstance(section.get("lookups"), list):
            continue
        lookups = []
        for lookup in section["lookups"]:
            if isinstance(lookup, Mapping):
                lookup = dict(lookup)
                components = lookup.get("components")
                if isinstance(components, Mapping) and components:
                    with_components.append(lookup)
                elif isinstance(components, Mapping):
                    lookup["components"] = None
            lookups.append(lookup)
        sections[nodeid] = {**section, "lookups": lookups}
    common: dict[str, list[Any]] = {}
    if with_components:
        first, *rest = with_components
        common = {name: list(pair) for name, pair in first["components"].items() if _component_hash(pair) is not None}
        for lookup in rest:
            components = lookup["components"]
            common = {
                name: pair
                for name, pair in common.items()
                if name in components and _component_hash(components[name]) == pair[0]
            }
            if not common:
                break
    if common:
        for lookup in with_components:
            lookup["components"] = {name: pair for name, pair in lookup["components"].items() if name not in common}
    for nodeid, section in sections.items():
        records[nodeid]["cache_keys"] = section
    return dict(sorted(common.items()))


def _component_hash(pair: Any) -> str | None:
    return pair[0] if isinstance(pair, (list, tuple)) and pair and isinstance(pair[0], str) else None


def full_components(report: Mapping[str, Any], lookup: Mapping[str, Any]) -> dict[str, list[Any]] | None:
    """A lookup's whole set of components, ``{name: [hash12, value-or-null]}``: the run's shared ones and its own.

    None when the lookup has none (a bypass, or a torch that gives none: see the
    record's ``note``).  ``report`` is the report the lookup comes from (its
    ``cache_components``).  Example::

        for lookup in report["tests"][nodeid]["cache_keys"]["lookups"]:
            components = full_components(report, lookup)
    """
    own = lookup.get("components")
    if not isinstance(own, Mapping):
        return None
    shared = report.get("cache_components")
    return {**(shared if isinstance(shared, Mapping) else {}), **own}


def expand_cache_components(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The report's test records with every lookup's components whole again (the report is not changed).

    For building a new report out of old ones (merging shard reports): build_report
    factors the records again, over all of them.
    """
    tests = report.get("tests")
    if not isinstance(tests, Mapping):
        return {}
    out = {}
    for nodeid, record in tests.items():
        section = record.get("cache_keys") if isinstance(record, Mapping) else None
        if isinstance(section, Mapping) and isinstance(section.get("lookups"), list):
            lookups = [
                {**lookup, "components": full_components(report, lookup)}
                if isinstance(lookup, Mapping) and isinstance(lookup.get("components"), Mapping)
                else lookup
                for lookup in section["lookups"]
            ]
            record = {**record, "cache_keys": {**section, "lookups": lookups}}
        out[nodeid] = record
    return out
