"""False hits: does the compile cache key on each factor the compiled code depends on?

A cache key that leaves out something the compiled code depends on returns stale
code: a *false hit*.  A custom Inductor pass whose ``uuid()`` leaves out a setting
it reads is the common case: compiled with the setting at 1, then run with it at
2, the FX-graph cache hits and returns the code compiled for 1.

``CacheProbe.sweep(fn, *args, factors=None)``:

1. compiles ``fn(*args)`` cold once (the *base* cache), and runs it warm once with
   no factor (the *control*: it must hit, or no factor can be judged);
2. for each factor (``sweep_factors.Factor``, or a name and a zero-argument
   callable returning a context manager): runs ``fn`` under the factor against a
   copy of the base cache, every in-memory cache dropped (the *lookup*), and, when
   anything hit there, compiles it cold under the factor in an empty directory
   (the *reference*);
3. gives each factor a verdict:

   - ``"miss"``: the key changed with the factor (sound); the lookups that missed
     name the key components that changed;
   - ``"hit"``: same key, and outputs (what ``fn`` returned and what it gave
     ``compile_cache.record()``) equal to the reference's: the factor does not
     matter to the compiled code;
   - ``"false-hit"``: a hit whose outputs differ from the reference's: the key
     leaves the factor out; the layer that hit and the key components that stayed
     equal (the custom passes' ``uuid()``, the config entries the factor set) are named;
   - ``"bypass"``: under the factor nothing was cached (no key to judge).

A factor whose every lookup missed needs no reference: the code came from a fresh
compile under the factor.  Every pass gets a copy of the arguments as given
(``caches.arguments``).  A function that returns and records nothing leaves no
hit to judge: the sweep refuses it after the base compile, saying so.  ``SweepResult.check()`` raises InvariantViolation naming
each false hit.  The result goes to the test's record (``cache_sweeps``), drawn by
``render.sweep_text`` and the HTML page.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _compat as compat
from ..errors import InvariantViolation, MisuseError
from . import keys as cache_keys
from .arguments import PassArguments
from .child import callable_label
from .keys import KEYED_LAYERS, CacheLookup, same_graph
from .outputs import cold_warm_differences, compare_recorded
from .pass_steps import PassSteps
from .results import PassResult
from .sweep_factors import Factor, normalized_factors
from .warm_start import ColdWarm, refuse_if_caches_disabled

if TYPE_CHECKING:
    from ..records.schema import CacheSweep

VERDICTS = ("miss", "hit", "false-hit", "bypass")


@dataclass(frozen=True)
class FactorVerdict:
    """One factor's verdict and why.

    ``changed``: for a miss, the key components that changed (``"fxgraph:
    inductor_config[size_asserts]: True -> False"``).  ``layers``: the layers that
    hit the base cache.  ``stayed_equal``: for a false hit, the components that could
    hold the factor and stayed equal.  ``differences``: the outputs against the
    reference compile.  ``lookups``: the lookups under the factor, per layer.
    """

    name: str
    verdict: str
    lookups: tuple[CacheLookup, ...]
    changed: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    stayed_equal: tuple[str, ...] = ()
    differences: tuple[str, ...] = ()
    reference: bool = False
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "verdict": self.verdict, "reference": self.reference}
        for field in ("changed", "layers", "stayed_equal", "differences"):
            if getattr(self, field):
                out[field] = list(getattr(self, field))
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class SweepResult:
    """Every factor's verdict (``.verdicts``: name -> verdict) and the passes behind them."""

    function: str
    base: PassResult
    factors: tuple[FactorVerdict, ...]
    duration_s: float = 0.0

    @property
    def verdicts(self) -> dict[str, str]:
        return {factor.name: factor.verdict for factor in self.factors}

    @property
    def false_hits(self) -> tuple[FactorVerdict, ...]:
        return tuple(factor for factor in self.factors if factor.verdict == "false-hit")

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "factors": [factor.to_json() for factor in self.factors],
            "duration_s": round(self.duration_s, 4),
        }

    def typed(self) -> CacheSweep:
        """The result as the report's type (``records.schema.CacheSweep``), for the renderers."""
        import msgspec

        from ..records.schema import CacheSweep

        return msgspec.convert(self.to_json(), CacheSweep)

    def text(self) -> str:
        from ..render.sweep_text import sweep_lines

        return "\n".join(sweep_lines(self.typed()))

    def check(self) -> None:
        """Raise InvariantViolation naming each false hit, its layer, the components that stayed equal, and the fix."""
        __tracebackhide__ = True
        if self.false_hits:
            from ..render.sweep_text import sweep_failure_text

            raise InvariantViolation(sweep_failure_text(self.typed()))


# ----------------------------------------------------------------------------
# the verdict
# ----------------------------------------------------------------------------


def judge(
    name: str,
    base_lookups: Sequence[CacheLookup],
    lookups: Sequence[CacheLookup],
    differences: Sequence[str] | None,
    factor_components: Sequence[str] = (),
) -> FactorVerdict:
    """A factor's verdict from its lookups against the base compile's and its outputs against the reference.

    ``differences``: the outputs' differences from the reference compile (None: no
    reference ran, allowed only when nothing hit).  ``factor_components``: the key
    components the factor should move (the config entries it set, as the key names
    them; ``example_inputs[i]`` for changed arguments).
    """
    keyed = [lookup for lookup in lookups if lookup.layer in KEYED_LAYERS]
    hits = [lookup for lookup in keyed if lookup.outcome == "hit"]
    misses = [lookup for lookup in keyed if lookup.outcome == "miss"]
    changed = tuple(_changed_lines(base_lookups, misses))
    if not hits:
        if misses:
            return FactorVerdict(name, "miss", tuple(lookups), changed=changed)
        reasons = sorted({lookup.bypass_reason for lookup in keyed if lookup.bypass_reason})
        note = "nothing was cached under the factor" + (f": {'; '.join(reasons)}" if reasons else "")
        return FactorVerdict(name, "bypass", tuple(lookups), note=note)
    if differences is None:
        raise ValueError("judge(): a factor with a hit needs the reference compile's differences")
    layers = tuple(layer for layer in KEYED_LAYERS if any(lookup.layer == layer for lookup in hits))
    if differences:
        equal = tuple(_stayed_equal(hits, base_lookups, factor_components))
        return FactorVerdict(
            name,
            "false-hit",
            tuple(lookups),
            changed=changed,
            layers=layers,
            stayed_equal=equal,
            differences=tuple(differences),
            reference=True,
        )
    return FactorVerdict(
        name, "miss" if misses else "hit", tuple(lookups), changed=changed, layers=layers, reference=True
    )


def _changed_lines(base_lookups: Sequence[CacheLookup], misses: Sequence[CacheLookup]) -> list[str]:
    lines: list[str] = []
    for lookup in sorted(misses, key=lambda one: KEYED_LAYERS.index(one.layer)):
        explanation = cache_keys.explain_miss(lookup, base_lookups, "the base compile")
        for line in explanation.explained if explanation is not None else ():
            entry = f"{lookup.layer}: {line}"
            if entry not in lines:
                lines.append(entry)
    return lines


def _is_custom_pass(name: str, value: str | None) -> bool:
    """A component holding a custom Inductor pass's uuid (``post_grad_custom_post_pass``): named so, and set."""
    if "custom" not in name or "pass" not in name:
        return False
    return value is not None and value.strip("()[]{}, ").replace("None", "").strip(", ") != ""


def _stayed_equal(
    hits: Sequence[CacheLookup], base_lookups: Sequence[CacheLookup], factor_components: Sequence[str]
) -> list[str]:
    """``"fxgraph: post_grad_custom_post_pass = 'constant'"``: the components of a false hit that could hold the factor."""
    out: list[str] = []
    for lookup in sorted(hits, key=lambda one: KEYED_LAYERS.index(one.layer)):
        components = lookup.components
        if components is None:
            matched = same_graph(base_lookups, lookup)
            components = matched.components if matched is not None else None
        if components is None:
            out.append(f"{lookup.layer}: torch gave no components for this lookup (the key was the base compile's)")
            continue
        for name in factor_components:
            if name in components:
                out.append(f"{lookup.layer}: {name} = {_shown(components[name])}")
            elif name.startswith(("inductor_config[", "autograd_config[")):
                out.append(f"{lookup.layer}: {name} is not in the key")
        for name, pair in components.items():
            if _is_custom_pass(name, pair[1]) and name not in factor_components:
                out.append(f"{lookup.layer}: {name} = {_shown(pair)}")
        if not any(line.startswith(f"{lookup.layer}:") for line in out):
            out.append(f"{lookup.layer}: every component (the key was the base compile's)")
    return list(dict.fromkeys(out))


def _shown(pair: tuple[str, str | None]) -> str:
    return repr(pair[1]) if pair[1] is not None else f"[{pair[0][:12]}]"


def output_differences(reference: PassResult, cached: PassResult, rtol: float | None, atol: float | None) -> list[str]:
    """What the pass from the cache returned and recorded against the reference compile's, in a sweep's words.

    A function may hand its results back through ``compile_cache.record()``
    instead of returning them: a recorded value that differs is a false hit as much
    as a returned one.
    """
    words = {
        "recorded on the cold pass only": "recorded by the reference compile only",
        "recorded on the warm pass only": "recorded by the pass from the cache only",
        "on the cold pass": "in the reference compile",
        "on the warm pass": "from the cache",
        "(cold ": "(reference ",
        ", warm ": ", from the cache ",
    }
    lines = cold_warm_differences("returned", reference.outputs, cached.outputs, rtol=rtol, atol=atol)
    lines += compare_recorded(reference.recorded, cached.recorded, rtol=rtol, atol=atol)
    for old, new in words.items():
        lines = [line.replace(old, new) for line in lines]
    return lines


def holds_nothing(value: Any) -> bool:
    """Whether a returned value carries nothing to compare: None, or containers holding only that."""
    if isinstance(value, (tuple, list)):
        return all(holds_nothing(item) for item in value)
    if isinstance(value, dict):
        return all(holds_nothing(item) for item in value.values())
    return value is None


def _refuse_unless_something_to_compare(fn: Any, base: PassResult) -> None:
    """A hit is told from a false hit by its outputs: a function that returns and records nothing cannot be judged."""
    if holds_nothing(base.outputs) and not base.recorded:
        raise MisuseError(
            f"compile_cache.sweep({callable_label(fn)}): the function returned nothing and recorded nothing, so a "
            f"cache hit cannot be told from a false hit; return its outputs, or record them with "
            f"compile_cache.record(name, value)"
        )


# ----------------------------------------------------------------------------
# running it
# ----------------------------------------------------------------------------


def run_sweep(
    probe: PassSteps,
    fn: Callable[..., Any],
    args: tuple,
    factors: Any = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int,
) -> SweepResult:
    """``CacheProbe.sweep()``: the base compile, the control, each factor's lookup and reference; the verdicts."""
    __tracebackhide__ = True
    refuse_if_caches_disabled("sweep()")
    chosen = normalized_factors(factors, args)
    started = time.perf_counter()
    # every pass starts from the arguments as given: a body that calls backward() or advances a state
    # in place would otherwise hand the next pass other inputs, and its outputs would differ
    arguments = PassArguments(args)
    base_dir = probe.new_pass_directory("sweep")
    base = probe.run_pass_on_copy("base", fn, arguments, seed, base_dir)
    _refuse_unless_something_to_compare(fn, base)
    control = probe.run_pass_on_copy("control", fn, arguments, seed, base_dir)
    _refuse_unless_control_hits(fn, base, control, rtol, atol, arguments)
    verdicts = []
    for factor in chosen:
        verdicts.append(_one_factor(probe, fn, arguments, factor, base, rtol=rtol, atol=atol, seed=seed))
    return SweepResult(callable_label(fn), base, tuple(verdicts), duration_s=time.perf_counter() - started)


def _refuse_unless_control_hits(
    fn: Any, base: PassResult, control: PassResult, rtol: Any, atol: Any, arguments: PassArguments
) -> None:
    __tracebackhide__ = True
    changed = arguments.changed_problem("compile_cache.sweep()") or ""
    pair = ColdWarm(cold=base, warm=control, mode="inprocess", cache_dir=base.cache_dir, arguments_problem=changed)
    problems = pair.problems(rtol, atol)
    if problems:
        raise InvariantViolation(
            f"compile_cache.sweep({callable_label(fn)}): the warm pass with no factor was not a pure cache hit, so no "
            f"factor can be judged; fix that first (cold_warm(...).check() explains it): " + "; ".join(problems)
        )


def _one_factor(
    probe: PassSteps,
    fn: Callable[..., Any],
    arguments: PassArguments,
    factor: Factor,
    base: PassResult,
    *,
    rtol: float | None,
    atol: float | None,
    seed: int,
) -> FactorVerdict:
    """Look the factor up against a copy of the base cache; compile it cold for reference when anything hit."""
    lookup_dir = probe.new_pass_directory("sweep-factor")
    # a copy, so that what one factor's misses save is never another factor's hit
    shutil.copytree(base.cache_dir, lookup_dir, dirs_exist_ok=True)
    before = compat.compile_config_values()
    with factor.entered():
        inside = compat.compile_config_values()
        cached = _factor_pass(probe, f"factor[{factor.name}]", fn, arguments, factor, seed, lookup_dir)
    components = compat.config_changes_as_key_components(before, inside)
    if factor.transform is not None:
        components += _changed_inputs(cached.lookups)
    hit = any(lookup.outcome == "hit" for lookup in cached.lookups if lookup.layer in KEYED_LAYERS)
    differences = None
    if hit:
        reference_dir = probe.new_pass_directory("sweep-reference")
        with factor.entered():
            reference = _factor_pass(probe, f"reference[{factor.name}]", fn, arguments, factor, seed, reference_dir)
        differences = output_differences(reference, cached, rtol, atol)
    verdict = judge(factor.name, base.lookups, cached.lookups, differences, components)
    cache_keys.annotate_active(cache_keys.explain_misses(base.lookups, cached.lookups, "the base compile"))
    return verdict


def _factor_pass(
    probe: PassSteps,
    name: str,
    fn: Callable[..., Any],
    arguments: PassArguments,
    factor: Factor,
    seed: int,
    directory: Any,
) -> PassResult:
    """One pass under the factor, on the factor's arguments made from a fresh copy of the originals."""
    factor_args = factor.arguments(arguments.fresh())
    return probe.run_pass(name, lambda: fn(*factor_args), seed, directory)


def _changed_inputs(lookups: Sequence[CacheLookup]) -> list[str]:
    """The ``example_inputs[i]`` components of the factor's lookups (the inputs it changed)."""
    names: list[str] = []
    for lookup in lookups:
        names += [name for name in lookup.components or () if name.startswith("example_inputs[")]
    return list(dict.fromkeys(names))


__all__ = ["VERDICTS", "Factor", "FactorVerdict", "SweepResult", "SweepsSection", "judge", "run_sweep"]


@dataclass(frozen=True)
class SweepsSection:
    """A test's sweeps as its record's ``cache_sweeps`` section (a list, ``records.schema.CacheSweep`` each)."""

    sweeps: tuple[SweepResult, ...]

    def to_json(self) -> list[dict[str, Any]]:
        return [sweep.to_json() for sweep in self.sweeps]
