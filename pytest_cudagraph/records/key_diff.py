"""Why a cache key differs: the components of two runs' FX-graph and AOTAutograd lookups, paired and diffed.

A report records, per test, every FX-graph and AOTAutograd cache lookup
(``cache_keys.lookups``) with its key and the components torch hashed into it,
``{name: [hash12, readable value or null]}``.  Components every lookup of a layer
shares sit once in the report's ``cache_components[layer]``; a lookup's whole set
is that table with its own ``components`` over it.  Two runs' lookups of one test
are paired by (layer, pass, graph), then, for those left over, by the hash of
their ``gm`` component (the graph's code); each pair's components are compared by
hash, name by name, a name present on one side only being a difference too::

    diff = diff_reports(load_report("torch-2.13.json"), load_report("torch-2.14.json"))
    diff.run_wide      # differences every lookup of a layer shares: torch_version, system_info[...]
    diff.tests[nodeid].pairs[0].changes   # the rest, per pair: inductor_config[max_autotune]: False -> True

``compare`` prints a few lines of it per test whose cache behaviour changed,
``pytest-cudagraph explain`` all of it (``key_text`` words both).  Readable values are for display
only (they may hold object addresses, bytes or a graph's whole code): hashes
decide.  Nothing here imports torch; a malformed section reads as absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..text import clip, clip_middle
from .json_values import mapping_of

__all__ = [
    "KEYED_LAYERS",
    "ComponentChange",
    "Lookup",
    "LookupPair",
    "ReportKeyDiff",
    "RunWideChange",
    "TestKeyDiff",
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
# a value longer than this is shown around its difference in compare's lines
SHORT_VALUE = 48
# components whose change says most about a run: listed first
_FIRST = ("torch_version", "system_info", "cuda_matmul_settings", "deterministic_algorithms_settings")


# ----------------------------------------------------------------------------
# reading a report
# ----------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _entry(value: Any) -> tuple[str | None, str | None] | None:
    """``[hash12, value]`` as a pair of strings (either may be None); None when it is no such pair."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return _text(value[0]), _text(value[1])
    return None


def _components(value: Any) -> dict[str, tuple[str | None, str | None]] | None:
    if not isinstance(value, Mapping):
        return None
    out = {}
    for name, item in value.items():
        entry = _entry(item)
        if entry is not None:
            out[str(name)] = entry
    return out


def shared_components(report: Mapping[str, Any]) -> dict[str, dict[str, tuple[str | None, str | None]]]:
    """``cache_components`` per layer: what every lookup of that layer in the run shares."""
    tables = mapping_of(report.get("cache_components"))
    return {str(layer): _components(table) or {} for layer, table in tables.items() if isinstance(table, Mapping)}


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


def has_cache_keys(record: Mapping[str, Any]) -> bool:
    """Whether the record holds a ``cache_keys`` section with a list of lookups."""
    return isinstance(mapping_of(record.get("cache_keys")).get("lookups"), list)


def records_cache_keys(report: Mapping[str, Any]) -> bool:
    """Whether the report records cache lookups: a shared table, or a test with a ``cache_keys`` section.

    False for a report of a plugin version before them (and for a run that compiled nothing).
    """
    if isinstance(report.get("cache_components"), Mapping):
        return True
    return any(isinstance(r, Mapping) and "cache_keys" in r for r in mapping_of(report.get("tests")).values())


def lookups_of(record: Mapping[str, Any], shared: Mapping[str, Components] | None = None) -> list[Lookup]:
    """The record's lookups (``cache_keys.lookups``), each with its whole set of components; malformed ones skipped."""
    shared = shared or {}
    items = mapping_of(record.get("cache_keys")).get("lookups")
    lookups = []
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if not isinstance(item, Mapping):
            continue
        graph = item.get("graph")
        explained = item.get("explained")
        layer = str(item.get("layer", "?"))
        lookups.append(
            Lookup(
                layer=layer,
                outcome=str(item.get("outcome", "?")),
                key=_text(item.get("key")),
                pass_name=_text(item.get("pass")),
                graph=graph if isinstance(graph, int) and not isinstance(graph, bool) else None,
                index=index,
                own=_components(item.get("components")),
                shared=shared.get(layer, {}),
                detail=_text(item.get("detail")),
                bypass_reason=_text(item.get("bypass_reason")),
                explained=tuple(str(x) for x in explained) if isinstance(explained, list) else (),
                compared_with=_text(item.get("compared_with")),
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

    def text(self, width: int = SHORT_VALUE) -> str:
        """``inductor_config[max_autotune]: False -> True``, long values shown around where they differ."""
        before, after = value_pair_text(self.base, self.new, width)
        return f"{self.name}: {before} -> {after}"

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


def _counters(record: Mapping[str, Any]) -> tuple[Any, Any]:
    caches = mapping_of(record.get("caches"))
    return tuple(dict(mapping_of(caches.get(layer))) for layer in KEYED_LAYERS)  # type: ignore[return-value]


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
    base_record: Mapping[str, Any],
    new_record: Mapping[str, Any],
    base_shared: Mapping[str, Components] | None = None,
    new_shared: Mapping[str, Components] | None = None,
    run_wide: Iterable[RunWideChange] = (),
    shared_differ: Mapping[str, Sequence[str]] | None = None,
) -> TestKeyDiff:
    """One test's lookups in two runs, paired, with each pair's differing components beyond ``run_wide``.

    ``shared_differ``: per layer, the names in which the two shared tables differ
    (``diff_reports`` computes them once for every test).
    """
    base_shared, new_shared = base_shared or {}, new_shared or {}
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
        counters_changed=_counters(base_record) != _counters(new_record),
    )


@dataclass(frozen=True)
class ReportKeyDiff:
    """Two runs' cache keys: the differences every lookup shares, and each test's pairs (tests in both runs)."""

    run_wide: tuple[RunWideChange, ...]
    tests: Mapping[str, TestKeyDiff]

    def to_json(self) -> dict[str, Any]:
        return {"run_wide": [c.to_json() for c in self.run_wide]}


def records_of(report: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    tests = mapping_of(report.get("tests"))
    return {str(n): r for n, r in tests.items() if isinstance(r, Mapping)}


def _names_by_layer(records: Iterable[Mapping[str, Any]], shared: Mapping[str, Components]) -> dict[str, set[str]]:
    """Per layer, every component name any lookup with components holds (its shared table's, and its own)."""
    names: dict[str, set[str]] = {}
    for record in records:
        for lookup in lookups_of(record, shared):
            if lookup.own is not None:
                names.setdefault(lookup.layer, set(lookup.shared)).update(lookup.own)
    return names


def diff_reports(base: Mapping[str, Any], new: Mapping[str, Any]) -> ReportKeyDiff:
    """Every test in both reports with ``cache_keys`` in either, diffed; and the run-wide differences."""
    base_records, new_records = records_of(base), records_of(new)
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
                nodeid, base_records[nodeid], new_records[nodeid], base_shared, new_shared, run_wide, shared_differ
            )
    return ReportKeyDiff(run_wide, tests)


# ----------------------------------------------------------------------------
# values for people
# ----------------------------------------------------------------------------


def _opaque(value: str) -> bool:
    """Bytes torch printed as ``<bytes>`` or as decoded garbage (a pickled config): only the hash says anything."""
    return value == "<bytes>" or "\ufffd" in value or any(ord(ch) < 32 and ch not in "\n\t" for ch in value)


def fixed_value_text(entry: tuple[str | None, str | None] | None) -> str | None:
    """What to show when the value cannot be: absent, unrecorded or opaque; None when the value can be shown."""
    if entry is None:
        return "(absent)"
    digest, value = entry
    if value is None:
        return f"(hash {digest})" if digest else "(not recorded)"
    if _opaque(value):
        return f"(opaque, hash {digest})" if digest else "(opaque)"
    if not value.strip():
        return repr(value)
    return None


def value_pair_text(
    base: tuple[str | None, str | None] | None, new: tuple[str | None, str | None] | None, width: int
) -> tuple[str, str]:
    fixed_base, fixed_new = fixed_value_text(base), fixed_value_text(new)
    a = fixed_base if fixed_base is not None else base[1]  # type: ignore[index]
    b = fixed_new if fixed_new is not None else new[1]  # type: ignore[index]
    if fixed_base is None and fixed_new is None and a == b:
        # the same readable value, other hashes: the difference lies past the report's clip of the value
        return f"{_one_line(str(a), width)} [{base[0]}]", f"{_one_line(str(b), width)} [{new[0]}]"  # type: ignore[index]
    if fixed_base is None and fixed_new is None:
        return _focus(str(a), str(b), width)
    return (_one_line(str(a), width) if fixed_base is None else str(a)), (
        _one_line(str(b), width) if fixed_new is None else str(b)
    )


def _one_line(value: str, width: int) -> str:
    first = value.strip().splitlines()
    text = first[0] if first else ""
    more = " ..." if len(first) > 1 else ""
    return clip(text, width) + more


def _depths(text: str) -> list[int]:
    depth, out = 0, []
    for ch in text:
        if ch in ")]}":
            depth = max(depth - 1, 0)
        out.append(depth)
        if ch in "([{":
            depth += 1
    return out


def _focus(a: str, b: str, width: int) -> tuple[str, str]:
    """Two values shown around where they differ: the item (between ``, ``) that holds the difference.

    ``TensorMetadata(dtype=torch.float32, shape=torch.Size([3, 8]), ...)`` against
    ``[4, 8]`` reads ``...shape=torch.Size([3, 8])...`` -> ``...shape=torch.Size([4, 8])...``;
    a graph's code, the first line that differs.
    """
    if len(a) <= width and len(b) <= width and "\n" not in a and "\n" not in b:
        return a, b
    if "\n" in a or "\n" in b:
        lines_a, lines_b = a.splitlines(), b.splitlines()
        index = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
        line_a = lines_a[index].strip() if index < len(lines_a) else "(no line)"
        line_b = lines_b[index].strip() if index < len(lines_b) else "(no line)"
        prefix = f"line {index + 1}: "
        shown_a, shown_b = _focus(line_a, line_b, max(width - len(prefix), 12))
        return prefix + shown_a, prefix + shown_b
    called = call_focus(a, b)
    if called is not None:
        return clip_middle(called[0], width, 0.6), clip_middle(called[1], width, 0.6)
    same_head = 0
    while same_head < min(len(a), len(b)) and a[same_head] == b[same_head]:
        same_head += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - same_head and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    start = _item_start(a, same_head)
    shown_a = _item_text(a, start, len(a) - suffix)
    shown_b = _item_text(b, start, len(b) - suffix)
    return clip_middle(shown_a, width, 0.6), clip_middle(shown_b, width, 0.6)


_CALL = re.compile(r"([A-Za-z_][\w.]*)\((.*)\)\Z", re.S)


def call_parts(value: str) -> tuple[str | None, list[str]]:
    """``"Name(a, b=(1, 2))"`` -> ``("Name", ["a", "b=(1, 2)"])``, split at top-level commas; (None, []) otherwise."""
    match = _CALL.match(value)
    if match is None:
        return None, []
    body = match.group(2)
    depths = _depths(body)
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


def _separators(text: str) -> tuple[list[tuple[int, int]], int | None]:
    depths = _depths(text)
    seps = [(i, depths[i]) for i in range(len(text) - 1) if text[i : i + 2] == ", "]
    return seps, min((d for _, d in seps), default=None)


def _item_start(text: str, position: int) -> int:
    seps, level = _separators(text)
    if level is None:
        return max(position - 12, 0)
    before = [i for i, d in seps if d == level and i < position]
    if before:
        return before[-1] + 2
    depths = _depths(text)
    return next((i for i, d in enumerate(depths) if d >= level), 0)


def _item_text(text: str, start: int, end_of_difference: int) -> str:
    seps, level = _separators(text)
    if level is None:
        end = min(end_of_difference + 12, len(text))
    else:
        after = [i for i, d in seps if d == level and i >= end_of_difference]
        end = after[0] if after else len(text)
        if not after:
            depths = _depths(text)
            # close before the bracket that ends the level the items are in
            end = next((i for i in range(max(end_of_difference, start), len(text)) if depths[i] < level), len(text))
    shown = text[start:end]
    return ("..." if start > 0 else "") + shown + ("..." if end < len(text) else "")
