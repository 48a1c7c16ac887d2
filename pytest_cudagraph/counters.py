"""Deltas of torch's own compile-cache counters over a test.

``torch._dynamo.utils.counters`` is process-global and only ever grows (and
``torch._dynamo.reset()`` does not clear it), so every figure the plugin reports
is a delta between two snapshots, never an absolute value.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def triton_kernel_dirs(cache_dirs: Iterable[Path]) -> frozenset[str]:
    """The per-kernel directories in the given Triton cache directories.

    Triton writes one directory per compiled kernel (named by its hash: hex, base64 or
    base32 depending on the Triton version, so names are not interpreted).  Inductor's
    default layout adds a ``<device>/`` level (``<inductor dir>/triton/0/<hash>``),
    which is looked through.  A directory that appears between two snapshots is a
    kernel Triton compiled, unless Inductor's bundler emitted it from an FX-cache entry.
    """
    found: set[str] = set()
    for base in cache_dirs:
        try:
            children = [c for c in Path(base).iterdir() if c.is_dir()]
        except OSError:
            continue  # not created yet: no kernel compiled there
        for child in children:
            if child.name.isdigit():
                try:
                    found.update(str(k) for k in child.iterdir() if _is_kernel_dir(k))
                except OSError:
                    pass
            elif _is_kernel_dir(child):
                found.add(str(child))
    return frozenset(found)


def _is_kernel_dir(path: Path) -> bool:
    """A compiled kernel's directory holds its ``__grp__<name>.json`` group file.

    Triton also caches its driver helpers (``cuda_utils.so``) and launcher stubs
    (``__triton_launcher.so``) in hash directories of the same cache; a fresh
    interpreter builds those again on first use (seen on an H200 with Triton 3.6),
    and they are not kernels.
    """
    try:
        return path.is_dir() and any(f.startswith("__grp__") for f in os.listdir(path))
    except OSError:
        return False


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
    # None where Triton is not loaded (CPU runs): no kernel can have been compiled
    kernel_dirs: frozenset[str] | None = None


def counter_snapshot(empty: bool = False) -> CounterSnapshot:
    """The current values of every counter in COUNTER_MAP (zeros with ``empty=True``).

    Triton's kernel directories are listed only when Triton is already imported, so
    a CPU run never imports it and never walks a cache directory.
    """
    if empty:
        return CounterSnapshot({}, frozenset() if "triton" in sys.modules else None)
    from torch._dynamo.utils import counters

    values = {}
    for keys in COUNTER_MAP.values():
        for group, name in keys.values():
            values[(group, name)] = int(counters[group][name]) if group in counters else 0
    dirs = triton_kernel_dirs(active_triton_cache_dirs()) if "triton" in sys.modules else None
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
    hit Triton itself is not called at all (TORCH_NOTES.md section 3).
    """
    emitted = triton_layer.get("bundler_loaded_files", 0) > 0
    compiled = 0 if emitted else new_kernel_dirs
    return compiled, triton_layer.get("static_autotuners_loaded", 0)


def delta_between(before: CounterSnapshot, after: CounterSnapshot) -> CounterDelta:
    layers = {}
    for layer, keys in COUNTER_MAP.items():
        layers[layer] = {
            key: after.values.get(src, 0) - before.values.get(src, 0) for key, src in keys.items()
        }
    if after.kernel_dirs is not None:
        new_dirs = len(after.kernel_dirs - (before.kernel_dirs or frozenset()))
        compiled, loaded = triton_compiled_and_loaded(new_dirs, layers["triton"])
        layers["triton"] = {"compiled": compiled, "loaded": loaded, "new_kernel_dirs": new_dirs, **layers["triton"]}
    return CounterDelta(**layers)


def counter_delta(before: CounterSnapshot) -> CounterDelta | None:
    """The delta since ``before``, or None when no cache counter moved (nothing compiled)."""
    delta = delta_between(before, counter_snapshot())
    return delta if delta.any else None
