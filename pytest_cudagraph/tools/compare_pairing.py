"""``compare``'s pairing: which tests and graph sets of two reports meet, and the figures their tables set side by side.

- ``paired_tests``: the tests in both reports, the new ones, the vanished ones;
- ``paired_sets``: each graph set of a test with its partner in the other run
  (``graph_set_key``), or None where they do not all pair up;
- ``env_diff``: the environment fields that differ and those that do not;
- ``table_changes``: every scalar of a test's record that differs, marked with the
  rule that flags it (the side-by-side table).

Plain data: no torch, no pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..records.cold_warm import passes_apart
from ..records.loaded import RecordRead
from .compare_noise import keyed_set_data, keyed_sets
from .compare_results import Change

if TYPE_CHECKING:
    from ..records.schema import GraphSet, TestRecord

__all__ = ["env_diff", "paired_sets", "paired_tests", "table_changes"]

# Sections whose scalar leaves appear in the side-by-side table.
_TABLE_SECTIONS = ("recompiles", "caches", "graphs", "piecewise", "reduce_overhead", "extra")
# Per-size or per-set detail: summarised elsewhere, too long for a table row each.
_TABLE_SKIP_KEYS = frozenset(
    {
        # counted instructions: the compile-instructions rule's rows, its medians where it fires
        "compile_instructions",
        "sets",
        "graph_bytes",
        "reasons",
        "limit_hits",
        "by_function",
        # differ on every run by construction (temporary directories, process ids)
        "cache_dir",
        # every startup run's figures: their medians and spreads are the rows
        "samples",
        "process",
        # how a test's caches started (caches.start): the cache-miss rule's to read, not a measurement
        "start",
    }
)
# The outcome and the words that go with it: the outcome is compared, its message and
# skip reason are the page's to show (a reworded message is not a change of the test).
_OUTCOME_WORDS = ("outcome", "duration_s", "failure", "skip_reason")
# compared apart (key_diff), not as table rows; a rerun's earlier attempts are not the test's result
_NOT_IN_TABLE = ("cache_keys", "reruns")


def paired_tests(
    base_tests: Mapping[str, TestRecord], new_tests: Mapping[str, TestRecord]
) -> tuple[list[str], tuple[str, ...], tuple[str, ...]]:
    """(the tests in both reports, in the base's order; the new ones, sorted; the vanished ones, sorted)."""
    both = [n for n in base_tests if n in new_tests]
    new = tuple(sorted(n for n in new_tests if n not in base_tests))
    vanished = tuple(sorted(n for n in base_tests if n not in new_tests))
    return both, new, vanished


def paired_sets(base: TestRecord, new: TestRecord) -> dict[str, tuple[GraphSet, GraphSet]] | None:
    """Each graph set of ``base`` with its partner in ``new``, by ``graph_set_key``, in the base's order.

    None, so that the test's overall figures are compared instead, when either run
    has one set or fewer, or when some set has no partner (``unpaired_set_notes``
    says which).
    """
    base_sets, new_sets = keyed_sets(base), keyed_sets(new)
    if not base_sets or not new_sets or set(base_sets) != set(new_sets):
        return None
    return {key: (base_set, new_sets[key]) for key, base_set in base_sets.items()}


def env_diff(
    base: Mapping[str, Any], new: Mapping[str, Any]
) -> tuple[tuple[tuple[str, Any, Any], ...], tuple[tuple[str, Any], ...]]:
    """((field, base, new) per field that differs; (field, value) per field both runs give alike), in the base's order."""
    keys = list(base) + [k for k in new if k not in base]
    changes = tuple((k, base.get(k), new.get(k)) for k in keys if base.get(k) != new.get(k))
    same = tuple((k, base.get(k)) for k in keys if base.get(k) == new.get(k) and base.get(k) is not None)
    return changes, same


def table_changes(
    base: RecordRead, new: RecordRead, rule_of: Mapping[str, str], include_timings: bool
) -> tuple[Change, ...]:
    """The side-by-side table: every scalar that differs, marked with the rule that flags it.

    It walks each record as the report holds it, every field included: a figure a
    newer plugin writes, or a section another plugin adds, is a row like any other.
    """
    base_values, new_values = _table_values(base, include_timings), _table_values(new, include_timings)
    changes = []
    for metric in list(base_values) + [m for m in new_values if m not in base_values]:
        b_value, n_value = base_values.get(metric), new_values.get(metric)
        # a field one plugin version adds, holding nothing (0, []), is not a change worth a row
        if metric not in rule_of and _empty(b_value) and _empty(n_value):
            continue
        if b_value != n_value or metric in rule_of:
            changes.append(Change(metric, b_value, n_value, rule_of.get(metric)))
    return tuple(changes)


def _empty(value: Any) -> bool:
    return value is None or (not isinstance(value, bool) and value in (0, "", []))


def _flatten(prefix: str, value: Any, out: dict[str, Any], include_timings: bool) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            key = str(key)
            if key in _TABLE_SKIP_KEYS or (not include_timings and key.endswith("_s")):
                continue
            _flatten(f"{prefix}.{key}" if prefix else key, item, out, include_timings)
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float, str, bool)) or v is None for v in value):
            out[prefix] = list(value)
        else:
            out[prefix] = f"[{len(value)} item{'' if len(value) == 1 else 's'}]"
    else:
        out[prefix] = value


def _table_values(read: RecordRead, include_timings: bool) -> dict[str, Any]:
    record = _with_derived_sections(read.data)
    out: dict[str, Any] = {"outcome": read.typed.outcome}
    if include_timings and "duration_s" in record:
        out["duration_s"] = record["duration_s"]
    for section in _TABLE_SECTIONS:
        if section in record:
            _flatten(section, record[section], out, include_timings)
    for key, one in keyed_set_data(read).items():
        _flatten(f"graphs.{key}", one, out, include_timings)
    for key, value in record.items():  # every other section: a newer plugin's, another plugin's
        if key not in out and key not in _TABLE_SECTIONS and key not in _OUTCOME_WORDS and key not in _NOT_IN_TABLE:
            _flatten(key, value, out, include_timings)
    return out


def _with_derived_sections(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` with the sections an older plugin did not write but whose makings it holds, derived.

    A field an older report lacks is not a change: ``cache_passes`` (the cold and
    warm passes counted apart) is what the passes under ``extra`` give, and a
    ``pytest-cudagraph/1`` report of a plugin before it holds the passes only.
    Reading a ``/2`` file puts it back likewise (``records/older_schemas.py``).
    """
    if "cache_passes" in record:
        return record
    derived = passes_apart([record])
    if derived is None:
        return record
    derived.pop("tests", None)
    return {**record, "cache_passes": derived}
