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

Which lookups are "the same graph" (matched by the hash of the graph code, then by
compile order) and how two lookups' components are compared: see ``lookups``.

**What torch leaves out** (``_compat.cache_lookup_gaps()``): a bypassed lookup has
no key and no components; torch 2.6-2.7 give no components for the FX lookups of
an AOTAutograd hit and no record at all for an FX miss there.  Such a lookup has
``components`` None and a ``note``; nothing is made up.

Readable values are kept up to 1,024 characters in memory (and in the cross-run
index), so an explanation can show the field that differs, and clipped to 160
characters in the report; the graph code and any other multi-line, longer or
unprintable value keeps only its hash.  This module imports no pytest, and torch
only through the gateway.

The modules behind it: ``lookups`` (parsing, ``CacheLookup``, matching, explaining a
miss), ``key_index`` (the key index across runs); this one collects the lookups
(``LookupLog``, ``capture_lookups``, ``pass_scope``) and re-exports the others' names.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from .. import _compat
from ..records.key_diff import KEYED_LAYERS
from .graph_code import graph_change
from .key_index import (
    INDEX_FILE_LIMIT,
    IndexContents,
    KeyIndex,
    StoredKey,
    explain_across_runs,
    index_directory_name,
    index_file_name,
    new_run_id,
)
from .lookups import (
    ABSENT,
    AUTOGRAD_CONFIG,
    GRAPH_CODE,
    OUTCOMES,
    REPORT_HASH_CHARS,
    REPORT_VALUE_LIMIT,
    SHOWN_DIFFERENCES,
    VALUE_LIMIT,
    CacheLookup,
    MissExplanation,
    clip,
    component_differences,
    difference_lines,
    explain_miss,
    explain_misses,
    lookup_from_event,
    lookups_from_json,
    lookups_to_json,
    parse_component_line,
    parse_components,
    readable_value,
    same_graph,
    split_debug_text,
)

__all__ = [
    "ABSENT",
    "AUTOGRAD_CONFIG",
    "GRAPH_CODE",
    "INDEX_FILE_LIMIT",
    "KEYED_LAYERS",
    "OUTCOMES",
    "REPORT_HASH_CHARS",
    "REPORT_VALUE_LIMIT",
    "SHOWN_DIFFERENCES",
    "VALUE_LIMIT",
    "CacheLookup",
    "IndexContents",
    "KeyIndex",
    "LookupLog",
    "MissExplanation",
    "StoredKey",
    "annotate_active",
    "capture_lookups",
    "clip",
    "component_differences",
    "deliver_lookups",
    "difference_lines",
    "explain_across_runs",
    "explain_miss",
    "explain_misses",
    "index_directory_name",
    "index_file_name",
    "lookup_from_event",
    "lookups_from_json",
    "lookups_to_json",
    "new_run_id",
    "note_version_gaps",
    "parse_component_line",
    "parse_components",
    "pass_scope",
    "readable_value",
    "same_graph",
    "split_debug_text",
]


# ----------------------------------------------------------------------------
# collecting lookups: logs, passes
# ----------------------------------------------------------------------------


def explained_lines(explanation: MissExplanation) -> list[str]:
    """The report's lines of a miss: the components that differ, and under a changed graph's hashes its code's diff.

    The report keeps the graph's hash alone (its code stays in memory): where both
    lookups kept the code, the changed lines and the constant that changed come
    with the hashes, so ``explain`` shows what the test's failure showed::

        gm: [1f2e3d4c5b6a] -> [a6b5c4d3e2f1]
          - mul = sin * 1.0
          + mul = sin * 2.0
          a constant: 1.0 -> 2.0
    """
    lines = list(explanation.explained)
    at = next((i for i, line in enumerate(lines) if line.startswith(f"{GRAPH_CODE}: ")), None)
    if at is None or explanation.matched is None:
        return lines
    change = graph_change([(explanation.matched, explanation.lookup)])
    return lines if change is None else [*lines[: at + 1], *(f"  {line}" for line in change.lines()), *lines[at + 1 :]]


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
                entry["explained"] = explained_lines(explanation)
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
