"""Deltas of torch's own compile-cache counters over a test.

``torch._dynamo.utils.counters`` is process-global and only ever grows (and
``torch._dynamo.reset()`` does not clear it), so every figure the plugin reports
is a delta between two snapshots, never an absolute value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# report layer -> report key -> (counter group, counter name)
COUNTER_MAP: dict[str, dict[str, tuple[str, str]]] = {
    "fxgraph": {
        "hit": ("inductor", "fxgraph_cache_hit"),
        "miss": ("inductor", "fxgraph_cache_miss"),
        "bypass": ("inductor", "fxgraph_cache_bypass"),
    },
    "aot_autograd": {
        "hit": ("aot_autograd", "autograd_cache_hit"),
        "miss": ("aot_autograd", "autograd_cache_miss"),
        "bypass": ("aot_autograd", "autograd_cache_bypass"),
        "saved": ("aot_autograd", "autograd_cache_saved"),
        "guard_miss": ("aot_autograd", "autograd_cache_guard_miss"),
    },
    # Inductor's Triton bundler; it counts files, not kernels (see TORCH_NOTES.md)
    "triton": {
        "bundler_saved_files": ("inductor", "triton_bundler_save_kernel"),
        "bundler_loaded_files": ("inductor", "triton_bundler_read_and_emit_kernel"),
        "static_autotuners_saved": ("inductor", "triton_bundler_save_static_autotuner"),
        "static_autotuners_loaded": ("inductor", "triton_bundler_load_static_autotuner"),
    },
}


@dataclass(frozen=True)
class CounterSnapshot:
    values: Mapping[tuple[str, str], int] = field(default_factory=dict)


def counter_snapshot(empty: bool = False) -> CounterSnapshot:
    """The current values of every counter in COUNTER_MAP (zeros with ``empty=True``)."""
    if empty:
        return CounterSnapshot({})
    from torch._dynamo.utils import counters

    values = {}
    for keys in COUNTER_MAP.values():
        for group, name in keys.values():
            values[(group, name)] = int(counters[group][name]) if group in counters else 0
    return CounterSnapshot(values)


@dataclass(frozen=True)
class CounterDelta:
    """Per-layer counter deltas, with the report's layer names and keys."""

    fxgraph: Mapping[str, int]
    aot_autograd: Mapping[str, int]
    triton: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"fxgraph": dict(self.fxgraph), "aot_autograd": dict(self.aot_autograd), "triton": dict(self.triton)}

    @property
    def any(self) -> bool:
        return any(v for layer in (self.fxgraph, self.aot_autograd, self.triton) for v in layer.values())


def delta_between(before: CounterSnapshot, after: CounterSnapshot) -> CounterDelta:
    layers = {}
    for layer, keys in COUNTER_MAP.items():
        layers[layer] = {
            key: after.values.get(src, 0) - before.values.get(src, 0) for key, src in keys.items()
        }
    return CounterDelta(**layers)


def counter_delta(before: CounterSnapshot) -> CounterDelta | None:
    """The delta since ``before``, or None when no cache counter moved (nothing compiled)."""
    delta = delta_between(before, counter_snapshot())
    return delta if delta.any else None
