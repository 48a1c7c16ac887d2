"""The terminal summary: one compact row per test that used the plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _mib(value: Any) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}M"


def _layer(record: dict[str, Any], layer: str) -> str:
    counts = (record.get("caches") or {}).get(layer)
    if not counts:
        return "-"
    if layer == "triton":
        if "compiled" in counts:
            return f"{counts.get('compiled', 0)}c/{counts.get('loaded', 0)}l"
        return "-"
    return f"{counts.get('hit', 0)}h/{counts.get('miss', 0)}m"


def _row(nodeid: str, record: dict[str, Any]) -> list[str]:
    graphs = record.get("graphs") or {}
    rec = record.get("recompiles") or {}
    sizes = graphs.get("sizes") or []
    graph_text = f"{graphs.get('captured', 0)} ({len(sizes)} sizes)" if graphs else "-"
    pool = f"{_mib(graphs.get('pool_bytes'))}/{_mib(graphs.get('largest_graph_bytes'))}" if graphs else "-"
    limit_hits = rec.get("limit_hits") or []
    recompiles = "-" if not rec else f"{rec.get('count', 0)}" + (" LIMIT" if limit_hits else "")
    return [
        nodeid,
        record.get("outcome", "?"),
        graph_text,
        pool,
        recompiles,
        _layer(record, "fxgraph"),
        _layer(record, "aot_autograd"),
        _layer(record, "triton"),
    ]


HEADER = ["test", "outcome", "graphs", "pool/largest", "recompiles", "fxgraph", "aot", "triton"]


def format_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def terminal_summary_lines(records: dict[str, dict[str, Any]], report_path: Path | None) -> list[str]:
    lines: list[str] = []
    if records:
        lines += format_table([HEADER] + [_row(n, r) for n, r in sorted(records.items())])
    if report_path is not None:
        lines.append(f"report written to {report_path}")
    return lines
