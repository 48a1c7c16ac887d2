"""Portable cache artifacts: a probe's cache saved with ``torch.compiler.save_cache_artifacts()``, loaded elsewhere.

``CacheProbe.portable()`` runs a function against the probe's latest cache (the
``source`` pass), saves the mega-cache artifacts it used, loads them into an empty
directory and runs again there (the ``moved`` pass): a pair that passes
``.check()`` when the moved cache gives only hits.  Needs torch 2.7+.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..errors import InvariantViolation, MisuseError
from . import keys as cache_keys
from .child import callable_label
from .results import PassResult
from .warm_start import ColdWarm, refuse_if_caches_disabled


def refuse_unless_portable() -> None:
    """Fail before running anything where this torch cannot move a cache, or every disk cache layer is off."""
    missing = compat.portable_cache_artifacts_missing()
    if missing:
        raise MisuseError(f"compile_cache.portable() needs {missing}; use cold_warm(mode='subprocess') on this torch")
    refuse_if_caches_disabled("portable()")


def source_pass_and_artifacts(run_source: Callable[[], PassResult], fn: Any) -> tuple[PassResult, bytes]:
    """Run the source pass recording only its own mega-cache artifacts; the pass and the saved artifacts.

    Raises InvariantViolation when torch saved nothing (``fn`` compiled nothing with
    Inductor, or every graph bypassed the cache).
    """
    with compat.fresh_cache_artifact_recording():
        source = run_source()
        blob = compat.save_cache_artifacts()
    if blob is None:
        raise InvariantViolation(
            f"compile_cache.portable(): torch.compiler.save_cache_artifacts() returned nothing after running "
            f"{callable_label(fn)}; the function compiled nothing with Inductor, or every graph bypassed the cache"
        )
    return source, blob


def load_artifacts(blob: bytes) -> None:
    """Load saved artifacts into the cache directories now set, with nothing left in memory to answer instead."""
    compat.clear_in_memory_compile_caches()
    compat.load_cache_artifacts(blob)


def portable_pair(source: PassResult, moved: PassResult, moved_dir: Path) -> ColdWarm:
    """The pair ``(source, moved)``, the moved pass's misses explained against the source pass in the active logs."""
    pair = ColdWarm(cold=source, warm=moved, mode="portable", cache_dir=str(moved_dir))
    cache_keys.annotate_active(
        cache_keys.explain_misses(source.lookups, moved.lookups, compared_with="the source pass")
    )
    return pair
