"""Cache lookups: the key of every FX-graph / AOTAutograd lookup and its components.

torch writes each lookup (its outcome, key and the key's components) to its
structured trace; ``capturing_cache_lookups`` hands each one to a callback as plain
data.  What torch leaves out of those records, per version: ``cache_lookup_gaps``;
functorch's config as AOTAutograd's key sees it: ``functorch_config_snapshot``.
Everything imports torch lazily.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

# torch's structured-trace logger (torch/_logging/_internal.py, ``trace_log``; 2.6-2.14)
_TRACE_LOGGER = "torch.__trace"
# the logger whose DEBUG level makes AOTAutograd compute its key's components (2.12+)
_AOT_CACHE_LOGGER = "torch._functorch._aot_autograd.autograd_cache"
# structured-trace artifact name prefix -> report layer
_LOOKUP_ARTIFACTS = (("fx_graph_cache_", "fxgraph"), ("aotautograd_cache_", "aot_autograd"))
# artifacts with those prefixes that are no lookup (2.11+: a field that failed to pickle while saving)
_NOT_LOOKUPS = frozenset({"aotautograd_cache_pickle_failure"})


def cache_lookup_gaps() -> dict[str, str]:
    """What this torch leaves out of its lookup records: situation -> a sentence for the report's note.

    Read in torch 2.6, 2.11, 2.13 and 2.14.1 (wheels of 2.7-2.12 for where it changed):

    - ``"fx_from_aot_hit"``: 2.6-2.7 look the FX graphs of an AOTAutograd hit up by the
      stored key and give no components for them (``components: []``); from 2.8 the
      stored debug lines are given.
    - ``"fx_miss_from_aot_hit"``: 2.6-2.7 write no record at all for an FX-graph miss
      inside an AOTAutograd hit (only an INFO log and the counters).
    - ``"bypass"``: every version: a bypassed lookup has no key and no components,
      only a reason (2.6's AOTAutograd reason is often empty).
    - ``"aot_default_off"``: 2.6 leaves AOTAutograd's cache off by default.
    - ``"no_components"``: torch gave a key without components (AOTAutograd in 2.12+
      when its logger could not be lowered to DEBUG).
    """
    import torch

    version = _torch_version(torch.__version__)
    gaps = {
        "bypass": "a bypassed lookup has no key and no components in any torch",
        "no_components": f"torch {torch.__version__} gave this lookup's key without its components",
    }
    if version < (2, 8):
        gaps["fx_from_aot_hit"] = (
            f"torch {torch.__version__} gives no components for the FX-graph lookups of an AOTAutograd hit "
            f"(2.8 and newer do)"
        )
        gaps["fx_miss_from_aot_hit"] = (
            f"torch {torch.__version__} records no FX-graph miss inside an AOTAutograd hit "
            f"(only its counter moves; 2.8 and newer record it)"
        )
    if version < (2, 7):
        gaps["aot_default_off"] = f"torch {torch.__version__} leaves AOTAutograd's cache off by default"
    return gaps


def _torch_version(text: str) -> tuple[int, int]:
    parts = text.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (99, 0)


def functorch_config_snapshot() -> dict[str, str]:
    """functorch's config as AOTAutograd's key sees it, entry -> ``repr`` (clipped to 200 chars).

    AOTAutograd puts the whole of ``torch._functorch.config.save_config()`` into its
    key as ONE opaque pickle (the ``autograd_config`` component, 2.6-2.14), so the
    component's hash only says *that* it changed.  A snapshot taken at each lookup,
    diffed between two lookups, names the entries.  ``save_config_portable()``
    (no arguments in 2.6; 2.11+ take ``ignore_private_configs``) leaves out the
    entries torch itself keeps out of portable configs; a torch without it gives {}.
    """
    import torch._functorch.config as functorch_config

    portable = getattr(functorch_config, "save_config_portable", None)
    if portable is None:
        return {}
    try:
        values = portable()
    except Exception:  # a config entry that cannot be read must not break a compile
        return {}
    out = {}
    for name, value in values.items():
        text = repr(value)
        out[str(name)] = text if len(text) <= 200 else text[:199] + "…"
    return out


class _LookupHandler(logging.Handler):
    """Delivers each FX-graph / AOTAutograd cache-lookup record of torch's structured trace to a callback.

    torch (2.6-2.14) calls ``trace_log.debug("", extra={"metadata": ..., "payload": ...})``
    with ``metadata = {"artifact": {"name": "fx_graph_cache_hit", "encoding": "json"}, ...}``
    and the lookup's ``cache_info`` as JSON in ``payload``.  Artifact names:
    ``fx_graph_cache_{hit,miss,bypass}``; ``aotautograd_cache_{hit,miss,bypass}`` from 2.7,
    ``aotautograd_cache_hash`` for every outcome in 2.6 (the outcome is always read
    from the payload's ``cache_state``).  Other records are dropped at once.
    """

    def __init__(self, callback: Callable[[dict[str, Any]], None], aot_level: _AotLoggerLevel):
        super().__init__(logging.DEBUG)
        self.callback = callback
        self.aot_level = aot_level

    def emit(self, record: logging.LogRecord) -> None:
        # torch sets its loggers' levels again (set_logs, TORCH_LOGS): keep AOTAutograd's at DEBUG
        self.aot_level.keep()
        metadata = getattr(record, "metadata", None)
        if type(metadata) is not dict:
            return
        artifact = metadata.get("artifact")
        name = artifact.get("name") if type(artifact) is dict else None
        if not isinstance(name, str) or name in _NOT_LOOKUPS:
            return
        layer = next((layer for prefix, layer in _LOOKUP_ARTIFACTS if name.startswith(prefix)), None)
        if layer is None:
            return
        try:
            payload = json.loads(getattr(record, "payload", None) or "{}")
            event = _lookup_event(layer, payload)
            if layer == "aot_autograd":
                event["functorch_config"] = functorch_config_snapshot()
            self.callback(event)
        except Exception:  # never break a compile over a record we could not read
            return


def _lookup_event(layer: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The plain-data lookup event of one trace payload (see capturing_cache_lookups)."""
    components = payload.get("components")
    outcome = str(payload.get("cache_state") or "unknown")
    key = payload.get("key") if isinstance(payload.get("key"), str) else None
    event: dict[str, Any] = {
        "layer": layer,
        "outcome": outcome,
        "key": key,
        "components": [str(line) for line in components] if isinstance(components, list) and components else None,
        "detail": payload.get("cache_status_detailed"),
        "bypass_reason": payload.get("cache_bypass_reason") if outcome == "bypass" else None,
        "note": None,
    }
    if event["components"] is None:
        gaps = cache_lookup_gaps()
        if outcome == "bypass":
            event["note"] = gaps["bypass"]
        elif layer == "fxgraph" and "fx_from_aot_hit" in gaps:
            event["note"] = gaps["fx_from_aot_hit"]
        else:
            event["note"] = gaps["no_components"]
    return event


class _AotLoggerLevel:
    """AOTAutograd's cache logger at DEBUG while any capture is active, without printing anything more.

    From 2.12 AOTAutograd computes its key's components only when that logger is
    enabled for DEBUG (``_get_debug_lines_for_cache_key``); 2.6-2.11 always compute
    them.  Lowered alone, the logger would hand its DEBUG records to torch's stderr
    handler on a parent: a logger-level filter drops every record below the level the
    logger would have without us (its own level as it was, else its parent's
    effective level).  It has no artifact child loggers in 2.6-2.14 that could
    start printing.  Shared by nested captures (a count); the last one out puts the
    level back and removes the filter.  A later ``torch._logging.set_logs()`` (or
    torch's import) resets the level: ``keep()`` lowers it again, and the level
    torch set becomes the one put back.
    """

    def __init__(self) -> None:
        self.users = 0
        self.own_level = logging.NOTSET
        self.logger: logging.Logger | None = None
        self.filter = self._filter

    def _threshold(self) -> int:
        logger = self.logger
        if self.own_level != logging.NOTSET or logger is None or logger.parent is None:
            return self.own_level
        return logger.parent.getEffectiveLevel()

    def _filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self._threshold()

    def acquire(self) -> None:
        self.users += 1
        if self.users == 1:
            self.logger = logging.getLogger(_AOT_CACHE_LOGGER)
            self.own_level = self.logger.level
            self.logger.addFilter(self.filter)
            self.logger.setLevel(logging.DEBUG)

    def keep(self) -> None:
        logger = self.logger
        if logger is not None and logger.level != logging.DEBUG:
            self.own_level = logger.level
            logger.setLevel(logging.DEBUG)

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.logger is not None:
            self.logger.removeFilter(self.filter)
            if self.logger.level == logging.DEBUG:
                self.logger.setLevel(self.own_level)
            self.logger = None


_AOT_LEVEL = _AotLoggerLevel()


@contextlib.contextmanager
def capturing_cache_lookups(callback: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Call ``callback(event)`` for every FX-graph and AOTAutograd cache lookup made in the block.

    ``event`` is plain data::

        {"layer": "fxgraph" | "aot_autograd", "outcome": "hit" | "miss" | "bypass",
         "key": "f..." | "a..." | None,             # None on a bypass
         "components": ["[<51-char hash>] name: value", ...] | None,
         "detail": "hit" | "full_miss" | "guard_miss" | None,   # 2.8+
         "bypass_reason": str | None, "note": str | None,       # note: why components is None
         "functorch_config": {entry: repr}}                     # AOTAutograd lookups only

    A private handler goes on torch's structured-trace logger ``torch.__trace`` (never
    touching the other handlers; pytest's are taken off that logger by the plugin,
    this one is not pytest's), and AOTAutograd's cache logger goes to DEBUG behind a
    filter that prints nothing more (``_AotLoggerLevel``).  Everything is put back on
    exit; captures nest (each gets every event).  Cost: while any handler is on that
    logger, torch builds every structured-trace payload of a compile (graphs, guards,
    about 0.2 s of a 30 s cold compile in 2.13), so capture only around what compiles.

    torch's own ``LazyTraceHandler`` (on that logger from torch's import unless
    ``TORCH_TRACE`` is set) takes itself off at the first record it sees, and for
    that one record ``logging`` skips the handler after it (the list changes while it
    is walked): that record is the start of a compile, never a cache lookup.

    Gaps per version (``cache_lookup_gaps()``): 2.6-2.7 give no components for the
    FX lookups of an AOTAutograd hit and no record for an FX miss there; 2.6 keeps
    AOTAutograd's cache off by default; a bypass has no key and no components in
    every version; ``cache_status_detailed`` (``guard_miss``) exists from 2.8.
    """
    logger = logging.getLogger(_TRACE_LOGGER)
    handler = _LookupHandler(callback, _AOT_LEVEL)
    _AOT_LEVEL.acquire()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        _AOT_LEVEL.release()
