"""A test's compile time on the HTML page: a stacked bar per pass, then a table of the phases (seconds and share).

A test with cold and warm passes (``compile_cache`` marker, ``cold_warm()``) shows
each pair cold -> warm, from the passes' own ``compile_time``; any other test its
section's figures.  A test that compiled nothing (a skipped one: ``total_s`` 0 and
no frames) gets no section.  The bars are CSS widths: no script, no image.

Nothing here imports torch, nor the library: the phases' names and meaning below
are a copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ReportError
from ..records.cold_warm import pass_pairs
from ..records.loaded import RecordRead, given, section_or_empty, typed_section
from ..records.schema import CompileTime, PassTime
from .html_parts import escape, rows_table
from .record_text import section

__all__ = ["PHASES_SHOWN", "compile_time_html", "phase_label"]


@dataclass(frozen=True)
class Phase:
    """One phase of ``compile_time.phases`` as the page shows it.

    ``part`` marks a phase inside another one (its share is still of the whole
    compile); the three that are not add up to ``total_s``.  ``spent`` is False for
    ``cache_saved_s``, time not spent.
    """

    key: str
    label: str
    meaning: str
    css: str = ""
    part: bool = False
    spent: bool = True


# A copy of compile/compile_time.py's PHASES and their meaning (its module docstring); render imports no
# library code, so keep this table in step with it.  Dynamo + AOTAutograd + Inductor == total_s.
PHASES_SHOWN: tuple[Phase, ...] = (
    Phase("dynamo_s", "Dynamo", "bytecode analysis, tracing, guards", "ph-dynamo"),
    Phase("aot_autograd_s", "AOTAutograd", "tracing and partitioning the graphs; its cache lookup", "ph-aot"),
    Phase("inductor_s", "Inductor", "lowering, code generation and kernel compiles", "ph-inductor"),
    Phase("inductor_codegen_s", "code generation", "part of Inductor: generating and loading code", part=True),
    Phase(
        "kernel_compile_s",
        "kernel compile",
        "waiting for kernel compiles: part of code generation on a cold compile, the kernels' loading on a cache hit",
        part=True,
    ),
    Phase(
        "cache_saved_s", "saved by cache hits", "not spent: what the cache hits' entries cost to compile", spent=False
    ),
)
# on a run without Triton, torch's same timer covers its wait for the C++ kernels (the CPU's Inductor backend)
_NO_TRITON_MEANING = (
    "torch's wait for the C++ kernels' compiles (no Triton installed): part of code generation on a cold "
    "compile, the kernels' loading on a cache hit"
)
_BY_KEY = {phase.key: phase for phase in PHASES_SHOWN}
_STACKED = tuple(phase for phase in PHASES_SHOWN if not phase.part and phase.spent)


def _has_triton(env: Mapping[str, Any] | None) -> bool | None:
    """Whether the run had Triton: True, False (the env says none), None (the report does not say)."""
    if not isinstance(env, Mapping) or "triton" not in env:
        return None
    return bool(env.get("triton"))


def phase_label(key: str, env: Mapping[str, Any] | None = None) -> str:
    """The page's name of a phase; ``kernel_compile_s`` names the kernels' compiler where the env says."""
    phase = _BY_KEY.get(key)
    if phase is None:
        return key
    if key == "kernel_compile_s":
        triton = _has_triton(env)
        if triton is False:
            return "kernel compile (C++, no Triton)"
        if triton:
            return "kernel compile (Triton; C++ for CPU tensors)"
    return phase.label


def _figure(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if value < 0.001:
        return "<0.001"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def _share(value: float | None, total: float | None) -> str:
    if value is None or not total:
        return ""
    share = 100 * value / total
    return "<1%" if 0 < share < 0.5 else f"{share:.0f}%"


def _compiled(entry: CompileTime) -> bool:
    """Whether a ``compile_time`` section holds any compile: a time above 0, or a frame."""
    return bool(_figure(given(entry.total_s))) or bool(given(entry.frames))


def _total(entry: CompileTime) -> float | None:
    return _figure(given(entry.total_s))


def _phases(entry: CompileTime) -> dict[str, float]:
    phases = {}
    for key, value in (given(entry.phases) or {}).items():
        figure = _figure(value)
        if figure is not None:
            phases[str(key)] = figure
    return phases


def _bar(label: str, entry: CompileTime, scale: float, env: Mapping[str, Any] | None) -> str:
    """One pass as a stacked bar: Dynamo, AOTAutograd, Inductor, its length its total against ``scale``."""
    total = _total(entry) or 0.0
    phases = _phases(entry)
    segments = []
    for phase in _STACKED:
        value = phases.get(phase.key)
        if not value or not total:
            continue
        width = 100 * value / total
        tip = f"{phase_label(phase.key, env)}: {_seconds(value)} s ({_share(value, total)})"
        segments.append(f'<span class="{phase.css}" style="width:{width:.2f}%" title="{escape(tip)}"></span>')
    length = 100 * total / scale if scale else 0.0
    return (
        f'<div class="ct-row"><span class="ct-label nowrap">{escape(label)} {escape(_seconds(total))} s</span>'
        f'<span class="ct-track"><span class="ct-bar" style="width:{max(length, 0.4):.2f}%">'
        f"{''.join(segments)}</span></span></div>"
    )


def _legend(env: Mapping[str, Any] | None) -> str:
    swatches = "".join(
        f'<span><i class="swatch {phase.css}"></i>{escape(phase_label(phase.key, env))}</span>' for phase in _STACKED
    )
    return f'<div class="legend">{swatches}</div>'


def _phase_cells(phase: Phase, entry: CompileTime) -> str:
    phases = _phases(entry)
    value = phases.get(phase.key)
    if phase.key not in phases:
        return '<td class="num">-</td><td class="num"></td>'
    total = _total(entry)
    share = _share(value, total) if phase.spent else ""
    width = 100 * value / total if phase.spent and value and total else 0.0
    meter = f'<span class="ct-meter"><span style="width:{min(width, 100):.2f}%"></span></span>' if width else ""
    return f'<td class="num">{escape(_seconds(value))}</td><td class="num share">{meter}{escape(share)}</td>'


def _meaning(phase: Phase, env: Mapping[str, Any] | None) -> str:
    return _NO_TRITON_MEANING if phase.key == "kernel_compile_s" and _has_triton(env) is False else phase.meaning


def _phase_table(columns: list[tuple[str, CompileTime]], env: Mapping[str, Any] | None) -> str:
    """Rows are the phases, columns seconds and share of each pass (``columns``: (heading, compile_time))."""
    head = "<th>phase</th>"
    for heading, _ in columns:
        head += f'<th class="num">{escape(heading + " s" if heading else "seconds")}</th>'
        head += f'<th class="num">{escape(heading + " share" if heading else "share")}</th>'
    head += "<th>what it is</th>"
    known = [phase for phase in PHASES_SHOWN if any(phase.key in _phases(entry) for _, entry in columns)]
    rows = []
    for phase in known:
        css = ' class="sub"' if phase.part else ' class="unspent"' if not phase.spent else ""
        cells = "".join(_phase_cells(phase, entry) for _, entry in columns)
        rows.append(
            f'<tr{css}><th title="{escape(phase.key)}">{escape(phase_label(phase.key, env))}</th>'
            f'{cells}<td class="small">{escape(_meaning(phase, env))}</td></tr>'
        )
    totals = "".join(
        f'<td class="num">{escape(_seconds(_total(entry)))}</td><td class="num">100%</td>' for _, entry in columns
    )
    rows.append(f'<tr class="total"><th>total</th>{totals}<td class="small">Dynamo + AOTAutograd + Inductor</td></tr>')
    return f'<table class="phases"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _notes(entry: CompileTime, fields: Mapping[str, Any], env: Mapping[str, Any] | None) -> list[str]:
    """The phases this torch does not record, and the section's notes (``fields``: the section as read)."""
    notes = []
    unavailable = given(entry.unavailable)
    if unavailable:
        names = ", ".join(phase_label(str(key), env) for key in unavailable)
        notes.append(f"not recorded by this torch: {names}")
    # "notes", a field no type names, is shown where a report holds it (any JSON), before the typed "note"
    for value in (fields.get("notes"), given(entry.note)):
        notes += [str(item) for item in (value if isinstance(value, list) else [value]) if item]
    return notes


def _frames_html(entry: CompileTime, folded: bool) -> str:
    """Each compiled frame (compile id, function, seconds, the exception that ended it); one frame is one line."""
    frames = given(entry.frames) or []
    if not frames:
        return ""
    failed = any(given(frame.failed) for frame in frames)
    if len(frames) == 1 and not failed and not folded:
        frame = frames[0]
        return f'<p class="small">compiled frame {escape(given(frame.compile_id))}: {escape(given(frame.function))}</p>'
    header = ("compile id", "function", "seconds") + (("failed",) if failed else ())
    rows = []
    for frame in frames:
        cells = (
            f'<td class="nowrap">{escape(given(frame.compile_id))}</td>'
            f'<td class="mono">{escape(given(frame.function))}'
            f'</td><td class="num">{escape(_seconds(_figure(given(frame.total_s))))}</td>'
        )
        if failed:
            cells += f'<td class="warn">{escape(given(frame.failed) or "")}</td>'
        rows.append(f"<tr>{cells}</tr>")
    table = rows_table("frames", header, rows)
    if folded:
        return f"<details><summary>compiled frames ({len(frames)})</summary>{table}</details>"
    return f'<p class="small">compiled frames ({len(frames)}):</p>{table}'


# a pass's compile_time: its type, and the mapping it was read from
_Timed = tuple[CompileTime, Mapping[str, Any]]


def _pass_compile_time(entry: Mapping[str, Any], which: str) -> _Timed:
    """The compile_time of a pair's ``which`` pass, as its type.

    The passes live under ``extra``, which the types leave open (any JSON): a
    compile_time of another shape reads as none, as any odd field of ``extra`` does.
    """
    fields = section(section(entry, which), "compile_time")
    try:
        return typed_section(fields, CompileTime, ()), fields
    except ReportError:
        return CompileTime(), {}


def _pair_entries(record: Mapping[str, Any]) -> list[tuple[str, _Timed, _Timed, str]]:
    """(label, cold compile_time, warm compile_time, the warm pass's process) of each pair that compiled."""
    entries = []
    for pair in pass_pairs(record):
        cold = _pass_compile_time(pair.source, "cold")
        warm = _pass_compile_time(pair.source, "warm")
        if _compiled(cold[0]) or _compiled(warm[0]):
            entries.append((pair.label, cold, warm, pair.warm_process))
    return entries


def _passes_table(passes: list[PassTime]) -> str:
    """The section's ``passes`` (label, cold_s, warm_s, warm/cold), for pairs whose passes hold no phases."""
    rows = []
    for entry in passes:
        cold, warm = _figure(given(entry.cold_s)), _figure(given(entry.warm_s))
        ratio = _figure(given(entry.warm_cold_ratio))
        rows.append(
            f"<tr><td>{escape(given(entry.label))}</td>"
            f'<td class="num nowrap">{escape(_seconds(cold))} s <span class="arrow">-&gt;</span> '
            f"{escape(_seconds(warm))} s</td>"
            f'<td class="num">{escape("-" if ratio is None else f"{ratio:.2f}")}</td></tr>'
        )
    return rows_table("ct-passes", ("pass pair", "cold -> warm", "warm / cold"), rows, numeric=2)


def compile_time_html(read: RecordRead, env: Mapping[str, Any] | None = None) -> str:
    """The test's compile time: per pair cold -> warm, else its own; empty when the test compiled nothing."""
    own = section_or_empty(read.typed.compile_time, CompileTime)
    own_fields = section(read.data, "compile_time")
    pairs = _pair_entries(read.data)
    if not pairs and not _compiled(own):
        return ""
    parts = []
    if pairs:
        parts.append("<h3>Compile time: cold and warm passes</h3>")
        for label, (cold, cold_fields), (warm, warm_fields), _ in pairs:
            cold_s, warm_s = _total(cold), _total(warm)
            parts.append(
                f'<p class="ct-head"><b>{escape(label)}</b>: '
                f'<span class="nowrap">cold {escape(_seconds(cold_s))} s <span class="arrow">-&gt;</span> '
                f"warm {escape(_seconds(warm_s))} s</span></p>"
            )
            scale = max(cold_s or 0.0, warm_s or 0.0)
            parts.append(f'<div class="ct-bars">{_bar("cold", cold, scale, env)}{_bar("warm", warm, scale, env)}</div>')
            parts.append(_phase_table([("cold", cold), ("warm", warm)], env))
            notes = dict.fromkeys(_notes(cold, cold_fields, env) + _notes(warm, warm_fields, env))
            parts += [f'<p class="small">{escape(note)}</p>' for note in notes]
        parts.append(_legend(env))
        total = _total(own)
        if total is not None:
            elsewhere = any(process and process != "this interpreter" for *_, process in pairs)
            parts.append(
                f'<p class="small">The whole test: {escape(_seconds(total))} s of compile in this interpreter'
                + (" (the warm pass in a fresh interpreter is not in it)" if elsewhere else "")
                + ".</p>"
            )
        parts.append(_frames_html(own, folded=True))
        return "".join(parts)
    total = _total(own)
    parts.append(f"<h3>Compile time: {escape(_seconds(total))} s</h3>")
    parts.append(f'<div class="ct-bars">{_bar("total", own, total or 0.0, env)}</div>{_legend(env)}')
    parts.append(_phase_table([("", own)], env))
    parts += [f'<p class="small">{escape(note)}</p>' for note in _notes(own, own_fields, env)]
    passes = given(own.passes) or []
    if passes:
        parts.append(_passes_table(passes))
    parts.append(_frames_html(own, folded=False))
    return "".join(parts)
