"""xdist: records travel from the workers to the controller, and one test run on several workers is one record."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .json_values import json_safe


def encode_worker_records(records: Mapping[str, Mapping[str, Any]]) -> str:
    """A worker's records as one JSON string (``workeroutput`` values must be plain data)."""
    return json.dumps(json_safe(dict(records)), allow_nan=False)


def merge_worker_records(into: dict[str, dict[str, Any]], payload: str | Mapping[str, Any] | None) -> int:
    """Add one worker's records to the controller's; return how many arrived.

    These are the records of tests refused at collection, the same on every worker:
    one copy is kept.
    """
    if not payload:
        return 0
    records = json.loads(payload) if isinstance(payload, str) else payload
    for nodeid, record in records.items():
        into[nodeid] = record
    return len(records)


# worst first: the outcome a test run on several workers (--dist each) is reported with
_OUTCOME_SEVERITY = ("crashed", "error", "failed", "xpassed", "passed", "xfailed", "skipped")


def merge_runs_of_one_test(
    earlier: Mapping[str, Any], later: Mapping[str, Any], earlier_worker: str, later_worker: str
) -> dict[str, Any]:
    """One record for a test that ran on several xdist workers (``--dist each``).

    The record of the worst outcome is kept whole (a failure on one GPU is never
    hidden by a pass on another), and ``extra.runs`` lists every worker's outcome.
    """
    runs = list(
        (earlier.get("extra") or {}).get("runs") or [{"worker": earlier_worker, "outcome": earlier.get("outcome")}]
    )
    runs.append({"worker": later_worker, "outcome": later.get("outcome")})

    def severity(record: Mapping[str, Any]) -> int:
        outcome = record.get("outcome")
        return _OUTCOME_SEVERITY.index(outcome) if outcome in _OUTCOME_SEVERITY else len(_OUTCOME_SEVERITY)

    kept = dict(later if severity(later) < severity(earlier) else earlier)
    kept["extra"] = {**(kept.get("extra") or {}), "runs": runs}
    return kept
