"""The run report: schema, atomic writing, loading and validation.

The report is JSON with a versioned schema (``"schema": "pytest-cudagraph/1"``) so
that ``pytest-cudagraph compare`` can refuse a file it does not understand instead
of comparing the wrong fields.  Files are written to a temporary sibling and moved
into place, so a reader (or a killed run) never sees half a report.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import ReportError

SCHEMA = "pytest-cudagraph/1"

# Per-test sections a report may hold; anything else is kept but not compared.
SECTIONS = ("recompiles", "caches", "graphs", "piecewise", "reduce_overhead")


def build_report(env: dict[str, Any], tests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "env": env,
        "tests": dict(sorted(tests.items())),
        "summary": summarize(tests),
    }


def summarize(tests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    recompiles = limit_hits = captured = 0
    cache_totals: dict[str, dict[str, int]] = {}
    for record in tests.values():
        outcome = record.get("outcome", "unknown")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        rec = record.get("recompiles") or {}
        recompiles += int(rec.get("count", 0) or 0)
        limit_hits += len(rec.get("limit_hits") or []) if isinstance(rec.get("limit_hits"), list) else int(rec.get("limit_hits") or 0)
        captured += int((record.get("graphs") or {}).get("captured", 0) or 0)
        for layer, counts in (record.get("caches") or {}).items():
            if isinstance(counts, dict):
                total = cache_totals.setdefault(layer, {})
                for key, value in counts.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        total[key] = total.get(key, 0) + int(value)
    return {
        "tests": len(tests),
        "outcomes": dict(sorted(outcomes.items())),
        "recompiles": recompiles,
        "recompile_limit_hits": limit_hits,
        "graphs_captured": captured,
        "caches": cache_totals,
    }


def write_report(path: str | os.PathLike, report: dict[str, Any]) -> Path:
    """Write ``report`` atomically: a temporary file in the same directory, then a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def load_report(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a report; raise ReportError with one sentence on any problem."""
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
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(
            f"report {path} is not valid JSON (line {exc.lineno}: {exc.msg}); it may be truncated, so write it again with --cudagraph-report"
        ) from None
    if not isinstance(data, dict) or "schema" not in data:
        raise ReportError(f"report {path} has no 'schema' field; it is not a pytest-cudagraph report")
    if data["schema"] != SCHEMA:
        raise ReportError(
            f"report {path} has schema {data['schema']!r}, but this pytest-cudagraph reads {SCHEMA!r}; "
            f"write both reports with the same plugin version"
        )
    if not isinstance(data.get("tests"), dict) or not isinstance(data.get("env", {}), dict):
        raise ReportError(f"report {path} has no 'tests' mapping; it is truncated or not a pytest-cudagraph report")
    for nodeid, record in data["tests"].items():
        if not isinstance(record, dict):
            raise ReportError(f"report {path} has a malformed record for {nodeid!r}; write the report again")
    return data


def check_report_path_writable(path: str | os.PathLike) -> str | None:
    """Return a one-sentence problem with writing a report to ``path``, or None."""
    path = Path(path)
    if path.is_dir():
        return f"--cudagraph-report={path} is a directory; give a file path such as {path / 'cudagraph.json'}"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"--cudagraph-report={path}: directory {parent} does not exist; create it or give another path"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"--cudagraph-report={path}: directory {parent} is not writable; give a path you can write to"
    if path.exists() and not os.access(path, os.W_OK):
        return f"--cudagraph-report={path} exists and is not writable; give a path you can write to"
    return None
