"""What a probe reads around a pass, and the conditions a pass runs under.

Readings: torch's cache counters, FX-graph cache entries written, Triton kernel
directories on disk and its compilation listener, and the bypass reasons torch
logs, gathered by a ``CacheMeter`` whose hooks a probe installs for its life.
Conditions: the seeded RNGs every pass starts from and the cache environment
variables that point Inductor and Triton into a directory.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _compat as compat
from .cache_root import INDUCTOR_ENV, TRITON_ENV
from .counters import CounterSnapshot, counter_snapshot, delta_between, triton_compiled_and_loaded, triton_kernel_dirs
from .results import CacheStats

# Every pass of a cold/warm pair starts from these seeds (Python, torch, CUDA).
DEFAULT_SEED = 1234


# ----------------------------------------------------------------------------
# readings: counters, disk, logs, Triton listener
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """Everything a probe counts, at one moment; two readings give a ``CacheStats`` (``CacheMeter.stats_between``)."""

    counters: CounterSnapshot
    # FX-graph cache entries written since the probe started (compat.counting_fx_graph_cache_writes)
    fx_written: int
    kernel_dirs: frozenset[str]
    listener_compiled: int
    listener_loaded: int
    reasons_seen: int
    # layer -> why, for the layers the user had turned off at this moment
    off_by_user: tuple[tuple[str, str], ...] = ()


class _BypassLog(logging.Filter):
    """Collects torch's bypass reasons from its INFO records without printing more than before.

    The loggers are lowered to INFO only while the probe runs (again after a
    ``torch._logging.set_logs()`` in the body, which puts their levels back), and this
    filter passes on only the records the user's own logging level would have let through.
    """

    def __init__(self, layer: str, prefix: str, sink: list[tuple[str, str]]):
        super().__init__()
        self.layer, self.prefix, self.sink = layer, prefix, sink
        self.threshold: Any = lambda: logging.WARNING

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.prefix):
            reason = str(record.args[0]) if isinstance(record.args, tuple) and record.args else record.getMessage()
            self.sink.append((self.layer, reason))
        return record.levelno >= self.threshold()


@contextlib.contextmanager
def _capture_bypass_reasons(sink: list[tuple[str, str]]) -> Iterator[None]:
    taps: list[Any] = []
    sight = None
    try:
        for name, (layer, prefix) in compat.cache_bypass_loggers().items():
            catcher = _BypassLog(layer, prefix, sink)
            tap = compat.LoggerTap(logging.getLogger(name), None, logging.INFO, log_filter=catcher)
            catcher.threshold = tap.untapped_level
            taps.append(tap)
            tap.apply()

        def apply_again(frame: Any) -> None:
            for tap in taps:
                tap.apply()

        sight = compat.on_set_logs(after=apply_again)
        yield
    finally:
        if sight is not None:
            sight.close()
        for tap in reversed(taps):
            tap.restore()


@contextlib.contextmanager
def _count_triton_compiles(counts: dict[str, int]) -> Iterator[Any]:
    """Chain a counter into ``triton.knobs.compilation.listener``; yields whether it still listens, or None.

    A listener the body sets over it stays the body's: the counter then says it no longer
    listens (the probe falls back to counting kernel directories), and is not put back over it.
    """
    knobs = compat.triton_compilation_knobs()
    if knobs is None:
        yield None
        return
    previous = knobs.listener

    def listener(*args: Any, **kwargs: Any) -> Any:
        counts["loaded" if kwargs.get("cache_hit") else "compiled"] += 1
        if previous is not None:
            return previous(*args, **kwargs)
        return None

    knobs.listener = listener
    try:
        yield lambda: knobs.listener is listener
    finally:
        if knobs.listener is listener:
            knobs.listener = previous


@contextlib.contextmanager
def seeded_rngs(seed: int = DEFAULT_SEED) -> Iterator[None]:
    """Seed Python's, torch's (CPU and every CUDA device) and NumPy's RNGs; restore them after."""
    import torch

    py_state = random.getstate()
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    numpy = sys.modules.get("numpy")
    np_state = numpy.random.get_state() if numpy is not None else None
    try:
        random.seed(seed)
        torch.manual_seed(seed)  # also seeds every CUDA device, lazily if CUDA is not initialised
        if numpy is not None:
            numpy.random.seed(seed % 2**32)
        yield
    finally:
        random.setstate(py_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        if numpy is not None and np_state is not None:
            numpy.random.set_state(np_state)


def cache_environment(directory: Path) -> dict[str, str]:
    """Point Inductor (and so AOTAutograd) and Triton into ``directory``."""
    return {INDUCTOR_ENV: str(directory), TRITON_ENV: str(Path(directory) / "triton")}


class CacheMeter:
    """What a probe counts while it is active: the hooks that feed its counts, and readings of them.

    ``dirs``: every cache directory the probe's passes used (their Triton kernel
    directories are counted); ``reasons``: the bypass reasons logged so far, in order.
    """

    def __init__(self) -> None:
        self.dirs: list[Path] = []
        self.reasons: list[tuple[str, str]] = []
        self.listener_counts = {"compiled": 0, "loaded": 0}
        self.write_counts: dict[str, int] = {}
        self._listening: Any = None

    def install(self, stack: contextlib.ExitStack) -> None:
        """Count FX-graph cache writes, collect bypass reasons and Triton's compiles until ``stack`` closes."""
        stack.enter_context(compat.counting_fx_graph_cache_writes(self.write_counts))
        stack.enter_context(_capture_bypass_reasons(self.reasons))
        self._listening = stack.enter_context(_count_triton_compiles(self.listener_counts))

    @property
    def has_listener(self) -> bool:
        """Whether Triton's listener counted every compile so far (none replaced it)."""
        return self._listening is not None and bool(self._listening())

    def read(self) -> Reading:
        return Reading(
            counters=counter_snapshot(),
            fx_written=self.write_counts.get("fxgraph_written", 0),
            kernel_dirs=triton_kernel_dirs(d / "triton" for d in self.dirs),
            listener_compiled=self.listener_counts["compiled"],
            listener_loaded=self.listener_counts["loaded"],
            reasons_seen=len(self.reasons),
            off_by_user=tuple(compat.cache_layers_off_by_user().items()),
        )

    def stats_between(self, before: Reading, after: Reading) -> CacheStats:
        delta = delta_between(before.counters, after.counters)
        fxgraph = dict(delta.fxgraph)
        fxgraph["saved"] = after.fx_written - before.fx_written
        aot = dict(delta.aot_autograd)
        new_dirs = len(after.kernel_dirs - before.kernel_dirs)
        bundler = {k: v for k, v in delta.triton.items() if k not in ("compiled", "loaded", "new_kernel_dirs")}
        compiled, loaded = triton_compiled_and_loaded(new_dirs, bundler)
        triton = {"compiled": compiled, "loaded": loaded, "new_kernel_dirs": new_dirs}
        if self.has_listener:
            listener_compiled = after.listener_compiled - before.listener_compiled
            listener_loaded = after.listener_loaded - before.listener_loaded
            triton["compiled"] = max(compiled, listener_compiled)
            triton["loaded"] = loaded + listener_loaded
            triton["listener_compiled"] = listener_compiled
            triton["listener_loaded"] = listener_loaded
        triton.update(bundler)
        reasons = tuple(self.reasons[before.reasons_seen : after.reasons_seen])
        disabled = dict(before.off_by_user)
        disabled.update(after.off_by_user)
        return CacheStats(fxgraph=fxgraph, aot_autograd=aot, triton=triton, bypass_reasons=reasons, disabled=disabled)

    def stats_since(self, before: Reading) -> CacheStats:
        return self.stats_between(before, self.read())


def absolute_counters(reading: Reading) -> dict[str, dict[str, int]]:
    """Absolute values of torch's counters (and on-disk entry counts) at one moment."""
    from .counters import COUNTER_MAP

    out: dict[str, dict[str, int]] = {}
    for layer, keys in COUNTER_MAP.items():
        out[layer] = {key: int(reading.counters.values.get(src, 0)) for key, src in keys.items()}
    out["fxgraph"]["saved"] = reading.fx_written
    out["triton"]["new_kernel_dirs"] = len(reading.kernel_dirs)
    return out
