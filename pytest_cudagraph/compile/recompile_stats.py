"""What a recompile watch saw, as data: recompiles per function, graph breaks, the report's section.

``RecompileStats`` is the report's ``recompiles`` section; ``_Event`` is one
recompile attempt as Dynamo logged it, made public as a ``RecompileEvent``.
"""

from __future__ import annotations

import linecache
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .call_site import CallSite
from .guard_failures import FailedGuard, flat_reason, parse_reason


@dataclass(frozen=True)
class FunctionRecompiles:
    """One compiled function's recompiles: ``count``, its ``reasons`` in order, its ``limit_hits``."""

    count: int = 0
    reasons: tuple[str, ...] = ()
    limit_hits: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "reasons": list(self.reasons), "limit_hits": list(self.limit_hits)}


@dataclass(frozen=True)
class GraphBreakSite:
    """Where graph breaks happened: one ``reason``, the ``location`` in the compiled code, the user's ``call_site``.

    ``location`` is ``file:line`` of the statement Dynamo could not trace (inside the
    compiled function or a function it inlined); ``call_site`` the user's line that
    called the compiled function; ``count`` how many breaks share all three.
    """

    reason: str
    location: str | None
    call_site: CallSite | None
    count: int = 1

    @property
    def code(self) -> str:
        """The source line at ``location``, when it can be read."""
        if not self.location:
            return ""
        file, _, line = self.location.rpartition(":")
        return linecache.getline(file, int(line)).strip() if line.isdigit() else ""

    def key(self) -> tuple[Any, ...]:
        return (self.reason, self.location, self.call_site)

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "location": self.location,
            "code": self.code,
            "call_site": self.call_site.to_json() if self.call_site else None,
            "count": self.count,
        }


def _merge_sites(sites: Sequence[GraphBreakSite]) -> tuple[GraphBreakSite, ...]:
    counts: dict[tuple[Any, ...], GraphBreakSite] = {}
    for site in sites:
        known = counts.get(site.key())
        counts[site.key()] = site if known is None else replace(known, count=known.count + site.count)
    return tuple(counts.values())


@dataclass(frozen=True)
class GraphBreaks:
    """Graph breaks seen while watching: ``count``, ``by_reason`` (message -> times) and ``sites``.

    Kept apart from recompiles: a graph break splits one compile into several
    graphs, it does not make Dynamo compile again.  ``count`` and ``by_reason`` are
    torch's ``counters["graph_break"]``; ``sites`` (:class:`GraphBreakSite`) say where
    each break was and which user line called the compiled function, from Dynamo's
    graph-break log.
    """

    count: int = 0
    by_reason: Mapping[str, int] = field(default_factory=dict)
    sites: tuple[GraphBreakSite, ...] = ()

    @property
    def reasons(self) -> list[str]:
        return list(self.by_reason)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "reasons": self.reasons, "sites": [site.to_json() for site in self.sites]}


@dataclass(frozen=True)
class RecompileEvent:
    """One recompile, or one attempt that hit the recompile limit, as data.

    * ``function``: ``"name (file:line)"`` of the compiled function;
    * ``call_site``: the user's line that called it (the first frame outside torch,
      the plugin and Python's standard library), or None when none was on the stack;
    * ``reasons``: one flat line per cached entry that failed, ``"0/1: n == 2"``, no
      comment or stack inside;
    * ``guards``: every failing guard of every cached entry (:class:`FailedGuard`),
      those torch printed and those the watch found by evaluating the entries' other
      guards itself, with expected and actual values where known;
    * ``verbatim``: torch's reasons as it wrote them, for exact matching;
    * ``limit_hit``: for an attempt past the recompile limit, the readable line
      (nothing was compiled: Dynamo ran the function eagerly), else None.
    """

    function: str
    call_site: CallSite | None
    reasons: tuple[str, ...]
    guards: tuple[FailedGuard, ...]
    verbatim: tuple[str, ...]
    limit_hit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "call_site": self.call_site.to_json() if self.call_site else None,
            "reasons": list(self.reasons),
            "guards": [g.to_json() for g in self.guards],
            "verbatim": list(self.verbatim),
            "limit_hit": self.limit_hit,
        }


@dataclass(frozen=True)
class RecompileStats:
    """What a :class:`RecompileWatch` saw; the report's ``recompiles`` section."""

    count: int = 0
    reasons: tuple[str, ...] = ()
    limit_hits: tuple[str, ...] = ()
    by_function: Mapping[str, FunctionRecompiles] = field(default_factory=dict)
    graph_breaks: GraphBreaks = field(default_factory=GraphBreaks)
    events: tuple[RecompileEvent, ...] = ()
    # what the watch could not count, and after what; None where it saw everything
    lost_sight: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "count": self.count,
            "reasons": list(self.reasons),
            "limit_hits": list(self.limit_hits),
            "by_function": {name: fn.to_json() for name, fn in self.by_function.items()},
            "graph_breaks": self.graph_breaks.to_json(),
            "events": [event.to_json() for event in self.events],
        }
        if self.lost_sight is not None:
            out["lost_sight"] = self.lost_sight
        return out

    def merged(self, other: RecompileStats) -> RecompileStats:
        """Both watches' figures added up (several plain watches in one test, e.g. hypothesis examples)."""
        by_function = dict(self.by_function)
        for name, fn in other.by_function.items():
            mine = by_function.get(name, FunctionRecompiles())
            by_function[name] = FunctionRecompiles(
                mine.count + fn.count, mine.reasons + fn.reasons, mine.limit_hits + fn.limit_hits
            )
        breaks = Counter(self.graph_breaks.by_reason)
        breaks.update(other.graph_breaks.by_reason)
        return RecompileStats(
            count=self.count + other.count,
            reasons=self.reasons + other.reasons,
            limit_hits=self.limit_hits + other.limit_hits,
            by_function=by_function,
            graph_breaks=GraphBreaks(
                self.graph_breaks.count + other.graph_breaks.count,
                dict(breaks),
                _merge_sites(self.graph_breaks.sites + other.graph_breaks.sites),
            ),
            events=self.events + other.events,
            lost_sight=self.lost_sight or other.lost_sight,
        )


def first_call_site(events: Sequence[RecompileEvent]) -> tuple[str, int] | None:
    """The user's line a failed recompile check points at: the first limit hit's call site, else the first recompile's."""
    for wanted in (lambda event: event.limit_hit is not None, lambda event: True):
        for event in events:
            if event.call_site is not None and wanted(event):
                return event.call_site.file, event.call_site.line
    return None


@dataclass
class _Event:
    """One recompile attempt as Dynamo logged it; :meth:`public` makes the RecompileEvent."""

    function: str
    verbatim: list[str]
    call_site: CallSite | None = None
    # every failing guard the watch found by evaluating the cached entries itself (None: not evaluated)
    evaluated: list[FailedGuard] | None = None
    limit_hit: str | None = None  # the readable description once the limit WARNING named it

    @property
    def reasons(self) -> list[str]:
        return [flat_reason(r) for r in self.verbatim]

    def public(self) -> RecompileEvent:
        return RecompileEvent(
            self.function,
            self.call_site,
            tuple(self.reasons),
            tuple(_all_guards(self.verbatim, self.evaluated)),
            tuple(self.verbatim),
            self.limit_hit,
        )


def _all_guards(verbatim: list[str], evaluated: list[FailedGuard] | None) -> list[FailedGuard]:
    """Torch's guards first, completed with the values the evaluation found, then the guards only it found."""
    printed = [guard for reason in verbatim for guard in parse_reason(reason).guards]
    extra = list(evaluated or [])
    out = []
    for guard in printed:
        twin = next((e for e in extra if guard.same_check(e)), None)
        if twin is not None:
            extra.remove(twin)
            guard = guard.with_values(twin.expected, twin.actual)
        out.append(guard)
    return out + [replace(e, reported_by_torch=False) for e in extra]


def _by_function(events: list[_Event]) -> dict[str, FunctionRecompiles]:
    """``"name (file:line)"`` -> the recompiles and limit hits of ``events``, in order."""
    out: dict[str, FunctionRecompiles] = {}
    for e in events:
        fn = out.get(e.function, FunctionRecompiles())
        if e.limit_hit is None:
            fn = FunctionRecompiles(fn.count + 1, fn.reasons + tuple(e.reasons), fn.limit_hits)
        else:
            fn = FunctionRecompiles(fn.count, fn.reasons, fn.limit_hits + (e.limit_hit,))
        out[e.function] = fn
    return out


def _graph_breaks_since(
    before: Mapping[str, int], after: Mapping[str, int], sites: Sequence[GraphBreakSite]
) -> GraphBreaks:
    """The graph breaks between two readings of torch's counter, with the sites the log named."""
    by_reason = {}
    for reason, times in after.items():
        was = before.get(reason, 0)
        # A test that cleared torch's counters restarted them from zero.
        delta = times - was if times >= was else times
        if delta > 0:
            by_reason[reason] = delta
    return GraphBreaks(sum(by_reason.values()), by_reason, _merge_sites(sites))
