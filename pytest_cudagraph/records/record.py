"""One test's record: what the plugin measured while the test ran.

Fixtures, markers and the plain API add frozen result objects (anything with a
``to_json()``) to the record of the test that is running; ``to_json()`` builds the
report's per-test entry from them.  The record of the running test is reachable
without a fixture (``current_record()``), so the plain API used inside a
``@hypothesis.given`` body still reports into its test.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from . import running


class JsonResult(Protocol):
    def to_json(self) -> dict[str, Any]: ...


# how a test's compile caches started (its ``caches.start``): see StartedCaches
CACHE_START_EMPTY = "empty"
CACHE_START_SHARED = "shared"


class StartedCaches:
    """A test's cache counters and how its caches started (the report's ``caches.start``).

    ``empty``: the compile_cache marker's or fixture's passes, each in a directory the
    plugin made empty (a warm pass starts from its cold pass's entries); ``shared``:
    the caches the run shares (torch's own location, or ``--cudagraph-cache-dir``),
    holding whatever earlier runs and the tests before it left.  ``compare`` judges
    misses on counters only between two ``empty`` starts.
    """

    def __init__(self, counts: Any, start: str):
        self.counts, self.start = counts, start

    def to_json(self) -> dict[str, Any]:
        return {**self.counts.to_json(), "start": self.start}


class JsonSection(Protocol):
    """A section a test has once: a JSON object, or a list of them (``cache_sweeps``)."""

    def to_json(self) -> dict[str, Any] | list[dict[str, Any]]: ...


class JsonList:
    """A section that is a list of results (``bundle_cycle``, ``precompiled``): each one's ``to_json()``, in order."""

    def __init__(self, results: Any):
        self.results = tuple(results)

    def to_json(self) -> list[dict[str, Any]]:
        return [result.to_json() for result in self.results]


class TestRecord:
    """Accumulates one test's results; sections follow the report schema."""

    __test__ = False  # not a pytest test class

    def __init__(self, nodeid: str):
        self.nodeid = nodeid
        self.outcome: str | None = None
        self.duration_s: float = 0.0
        self._single: dict[str, JsonSection] = {}
        self._graph_sets: list[JsonResult] = []
        self._piecewise: list[JsonResult] = []
        self._extra: dict[str, Any] = {}
        # where the test ran when workers are pinned to GPUs: {"worker": ..., "cuda_visible_devices": ...}
        self.placement: dict[str, str] | None = None
        # why the test failed, as pytest's one-line crash summary: {"when": "call", "message": "..."}
        self.failure: dict[str, str] | None = None
        # why the test skipped, as given to pytest.skip() or a skip mark
        self.skip_reason: str | None = None

    # -- adding results -------------------------------------------------
    def set(self, section: str, result: JsonSection) -> None:
        """Set a section that a test has once (``recompiles``, ``caches``, ``reduce_overhead``)."""
        self._single[section] = result

    def get(self, section: str) -> JsonSection | None:
        return self._single.get(section)

    def add_graph_set(self, result: JsonResult) -> None:
        self._graph_sets.append(result)

    def add_piecewise(self, result: JsonResult) -> None:
        self._piecewise.append(result)

    def note(self, key: str, value: Any) -> None:
        """A free-form JSON value under ``extra`` (e.g. the compile_cache marker's passes)."""
        self._extra[key] = value

    @property
    def graph_sets(self) -> list[JsonResult]:
        return list(self._graph_sets)

    # -- building the report entry ----------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"outcome": self.outcome or "unknown", "duration_s": round(self.duration_s, 4)}
        for section, result in self._single.items():
            out[section] = result.to_json()
        if self._graph_sets:
            out["graphs"] = merge_graph_sets([g.to_json() for g in self._graph_sets])
        if self._piecewise:
            out["piecewise"] = merge_piecewise([p.to_json() for p in self._piecewise])
        if self.placement:
            out["placement"] = dict(self.placement)
        if self.failure:
            out["failure"] = dict(self.failure)
        if self.skip_reason:
            out["skip_reason"] = self.skip_reason
        if self._extra:
            out["extra"] = dict(self._extra)
        return out


def _max_or_none(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    if any(isinstance(v, float) and math.isnan(v) for v in present):
        return math.nan  # a NaN anywhere is the worst error, whatever max() would pick
    return max(present) if present else None


def merge_graph_sets(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """The test's ``graphs`` entry for several GraphSets (docs/reference.md, "Several GraphSets").

    ``captured`` and ``capture_s`` add up, ``sizes`` is the union, the byte figures
    (the cuBLAS workspace too) and the numerics error take the maximum, and each
    set's own record is kept.  The maxima may come from different sets, so no ratio
    of them means anything: readers take a ratio per set (summary.pool_figures).
    """
    if len(sets) == 1:
        return dict(sets[0])
    merged = {
        "sizes": sorted({s for g in sets for s in g.get("sizes", [])}),
        "captured": sum(int(g.get("captured", 0)) for g in sets),
        "pool_bytes": _max_or_none([g.get("pool_bytes") for g in sets]),
        "largest_graph_bytes": _max_or_none([g.get("largest_graph_bytes") for g in sets]),
        **{
            key: _max_or_none([g.get(key) for g in sets])
            for key in ("pool_live_bytes", "pool_caching_bytes")
            if any(key in g for g in sets)
        },
        "max_abs_err": _max_or_none([g.get("max_abs_err") for g in sets]),
        "capture_s": round(sum(float(g.get("capture_s") or 0.0) for g in sets), 6),
        **_merged_capture_cost(sets),
        "sets": sets,
    }
    if any("cublas_workspace_bytes" in g for g in sets):
        # Every GraphSet clears cuBLAS's workspaces before its first capture, so that capture
        # allocates one workspace inside the set's own pool (32 MiB on an H200): each pool holds
        # exactly one, of the same size.  "pool_bytes" above is one pool's figure (the largest
        # set's), so one workspace goes with it: the max, which also covers a set that measured
        # none.  A sum would count the workspace once per set; dropping it (as this merge once
        # did) made a test whose every pool check passed show a pool 17 times its largest graph.
        merged["cublas_workspace_bytes"] = _max_or_none([g.get("cublas_workspace_bytes") for g in sets])
    return merged


def _merged_capture_cost(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """Warm-up seconds add up; memory outside the pool takes the maximum, as the pool does; one unreliable set taints all."""
    if not any("warmup_s" in s for s in sets):
        return {}
    merged: dict[str, Any] = {"warmup_s": round(sum(float(s.get("warmup_s") or 0.0) for s in sets), 6)}
    for key in ("outside_pool_bytes", "allocator_outside_pool_bytes", "behind_allocator_bytes"):
        merged[key] = _max_or_none([s.get(key) for s in sets])
    if any("first_use_bytes" in s for s in sets):
        # the sets' warm-ups ran one after another: each paid its own first use
        figures = [s.get("first_use_bytes") for s in sets]
        merged["first_use_bytes"] = None if None in figures else sum(figures)
    if all("held_behind_allocator_bytes" in s for s in sets):
        merged["held_behind_allocator_bytes"] = _max_or_none([s.get("held_behind_allocator_bytes") for s in sets])
    unreliable = next((s["outside_unreliable"] for s in sets if s.get("outside_unreliable")), None)
    if unreliable:
        merged["outside_unreliable"] = unreliable
    return merged


def merge_piecewise(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """The test's ``piecewise`` entry for several piecewise modules: counts add up, pools take the maximum."""
    if len(sets) == 1:
        return dict(sets[0])
    calls: dict[str, int] = {}
    for piece in sets:
        for op, count in (piece.get("splitting_op_calls") or {}).items():
            calls[op] = calls.get(op, 0) + int(count)
    merged: dict[str, Any] = {
        key: sum(int(p.get(key) or 0) for p in sets)
        for key in ("pieces", "capturable_pieces", "graphs_captured", "backend_compilations")
    }
    merged.update(
        {
            "splitting_op_calls": calls,
            "sizes": sorted({s for p in sets for s in p.get("sizes", [])}),
            "pool_bytes": _max_or_none([p.get("pool_bytes") for p in sets]),
            "max_abs_err": _max_or_none([p.get("max_abs_err") for p in sets]),
            **_merged_capture_cost(sets),
            "sets": sets,
        }
    )
    return merged


# The record of the test that is running in this process, set by the plugin
# around each test; None outside tests (plain API used from a script).  In a run
# that uses no plugin feature the plugin sets none: the running test's record then
# comes from records/running.py, made on first use.
_current: TestRecord | None = None


def current_record() -> TestRecord | None:
    if _current is None and running.running():
        made = running.record()
        return made if isinstance(made, TestRecord) else None
    return _current


def set_current_record(record: TestRecord | None) -> None:
    global _current
    _current = record
