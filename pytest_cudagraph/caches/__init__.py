"""Library layer: torch.compile's caches.

- ``probe``: ``cache_probe`` / ``CacheProbe``, cold and warm passes, portable caches,
  made of ``results`` (``CacheStats``, ``PassResult``, ``ProbeResult``), ``readings``
  (counters, logs, Triton's listener, seeded RNGs), ``warm_start`` (``ColdWarm``, the
  warm-start invariant and its message), ``outputs`` (the cold/warm comparison of
  outputs), ``child`` (the warm pass in a fresh interpreter, ``python -m
  pytest_cudagraph.caches SPEC``) and ``portable`` (portable cache artifacts, moved
  in this or a fresh interpreter), ``bundle_cycle`` (a bundle saved, loaded, extended,
  saved again and loaded again: ``BundleCycle``) and ``precompiled``
  (``torch.compiler.precompile`` artifacts loaded in a fresh interpreter: ``PrecompiledCheck``);
- ``sweep`` (false hits: does the key change with each factor?), ``sweep_factors``
  (``Factor`` and the default factors) and ``relocate`` (a warm start after the
  cache, the working directory, HOME and TMPDIR moved): ``CacheProbe.sweep()`` and
  ``CacheProbe.relocate()``;
- ``keys``: every cache lookup's key and its components (``lookups``), the key index
  across runs (``key_index``);
- ``cache_root``: the private cache root of a run, per worker and per test;
- ``counters``: torch's cache counters, read as deltas.

``pytest_cudagraph.caches.cache_probe`` and the probe's other names are the
documented import path; they are loaded on first use, so importing a sibling
(the plugin reads ``cache_root`` at start-up) imports no torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path

# where the probe's names live: ``probe`` re-exports the public ones; the rest are found in its parts
_PROBE_MODULES = (
    "probe",
    "results",
    "readings",
    "warm_start",
    "outputs",
    "child",
    "portable",
    "bundle_cycle",
    "precompiled",
)


def __getattr__(name: str):
    if name.startswith("__") or (Path(__file__).parent / f"{name}.py").exists():
        # a submodule not imported yet: ``from . import keys`` asks here first, then imports it
        raise AttributeError(name)
    for module_name in _PROBE_MODULES:
        module = importlib.import_module(f"{__name__}.{module_name}")
        try:
            return getattr(module, name)
        except AttributeError:
            continue
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
