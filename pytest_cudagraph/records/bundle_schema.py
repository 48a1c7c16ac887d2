"""The record's sections of caches that ship: ``bundle_cycle`` and ``precompiled`` (part of ``schema``).

``schema.TestRecord`` holds them: they are part of the report's one definition,
kept in a module of their own.  A bundle cycle (``caches/bundle_cycle.py``) keeps each
step's counters, each bundle's artifacts per layer as a load reads them, and what
the second bundle lost; a precompiled check (``caches/precompiled.py``) keeps its
sizes, its load pass and what each changed input gave.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from .fields import Count, Counts, Flag, Measure, Section, Text, Texts


class StepCounters(Section):
    """A pass's counters per layer (``CacheStats.to_json()``), the bypass reasons and the layers turned off."""

    fxgraph: Counts | UnsetType = UNSET
    aot_autograd: Counts | UnsetType = UNSET
    triton: Counts | UnsetType = UNSET
    bypass_reasons: dict[str, Texts] | UnsetType = UNSET
    disabled: dict[str, Text] | UnsetType = UNSET


class BundleStep(Section):
    """One pass of a bundle cycle or a precompiled check: its counters per layer, where and how long it ran."""

    stats: StepCounters | UnsetType = UNSET
    duration_s: Measure | UnsetType = UNSET
    process: Text | UnsetType = UNSET
    cache_dir: Text | UnsetType = UNSET


class BundleLayer(Section):
    """A layer of a saved bundle, as a load reads it: how many artifacts, how many bytes."""

    count: Count | UnsetType = UNSET
    bytes: Count | UnsetType = UNSET


class SavedBundle(Section):
    """One bundle of ``torch.compiler.save_cache_artifacts()``; ``dropped``: keys a load leaves out, per layer."""

    size_bytes: Count | UnsetType = UNSET
    saves: Count | UnsetType = UNSET
    layers: dict[str, BundleLayer] | UnsetType = UNSET
    dropped: dict[str, Texts] | UnsetType = UNSET


class BundleCycle(Section):
    """``compile_cache.bundle_cycle(fn, ...)``: a bundle saved cold, loaded, extended, saved again and loaded again.

    ``steps``: cold, reload, extend, second_load, second_extend; ``bundles``: first
    and second; ``lost``: per layer, the keys the first bundle held and the second
    lacks; ``lost_though_hit``: those a lookup hit before the second save.
    """

    function: Text | UnsetType = UNSET
    extend: Text | UnsetType = UNSET
    torch: Text | UnsetType = UNSET
    strict: Flag | UnsetType = UNSET
    steps: dict[str, BundleStep] | UnsetType = UNSET
    bundles: dict[str, SavedBundle] | UnsetType = UNSET
    lost: dict[str, Texts] | UnsetType = UNSET
    lost_though_hit: dict[str, Texts] | UnsetType = UNSET
    passed: Flag | UnsetType = UNSET
    problems: Texts | UnsetType = UNSET
    note: Text | UnsetType = UNSET


class PrecompiledChange(Section):
    """A changed input given to precompiled artifacts: ``outcome`` "PrecompileError", "ran" or the error raised."""

    outcome: Text | UnsetType = UNSET
    message: Text | UnsetType = UNSET


class Precompiled(Section):
    """``compile_cache.precompiled(fn, ...)``: ``torch.compiler.precompile`` artifacts loaded in a fresh interpreter."""

    function: Text | UnsetType = UNSET
    torch: Text | UnsetType = UNSET
    code_bytes: Count | UnsetType = UNSET
    cache_bytes: Count | UnsetType = UNSET
    kernel_binaries_built: Count | UnsetType = UNSET
    steps: dict[str, BundleStep] | UnsetType = UNSET
    changed: dict[str, PrecompiledChange] | UnsetType = UNSET
    unchecked: dict[str, Text] | UnsetType = UNSET
    passed: Flag | UnsetType = UNSET
