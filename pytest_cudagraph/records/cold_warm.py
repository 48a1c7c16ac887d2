"""Cold and warm passes as a report holds them: the pairs, their counters added up, the layers turned off.

A test that ran the ``compile_cache`` marker or ``compile_cache.cold_warm()`` has
two kinds of cache figures.  Its ``caches`` section counts the probe's whole life,
cold and warm pass added up, so a perfect warm start reads ``h=1 m=1``: one hit (the
warm pass) and one miss (the cold pass), which looks like a failure.  Its passes
are kept under ``extra``: the marker's pair under ``compile_cache``, every
``cold_warm()``, ``portable()`` and ``relocate()`` pair under ``cold_warm``.  The terminal table
and the HTML page show those: the warm pass, and cold -> warm.

Their text (``m=1 s=1 -> h=1``) is ``render.counter_text``'s.

Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .json_values import as_int

# The counters a pass shows, per layer, with their one-letter names, in display order
# (written ``h=1``: the letter first, so a count never reads as a duration).
# Triton's bundler and static-autotuner counters are kept in the report only.
PASS_COUNTERS: dict[str, tuple[tuple[str, str], ...]] = {
    "fxgraph": (("hit", "h"), ("miss", "m"), ("saved", "s"), ("bypass", "b")),
    "aot_autograd": (("hit", "h"), ("miss", "m"), ("saved", "s"), ("bypass", "b")),
    "triton": (("compiled", "c"), ("loaded", "l")),
}


@dataclass(frozen=True)
class PassPair:
    """One cold pass and the warm pass after it, each as ``{layer: {counter: n}}``."""

    label: str
    mode: str
    cold: Mapping[str, Mapping[str, Any]]
    warm: Mapping[str, Mapping[str, Any]]
    cold_s: float | None
    warm_s: float | None
    warm_process: str
    # the report's entry this pair was read from (its passes' recorded tensors, cache dirs, ...)
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


# pairs made by a probe method other than cold_warm() carry that method's name as their mode
_CALLED_BY_MODE = {"portable": "portable()", "relocate": "relocate()"}


def pass_pairs(record: Mapping[str, Any]) -> list[PassPair]:
    """The record's cold/warm pairs: the marker's first, then each ``cold_warm()``/``portable()``/``relocate()`` in order."""
    extra = record.get("extra")
    if not isinstance(extra, Mapping):
        return []
    pairs: list[PassPair] = []
    marked = extra.get("compile_cache")
    if isinstance(marked, Mapping):
        mode = str(marked.get("mode", "?"))
        pair = _pair(f"@pytest.mark.compile_cache(mode={mode!r})", marked)
        if pair is not None:
            pairs.append(pair)
    called = extra.get("cold_warm")
    if isinstance(called, list):
        for number, entry in enumerate(called, start=1):
            if isinstance(entry, Mapping):
                mode = str(entry.get("mode", "?"))
                name = _CALLED_BY_MODE.get(mode) or f"cold_warm(mode={mode!r})"
                pair = _pair(f"{name} #{number}" if len(called) > 1 else name, entry)
                if pair is not None:
                    pairs.append(pair)
    return pairs


def _pair(label: str, entry: Mapping[str, Any]) -> PassPair | None:
    cold, warm = entry.get("cold"), entry.get("warm")
    if not isinstance(cold, Mapping) or not isinstance(warm, Mapping):
        return None
    return PassPair(
        label=label,
        mode=str(entry.get("mode", "?")),
        cold=_stats(cold),
        warm=_stats(warm),
        cold_s=_seconds(cold.get("duration_s")),
        warm_s=_seconds(warm.get("duration_s")),
        warm_process=str(warm.get("process", "")),
        source=entry,
    )


def extra_keys_read_whole(record: Mapping[str, Any]) -> set[str]:
    """The keys of ``extra`` that ``pass_pairs`` read whole: every entry under them is a pair.

    A key holding anything else (a report edited by hand, a newer plugin) is not
    read whole, so a page that draws the pairs still shows that key as it is.
    """
    extra = record.get("extra")
    if not isinstance(extra, Mapping):
        return set()
    whole = set()
    if isinstance(extra.get("compile_cache"), Mapping) and _pair("", extra["compile_cache"]) is not None:
        whole.add("compile_cache")
    called = extra.get("cold_warm")
    if isinstance(called, list) and called:
        if all(isinstance(entry, Mapping) and _pair("", entry) is not None for entry in called):
            whole.add("cold_warm")
    return whole


def pass_times(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The compile time of each of the record's pairs, as its ``compile_time.passes`` lists them.

    ``{"label", "cold_s", "warm_s", "warm_cold_ratio", "cold_startup_s"?, "warm_startup_s"?}``
    per pair whose passes both have a ``compile_time``: each pass's total, and its
    process start-up (interpreter, imports, the CPU probe), which is not in that total.
    """
    entries = []
    for pair in pass_pairs(record):
        cold_pass, warm_pass = pair.source.get("cold") or {}, pair.source.get("warm") or {}
        cold, warm = cold_pass.get("compile_time"), warm_pass.get("compile_time")
        if isinstance(cold, Mapping) and isinstance(warm, Mapping):
            entry = {
                "label": pair.label,
                "cold_s": cold.get("total_s"),
                "warm_s": warm.get("total_s"),
                "warm_cold_ratio": warm_cold_ratio(cold.get("total_s"), warm.get("total_s")),
            }
            for name, one in (("cold", cold_pass), ("warm", warm_pass)):
                if isinstance(one.get("startup_s"), (int, float)):
                    entry[f"{name}_startup_s"] = one["startup_s"]
            entries.append(entry)
    return entries


def warm_cold_ratio(cold_s: Any, warm_s: Any) -> float | None:
    """``warm / cold`` (0.03: the warm start compiled in 3% of the cold one's time); None when cold took no time."""
    if not isinstance(cold_s, (int, float)) or not isinstance(warm_s, (int, float)) or cold_s <= 0:
        return None
    return round(warm_s / cold_s, 4)


def _stats(one_pass: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    stats = one_pass.get("stats")
    if not isinstance(stats, Mapping):
        return {}
    # "disabled" (layer -> why) rides along: a mapping, but of sentences, not counters
    return {layer: counts for layer, counts in stats.items() if isinstance(counts, Mapping)}


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def disabled_layers(pair: PassPair) -> dict[str, str]:
    """The layers turned off during the pair's passes (layer -> why), as the passes' ``stats.disabled`` say."""
    off: dict[str, str] = {}
    for stats in (pair.cold, pair.warm):
        for layer, why in (stats.get("disabled") or {}).items():
            off.setdefault(str(layer), str(why))
    return off


def added_up(passes: list[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, int]]:
    """Several passes' counters added per layer and counter (a test with several pairs shows their sum)."""
    total: dict[str, dict[str, int]] = {}
    for stats in passes:
        for layer, counts in stats.items():
            into = total.setdefault(layer, {})
            for counter, value in counts.items():
                into[counter] = into.get(counter, 0) + as_int(value)
    return total


def passes_apart(records: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The cold and the warm passes of ``records``, counted apart: the report's ``cache_passes``; None without any.

    ``{"tests": 2, "cold": {"fxgraph": {"hit": 0, "miss": 2, ...}}, "warm": {"fxgraph": {"hit": 2, ...}}}``:
    every pair of every record added up per pass, so a run of perfect warm starts
    reads misses in the cold pass and hits in the warm one, never ``hit 2, miss 2``.
    """
    paired = [pairs for pairs in map(pass_pairs, records) if pairs]
    if not paired:
        return None
    pairs = [pair for pairs in paired for pair in pairs]
    return {
        "tests": len(paired),
        "cold": added_up([pair.cold for pair in pairs]),
        "warm": added_up([pair.warm for pair in pairs]),
    }
