"""A test's compile caches on the HTML page: a table per cold/warm pair, the whole-life counters, the cache
lookups with why each missed, and what ``extra`` holds beyond them.

Nothing here imports torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..records.cold_warm import PASS_COUNTERS, PassPair, extra_keys_read_whole, pass_pairs
from ..records.key_diff import lookups_of
from ..records.loaded import RecordRead, given
from ..records.report import as_int
from ..records.schema import TestRecord
from .bundle_text import bundles_html
from .html_parts import escape, json_block, kv_table, nonzero_counters, reasons_list, value_html
from .key_text import lookup_why, prominent
from .record_text import section

__all__ = ["cache_keys_html", "caches_html", "counters_table", "extra_html", "pass_pair_html", "sweeps_html"]


def _seconds_text(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f} s" if value >= 100 else f"{value:.1f} s" if value >= 10 else f"{value:.2f} s"


def _off_a_pure_warm_start(layer: str, counter: str, value: int) -> bool:
    """What the compile_cache marker refuses on a warm pass: no hit, or any miss, save, bypass or Triton compile."""
    if layer == "triton":
        return counter == "compiled" and value > 0
    return value == 0 if counter == "hit" else value > 0


def _recorded_text(recorded: Any) -> str:
    if not isinstance(recorded, Mapping) or not recorded:
        return ""
    described = []
    for name, value in recorded.items():
        if isinstance(value, Mapping) and "dtype" in value:
            shape = value.get("shape")
            dims = "x".join(map(str, shape)) if isinstance(shape, list) else str(shape)
            described.append(f"{name} ({value.get('dtype')} {dims})")
        else:
            described.append(f"{name} ({json.dumps(value, default=str)})")
    return ", ".join(described)


def pass_pair_html(pair: PassPair) -> str:
    """One cold/warm pair: rows are the cache layers, columns the cold pass's counters, then the warm pass's."""
    layers = [layer for layer in PASS_COUNTERS if layer in pair.cold or layer in pair.warm]
    counters: list[str] = []
    for layer in layers:
        counters += [name for name, _ in PASS_COUNTERS[layer] if name not in counters]
    cold, warm = section(pair.source, "cold"), section(pair.source, "warm")
    caption = f"<b>{escape(pair.label)}</b>: cold pass {escape(_seconds_text(pair.cold_s))}"
    if isinstance(cold.get("process"), str):
        caption += f" in {escape(cold['process'])}"
    caption += f", warm pass {escape(_seconds_text(pair.warm_s))}"
    if pair.warm_process:
        caption += f" in {escape(pair.warm_process)}"
    head_counters = "".join(
        f'<th class="num{" first" if index == 0 else ""}">{escape(name)}</th>' for index, name in enumerate(counters)
    )
    head = (
        f'<tr><th rowspan="2">layer</th><th class="pass first" colspan="{len(counters)}">cold pass</th>'
        f'<th class="pass first" colspan="{len(counters)}">warm pass</th></tr><tr>{head_counters * 2}</tr>'
    )
    body = []
    off_seen = False
    for layer in layers:
        own = {name for name, _ in PASS_COUNTERS[layer]}
        cells = []
        for which, stats in (("cold", pair.cold), ("warm", pair.warm)):
            counts = stats.get(layer)
            for index, name in enumerate(counters):
                css = ["num"] + (["first"] if index == 0 else [])
                if name not in own:
                    cells.append(f'<td class="{" ".join(css + ["na"])}"></td>')
                    continue
                value = counts.get(name) if isinstance(counts, Mapping) else None
                title = ""
                if which == "warm" and value is not None and _off_a_pure_warm_start(layer, name, as_int(value)):
                    css.append("off")
                    title = ' title="not what a pure warm start shows"'
                    off_seen = True
                cells.append(f'<td class="{" ".join(css)}"{title}>{escape(value)}</td>')
        body.append(f"<tr><th>{escape(layer)}</th>{''.join(cells)}</tr>")
    parts = [
        # in a box of its own that scrolls sideways on a narrow window (13 columns do not fit 720 px)
        f'<div class="wide"><table class="passes"><caption>{caption}</caption><thead>{head}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    ]
    notes = []
    if off_seen:
        notes.append(
            "red: not what a pure warm start shows (a pure one hits every layer, with no miss, save, "
            "bypass or Triton compile)"
        )
    recorded = _recorded_text(cold.get("recorded") or warm.get("recorded"))
    if recorded:
        notes.append(f"compared between the passes: {recorded}")
    cache_dir = warm.get("cache_dir") or cold.get("cache_dir")
    if cache_dir:
        notes.append(f"cache dir {cache_dir}")
    parts += [f'<p class="small">{escape(note)}</p>' for note in notes]
    parts.append(_why_not_cached(("cold pass", pair.cold), ("warm pass", pair.warm)))
    return "".join(parts)


def _why_not_cached(*passes: tuple[str, Mapping[str, Any]]) -> str:
    """Torch's bypass reasons and the layers a user turned off, per pass."""
    lines = []
    for label, stats in passes:
        reasons = stats.get("bypass_reasons")
        if isinstance(reasons, Mapping):
            for layer, items in reasons.items():
                for reason in items if isinstance(items, list) else [items]:
                    lines.append(f"bypass ({layer}{', ' + label if label else ''}): {reason}")
        disabled = stats.get("disabled")
        if isinstance(disabled, Mapping):
            lines += [f"turned off ({layer}{', ' + label if label else ''}): {why}" for layer, why in disabled.items()]
    return reasons_list(lines) if lines else ""


def counters_table(caches: Mapping[str, Any]) -> str:
    """A test's whole-life cache counters: rows are layers, the counters of the passes' tables, the rest as text."""
    layers = {layer: counts for layer, counts in caches.items() if isinstance(counts, Mapping)}
    layers = {layer: counts for layer, counts in layers.items() if layer not in ("bypass_reasons", "disabled")}
    if not layers:
        return ""
    counters: list[str] = []
    for layer in layers:
        counters += [name for name, _ in PASS_COUNTERS.get(layer, ()) if name not in counters]
    head = "<th>layer</th>" + "".join(f'<th class="num">{escape(name)}</th>' for name in counters) + "<th>other</th>"
    body = []
    for layer, counts in layers.items():
        own = [name for name, _ in PASS_COUNTERS.get(layer, ())]
        cells = "".join(
            f'<td class="num">{escape(counts.get(name))}</td>' if name in own else '<td class="num na"></td>'
            for name in counters
        )
        # Triton's listener, bundler and autotuner counters: only the ones that moved
        other = {k: v for k, v in counts.items() if k not in own}
        moved = {k: v for k, v in other.items() if not (isinstance(v, int) and v == 0)}
        other_text = nonzero_counters(moved) if moved else "-"
        body.append(f'<tr><th>{escape(layer)}</th>{cells}<td class="small">{escape(other_text)}</td></tr>')
    table = f'<table class="counters"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return table + _why_not_cached(("", caches))


def caches_html(read: RecordRead) -> str:
    """The cold/warm pairs as tables, then the test's whole-life counters (folded away when pairs tell the story).

    Both read the record as read (``read.data``): the passes live under ``extra``,
    which the types leave open, and the counters table shows every counter of every
    layer, those no type names (Triton's bundler, a newer layer) included.
    """
    record = read.data
    pairs = pass_pairs(record)
    caches = section(record, "caches")
    if not pairs:
        table = counters_table(caches)
        return ("<h3>Compile caches</h3>" + table if table else "") + sweeps_html(record) + bundles_html(record)
    parts = ["<h3>Compile caches: cold and warm passes</h3>"]
    for pair in pairs:
        parts.append(pass_pair_html(pair))
    whole = counters_table(caches)
    if whole:
        parts.append(
            "<details><summary>The test's whole-life counters (cold and warm passes added up)</summary>"
            f"{whole}</details>"
        )
    return "".join(parts) + sweeps_html(record) + bundles_html(record)


def sweeps_html(record: Any) -> str:
    """Each ``compile_cache.sweep()`` of the test (a record, mapping or typed): a row per factor, verdict and why."""
    from .sweep_text import VERDICT_WORDS, factor_why, sweep_lines, sweeps_of

    value = record.get("cache_sweeps") if isinstance(record, Mapping) else getattr(record, "cache_sweeps", None)
    parts = []
    for sweep in sweeps_of(value):
        rows = []
        for factor in sweep.factors if isinstance(sweep.factors, list) else []:
            css = ' class="off"' if factor.verdict == "false-hit" else ""
            rows.append(
                f"<tr><td>{escape(factor.name)}</td><td{css}>{escape(VERDICT_WORDS.get(str(factor.verdict)))}</td>"
                f'<td class="why">{escape(factor_why(factor))}</td></tr>'
            )
        head = "<tr><th>factor</th><th>verdict</th><th>why</th></tr>"
        parts.append(
            f"<h3>{escape(sweep_lines(sweep)[0])}</h3>"
            f'<table class="lookups"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
        )
    return "".join(parts)


def cache_keys_html(record: TestRecord) -> str:
    """The test's cache lookups (``cache_keys``): layer, pass, graph, outcome, key, and why it missed.

    A miss or bypass with a reason (the components that differ from the cold pass,
    a bypass reason, a guard miss) is marked; the key shows its first 12
    characters, the whole key in its title.
    """
    lookups = lookups_of(record)
    if not lookups:
        return ""
    head = '<th>layer</th><th>pass</th><th class="num">graph</th><th>outcome</th><th>key</th><th>why</th>'
    body = []
    for lookup in lookups:
        why = lookup_why(lookup)
        items = list(lookup.explained)
        if items:
            against = f"compared with {lookup.compared_with}:" if lookup.compared_with else "compared:"
            rest = why[: len(why) - len(items)]
            cell = escape("; ".join(rest + [against])) + reasons_list(items)
        else:
            cell = escape("; ".join(why))
        key = f'<code title="{escape(lookup.key)}">{escape(lookup.key[:12])}</code>' if lookup.key else escape(None)
        css = ' class="explained"' if prominent(lookup) else ""
        body.append(
            f"<tr{css}><td>{escape(lookup.layer)}</td><td>{escape(lookup.pass_name)}</td>"
            f'<td class="num">{escape(lookup.graph)}</td><td class="outcome">{escape(lookup.outcome)}</td>'
            f'<td class="nowrap">{key}</td><td class="why">{cell}</td></tr>'
        )
    parts = [
        "<h3>Cache lookups</h3>",
        f'<table class="lookups"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>',
    ]
    keys = given(record.cache_keys)
    note = given(keys.note) if keys is not None else None
    if note:
        parts.append(f'<p class="small">{escape(note)}</p>')
    return "".join(parts)


def extra_html(extra: Any) -> str:
    """What ``extra`` holds beyond the passes drawn as tables (``compile_cache``, ``cold_warm``), folded away.

    The rest is the plugin's notes (state put back after the test, objects it
    closed, the runs of a test joined from several workers): rarely the verdict.
    """
    if extra in (None, {}, []):
        return ""
    if not isinstance(extra, Mapping):
        return f"<details><summary>extra</summary>{json_block(extra)}</details>"
    drawn = extra_keys_read_whole({"extra": extra})
    rest = {str(k): v for k, v in extra.items() if k not in drawn}
    if not rest:
        return ""
    rows = [(key, value_html(key, value)) for key, value in rest.items()]
    return f"<details><summary>extra: {escape(', '.join(rest))}</summary>{kv_table(rows)}</details>"
