"""The run report: schema, atomic writing, loading, validation and the xdist merge.

The report is JSON with a versioned schema (``"schema": "pytest-cudagraph/1"``) so
that ``pytest-cudagraph compare`` can refuse a file it does not understand instead
of comparing the wrong fields::

    {"schema": "pytest-cudagraph/1",
     "created": "2025-01-31T12:00:00+00:00",
     "env": {"torch": "2.13.0", "triton": "3.5.0", "cuda": "12.8", "gpu": "NVIDIA H200",
             "python": "3.11.9", "platform": "Linux-...", "plugin": "0.1.0",
             "git_commit": "1a2b3c..."},
     "tests": {"tests/test_model.py::test_decode": {"outcome": "passed", "recompiles": {...},
                                                    "caches": {...}, "graphs": {...}}},
     "summary": {"tests": 1, "outcomes": {"passed": 1}, "recompiles": 0, ...}}

Every per-test section but ``outcome`` is optional and unknown keys are kept, so a
report written by a newer plugin (same schema) still loads.  Files are written to a
temporary sibling and moved into place: a reader, or a run killed half-way, sees
either the old report or the new one, never half a file.  This module never
imports torch: ``compare`` must run on a machine without it.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import ReportError

SCHEMA = "pytest-cudagraph/1"

# Per-test sections the plugin writes; anything else is kept and compared generically.
SECTIONS = ("recompiles", "caches", "graphs", "piecewise", "reduce_overhead", "extra")


# ----------------------------------------------------------------------------
# building
# ----------------------------------------------------------------------------


def build_report(
    env: Mapping[str, Any],
    tests: Mapping[str, Mapping[str, Any]],
    *,
    exitstatus: int | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """The report dictionary for one run: schema, env, one record per test (sorted by node id), summary."""
    summary = summarize(tests)
    if exitstatus is not None:
        summary["exitstatus"] = int(exitstatus)
    return {
        "schema": SCHEMA,
        "created": created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "env": dict(env),
        "tests": {nodeid: dict(tests[nodeid]) for nodeid in sorted(tests)},
        "summary": summary,
    }


def as_int(value: Any) -> int:
    """A count from a record: ints, floats and numeric strings count; anything else is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return int(number) if math.isfinite(number) else 0


def limit_hit_count(recompiles: Mapping[str, Any] | None) -> int:
    """How many recompile-limit hits a ``recompiles`` section records (a list, or a count)."""
    hits = (recompiles or {}).get("limit_hits")
    if isinstance(hits, (list, tuple)):
        return len(hits)
    return as_int(hits)


def summarize(tests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Run totals: outcomes, recompiles, recompile-limit hits, graphs captured, cache counters per layer."""
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
        caches = record.get("caches")
        for layer, counts in (caches.items() if isinstance(caches, Mapping) else ()):
            if not isinstance(counts, Mapping):
                continue
            total = cache_totals.setdefault(layer, {})
            for key, value in counts.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[key] = total.get(key, 0) + as_int(value)
    return {
        "tests": len(tests),
        "outcomes": dict(sorted(outcomes.items())),
        "recompiles": recompiles,
        "recompile_limit_hits": limit_hits,
        "graph_breaks": graph_breaks,
        "graphs_captured": captured,
        "caches": {layer: cache_totals[layer] for layer in sorted(cache_totals)},
    }


# ----------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as the strings "nan", "inf", "-inf".

    Strict JSON has no NaN (``jq`` and browsers reject it), yet a NaN replay error is
    exactly what a numerics report must keep; ``float("nan")`` reads it back.
    Objects that are not JSON (a ``torch.Size``, a path) become their ``str()``.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return json_safe(to_json())
    return str(value)


def dumps_report(report: Mapping[str, Any]) -> str:
    return json.dumps(json_safe(report), indent=2, allow_nan=False) + "\n"


def write_report(path: str | os.PathLike, report: Mapping[str, Any]) -> Path:
    """Write ``report`` atomically: a temporary file in the same directory, fsync, then a rename.

    If anything fails (serialising, a full disk), the temporary file is removed,
    an existing report at ``path`` is left as it was, and the error propagates.
    """
    # serialise first: a value that cannot be written must not even create a file
    return write_text_atomically(Path(path), dumps_report(report))


def write_text_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary sibling and ``os.replace``; no partial file, ever."""
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; a report is an ordinary artefact, so honour the umask
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ----------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------


def load_report(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a report written by ``--cudagraph-report``.

    Raises ReportError, with one sentence naming the file, the problem and the fix,
    when the file is missing, unreadable, not JSON (often: truncated), of another
    schema, or has malformed records.  Example::

        report = load_report("torch-2.13.json")
        report["tests"]["tests/test_model.py::test_decode"]["recompiles"]["count"]
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"report {path} does not exist; give the path of a file written by --cudagraph-report") from None
    except IsADirectoryError:
        raise ReportError(f"report {path} is a directory; give the path of a JSON report file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ReportError(f"report {path} cannot be read ({reason}); give a readable JSON report file") from None
    if not text.strip():
        raise ReportError(f"report {path} is empty; write it again with --cudagraph-report")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise ReportError(
            f"report {path} is not valid JSON ({where}); it may be truncated, so write it again with --cudagraph-report"
        ) from None
    return validate_report(data, str(path))


def validate_report(data: Any, name: str = "report") -> dict[str, Any]:
    """Check the parts of a report that ``compare`` relies on; return it unchanged.

    Sections of a record are not checked: readers treat a missing or malformed
    section as absent, so that records from newer fixtures never break a comparison.
    """
    if not isinstance(data, dict) or "schema" not in data:
        raise ReportError(
            f"report {name} has no 'schema' field, so it is not a pytest-cudagraph report; "
            f"give a file written by --cudagraph-report"
        )
    if data["schema"] != SCHEMA:
        raise ReportError(
            f"report {name} has schema {data['schema']!r}, but this pytest-cudagraph reads {SCHEMA!r}; "
            f"write both reports with the same plugin version"
        )
    if not isinstance(data.get("tests"), dict):
        raise ReportError(
            f"report {name} has no 'tests' mapping, so it is truncated or not a pytest-cudagraph report; "
            f"write it again with --cudagraph-report"
        )
    if not isinstance(data.get("env", {}), dict):
        raise ReportError(f"report {name} has an 'env' that is not a mapping; write the report again")
    for nodeid, record in data["tests"].items():
        if not isinstance(record, dict) or "outcome" not in record:
            raise ReportError(
                f"report {name} has a malformed record for {nodeid!r} (no 'outcome'); write the report again"
            )
    return data


def check_report_path_writable(path: str | os.PathLike) -> str | None:
    """Return a one-sentence problem with writing a report to ``path``, or None."""
    path = Path(path)
    if path.is_dir():
        return f"--cudagraph-report={path} is a directory; give a file path such as {path / 'cudagraph.json'}"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        blocking = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if blocking is not None and not blocking.is_dir():
            return (
                f"--cudagraph-report={path}: {blocking} is a file, not a directory; "
                f"give another path, inside a directory"
            )
        return f"--cudagraph-report={path}: directory {parent} does not exist; create it or give another path"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"--cudagraph-report={path}: directory {parent} is not writable; give a path you can write to"
    if path.exists() and not os.access(path, os.W_OK):
        return f"--cudagraph-report={path} exists and is not writable; give a path you can write to"
    return None


# ----------------------------------------------------------------------------
# xdist: records travel from the workers to the controller
# ----------------------------------------------------------------------------


def encode_worker_records(records: Mapping[str, Mapping[str, Any]]) -> str:
    """A worker's records as one JSON string (``workeroutput`` values must be plain data)."""
    return json.dumps(json_safe(dict(records)), allow_nan=False)


def merge_worker_records(into: dict[str, dict[str, Any]], payload: str | Mapping[str, Any] | None) -> int:
    """Add one worker's records to the controller's; return how many arrived.

    A test that ran on two workers (``--dist each``, a rerun after a crash) keeps the
    record that arrived last.
    """
    if not payload:
        return 0
    records = json.loads(payload) if isinstance(payload, str) else payload
    for nodeid, record in records.items():
        into[nodeid] = record
    return len(records)
