"""The run report: its schema, building it from the records, and the names readers and writers use.

The report is JSON with a versioned schema (``"schema": "pytest-cudagraph/3"``) so
that ``pytest-cudagraph compare`` can refuse a file it does not understand instead
of comparing the wrong fields::

    {"schema": "pytest-cudagraph/3",
     "created": "2025-01-31T12:00:00+00:00",
     "env": {"torch": "2.13.0", "triton": "3.5.0", "cuda": "12.8", "gpu": "NVIDIA H200",
             "python": "3.11.9", "platform": "Linux-...", "plugin": "0.1.0",
             "git_commit": "1a2b3c..."},
     "tests": {"tests/test_model.py::test_decode": {"outcome": "passed", "recompiles": {...},
                                                    "caches": {...}, "graphs": {...},
                                                    "cache_keys": {"lookups": [...], "note": "..."}}},
     "cache_components": {"inductor_config[max_autotune]": ["esstihe2xq4a", "False"], ...},
     "summary": {"tests": 1, "outcomes": {"passed": 1}, "recompiles": 0, ...,
                 "exitstatus": 0, "complete": true, "incomplete_reasons": [], "not_run": [],
                 "not_run_count": 0, "deselected": 0, "selection": {"-k": "decode"},
                 "shard": {"group": 2, "splits": 3, "algorithm": "duration_based_chunks",
                           "durations_path": ".test_durations", "selected": 41, "deselected": 82}},
     "durations": {"tests/test_model.py::test_decode": 4.217, "tests/test_model.py::test_plain": 0.002}}

A test's ``cache_keys`` lists every FX-graph and AOTAutograd cache lookup it made
(``cache_keys.py``)::

    {"lookups": [{"layer": "fxgraph", "outcome": "miss", "key": "f...", "pass": "warm", "graph": 2,
                  "components": {"inductor_config[fallback_random]": ["hd2xw2jzgzqs", "True"], ...},
                  "detail": "full_miss", "bypass_reason": "...",
                  "explained": ["inductor_config[fallback_random]: False -> True"],
                  "compared_with": "the cold pass"}],
     "note": "..."}

``pass`` is null outside a pass and ``graph`` the 1-based order of the layer's
lookups within the pass (or test); a component is ``[first 12 characters of its
hash, readable value or null]``, and ``components`` is null where torch gave none
(``note`` says why).  ``detail``, ``bypass_reason``, ``explained`` (why a miss
missed) and ``compared_with`` (``"the cold pass"``, ``"an earlier run (<time>,
torch <version>)"``) are there when they apply.  The components every lookup of
the run shares (same name and hash; some 600 ``inductor_config`` entries) are
kept once, in the top-level ``cache_components`` (the run's table), and each
lookup keeps only the rest: ``cache_components.full_components(report, lookup)``
gives the whole set.

``summary.shard`` is there when pytest-split ran one group of a split suite; a
report merged from such shards (``shards.merge_shard_reports``) has ``merged`` and
``sources`` there instead of ``group``.  ``durations`` holds every test that
finished, plugin or not, in seconds (setup + call + teardown), as pytest-split's
``.test_durations`` file does.

Every per-test section but ``outcome`` is optional and unknown keys are kept, so a
report written by a newer plugin (same schema) still loads; the fields this plugin
knows are type-checked on loading, so a malformed report is one clear error, not a
traceback half-way through a comparison.  A regular file is written to a temporary
sibling and moved into place: a reader, or a run killed half-way, sees either the
old report or the new one, never half a file.  Special files (``/dev/stdout``, a
FIFO) are written into, and symlinks stay links.  This module never imports
torch: ``compare`` must run on a machine without it.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ReportError
from .cache_components import factor_cache_components
from .cold_warm import passes_apart
from .files import FileRefused, check_report_path_writable, gzip_bytes, read_regular_bytes, write_text_atomically
from .json_values import as_int, json_safe
from .load import collector_paused, load_report
from .progress import NOT_RUN_LIMIT
from .validate import MAX_DEPTH, SCHEMA, Malformed, check_numbers, check_types, validate_report
from .worker_records import encode_worker_records, merge_runs_of_one_test, merge_worker_records

# Per-test sections the plugin writes; anything else is kept and compared generically.
SECTIONS = ("recompiles", "caches", "cache_keys", "graphs", "piecewise", "reduce_overhead", "extra")

# Facts about the run as a whole that the plugin hands to build_report(run=...):
# whether it ran to its end, and what it selected.  See docs/reliability.md, "What a
# report guarantees".
RUN_FIELDS = ("complete", "incomplete_reasons", "not_run", "not_run_count", "deselected", "selection", "shard")
# The report lists at most this many ids of selected tests that never finished; the count is exact.
# pytest exit statuses that mean the run did not get through its tests (for reports without "complete")
INCOMPLETE_EXIT_STATUSES = {2: "interrupted", 3: "internal error", 4: "usage error"}
# the capture-cost figures read from cudaMemGetInfo: other processes on the GPU move them, so
# where "outside_unreliable" says the GPU was shared no reader vouches for them
OUTSIDE_DEVICE_FIGURES = (
    "outside_pool_bytes",
    "behind_allocator_bytes",
    "first_use_bytes",
    "held_behind_allocator_bytes",
)


# ----------------------------------------------------------------------------
# building
# ----------------------------------------------------------------------------


def build_report(
    env: Mapping[str, Any],
    tests: Mapping[str, Mapping[str, Any]],
    *,
    exitstatus: int | None = None,
    created: str | None = None,
    run: Mapping[str, Any] | None = None,
    durations: Mapping[str, float] | None = None,
    fixture_setups: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report dictionary for one run: schema, env, one record per test (sorted by node id), summary, durations.

    ``run`` holds the run's own facts (RUN_FIELDS: ``complete``, ``incomplete_reasons``,
    ``not_run``, ``not_run_count``, ``deselected``, ``selection``, ``shard``); they go
    into ``summary`` as given, type-checked (TypeError), with ``not_run`` cut to
    NOT_RUN_LIMIT ids.  ``shard`` is pytest-split's group of a split run:
    ``{"group", "splits", "algorithm", "durations_path", "selected", "deselected",
    "suite_digest"}`` (a merged report: ``{"splits", "merged": [1, 2, 3], "algorithm",
    "selected", "suite_digest", "sources": [...]}``).  Keys beyond RUN_FIELDS pass through unchecked.

    ``durations`` is seconds per node id of every test that finished, plugin or not
    (what pytest-split needs to split the next run); written sorted, to the
    millisecond, and left out when None.

    ``fixture_setups``: what wider-scoped fixtures compiled, apart from the tests they
    were set up for (``{"fixture", "scope", "set_up_for", "worker", "caches"?,
    "lookups"?}`` each, ``plugin/fixture_compiles.py``); written sorted by fixture and
    scope, left out when empty, and their counters added to ``summary.caches``.
    """
    summary = summarize(tests, run=run, fixture_setups=fixture_setups)
    if exitstatus is not None:
        summary["exitstatus"] = int(exitstatus)
    records = {nodeid: _with_passes_apart(tests[nodeid]) for nodeid in sorted(tests)}
    shared = factor_cache_components(records)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "created": created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "env": dict(env),
        "tests": records,
    }
    if shared:
        report["cache_components"] = shared
    if fixture_setups:
        order = sorted(fixture_setups, key=lambda one: (str(one.get("fixture")), str(one.get("scope"))))
        report["fixture_setups"] = [dict(one) for one in order]
    report["summary"] = summary
    if durations is not None:
        report["durations"] = _durations(durations)
    return report


def _with_passes_apart(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``record`` with ``cache_passes``, its cold and warm passes counted apart, where it ran any.

    Its ``caches`` counts the test's whole life, both passes added up; readers of
    the JSON find each pass beside it (the passes themselves are under ``extra``).
    """
    out = dict(record)
    passes = passes_apart([record])
    if passes is not None:
        passes.pop("tests")
        out["cache_passes"] = passes
    return out


def _durations(durations: Mapping[str, float]) -> dict[str, float]:
    """Seconds per node id, sorted, to the millisecond; TypeError for a value that is no finite number."""
    rounded = {}
    for nodeid in sorted(durations):
        seconds = durations[nodeid]
        if not _is_count(seconds) or not math.isfinite(seconds):
            raise TypeError(f"build_report got durations[{nodeid!r}] = {seconds!r}; give seconds as a finite number")
        rounded[str(nodeid)] = round(float(seconds), 3)
    return rounded


def limit_hit_count(recompiles: Mapping[str, Any] | None) -> int:
    """How many recompile-limit hits a ``recompiles`` section records (a list, or a count)."""
    hits = (recompiles or {}).get("limit_hits")
    if isinstance(hits, (list, tuple)):
        return len(hits)
    return as_int(hits)


def summarize(
    tests: Mapping[str, Mapping[str, Any]],
    run: Mapping[str, Any] | None = None,
    fixture_setups: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Run totals (outcomes, recompiles, limit hits, graphs captured, cache counters per layer), then ``run``'s facts.

    See build_report for ``run``; the cache counters of ``fixture_setups`` count too.
    """
    totals = _totals(tests)
    for setup in fixture_setups:
        _add_cache_counts(totals["caches"], setup.get("caches"))
    totals["caches"] = {layer: totals["caches"][layer] for layer in sorted(totals["caches"])}
    if run:
        totals.update(_run_facts(run, totals))
    return totals


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _totals(tests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    recompiles = limit_hits = graph_breaks = captured = 0
    cache_totals: dict[str, dict[str, int]] = {}
    for record in tests.values():
        outcome = str(record.get("outcome", "unknown"))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        rec = record.get("recompiles")
        if isinstance(rec, Mapping):
            recompiles += as_int(rec.get("count"))
            limit_hits += limit_hit_count(rec)
            breaks = rec.get("graph_breaks")
            if isinstance(breaks, Mapping):
                graph_breaks += as_int(breaks.get("count"))
        graphs = record.get("graphs")
        if isinstance(graphs, Mapping):
            captured += as_int(graphs.get("captured"))
        piecewise = record.get("piecewise")
        if isinstance(piecewise, Mapping):
            captured += as_int(piecewise.get("graphs_captured"))
        observed = record.get("observed_graphs")  # the graphs the test body captured itself
        if isinstance(observed, Mapping):
            captured += as_int(observed.get("captured"))
        _add_cache_counts(cache_totals, record.get("caches"))
    totals: dict[str, Any] = {
        "tests": len(tests),
        "outcomes": dict(sorted(outcomes.items())),
        "recompiles": recompiles,
        "recompile_limit_hits": limit_hits,
        "graph_breaks": graph_breaks,
        "graphs_captured": captured,
        "caches": {layer: cache_totals[layer] for layer in sorted(cache_totals)},
    }
    # "caches" adds each test's whole-life counters (a warm start's cold miss and warm hit
    # together, "hit 1, miss 1"); the tests that ran cold and warm passes get them apart
    passes = passes_apart(list(tests.values()))
    if passes is not None:
        totals["cache_passes"] = passes
    return totals


def _add_cache_counts(totals: dict[str, dict[str, int]], caches: Any) -> None:
    """Add a ``caches`` section's counters per layer to ``totals``."""
    for layer, counts in caches.items() if isinstance(caches, Mapping) else ():
        # only the counter layers add up; "disabled", "bypass_reasons" and "start" are words, not counts
        if not isinstance(counts, Mapping) or not any(_is_count(value) for value in counts.values()):
            continue
        total = totals.setdefault(layer, {})
        for key, value in counts.items():
            if _is_count(value):
                total[key] = total.get(key, 0) + as_int(value)


def _run_facts(run: Mapping[str, Any], totals: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` checked for the report: lists as lists, ``not_run`` cut, nothing that overwrites a total."""
    clash = sorted(set(run) & set(totals))
    if clash:
        raise ValueError(f"build_report(run=...) may not set the computed totals {clash}; leave them out of run")
    facts = dict(run)
    for key in ("incomplete_reasons", "not_run"):
        if isinstance(facts.get(key), (tuple, list)):
            facts[key] = list(facts[key])
    if isinstance(facts.get("not_run"), list):
        listed = facts["not_run"]
        facts.setdefault("not_run_count", len(listed))
        if isinstance(facts["not_run_count"], int):
            facts["not_run_count"] = max(facts["not_run_count"], len(listed))
        facts["not_run"] = listed[:NOT_RUN_LIMIT]
    if isinstance(facts.get("selection"), Mapping):
        facts["selection"] = dict(facts["selection"])
    if isinstance(facts.get("shard"), Mapping):
        shard = facts["shard"] = dict(facts["shard"])
        if isinstance(shard.get("merged"), (tuple, list)):
            shard["merged"] = list(shard["merged"])
        if isinstance(shard.get("sources"), (tuple, list)):
            shard["sources"] = [dict(source) if isinstance(source, Mapping) else source for source in shard["sources"]]
    try:
        check_numbers(facts, ("run",))
        # the types need msgspec; a run of a package installed with --no-deps still writes its report
        if importlib.util.find_spec("msgspec") is not None:
            check_types(facts, _run_facts_type(), ("run",))
    except Malformed as problem:
        raise TypeError(f"build_report got {problem.describe()}; pass the types the report schema documents") from None
    return facts


# ----------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------


def dumps_report(report: Mapping[str, Any]) -> str:
    """The report's file: the report as it is, one line per top-level field and per entry of a table.

    ``tests``, ``cache_components`` and ``durations`` (and every other top-level
    mapping) hold one entry per line, each written compactly: a test's record is
    one line, so the file stays small and ``grep`` finds a test's record whole;
    ``jq .`` prints it indented.
    """
    safe = json_safe(report)
    lines = []
    for name, value in safe.items():
        if isinstance(value, Mapping) and value:
            entries = ",\n".join(f"    {_compact(key)}: {_compact(item)}" for key, item in value.items())
            lines.append(f"  {_compact(name)}: {{\n{entries}\n  }}")
        else:
            lines.append(f"  {_compact(name)}: {_compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def write_report(path: str | os.PathLike[str], report: Mapping[str, Any]) -> Path:
    """Write ``report`` to ``path`` as write_text_atomically does; gzip-compressed where the name ends in ``.gz``.

    If anything fails (serialising, a full disk), an existing report at ``path`` is
    left as it was, no temporary file stays behind, and the error propagates.
    """
    # serialise first: a value that cannot be written must not even create a file
    text = dumps_report(report)
    path = Path(path)
    return write_text_atomically(path, gzip_bytes(text) if path.name.endswith(".gz") else text)


def _run_facts_type() -> Any:
    """The run's facts' type; the schema module (and msgspec) load when a report is built, not at import."""
    from .schema import RunFacts

    return RunFacts


# the names readers and writers import from here
__all__ = [
    "INCOMPLETE_EXIT_STATUSES",
    "MAX_DEPTH",
    "OUTSIDE_DEVICE_FIGURES",
    "RUN_FIELDS",
    "ReportError",
    "SCHEMA",
    "SECTIONS",
    "FileRefused",
    "as_int",
    "build_report",
    "check_report_path_writable",
    "collector_paused",
    "dumps_report",
    "encode_worker_records",
    "json_safe",
    "limit_hit_count",
    "load_report",
    "merge_runs_of_one_test",
    "merge_worker_records",
    "read_regular_bytes",
    "summarize",
    "validate_report",
    "write_report",
    "write_text_atomically",
]
