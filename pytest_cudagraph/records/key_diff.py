"""Why a cache key differs: the components of two runs' FX-graph and AOTAutograd lookups, paired and diffed.

A report records, per test, every FX-graph and AOTAutograd cache lookup
(``cache_keys.lookups``) with its key and the components torch hashed into it,
``{name: [hash12, readable value or null]}``.  Components every lookup of the run
shares sit once in the report's ``cache_components``; a lookup's whole set is
that table with its own ``components`` over it.  Two runs' lookups of one test
are paired by (layer, pass, graph), then, for those left over, by the hash of
their ``gm`` component (the graph's code); each pair's components are compared by
hash, name by name, a name present on one side only being a difference too::

    diff = diff_reports(load_report("torch-2.13.json"), load_report("torch-2.14.json"))
    diff.run_wide      # differences every lookup of a layer shares: torch_version, system_info[...]
    diff.tests[nodeid].pairs[0].changes   # the rest, per pair: inductor_config[max_autotune]: False -> True

``compare`` prints a few lines of it per test whose cache behaviour changed,
``pytest-cudagraph explain`` all of it (``key_text`` words both).  Readable values are for display
only (they may hold object addresses, bytes or a graph's whole code): hashes
decide.  Nothing here imports torch; it reads a report's typed view (``loaded``),
and a report given as a mapping is checked against its types first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .loaded import LoadedReport, given, typed_record, typed_report, typed_section

if TYPE_CHECKING:
    from .schema import CacheKeys, CacheLayer, TestRecord

__all__ = [
    "KEYED_LAYERS",
    "ComponentChange",
    "Lookup",
    "LookupPair",
    "ReportKeyDiff",
    "RunWideChange",
    "TestKeyDiff",
    "bracket_depths",
    "call_focus",
    "call_parts",
    "diff_reports",
    "diff_test",
    "has_cache_keys",
    "lookup_changes",
    "lookups_of",
    "records_cache_keys",
    "shared_components",
]

# the cache layers whose lookups carry a key and its components (Triton's kernels have none)
KEYED_LAYERS = ("fxgraph", "aot_autograd")
# what a lookup's components are when the torch version recorded none for it
Components = Mapping[str, tuple[str | None, str | None]]
# components whose change says most about a run: listed first
_FIRST = ("torch_version", "system_info", "cuda_matmul_settings", "deterministic_algorithms_settings")


# ----------------------------------------------------------------------------
# reading a report
# ----------------------------------------------------------------------------


def _entry(value: list[str | None]) -> tuple[str | None, str | None] | None:
    """``[hash12, value]`` as a pair of strings (either may be None); None when it is no such pair."""
    if len(value) == 2:
        return value[0], value[1]
    return None


def _components(value: Mapping[str, list[str | None]] | None) -> dict[str, tuple[str | None, str | None]] | None:
    if value is None:
        return None
    out = {}
    for name, item in value.items():
        entry = _entry(item)
        if entry is not None:
            out[name] = entry
    return out


def shared_components(report: LoadedReport | Mapping[str, Any]) -> dict[str, dict[str, tuple[str | None, str | None]]]:
    """Per keyed layer, the components every lookup of that layer in the run shares.

    The run's ``cache_components`` (what every lookup shares, of either layer), and
    what every lookup of the layer holds alike among its own (``fx_kwargs[...]``
    for the FX graphs): a difference in either is one of the whole run.
    """
    typed = typed_report(report)
    table = _components(given(typed.report.cache_components)) or {}
    alike: dict[str, dict[str, tuple[str | None, str | None]]] = {}
    for record in typed.tests.values():
        for lookup in lookups_of(record):
            if lookup.own is None:
                continue
            if lookup.layer not in alike:
                alike[lookup.layer] = {name: pair for name, pair in lookup.own.items() if pair[0] is not None}
            else:
                held = alike[lookup.layer]
                alike[lookup.layer] = {
                    name: held[name] for name in held if _same_hash(lookup.own.get(name), held[name])
                }
    layers = [layer for layer in KEYED_LAYERS if layer in alike or table]
    return {layer: dict(sorted({**table, **alike.get(layer, {})}.items())) for layer in layers}


def _same_hash(one: tuple[str | None, str | None] | None, other: tuple[str | None, str | None]) -> bool:
    return one is not None and one[0] is not None and one[0] == other[0]


@dataclass(frozen=True)
class Lookup:
    """One FX-graph or AOTAutograd cache lookup of a test: its own components over its layer's shared ones."""

    layer: str
    outcome: str
    key: str | None
    pass_name: str | None
    graph: int | None
    index: int  # its place in the test's list of lookups
    own: Components | None  # None: the torch version recorded no components for this lookup
    shared: Components = field(default_factory=dict)  # the run's table for this layer
    detail: str | None = None
    bypass_reason: str | None = None
    explained: tuple[str, ...] = ()
    compared_with: str | None = None

    @property
    def components(self) -> Components | None:
        """Its whole set: the layer's shared components with its own over them; None when it has none."""
        return None if self.own is None else {**self.shared, **self.own}

    def component(self, name: str) -> tuple[str | None, str | None] | None:
        if self.own is None:
            return None
        return self.own[name] if name in self.own else self.shared.get(name)

    @property
    def label(self) -> str:
        """``fxgraph graph 1 (warm)``: the layer, the graph's place, the pass."""
        where = f"graph {self.graph}" if self.graph is not None else f"lookup {self.index + 1}"
        return f"{self.layer} {where}" + (f" ({self.pass_name})" if self.pass_name else "")

    @property
    def gm_hash(self) -> str | None:
        entry = self.component("gm")
        return entry[0] if entry else None

    def summary(self) -> dict[str, Any]:
        """The lookup without its components, for ``--json``."""
        out: dict[str, Any] = {
            "layer": self.layer,
            "pass": self.pass_name,
            "graph": self.graph,
            "outcome": self.outcome,
            "key": self.key,
        }
        for name in ("detail", "bypass_reason", "compared_with"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.explained:
            out["explained"] = list(self.explained)
        return out


def _cache_keys(record: TestRecord | Mapping[str, Any]) -> CacheKeys | None:
    """The record's ``cache_keys`` section; of a record given as a mapping, only that section is checked."""
    if isinstance(record, Mapping):
        from .schema import CacheKeys

        section = record.get("cache_keys")
        return None if section is None else typed_section(section, CacheKeys, ("cache_keys",))
    return given(record.cache_keys)


def has_cache_keys(record: TestRecord | Mapping[str, Any]) -> bool:
    """Whether the record holds a ``cache_keys`` section with a list of lookups."""
    keys = _cache_keys(record)
    return keys is not None and given(keys.lookups) is not None


def records_cache_keys(report: LoadedReport | Mapping[str, Any]) -> bool:
    """Whether the report records cache lookups: a shared table, or a test with a ``cache_keys`` section.

    False for a report of a plugin version before them (and for a run that compiled nothing).
    """
    typed = typed_report(report).report
    if given(typed.cache_components) is not None:
        return True
    return any(given(r.cache_keys) is not None for r in typed.tests.values())


def lookups_of(record: TestRecord | Mapping[str, Any], shared: Mapping[str, Components] | None = None) -> list[Lookup]:
    """The record's lookups (``cache_keys.lookups``), each with its whole set of components."""
    shared = shared or {}
    keys = _cache_keys(record)
    lookups = []
    for index, item in enumerate((given(keys.lookups) or ()) if keys is not None else ()):
        layer, outcome = given(item.layer), given(item.outcome)
        layer = "?" if layer is None else layer
        components = given(item.components)
        lookups.append(
            Lookup(
                layer=layer,
                outcome="?" if outcome is None else outcome,
                key=given(item.key),
                pass_name=given(item.pass_),
                graph=given(item.graph),
                index=index,
                own=_components(components),
                shared=shared.get(layer, {}),
                detail=given(item.detail),
                bypass_reason=given(item.bypass_reason),
                explained=tuple(given(item.explained) or ()),
                compared_with=given(item.compared_with),
            )
        )
    return lookups


# ----------------------------------------------------------------------------
# differences
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ComponentChange:
    """One component that differs between two keys: ``(hash, value)`` on each side, None where it is absent."""

    name: str
    base: tuple[str | None, str | None] | None
    new: tuple[str | None, str | None] | None

    @property
    def same_change(self) -> tuple[Any, Any, Any]:
        return (self.name, self.base and self.base[0], self.new and self.new[0])

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base": list(self.base) if self.base else None,
            "new": list(self.new) if self.new else None,
        }


def _differs(a: tuple[str | None, str | None] | None, b: tuple[str | None, str | None] | None) -> bool:
    if a is None or b is None:
        return a is not b
    if a[0] is not None and b[0] is not None:
        return a[0] != b[0]  # hashes decide: a readable value may hold an address that differs every run
    return a[1] != b[1]


def _differing_names(base: Components, new: Components) -> list[str]:
    return [n for n in base if n not in new or _differs(base[n], new[n])] + [n for n in new if n not in base]


def lookup_changes(
    base: Lookup, new: Lookup, shared_differ: Sequence[str] | None = None
) -> tuple[ComponentChange, ...] | None:
    """Every component whose hash differs between two lookups, or that one of them lacks; None when either has none.

    Only the names of their own components and those in which the two shared
    tables differ (``shared_differ``, computed when not given) are looked at: the
    rest come from equal shared entries.  Changed values come first, then the
    names only one side has.
    """
    if base.own is None or new.own is None:
        return None
    if shared_differ is None:
        shared_differ = _differing_names(base.shared, new.shared)
    changes = []
    for name in dict.fromkeys([*base.own, *shared_differ, *new.own]):
        before, after = base.component(name), new.component(name)
        if _differs(before, after):
            changes.append(ComponentChange(name, before, after))
    return tuple(sorted(changes, key=lambda c: c.base is None or c.new is None))


@dataclass(frozen=True)
class RunWideChange:
    """A component that differs between the runs for every lookup of ``layers`` (their shared tables)."""

    change: ComponentChange
    layers: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self.change.to_json(), "layers": list(self.layers)}


def _run_wide_changes(
    base_shared: Mapping[str, Components],
    new_shared: Mapping[str, Components],
    base_names: Mapping[str, set[str]],
    new_names: Mapping[str, set[str]],
) -> tuple[RunWideChange, ...]:
    """Components of a layer's shared table that differ in the other run's: by hash, or absent from all its lookups.

    A name in one run's shared table and in no lookup of the other run (a config
    entry a torch version added) is a run-wide difference; one that the other run's
    lookups hold each their own value of is not, and shows per lookup.
    """
    per_layer: dict[tuple[Any, Any, Any], tuple[ComponentChange, list[str]]] = {}
    for layer in KEYED_LAYERS:
        base, new = base_shared.get(layer, {}), new_shared.get(layer, {})
        if not base_names.get(layer) or not new_names.get(layer):
            continue  # a layer one run never looked up (with components) cannot differ run-wide
        changes = [ComponentChange(n, base[n], new[n]) for n in base if n in new and _differs(base[n], new[n])]
        changes += [ComponentChange(n, base[n], None) for n in base if n not in new and n not in new_names[layer]]
        changes += [ComponentChange(n, None, new[n]) for n in new if n not in base and n not in base_names[layer]]
        for change in changes:
            per_layer.setdefault(change.same_change, (change, []))[1].append(layer)
    found = [RunWideChange(change, tuple(layers)) for change, layers in per_layer.values()]
    return tuple(sorted(found, key=lambda c: _order(c.change)))


def _order(change: ComponentChange) -> tuple[int, int]:
    """torch_version and system_info first, then changed values, then names one run lacks."""
    family = change.name.split("[")[0]
    if family in _FIRST:
        return (0, _FIRST.index(family))
    return (2 if change.base is None or change.new is None else 1, 0)


@dataclass(frozen=True)
class LookupPair:
    """A lookup of the base run and the one of the new run it is compared with."""

    base: Lookup
    new: Lookup
    paired_by: str  # "pass and graph", or "gm" (the graph's code) when pass and graph found no partner
    changes: tuple[ComponentChange, ...] | None  # beyond the run-wide ones; None: a side has no components
    run_wide: int = 0  # how many run-wide differences it shares (not repeated in ``changes``)

    @property
    def label(self) -> str:
        if self.base.label == self.new.label:
            return self.new.label
        return f"{self.base.label} / {self.new.label}"

    @property
    def outcome_changed(self) -> bool:
        return self.base.outcome != self.new.outcome

    @property
    def key_changed(self) -> bool:
        return self.base.key != self.new.key

    def to_json(self) -> dict[str, Any]:
        return {
            "paired_by": self.paired_by,
            "base": self.base.summary(),
            "new": self.new.summary(),
            "components": [c.to_json() for c in self.changes] if self.changes is not None else None,
            "components_missing": missing_sides(self),
            "run_wide": self.run_wide,
        }


def missing_sides(pair: LookupPair, labels: tuple[str, str] = ("base", "new")) -> str | None:
    sides = [label for label, lookup in zip(labels, (pair.base, pair.new)) if lookup.own is None]
    return " and ".join(sides) or None


@dataclass(frozen=True)
class TestKeyDiff:
    """One test's lookups in two runs: the pairs, and the lookups left without a partner."""

    __test__ = False  # not a pytest test class

    nodeid: str
    pairs: tuple[LookupPair, ...]
    only_base: tuple[Lookup, ...]
    only_new: tuple[Lookup, ...]
    counters_changed: bool = False

    @property
    def behaviour_changed(self) -> bool:
        """Its cache counters or a lookup's outcome differ, or a lookup has no partner."""
        return (
            self.counters_changed or any(p.outcome_changed for p in self.pairs) or bool(self.only_base or self.only_new)
        )

    @property
    def keys_differ(self) -> bool:
        return any(p.key_changed for p in self.pairs) or bool(self.only_base or self.only_new)

    @property
    def own_changes(self) -> int:
        """Differing components beyond the run-wide ones, over every pair."""
        return sum(len(p.changes or ()) for p in self.pairs)

    def to_json(self) -> dict[str, Any]:
        return {
            "behaviour_changed": self.behaviour_changed,
            "pairs": [p.to_json() for p in self.pairs],
            "unpaired": {"base": [x.summary() for x in self.only_base], "new": [x.summary() for x in self.only_new]},
        }


def _counters(record: TestRecord) -> tuple[CacheLayer | None, CacheLayer | None]:
    caches = given(record.caches)
    if caches is None:
        return None, None
    return given(caches.fxgraph), given(caches.aot_autograd)


def _counters_as_read(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """The keyed layers' counters as the report holds them: every counter, those no type names (guard_miss) too."""
    caches = record.get("caches") or {}
    return tuple(caches.get(layer) or {} for layer in KEYED_LAYERS)


def _pair(base: list[Lookup], new: list[Lookup]) -> tuple[list[tuple[Lookup, Lookup, str]], list[Lookup], list[Lookup]]:
    """Pairs by (layer, pass, graph), in order; then the rest by the hash of their ``gm``; then the unpaired."""
    waiting: dict[tuple[Any, ...], list[Lookup]] = {}
    for lookup in new:
        waiting.setdefault((lookup.layer, lookup.pass_name, lookup.graph), []).append(lookup)
    pairs: list[tuple[Lookup, Lookup, str]] = []
    left_base = []
    for lookup in base:
        candidates = waiting.get((lookup.layer, lookup.pass_name, lookup.graph))
        if lookup.graph is not None and candidates:
            pairs.append((lookup, candidates.pop(0), "pass and graph"))
        else:
            left_base.append(lookup)
    paired_new = {id(n) for _, n, _ in pairs}
    left_new = [lookup for lookup in new if id(lookup) not in paired_new]
    still_base = []
    for lookup in left_base:
        gm = lookup.gm_hash
        partner = next((n for n in left_new if gm is not None and n.layer == lookup.layer and n.gm_hash == gm), None)
        if partner is None:
            still_base.append(lookup)
        else:
            left_new.remove(partner)
            pairs.append((lookup, partner, "gm"))
    pairs.sort(key=lambda p: p[0].index)
    return pairs, still_base, left_new


def diff_test(
    nodeid: str,
    base_record: TestRecord | Mapping[str, Any],
    new_record: TestRecord | Mapping[str, Any],
    base_shared: Mapping[str, Components] | None = None,
    new_shared: Mapping[str, Components] | None = None,
    run_wide: Iterable[RunWideChange] = (),
    shared_differ: Mapping[str, Sequence[str]] | None = None,
    counters_changed: bool | None = None,
) -> TestKeyDiff:
    """One test's lookups in two runs, paired, with each pair's differing components beyond ``run_wide``.

    ``shared_differ``: per layer, the names in which the two shared tables differ
    (``diff_reports`` computes them once for every test).  ``counters_changed``:
    whether the records' FX-graph and AOTAutograd counters differ, every counter
    the report holds compared (``diff_reports`` reads them so); by default, the
    counters the types name.
    """
    base_shared, new_shared = base_shared or {}, new_shared or {}
    base_record, new_record = typed_record(base_record), typed_record(new_record)
    if shared_differ is None:
        shared_differ = {
            layer: _differing_names(base_shared.get(layer, {}), new_shared.get(layer, {}))
            for layer in {*base_shared, *new_shared}
        }
    base_lookups = lookups_of(base_record, base_shared)
    new_lookups = lookups_of(new_record, new_shared)
    wide = {(c.change.same_change, layer) for c in run_wide for layer in c.layers}
    pairs = []
    matched, only_base, only_new = _pair(base_lookups, new_lookups)
    for base, new, how in matched:
        changes = lookup_changes(base, new, shared_differ.get(new.layer, ()))
        shared = 0
        if changes is not None:
            own = tuple(c for c in changes if (c.same_change, new.layer) not in wide)
            shared, changes = len(changes) - len(own), own
        pairs.append(LookupPair(base, new, how, changes, shared))
    return TestKeyDiff(
        nodeid,
        tuple(pairs),
        tuple(only_base),
        tuple(only_new),
        counters_changed=(
            _counters(base_record) != _counters(new_record) if counters_changed is None else counters_changed
        ),
    )


@dataclass(frozen=True)
class ReportKeyDiff:
    """Two runs' cache keys: the differences every lookup shares, and each test's pairs (tests in both runs)."""

    run_wide: tuple[RunWideChange, ...]
    tests: Mapping[str, TestKeyDiff]

    def to_json(self) -> dict[str, Any]:
        return {"run_wide": [c.to_json() for c in self.run_wide]}


def records_of(report: LoadedReport | Mapping[str, Any]) -> Mapping[str, TestRecord]:
    return typed_report(report).tests


def _names_by_layer(records: Iterable[TestRecord], shared: Mapping[str, Components]) -> dict[str, set[str]]:
    """Per layer, every component name any lookup with components holds (its shared table's, and its own)."""
    names: dict[str, set[str]] = {}
    for record in records:
        for lookup in lookups_of(record, shared):
            if lookup.own is not None:
                names.setdefault(lookup.layer, set(lookup.shared)).update(lookup.own)
    return names


def diff_reports(base: LoadedReport | Mapping[str, Any], new: LoadedReport | Mapping[str, Any]) -> ReportKeyDiff:
    """Every test in both reports with ``cache_keys`` in either, diffed; and the run-wide differences."""
    base, new = typed_report(base, "base"), typed_report(new, "new")
    base_records, new_records = base.tests, new.tests
    base_shared, new_shared = shared_components(base), shared_components(new)
    run_wide = _run_wide_changes(
        base_shared,
        new_shared,
        _names_by_layer(base_records.values(), base_shared),
        _names_by_layer(new_records.values(), new_shared),
    )
    shared_differ = {
        layer: _differing_names(base_shared.get(layer, {}), new_shared.get(layer, {}))
        for layer in {*base_shared, *new_shared}
    }
    tests = {}
    for nodeid in sorted(n for n in base_records if n in new_records):
        if has_cache_keys(base_records[nodeid]) or has_cache_keys(new_records[nodeid]):
            tests[nodeid] = diff_test(
                nodeid,
                base_records[nodeid],
                new_records[nodeid],
                base_shared,
                new_shared,
                run_wide,
                shared_differ,
                _counters_as_read(base.record_data(nodeid)) != _counters_as_read(new.record_data(nodeid)),
            )
    return ReportKeyDiff(run_wide, tests)


# ----------------------------------------------------------------------------
# a value's structure: brackets, and the arguments of a call
# ----------------------------------------------------------------------------


def bracket_depths(text: str) -> list[int]:
    """How many brackets are open at each character of ``text`` (a closing one counts at its own level)."""
    depth, out = 0, []
    for ch in text:
        if ch in ")]}":
            depth = max(depth - 1, 0)
        out.append(depth)
        if ch in "([{":
            depth += 1
    return out


_CALL = re.compile(r"([A-Za-z_][\w.]*)\((.*)\)\Z", re.S)


def call_parts(value: str) -> tuple[str | None, list[str]]:
    """``"Name(a, b=(1, 2))"`` -> ``("Name", ["a", "b=(1, 2)"])``, split at top-level commas; (None, []) otherwise."""
    match = _CALL.match(value)
    if match is None:
        return None, []
    body = match.group(2)
    depths = bracket_depths(body)
    cuts = [i for i, ch in enumerate(body) if ch == "," and depths[i] == 0]
    bounds = zip([-1, *cuts], [*cuts, len(body)])
    return match.group(1), [body[start + 1 : end].strip() for start, end in bounds]


def call_focus(a: str, b: str) -> tuple[str, str] | None:
    """``T(x=1, y=2)`` vs ``T(x=1, y=5)`` -> ``T(y=2, ...)``, ``T(y=5, ...)`` (as the failure messages show it)."""
    head_a, parts_a = call_parts(a)
    head_b, parts_b = call_parts(b)
    if head_a is None or head_a != head_b or len(parts_a) != len(parts_b):
        return None
    differing = [(x, y) for x, y in zip(parts_a, parts_b) if x != y]
    if not differing or len(differing) == len(parts_a):
        return None
    return (
        f"{head_a}({', '.join(x for x, _ in differing)}, ...)",
        f"{head_b}({', '.join(y for _, y in differing)}, ...)",
    )
