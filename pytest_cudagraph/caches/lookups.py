"""One cache lookup's key and components, and what changed in it: parsing, matching, explaining a miss.

``CacheLookup`` is one FX-graph or AOTAutograd lookup as torch's structured trace
gave it (``keys.capture_lookups`` collects them); ``explain_miss`` says why a miss
missed, naming the components that differ from the same graph's lookup in an
earlier pass or run::

    fxgraph miss for graph 2 of the warm pass: inductor_config[fallback_random]: False -> True

**Which lookups are "the same graph".**  A warm lookup is matched with a cold one
of the same layer, first by the hash of its graph code (the ``gm`` component: the
same code is the same graph, whatever else changed), and, when no cold lookup has
that hash (the code itself changed, or torch gave no components), by compile
order: the cold lookup with the same graph number (the 1-based order of that
layer's lookups within the pass, or within the test outside a pass).  Several
cold lookups with the same code (one function compiled for two shapes) are told
apart by the graph number too.  See ``same_graph``.

**Comparing.**  Components are compared by hash, name by name; a name present on
one side only is a difference (torch writes no line for an empty list or dict).
The readable values are for display only: some hold object addresses or
undecodable bytes.  AOTAutograd's ``autograd_config`` is one opaque pickle of
functorch's config; a snapshot of that config taken at each lookup names the
entries that differ (``autograd_config[donated_buffer]: True -> False``).  A value
shown is cut to what differs as a report's key diff shows it
(``records.key_diff.call_focus``).

Imports no torch, no pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records.key_diff import call_focus

OUTCOMES = ("hit", "miss", "bypass")
# the report's clip of a readable value, and the longest kept in memory at all
REPORT_VALUE_LIMIT = 160
VALUE_LIMIT = 1024
# characters of a component hash the report keeps
REPORT_HASH_CHARS = 12
# an explanation names at most this many differing components, then "and N more"
SHOWN_DIFFERENCES = 8
# characters of a graph's code kept in memory to show how two passes' graphs differ
GRAPH_CODE_LIMIT = 64 * 1024

# torch's component hash: sha256 in lowercase base32, 51 characters (2.6-2.14)
_HASH = r"[a-z2-7]{51}"
# one debug line; the value may span lines (the graph code)
_LINE = re.compile(rf"\[({_HASH})\] ([^\n]+?): (.*)\Z", re.S)
# where one debug line ends in torch's DEBUG text: a newline followed by the next "[hash] "
_SPLIT = re.compile(rf"\n(?=\[{_HASH}\] )")
GRAPH_CODE = "gm"
AUTOGRAD_CONFIG = "autograd_config"
ABSENT = "(absent)"


# ----------------------------------------------------------------------------
# parsing torch's debug lines
# ----------------------------------------------------------------------------


def split_debug_text(text: str) -> list[str]:
    """torch's DEBUG text ``"[hash] name: value\\n[hash] name: value..."`` as one string per component.

    A value may itself hold newlines (``gm`` is the graph's code), so the text is
    split only where a newline is followed by the next ``[<51-char hash>] ``.
    """
    return _SPLIT.split(text) if text else []


def parse_component_line(line: str) -> tuple[str, str, str] | None:
    """``(name, hash, value)`` of one debug line ``"[hash] name: value"``; None for anything else."""
    match = _LINE.match(line)
    if match is None:
        return None
    digest, name, value = match.groups()
    return name, digest, value


def readable_value(name: str, value: str) -> str | None:
    """The value kept for display: None for the graph code and any multi-line, unprintable or huge value."""
    if name == GRAPH_CODE or len(value) > VALUE_LIMIT or "\n" in value or "\ufffd" in value:
        return None
    if not value.isprintable():
        return None
    return value


def parse_components(lines: Iterable[str]) -> dict[str, tuple[str, str | None]]:
    """name -> (hash, readable value or None) of torch's debug lines; lines that do not parse are skipped."""
    out: dict[str, tuple[str, str | None]] = {}
    for line in lines:
        parsed = parse_component_line(line)
        if parsed is not None:
            name, digest, value = parsed
            out[name] = (digest, readable_value(name, value))
    return out


def clip(value: str, limit: int = REPORT_VALUE_LIMIT) -> str:
    """``value`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


# ----------------------------------------------------------------------------
# one lookup
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheLookup:
    """One lookup of the FX-graph (``"fxgraph"``) or AOTAutograd (``"aot_autograd"``) cache.

    ``outcome``: ``"hit"``, ``"miss"`` or ``"bypass"`` (torch's ``cache_state``).
    ``key``: the cache key (None on a bypass).  ``components``: name -> (hash,
    readable value or None), None where torch gave none (``note`` says why).
    ``detail``: torch's ``cache_status_detailed`` (2.8+: ``hit``, ``full_miss``,
    ``guard_miss``).  ``pass_name``: the pass it was made in (None outside one);
    ``graph``: the 1-based order of this layer's lookups within that pass (or the
    test).  ``functorch_config``: functorch's config at an AOTAutograd lookup, to
    name the entries behind an ``autograd_config`` difference (not in the report).
    ``graph_code``: the ``gm`` component's value, the code of the graph the key was
    computed from (cut to GRAPH_CODE_LIMIT), to show how two passes' graphs differ
    (not in the report).
    """

    layer: str
    outcome: str
    key: str | None
    components: Mapping[str, tuple[str, str | None]] | None
    detail: str | None = None
    bypass_reason: str | None = None
    pass_name: str | None = None
    graph: int = 1
    note: str | None = None
    functorch_config: Mapping[str, str] | None = field(default=None, compare=False, repr=False)
    graph_code: str | None = field(default=None, compare=False, repr=False)

    @property
    def graph_code_hash(self) -> str | None:
        pair = (self.components or {}).get(GRAPH_CODE)
        return pair[0] if pair else None

    def where(self) -> str:
        """``"graph 2 of the warm pass"``, or ``"graph 2 of the test"`` outside a pass."""
        return (
            f"graph {self.graph} of the {self.pass_name} pass" if self.pass_name else f"graph {self.graph} of the test"
        )

    def to_json(self, full: bool = False, with_code: bool = False) -> dict[str, Any]:
        """The report's form (hashes cut to 12 characters, values to 160); ``full``: everything, for reading back.

        ``with_code`` (with ``full``) adds the graph code, for a pass that travels back
        from a fresh interpreter; the report and the key index leave it out.
        """
        out: dict[str, Any] = {
            "layer": self.layer,
            "outcome": self.outcome,
            "key": self.key,
            "pass": self.pass_name,
            "graph": self.graph,
        }
        if self.components is None:
            out["components"] = None
        elif full:
            out["components"] = {name: [digest, value] for name, (digest, value) in self.components.items()}
        else:
            out["components"] = {
                name: [digest[:REPORT_HASH_CHARS], None if value is None else clip(value)]
                for name, (digest, value) in self.components.items()
            }
        if self.detail:
            out["detail"] = self.detail
        if self.bypass_reason is not None:
            out["bypass_reason"] = self.bypass_reason
        if full:
            if self.note:
                out["note"] = self.note
            if self.functorch_config is not None:
                out["functorch_config"] = dict(self.functorch_config)
            if with_code and self.graph_code is not None:
                out["graph_code"] = self.graph_code
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CacheLookup:
        """A lookup written by ``to_json(full=True)`` (a child interpreter's, or the cross-run index's)."""
        components = data.get("components")
        config = data.get("functorch_config")
        code = data.get("graph_code")
        return cls(
            layer=str(data["layer"]),
            outcome=str(data["outcome"]),
            key=data.get("key"),
            components=None
            if not isinstance(components, Mapping)
            else {str(name): (str(pair[0]), pair[1]) for name, pair in components.items()},
            detail=data.get("detail"),
            bypass_reason=data.get("bypass_reason"),
            pass_name=data.get("pass"),
            graph=int(data.get("graph") or 1),
            note=data.get("note"),
            functorch_config=dict(config) if isinstance(config, Mapping) else None,
            graph_code=code[:GRAPH_CODE_LIMIT] if isinstance(code, str) else None,
        )


def lookup_from_event(event: Mapping[str, Any], pass_name: str | None = None, graph: int = 1) -> CacheLookup:
    """A CacheLookup from the gateway's event (``_compat.capturing_cache_lookups``)."""
    lines = event.get("components")
    reason = event.get("bypass_reason")
    return CacheLookup(
        layer=str(event.get("layer")),
        outcome=str(event.get("outcome")),
        key=event.get("key"),
        components=parse_components(lines) if lines else None,
        detail=event.get("detail") or None,
        bypass_reason=None if reason is None else str(reason),
        pass_name=pass_name,
        graph=graph,
        note=event.get("note"),
        functorch_config=event.get("functorch_config"),
        graph_code=graph_code_of(lines) if lines else None,
    )


def graph_code_of(lines: Iterable[str]) -> str | None:
    """The ``gm`` component's value in torch's debug lines (the graph's code), cut to GRAPH_CODE_LIMIT; None without one."""
    for line in lines:
        parsed = parse_component_line(line)
        if parsed is not None and parsed[0] == GRAPH_CODE:
            return parsed[2][:GRAPH_CODE_LIMIT]
    return None


def lookups_to_json(
    lookups: Iterable[CacheLookup], full: bool = False, with_code: bool = False
) -> list[dict[str, Any]]:
    """The lookups as plain data (the report's form; ``full=True`` keeps whole hashes, values and config;
    ``with_code`` the graph code too)."""
    return [lookup.to_json(full=full, with_code=with_code) for lookup in lookups]


def lookups_from_json(data: Iterable[Mapping[str, Any]]) -> tuple[CacheLookup, ...]:
    """Lookups written by ``lookups_to_json(..., full=True)``."""
    return tuple(CacheLookup.from_json(item) for item in data)


# ----------------------------------------------------------------------------
# matching and diffing
# ----------------------------------------------------------------------------


def same_graph(cold_lookups: Sequence[CacheLookup], warm_lookup: CacheLookup) -> CacheLookup | None:
    """The lookup of ``cold_lookups`` that looked up the same graph as ``warm_lookup``, or None.

    Same layer; then the same graph code (``gm`` hash; among several, the one with
    the same graph number, else the first); else the same graph number (compile
    order within the layer).
    """
    candidates = [lookup for lookup in cold_lookups if lookup.layer == warm_lookup.layer]
    code = warm_lookup.graph_code_hash
    if code is not None:
        same_code = [lookup for lookup in candidates if lookup.graph_code_hash == code]
        if same_code:
            return next((lookup for lookup in same_code if lookup.graph == warm_lookup.graph), same_code[0])
    return next((lookup for lookup in candidates if lookup.graph == warm_lookup.graph), None)


def _shown(pair: tuple[str, str | None] | None) -> str:
    if pair is None:
        return ABSENT
    digest, value = pair
    return value if value is not None else f"[{digest[:REPORT_HASH_CHARS]}]"


def component_differences(a: CacheLookup, b: CacheLookup) -> list[tuple[str, str, str]]:
    """``(name, value in a, value in b)`` for every component whose hash differs, or that one side lacks.

    Values are for display: the readable value, ``"[<hash12>]"`` where only the
    hash is kept (the graph code), ``"(absent)"`` for a missing name; two equal
    readable values of different hashes (a clipped value, ``<bytes>``) get their
    hashes added.  A differing ``autograd_config`` is replaced by the functorch
    config entries that differ between the two lookups' snapshots
    (``autograd_config[name]``), or kept as
    ``("autograd_config", "(functorch's config)", "changed")`` when no snapshot
    tells.  Empty when either lookup has no components.
    """
    if a.components is None or b.components is None:
        return []
    out: list[tuple[str, str, str]] = []
    for name in list(a.components) + [n for n in b.components if n not in a.components]:
        pa, pb = a.components.get(name), b.components.get(name)
        if pa is not None and pb is not None and pa[0] == pb[0]:
            continue
        if name == AUTOGRAD_CONFIG and pa is not None and pb is not None:
            entries = _config_differences(a.functorch_config, b.functorch_config)
            out += entries or [(AUTOGRAD_CONFIG, "(functorch's config)", "changed")]
            continue
        shown_a, shown_b = _shown(pa), _shown(pb)
        if shown_a == shown_b and pa is not None and pb is not None:
            shown_a = f"{shown_a} [{pa[0][:REPORT_HASH_CHARS]}]"
            shown_b = f"{shown_b} [{pb[0][:REPORT_HASH_CHARS]}]"
        out.append((name, shown_a, shown_b))
    return out


def _config_differences(a: Mapping[str, str] | None, b: Mapping[str, str] | None) -> list[tuple[str, str, str]]:
    if not a or not b:
        return []
    names = list(a) + [name for name in b if name not in a]
    return [
        (f"{AUTOGRAD_CONFIG}[{name}]", a.get(name, ABSENT), b.get(name, ABSENT))
        for name in names
        if a.get(name) != b.get(name)
    ]


def difference_lines(a: CacheLookup, b: CacheLookup) -> list[str]:
    """``"name: value in a -> value in b"`` per differing component (values cut to what differs)."""
    lines = []
    for name, value_a, value_b in component_differences(a, b):
        # cut to the arguments that differ of a call-like value (``T(y=2, ...)``), else clipped
        shown_a, shown_b = call_focus(value_a, value_b) or (clip(value_a), clip(value_b))
        lines.append(f"{name}: {shown_a} -> {shown_b}")
    return lines


# ----------------------------------------------------------------------------
# explaining a miss
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MissExplanation:
    """Why ``lookup`` missed, compared with ``matched`` (None: nothing to compare with).

    ``explained``: the report's lines (``"inductor_config[x]: a -> b"``, or one
    sentence when no component can say it); ``compared_with``: ``"the cold pass"``
    or ``"an earlier run (<time>, torch <version>)"``.
    """

    lookup: CacheLookup
    matched: CacheLookup | None
    explained: tuple[str, ...]
    compared_with: str

    def text(self) -> str:
        """``"fxgraph miss for graph 2 of the warm pass: inductor_config[x]: False -> True"``."""
        shown = list(self.explained[:SHOWN_DIFFERENCES])
        if len(self.explained) > SHOWN_DIFFERENCES:
            shown.append(f"and {len(self.explained) - SHOWN_DIFFERENCES} more")
        return f"{self.lookup.layer} {self.lookup.outcome} for {self.lookup.where()}: {'; '.join(shown)}"


def explain_miss(lookup: CacheLookup, earlier: Sequence[CacheLookup], compared_with: str) -> MissExplanation | None:
    """Why ``lookup`` (a miss) missed, against ``earlier`` (the cold pass's lookups, or an earlier run's).

    - ``guard_miss``: the key matched, the stored graph's shape guards failed.
    - no matching graph in ``earlier``: said so.
    - the matched lookup has the same key: it was stored under that key, yet it
      missed: evicted or deleted, or never written (an AOTAutograd entry that was
      found, ``detail == "hit"``, missed the FX graph it refers to).
    - otherwise the differing components; or, where either side has none, that
      torch gave none to compare.

    None for a lookup that did not miss.  ``compared_with`` (``"the cold pass"``,
    ``"an earlier run (...)"``) also names the matched graph in the sentences.
    """
    if lookup.outcome != "miss":
        return None
    source = "the earlier run" if compared_with.startswith("an earlier run") else compared_with
    if lookup.detail == "guard_miss":
        return MissExplanation(
            lookup,
            None,
            ("the key matched a stored entry, but the stored graph's shape guards failed for these inputs",),
            compared_with,
        )
    matched = same_graph(earlier, lookup)
    if matched is None:
        return MissExplanation(
            lookup,
            None,
            (f"{source} looked up no graph to match it (by graph code or compile order)",),
            compared_with,
        )
    where = f"{source}'s graph {matched.graph}"
    if matched.key is None:
        reason = f": {matched.bypass_reason}" if matched.bypass_reason else ""
        return MissExplanation(
            lookup, matched, (f"{source} bypassed the cache for {where}{reason}, so nothing was stored",), compared_with
        )
    if matched.key == lookup.key and lookup.layer == "aot_autograd" and lookup.detail == "hit":
        # AOTAutograd found its entry, then missed the FX graph the entry refers to (FXGraphCacheMiss)
        return MissExplanation(
            lookup,
            matched,
            (
                f"same key as {where}, and its entry was found, but not the FX graph it refers to: "
                f"that FX-graph cache entry was evicted or deleted",
            ),
            compared_with,
        )
    if matched.key == lookup.key:
        return MissExplanation(
            lookup,
            matched,
            (f"same key as {where}, yet it missed: the entry was evicted or deleted, or never written",),
            compared_with,
        )
    lines = difference_lines(matched, lookup)
    if lines:
        return MissExplanation(lookup, matched, tuple(lines), compared_with)
    note = lookup.note or matched.note
    if lookup.components is None or matched.components is None:
        words = f"the key differs from {where}'s, and torch gave no components to compare" + (
            f" ({note})" if note else ""
        )
    else:
        words = f"the key differs from {where}'s, yet no component does"
    return MissExplanation(lookup, matched, (words,), compared_with)


def explain_misses(
    earlier: Sequence[CacheLookup], later: Sequence[CacheLookup], compared_with: str = "the cold pass"
) -> list[MissExplanation]:
    """An explanation for every miss among ``later`` (a warm pass's lookups), against ``earlier`` (the cold pass's)."""
    out = []
    for lookup in later:
        explanation = explain_miss(lookup, earlier, compared_with)
        if explanation is not None:
            out.append(explanation)
    return out
