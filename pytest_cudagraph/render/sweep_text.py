"""A cache sweep as text: each factor, its verdict and why; the failure a false hit raises.

A sweep (``compile_cache.sweep(fn, ...)``, ``records.schema.CacheSweep``) gives each
factor a verdict: ``miss`` (the key changed with it: sound), ``hit`` (same key,
same outputs as a cold compile: the factor does not matter), ``false-hit`` (a hit
whose outputs differ from a cold compile's: stale code) or ``bypass`` (nothing was
cached under it).  The same lines serve ``pytest-cudagraph show``, the terminal and
the failure ``check()`` raises.

Nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from ..records.schema import CacheSweep, SweepFactor
from .plain_text import clip, count_noun, format_table

__all__ = ["VERDICT_WORDS", "WHAT_TO_DO", "factor_why", "grouped", "sweep_failure_text", "sweep_lines", "sweeps_of"]

VERDICT_WORDS = {
    "miss": "miss",
    "hit": "hit",
    "false-hit": "FALSE HIT",
    "bypass": "bypass",
}
WHAT_TO_DO = (
    "put the setting into the pass's uuid() (a CustomGraphPass), or into the cache key "
    "(an Inductor config entry), so that a change of it compiles again"
)
_SHOWN = 3


def _texts(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def grouped(items: list[str]) -> list[str]:
    """``"<layer>: <what>"`` lines as ``"<what> (fxgraph, aot_autograd)"``: one line per component, its layers after it."""
    layers: dict[str, list[str]] = {}
    for item in items:
        layer, sep, what = item.partition(": ")
        if not sep or " " in layer:
            layer, what = "", item
        layers.setdefault(what, [])
        if layer and layer not in layers[what]:
            layers[what].append(layer)
    return [f"{what} ({', '.join(names)})" if names else what for what, names in layers.items()]


def _some(items: list[str], limit: int = _SHOWN) -> str:
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def factor_why(factor: SweepFactor) -> str:
    """One line: for a miss the components that changed, for a false hit what hit and stayed equal, else why."""
    verdict = factor.verdict if isinstance(factor.verdict, str) else "?"
    changed, layers = grouped(_texts(factor.changed)), _texts(factor.layers)
    if verdict == "miss":
        head = "" if not layers else f"({' and '.join(layers)} hit for other graphs) "
        return f"{head}{_some(changed)}" if changed else f"{head}the key changed".strip()
    if verdict == "false-hit":
        equal = grouped(_texts(factor.stayed_equal))
        where = " and ".join(layers) or "a layer"
        return f"{where} hit the base compile's entry; stayed equal: {_some(equal) or 'every component'}"
    if verdict == "hit":
        return "same key, and the same outputs as a cold compile under the factor: the factor does not matter"
    return factor.note if isinstance(factor.note, str) and factor.note else verdict


def _counts(sweep: CacheSweep) -> str:
    factors = sweep.factors if isinstance(sweep.factors, list) else []
    tally: dict[str, int] = {}
    for factor in factors:
        verdict = factor.verdict if isinstance(factor.verdict, str) else "?"
        tally[verdict] = tally.get(verdict, 0) + 1
    words = {"miss": ("miss", "misses"), "hit": ("hit", None), "false-hit": ("false hit", None)}
    parts = [count_noun(n, *words.get(v, (v, None))) for v, n in tally.items()]
    return f"{count_noun(len(factors), 'factor')}: {', '.join(parts)}" if parts else "no factor"


def sweep_lines(sweep: CacheSweep, width: int = 100) -> list[str]:
    """``cache sweep of fn: 5 factors: 5 misses`` and a table: factor, verdict, why."""
    function = sweep.function if isinstance(sweep.function, str) else "?"
    lines = [f"cache sweep of {function}: {_counts(sweep)}"]
    rows = [["factor", "verdict", "why"]]
    for factor in sweep.factors if isinstance(sweep.factors, list) else []:
        name = factor.name if isinstance(factor.name, str) else "?"
        verdict = VERDICT_WORDS.get(str(factor.verdict), str(factor.verdict))
        rows.append([clip(name, 40), verdict, clip(factor_why(factor), width)])
    if len(rows) > 1:
        lines += format_table(rows, indent="  ")
    return lines


def sweep_failure_text(sweep: CacheSweep) -> str:
    """What ``SweepResult.check()`` raises: each false hit, its layer, what stayed equal, the outputs, the fix."""
    function = sweep.function if isinstance(sweep.function, str) else "?"
    factors = sweep.factors if isinstance(sweep.factors, list) else []
    false_hits = [factor for factor in factors if factor.verdict == "false-hit"]
    lines = [
        f"compile_cache.sweep({function}): {count_noun(len(false_hits), 'false hit')}: the cache returned code "
        f"compiled without the factor"
    ]
    for factor in false_hits:
        layers = " and ".join(_texts(factor.layers)) or "a cache layer"
        lines.append(
            f"  - factor {factor.name!r}: a false hit in {layers}: the key stayed the base compile's, but a cold "
            f"compile under the factor gives other outputs"
        )
        lines += [f"      key component that stayed equal: {item}" for item in grouped(_texts(factor.stayed_equal))]
        lines += [f"      outputs: {clip(item, 160)}" for item in _texts(factor.differences)[:_SHOWN]]
    lines.append(f"  what to do: {WHAT_TO_DO}")
    lines.append("")
    lines += sweep_lines(sweep)
    return "\n".join(lines)


def sweeps_of(value: Any) -> list[CacheSweep]:
    """A record's ``cache_sweeps`` (dicts, or typed already) as typed sweeps; an entry of another shape is left out."""
    from .bundle_text import typed_list

    return typed_list(value, CacheSweep)
