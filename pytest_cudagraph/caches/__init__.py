"""Library layer: torch.compile's caches.

- ``probe``: ``cache_probe`` / ``CacheProbe``, cold and warm passes, portable caches;
- ``keys``: every cache lookup's key and its components, the key index across runs;
- ``cache_root``: the private cache root of a run, per worker and per test;
- ``counters``: torch's cache counters, read as deltas.

``pytest_cudagraph.caches.cache_probe`` and the probe's other names are the
documented import path; they are loaded on first use, so importing a sibling
(the plugin reads ``cache_root`` at start-up) imports no torch.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    probe = importlib.import_module(f"{__name__}.probe")

    try:
        return getattr(probe, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
