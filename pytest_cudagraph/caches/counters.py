"""Deltas of torch's own compile-cache counters over a test.

Dynamo's counters (``_compat.counter_values()``) are process-global and only ever
grow (resetting Dynamo does not clear them), so every figure the plugin reports
is a delta between two snapshots, never an absolute value.  ``triton_kernel_dirs``
(the gateway's, re-exported here) lists the kernels in Triton's cache directories.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _compat
from .._compat import triton_kernel_dirs

# report layer -> report key -> (counter group, counter name); which torch has which
# counter is the gateway's to know (a counter this torch lacks reads 0)
COUNTER_MAP: dict[str, dict[str, tuple[str, str]]] = _compat.cache_counter_names()


def active_triton_cache_dirs() -> list[Path]:
    """Where Triton writes kernels in this process, as far as the environment says.

    Never calls Inductor's ``cache_dir()``, which writes TORCHINDUCTOR_CACHE_DIR into
    ``os.environ``: with neither variable set, nothing is scanned.
    """
    if os.environ.get("TRITON_CACHE_DIR"):
        return [Path(os.environ["TRITON_CACHE_DIR"])]
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return [Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) / "triton"]
    return []


@dataclass(frozen=True)
class CounterSnapshot:
    values: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # None where no Triton cache directory was known: kernels are then not counted by directory
    kernel_dirs: frozenset[str] | None = None


def counter_snapshot(empty: bool = False) -> CounterSnapshot:
    """The current values of every counter in COUNTER_MAP (zeros with ``empty=True``).

    Triton's kernel directories are listed wherever the environment names a Triton
    cache directory (a walk of directories, no Triton import), also when torch was not
    loaded yet: kernels already on disk must never count as compiled by the test.
    """
    dirs = triton_kernel_dirs(active_triton_cache_dirs()) if active_triton_cache_dirs() else None
    if empty:
        return CounterSnapshot({}, dirs)
    values = _compat.counter_values(src for keys in COUNTER_MAP.values() for src in keys.values())
    return CounterSnapshot(values, dirs)


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


def triton_compiled_and_loaded(new_kernel_dirs: int, triton_layer: Mapping[str, int]) -> tuple[int, int]:
    """(compiled, loaded) Triton kernels from new kernel directories and the bundler counters.

    New directories are compiles unless Inductor's bundler emitted kernel files in the
    same interval (a warm FX-cache hit into an empty Triton directory, or a portable
    cache): then they were loaded, not compiled, and are not counted as compiles.
    Kernels loaded on an FX-cache hit show up as static autotuners loaded (2.8+); on a
    hit Triton itself is not called at all (torch 2.8 and newer).
    """
    emitted = triton_layer.get("bundler_loaded_files", 0) > 0
    compiled = 0 if emitted else new_kernel_dirs
    return compiled, triton_layer.get("static_autotuners_loaded", 0)


def delta_between(before: CounterSnapshot, after: CounterSnapshot) -> CounterDelta:
    layers = {}
    for layer, keys in COUNTER_MAP.items():
        layers[layer] = {key: after.values.get(src, 0) - before.values.get(src, 0) for key, src in keys.items()}
    if after.kernel_dirs is not None and before.kernel_dirs is not None:
        # without a listing at the start, a directory now is not known to be new
        new_dirs = len(after.kernel_dirs - before.kernel_dirs)
        compiled, loaded = triton_compiled_and_loaded(new_dirs, layers["triton"])
        layers["triton"] = {"compiled": compiled, "loaded": loaded, "new_kernel_dirs": new_dirs, **layers["triton"]}
    return CounterDelta(**layers)


def counter_delta(before: CounterSnapshot) -> CounterDelta | None:
    """The delta since ``before``, or None when no cache counter moved (nothing compiled)."""
    delta = delta_between(before, counter_snapshot())
    return delta if delta.any else None
