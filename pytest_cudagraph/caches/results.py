"""What a probe measured: ``CacheStats`` per interval, ``PassResult`` per pass, ``ProbeResult`` for the report.

Also the figures ``CacheProbe.expect()`` checks (``EXPECT_CACHE_FIGURES``) and the
small helpers for values that cross passes and processes (tensor trees detached,
moved to the CPU, described for the report).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..compile.compile_time import CompileTime
from .lookups import CacheLookup

CACHE_LAYERS = ("fxgraph", "aot_autograd", "triton")
# the figures CacheProbe.expect() checks, in the order its failure lists them
EXPECT_CACHE_FIGURES = tuple(
    f"{layer}_{counter}" for layer in ("fxgraph", "aot_autograd") for counter in ("hit", "miss", "bypass", "saved")
) + ("triton_compiled", "triton_loaded")


def cache_figures(stats: CacheStats) -> dict[str, int]:
    """``{"fxgraph_hit": ..., "triton_compiled": ...}``: the figures of :data:`EXPECT_CACHE_FIGURES` in ``stats``."""
    return {
        name: int(getattr(stats, layer).get(counter, 0))
        for name in EXPECT_CACHE_FIGURES
        for layer, counter in [name.rsplit("_", 1)]
    }


# ----------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheStats:
    """What each cache layer did over an interval; the report's ``caches`` section.

    ``fxgraph``: hit, miss, bypass, saved.  ``aot_autograd``: hit, miss, bypass,
    saved, guard_miss.  ``triton``: compiled, loaded, new_kernel_dirs, plus the
    bundler's file counters and the listener's counts where Triton has a listener.
    ``bypass_reasons``: ``(layer, reason)`` pairs, verbatim from torch's log records.
    ``disabled``: layer -> why, for each layer the user had turned off (by its
    environment variable or in code) while the interval ran; its zeros are not misses.
    """

    fxgraph: Mapping[str, int]
    aot_autograd: Mapping[str, int]
    triton: Mapping[str, int]
    bypass_reasons: tuple[tuple[str, str], ...] = ()
    disabled: Mapping[str, str] = field(default_factory=dict)

    def reasons(self, layer: str | None = None) -> list[str]:
        """Distinct bypass reasons, in the order first seen (of one layer, or all)."""
        seen: list[str] = []
        for where, reason in self.bypass_reasons:
            if (layer is None or where == layer) and reason not in seen:
                seen.append(reason)
        return seen

    @property
    def compiled_anything(self) -> bool:
        """Some graph reached Inductor's FX-graph cache (hit, miss or bypass)."""
        return any(self.fxgraph.get(k, 0) for k in ("hit", "miss", "bypass"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {layer: dict(getattr(self, layer)) for layer in CACHE_LAYERS}
        if self.bypass_reasons:
            out["bypass_reasons"] = {
                layer: self.reasons(layer) for layer in ("fxgraph", "aot_autograd") if self.reasons(layer)
            }
        if self.disabled:
            out["disabled"] = dict(self.disabled)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CacheStats:
        reasons = tuple(
            (layer, reason) for layer, items in (data.get("bypass_reasons") or {}).items() for reason in items
        )
        return cls(
            **{layer: dict(data.get(layer) or {}) for layer in CACHE_LAYERS},
            bypass_reasons=reasons,
            disabled=dict(data.get("disabled") or {}),
        )


@dataclass(frozen=True)
class PassResult:
    """One run of the function (or test body) under a probe.

    ``outputs`` is what the function returned (a test body: the tensors it recorded);
    ``recorded`` the tensors given to ``probe.record()`` during the pass;
    ``before``/``after`` the absolute counter values around it, for messages.
    ``lookups``: every FX-graph and AOTAutograd cache lookup of the pass, with its
    key's components (``cache_keys``); ``label`` names the pass in them (its
    ``name``, numbered from the second pass of that name in one probe: ``cold-2``).
    """

    name: str
    stats: CacheStats
    outputs: Any
    recorded: Mapping[str, Any]
    cache_dir: str
    duration_s: float
    before: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    after: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    process: str = "this interpreter"
    lookups: tuple[CacheLookup, ...] = ()
    label: str = ""
    # compile time per phase and frame in the pass (compile_time.CompileTime)
    compile_time: CompileTime | None = None
    # seconds spent starting the process's compiler before the pass, kept out of its compile time
    # (start_compiler's parts; a fresh interpreter adds interpreter_s, its start until the pass)
    startup: Mapping[str, float] = field(default_factory=dict)
    # wall clock (time.time()) when the pass began, before its start-up
    started_at: float = 0.0

    @property
    def startup_s(self) -> float:
        """The pass's start-up seconds in all (``startup``'s parts summed)."""
        return round(sum(self.startup.values()), 4)

    @property
    def pass_label(self) -> str:
        return self.label or self.name

    def to_json(self) -> dict[str, Any]:
        # the lookups go to the report's cache_keys section, once, not here
        return {
            "stats": self.stats.to_json(),
            "recorded": {name: _describe(value) for name, value in self.recorded.items()},
            "duration_s": round(self.duration_s, 4),
            "process": self.process,
            "cache_dir": self.cache_dir,
            **({"compile_time": self.compile_time.to_json()} if self.compile_time is not None else {}),
            **({"startup_s": self.startup_s, "startup": dict(self.startup)} if self.startup else {}),
        }


@dataclass(frozen=True)
class ProbeResult:
    """A probe's whole-life counters (the report's ``caches``) and its cold/warm passes."""

    stats: CacheStats
    passes: tuple[PassResult, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return self.stats.to_json()


# ----------------------------------------------------------------------------
# small helpers for values crossing passes and processes
# ----------------------------------------------------------------------------


def _map_tensors(value: Any, fn: Callable[[Any], Any]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map_tensors(v, fn) for v in value)
    if isinstance(value, list):
        return [_map_tensors(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


def detached_copy(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.detach().clone())


def to_cpu(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.detach().cpu())


def _describe(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    return (
        _map_tensors(value, lambda t: {"shape": list(t.shape), "dtype": str(t.dtype)})
        if isinstance(value, (list, tuple, dict))
        else repr(value)
    )


def sum_stats(a: CacheStats, b: CacheStats) -> CacheStats:
    def add(x: Mapping[str, int], y: Mapping[str, int]) -> dict[str, int]:
        return {k: x.get(k, 0) + y.get(k, 0) for k in {**x, **y}}

    return CacheStats(
        fxgraph=add(a.fxgraph, b.fxgraph),
        aot_autograd=add(a.aot_autograd, b.aot_autograd),
        triton=add(a.triton, b.triton),
        bypass_reasons=a.bypass_reasons + b.bypass_reasons,
        disabled={**a.disabled, **b.disabled},
    )


def plain_counters(value: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    return {k: dict(v) for k, v in value.items()}
