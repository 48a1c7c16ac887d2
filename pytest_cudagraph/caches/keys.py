"""Why a compile cache missed: the key of every FX-graph and AOTAutograd lookup, and what changed in it.

Inductor's FX-graph cache and AOTAutograd's cache look a compiled graph up by a
key: the hash of some 640 *components* (the graph's code ``gm``, each example
input's metadata ``example_inputs[i]``, every Inductor config entry
``inductor_config[name]``, ``torch_version``, ...).  torch writes each lookup
(its outcome, key and the components as debug lines ``[<hash>] name: value``) to
its structured trace; ``capture_lookups()`` collects them as ``CacheLookup``
objects, and comparing the components of two lookups of the same graph names
what changed::

    with capture_lookups() as log:
        torch.compile(fn)(x)
    for lookup in log.lookups:
        print(lookup.layer, lookup.outcome, lookup.key, len(lookup.components or ()))

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
entries that differ (``autograd_config[donated_buffer]: True -> False``).

**What torch leaves out** (``_compat.cache_lookup_gaps()``): a bypassed lookup has
no key and no components; torch 2.6-2.7 give no components for the FX lookups of
an AOTAutograd hit and no record at all for an FX miss there.  Such a lookup has
``components`` None and a ``note``; nothing is made up.

Readable values are kept up to 1,024 characters in memory (and in the cross-run
index), so an explanation can show the field that differs, and clipped to 160
characters in the report; the graph code and any other multi-line, longer or
unprintable value keeps only its hash.  This module imports no pytest, and torch
only through the gateway.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import _compat

LAYERS = ("fxgraph", "aot_autograd")
OUTCOMES = ("hit", "miss", "bypass")
# the report's clip of a readable value, and the longest kept in memory at all
REPORT_VALUE_LIMIT = 160
VALUE_LIMIT = 1024
# characters of a component hash the report keeps
REPORT_HASH_CHARS = 12
# an explanation names at most this many differing components, then "and N more"
SHOWN_DIFFERENCES = 8

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

    @property
    def graph_code_hash(self) -> str | None:
        pair = (self.components or {}).get(GRAPH_CODE)
        return pair[0] if pair else None

    def where(self) -> str:
        """``"graph 2 of the warm pass"``, or ``"graph 2 of the test"`` outside a pass."""
        return (
            f"graph {self.graph} of the {self.pass_name} pass" if self.pass_name else f"graph {self.graph} of the test"
        )

    def to_json(self, full: bool = False) -> dict[str, Any]:
        """The report's form (hashes cut to 12 characters, values to 160); ``full``: everything, for reading back."""
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
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CacheLookup:
        """A lookup written by ``to_json(full=True)`` (a child interpreter's, or the cross-run index's)."""
        components = data.get("components")
        config = data.get("functorch_config")
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
    )


def lookups_to_json(lookups: Iterable[CacheLookup], full: bool = False) -> list[dict[str, Any]]:
    """The lookups as plain data (the report's form; ``full=True`` keeps whole hashes, values and config)."""
    return [lookup.to_json(full=full) for lookup in lookups]


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


def _focus(a: str, b: str) -> tuple[str, str]:
    """Two values cut to what differs: ``T(x=1, y=2, z=3)`` vs ``T(x=1, y=5, z=3)`` gives ``T(y=2)``, ``T(y=5)``."""
    head_a, parts_a = _call_parts(a)
    head_b, parts_b = _call_parts(b)
    if head_a is not None and head_a == head_b and len(parts_a) == len(parts_b):
        differing = [(x, y) for x, y in zip(parts_a, parts_b) if x != y]
        if differing and len(differing) < len(parts_a):
            return (
                f"{head_a}({', '.join(x for x, _ in differing)}, ...)",
                f"{head_b}({', '.join(y for _, y in differing)}, ...)",
            )
    return clip(a), clip(b)


def _call_parts(value: str) -> tuple[str | None, list[str]]:
    """``"Name(a, b=(1, 2))"`` -> ``("Name", ["a", "b=(1, 2)"])`` split at top-level commas; (None, []) otherwise."""
    match = re.match(r"([A-Za-z_][\w.]*)\((.*)\)\Z", value, re.S)
    if match is None:
        return None, []
    parts, depth, start = [], 0, 0
    body = match.group(2)
    for index, char in enumerate(body):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:index].strip())
            start = index + 1
    parts.append(body[start:].strip())
    return match.group(1), parts


def difference_lines(a: CacheLookup, b: CacheLookup) -> list[str]:
    """``"name: value in a -> value in b"`` per differing component (values cut to what differs)."""
    lines = []
    for name, value_a, value_b in component_differences(a, b):
        shown_a, shown_b = _focus(value_a, value_b)
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


# ----------------------------------------------------------------------------
# collecting lookups: logs, passes
# ----------------------------------------------------------------------------


class LookupLog:
    """The lookups made while it is active, numbered per (pass, layer), with what explains their misses.

    ``annotate()`` keeps an explanation of a lookup (found by pass, layer and graph
    number), ``to_json()`` is the report's ``cache_keys`` section.
    """

    def __init__(self) -> None:
        self.lookups: list[CacheLookup] = []
        self._numbers: dict[tuple[str | None, str], int] = {}
        self._explained: dict[tuple[str | None, str, int], MissExplanation] = {}
        self.notes: list[str] = []

    def add(self, lookup: CacheLookup) -> None:
        """Keep ``lookup``, giving it the next graph number of its pass and layer unless it brings its own."""
        slot = (lookup.pass_name, lookup.layer)
        number = self._numbers.get(slot, 0) + 1
        if lookup.graph > number:
            number = lookup.graph
        self._numbers[slot] = number
        if lookup.graph != number:
            lookup = replace(lookup, graph=number)
        self.lookups.append(lookup)
        if lookup.note and lookup.note not in self.notes:
            self.notes.append(lookup.note)

    def add_note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def of_pass(self, pass_name: str | None) -> list[CacheLookup]:
        return [lookup for lookup in self.lookups if lookup.pass_name == pass_name]

    def annotate(self, explanation: MissExplanation, replace_existing: bool = True) -> None:
        """Keep why a lookup of this log missed (the lookup is found by pass, layer and graph number)."""
        slot = (explanation.lookup.pass_name, explanation.lookup.layer, explanation.lookup.graph)
        if replace_existing or slot not in self._explained:
            self._explained[slot] = explanation

    def explanation(self, lookup: CacheLookup) -> MissExplanation | None:
        return self._explained.get((lookup.pass_name, lookup.layer, lookup.graph))

    def to_json(self) -> dict[str, Any]:
        """``{"lookups": [...], "note"?: "..."}``: the report's ``cache_keys`` section."""
        lookups = []
        for lookup in self.lookups:
            entry = lookup.to_json()
            explanation = self.explanation(lookup)
            if explanation is not None:
                entry["explained"] = list(explanation.explained)
                entry["compared_with"] = explanation.compared_with
            lookups.append(entry)
        out: dict[str, Any] = {"lookups": lookups}
        if self.notes:
            out["note"] = "; ".join(self.notes)
        return out


def note_version_gaps(log: LookupLog) -> None:
    """Add to ``log``'s note what this torch leaves out that bears on its lookups (torch must be loaded).

    Now only: AOTAutograd's cache off by default (2.6), when the log holds FX-graph
    lookups made outside a probe's pass and no AOTAutograd lookup at all.
    """
    gaps = _compat.cache_lookup_gaps()
    layers = {lookup.layer for lookup in log.lookups}
    outside = any(lookup.pass_name is None for lookup in log.lookups)
    if "aot_default_off" in gaps and outside and "fxgraph" in layers and "aot_autograd" not in layers:
        log.add_note(gaps["aot_default_off"])


class _Collector:
    """The one gateway capture behind every active log and pass of this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.logs: list[LookupLog] = []
        self.passes: list[str] = []
        self.stack: contextlib.ExitStack | None = None

    def on_event(self, event: dict[str, Any]) -> None:
        lookup = lookup_from_event(event, pass_name=self.passes[-1] if self.passes else None)
        with self.lock:
            logs = list(self.logs)
        for log in logs:
            log.add(lookup)
        if lookup.layer == "aot_autograd" and lookup.outcome == "hit":
            gaps = _compat.cache_lookup_gaps()
            for log in logs:
                if "fx_miss_from_aot_hit" in gaps:
                    log.add_note(gaps["fx_miss_from_aot_hit"])

    @contextlib.contextmanager
    def active(self, log: LookupLog) -> Iterator[LookupLog]:
        with self.lock:
            self.logs.append(log)
            first = len(self.logs) == 1
        if first:
            stack = contextlib.ExitStack()
            stack.enter_context(_compat.capturing_cache_lookups(self.on_event))
            self.stack = stack
        try:
            yield log
        finally:
            with self.lock:
                self.logs.remove(log)
                last = not self.logs
            if last and self.stack is not None:
                stack, self.stack = self.stack, None
                stack.close()


_COLLECTOR = _Collector()


def capture_lookups(log: LookupLog | None = None) -> contextlib.AbstractContextManager[LookupLog]:
    """Collect every FX-graph and AOTAutograd lookup made in the block into a ``LookupLog`` (given or new).

    Blocks nest: each active log gets every lookup.  A lookup made inside
    ``pass_scope(name)`` carries that pass's name, and its graph number counts
    within that pass.
    """
    return _COLLECTOR.active(log if log is not None else LookupLog())


@contextlib.contextmanager
def pass_scope(name: str) -> Iterator[LookupLog]:
    """Name the pass the block's lookups belong to, and collect them (the yielded log holds only this pass)."""
    _COLLECTOR.passes.append(name)
    try:
        with capture_lookups() as log:
            yield log
    finally:
        _COLLECTOR.passes.pop()


def deliver_lookups(lookups: Iterable[CacheLookup]) -> None:
    """Add lookups made elsewhere (a warm pass in a child interpreter) to every log active here."""
    with _COLLECTOR.lock:
        logs = list(_COLLECTOR.logs)
    for lookup in lookups:
        for log in logs:
            log.add(lookup)


def annotate_active(explanations: Iterable[MissExplanation]) -> None:
    """Keep these explanations in every log active here (the test's record shows them)."""
    with _COLLECTOR.lock:
        logs = list(_COLLECTOR.logs)
    for explanation in explanations:
        for log in logs:
            log.annotate(explanation)


# ----------------------------------------------------------------------------
# across runs: the keys a test's graphs had in an earlier run
# ----------------------------------------------------------------------------


def index_directory_name(nodeid: str) -> str:
    """The index directory of one test: the first 16 hex digits of the sha256 of its node id."""
    return hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:16]


def index_file_name(lookup: CacheLookup) -> str:
    """``<layer>-<pass or 'test'>-<graph>.json``, the pass name made safe for a file name."""
    pass_name = re.sub(r"[^A-Za-z0-9_.-]", "_", lookup.pass_name or "test")[:40]
    return f"{lookup.layer}-{pass_name}-{lookup.graph}.json"


@dataclass(frozen=True)
class StoredKey:
    """A lookup an earlier run stored, read from the index, with that run's time and torch."""

    lookup: CacheLookup
    created: str
    torch_version: str
    run_id: str

    def compared_with(self) -> str:
        return f"an earlier run ({self.created}, torch {self.torch_version})"


# The largest index file read: one lookup's ~640 components of up to 1,024 characters each (about 0.7 MB),
# with room to spare.  A larger file is no file this plugin wrote.
INDEX_FILE_LIMIT = 4 * 2**20
# index entries a note names one by one before "and N more"
_IGNORED_SHOWN = 3


class _BadEntry(Exception):
    """An index file that is not read, or not used: ``str()`` says why in a few words."""


@dataclass(frozen=True)
class IndexContents:
    """What ``KeyIndex.read`` found: index file name -> what an earlier run stored, and a note on the files left out.

    ``refused``: why nothing in the index was read (a directory another user could
    write, one that could not be read), one sentence; None where it was read.
    """

    stored: Mapping[str, StoredKey] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    refused: str | None = None


class KeyIndex:
    """The components of every key a test's graphs had, kept under a persistent cache root across runs.

    ``<root>/cache-keys/<sha256(nodeid)[:16]>/<layer>-<pass or 'test'>-<graph>.json``
    holds the last key stored for that graph: the lookup (whole hashes, values up
    to 1,024 characters, functorch's config), the run's time, torch version and an
    id of the run.  Files are private (0600, in 0700 directories), written whole
    (a temporary file moved into place) under the test directory's file lock, so
    two runs sharing a root never see half a file.

    It is read as a report is (``report.read_regular_bytes``): the directory is
    checked as the cache root is (yours, writable by you alone) before anything in
    it is opened, and only regular files of yours up to INDEX_FILE_LIMIT bytes are
    read, without waiting (a FIFO) or reading for ever (a link to /dev/zero).  A
    file that is not one the plugin could have written (not JSON, nested too
    deeply, a field of the wrong type) is ignored, and ``read`` says so in a note.
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def load(self) -> dict[str, StoredKey]:
        """File name -> what an earlier run stored; unreadable, foreign or malformed files are skipped."""
        return dict(self.read().stored)

    def read(self) -> IndexContents:
        """What earlier runs stored, with a note for each file left out; never raises for what is on disk."""
        from ..errors import UsageProblem
        from .cache_root import check_secure_dir, private_lock

        if not self.directory.is_dir():
            return IndexContents()
        try:
            check_secure_dir(self.directory, "cache-key index directory")
        except UsageProblem as exc:
            return IndexContents(refused=str(exc))
        out: dict[str, StoredKey] = {}
        ignored: list[str] = []
        try:
            with private_lock(self.directory):
                for path in sorted(self.directory.glob("*.json")):
                    try:
                        out[path.name] = _read_entry(path)
                    except _BadEntry as exc:
                        ignored.append(f"{_escaped(path.name)}: {exc}")
        except OSError as exc:  # the lock (held by another run past its timeout), the directory listing
            return IndexContents(
                refused=f"cache-key index directory {self.directory} cannot be read ({exc.strerror or exc})"
            )
        notes = ()
        if ignored:
            shown = "; ".join(ignored[:_IGNORED_SHOWN])
            more = f"; and {len(ignored) - _IGNORED_SHOWN} more" if len(ignored) > _IGNORED_SHOWN else ""
            notes = (
                f"ignored {len(ignored)} {'entry' if len(ignored) == 1 else 'entries'} of the key index "
                f"{self.directory} that no run of this plugin wrote ({shown}{more})",
            )
        return IndexContents(out, notes)

    def store(self, lookups: Iterable[CacheLookup], created: str, torch_version: str, run_id: str) -> int:
        """Write each lookup that left an entry (a miss, which saved, or a hit); return how many were written.

        Raises OSError where a file cannot be written, UsageProblem where the directory
        is one another user could write (checked as the cache root is).
        """
        from .cache_root import ensure_private_dir, private_lock, write_private_file

        kept = [lookup for lookup in lookups if lookup.outcome in ("miss", "hit") and lookup.key]
        if not kept:
            return 0
        ensure_private_dir(self.directory, "cache-key index directory")
        written = 0
        with private_lock(self.directory):
            for lookup in kept:
                if lookup.components is None:
                    continue  # nothing to compare with later (a 2.6-2.7 FX hit inside an AOTAutograd hit)
                data = {
                    "created": created,
                    "torch_version": torch_version,
                    "run_id": run_id,
                    "lookup": lookup.to_json(full=True),
                }
                write_private_file(self.directory / index_file_name(lookup), json.dumps(data))
                written += 1
        return written


def _read_entry(path: Path) -> StoredKey:
    """One index file, read as a report is and checked field by field; _BadEntry says why it is not used."""
    from ..records.report import FileRefused, read_regular_bytes

    try:
        data = read_regular_bytes(path, limit=INDEX_FILE_LIMIT, owner=os.getuid() if hasattr(os, "getuid") else None)
    except FileRefused as exc:
        raise _BadEntry(str(exc)) from None
    except OSError as exc:
        raise _BadEntry(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise _BadEntry("not JSON: nested too deeply") from None
    except UnicodeDecodeError:
        raise _BadEntry("not UTF-8 text") from None
    except ValueError:  # JSONDecodeError, or an integer of more digits than int() converts
        raise _BadEntry("not JSON") from None
    return _stored_key(parsed)


def _escaped(name: str) -> str:
    """A name read from the index, for a note: escaped to ASCII (no control character reaches a terminal), clipped."""
    return clip(ascii(name)[1:-1], 60)


def _text(value: Any, what: str, *, null: bool = False, limit: int | None = None) -> str | None:
    """``value`` if it is text (a string without lone surrogates) of at most ``limit`` characters; else _BadEntry."""
    if value is None and null:
        return None
    if not isinstance(value, str):
        raise _BadEntry(f"{what} is not a string")
    if limit is not None and len(value) > limit:
        raise _BadEntry(f"{what} is longer than {limit:,} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _BadEntry(f"{what} is not text") from None
    return value


def _stored_key(data: Any) -> StoredKey:
    """What ``KeyIndex.store`` writes, checked: every field of the type and form it writes, or _BadEntry."""
    if not isinstance(data, dict) or not isinstance(data.get("lookup"), dict):
        raise _BadEntry("not an index entry (no lookup)")
    item = data["lookup"]
    if item.get("layer") not in LAYERS or item.get("outcome") not in OUTCOMES:
        raise _BadEntry("lookup.layer or lookup.outcome is not one this plugin writes")
    graph = item.get("graph", 1)
    if type(graph) is not int or not 1 <= graph <= 2**31:
        raise _BadEntry("lookup.graph is not a graph number")
    for name in ("key", "pass", "detail", "bypass_reason", "note"):
        _text(item.get(name), f"lookup.{name}", null=True)
    components = item.get("components")
    if components is not None:
        if not isinstance(components, dict):
            raise _BadEntry("lookup.components is not a mapping")
        for name, pair in components.items():
            _text(name, "a component name", limit=VALUE_LIMIT)
            if not isinstance(pair, list) or len(pair) != 2:
                raise _BadEntry(f"component {_escaped(name)} is not a [hash, value] pair")
            _text(pair[0], f"the hash of {_escaped(name)}", limit=VALUE_LIMIT)
            value = _text(pair[1], f"the value of {_escaped(name)}", null=True, limit=VALUE_LIMIT)
            if value is not None and not value.isprintable():  # a kept value is one printable line (readable_value)
                raise _BadEntry(f"the value of {_escaped(name)} is not one printable line")
    config = item.get("functorch_config")
    if config is not None:
        if not isinstance(config, dict):
            raise _BadEntry("lookup.functorch_config is not a mapping")
        for name, value in config.items():
            _text(name, "a functorch config name", limit=VALUE_LIMIT)
            _text(value, "a functorch config value", limit=VALUE_LIMIT)
    created = _text(data.get("created"), "created", limit=200)
    torch_version = _text(data.get("torch_version"), "torch_version", limit=200)
    run_id = _text(data.get("run_id", ""), "run_id", limit=200)
    return StoredKey(
        lookup=CacheLookup.from_json(item),
        created=created or "",
        torch_version=torch_version or "",
        run_id=run_id or "",
    )


def explain_across_runs(
    lookups: Sequence[CacheLookup], stored: Mapping[str, StoredKey], run_id: str, *, probe_passes: bool
) -> list[MissExplanation]:
    """Explanations of this run's misses against what an earlier run stored for the same graph.

    Same test, layer, pass and graph number.  A lookup outside a pass looked in the
    run's persistent cache, where the earlier run stored its entry: a different
    key names the components, the same key means the entry was evicted or
    deleted.  A lookup in a probe's pass (``probe_passes``: a fresh directory each
    run) is expected to miss; it is compared only when its key changed, which
    says what differs from the earlier run.
    """
    out = []
    for lookup in lookups:
        if lookup.outcome != "miss" or not lookup.key or lookup.detail == "guard_miss":
            continue
        earlier = stored.get(index_file_name(lookup))
        if earlier is None or (run_id and earlier.run_id == run_id):
            continue
        in_probe = lookup.pass_name is not None and probe_passes
        if in_probe and earlier.lookup.key == lookup.key:
            continue
        theirs = replace(earlier.lookup, pass_name=lookup.pass_name, graph=lookup.graph)
        explanation = explain_miss(lookup, [theirs], earlier.compared_with())
        if explanation is not None:
            out.append(explanation)
    return out


def new_run_id() -> str:
    """An id for one run (one process), kept in the index so a run never compares with itself."""
    return f"{os.getpid()}-{os.urandom(4).hex()}"
