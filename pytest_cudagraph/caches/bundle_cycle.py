"""The life of a Mega-Cache bundle: saved cold, loaded, extended and saved again, loaded again.

``CacheProbe.bundle_cycle(fn, *args, extend=...)`` runs the cycle a service runs:

1. ``cold``: ``fn(*args)`` against an empty cache here; the bundle it recorded is
   saved (``torch.compiler.save_cache_artifacts()``): the *first* bundle;
2. in a fresh interpreter on an empty cache: the first bundle loaded, ``fn(*args)``
   run (``reload``: all hits), then ``extend`` run (``extend``: it compiles
   something more), then one save: the *second* bundle;
3. in another fresh interpreter on an empty cache: the second bundle loaded, and
   ``fn(*args)`` (``second_load``) and ``extend`` (``second_extend``) run: all hits.

``extend`` is a second importable function, called with ``args``, or a tuple of new
arguments for ``fn`` (new shapes).

Each bundle is read as ``load_cache_artifacts()`` reads it (``Bundle``): the
artifacts of each layer (FX graphs, AOTAutograd entries, the Triton kernels
bundled in the FX graphs, autotune results, PGO profiles, precompile entries), with
their sizes.  ``.check()`` fails when a load missed (the warm-start invariant of
``cold_warm``), when outputs differ from the cold run's, and when the second
bundle lacks an artifact the first held: always where the reload pass hit it (a
hit is re-recorded, so the save should hold it), and only with ``strict=True``
where nothing hit it there, which is torch's behaviour (``compat.bundle_rerecording``):
the failure or note then says how to save the whole bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..errors import InvariantViolation, MisuseError
from ..render.plain_text import format_bytes
from .arguments import PassArguments
from .child import (
    SAVE_ARTIFACTS_OPTION,
    THEN_OPTION,
    callable_label,
    child_pass_command,
    importable_name,
    resolve_importable,
)
from .pass_steps import PassSteps
from .portable import LOAD_ARTIFACTS_OPTION, refuse_unless_portable, source_pass_and_artifacts
from .results import PassResult
from .warm_start import warm_pass_problems

BUNDLE_CYCLE_CALL = "compile_cache.bundle_cycle()"
BUNDLE_CYCLE_MODES = ("subprocess",)
# a layer in words, one artifact and several
LAYER_WORDS = {
    "fxgraph": ("FX graph", "FX graphs"),
    "aot_autograd": ("AOTAutograd entry", "AOTAutograd entries"),
    "triton": ("Triton kernel", "Triton kernels"),
    "autotune": ("autotune result", "autotune results"),
    "pgo": ("PGO profile", "PGO profiles"),
    "precompile": ("precompile entry", "precompile entries"),
}
# the layers whose lookups a pass keeps (caches.keys): a lost artifact of these is known to have been hit or not
_LOOKED_UP = ("fxgraph", "aot_autograd")
UNION_ADVICE = (
    "to ship a whole bundle, run every graph the loaded bundle holds (each shape, each function) before "
    "torch.compiler.save_cache_artifacts(), so that their hits are re-recorded, and save once per process; "
    "or keep every bundle and load each one in turn (torch.compiler.load_cache_artifacts(first); "
    "...(second)) at start"
)


def layer_words(layer: str, count: int) -> str:
    one, many = LAYER_WORDS.get(layer, (f"{layer} artifact", f"{layer} artifacts"))
    return f"{count} {one if count == 1 else many}"


@dataclass(frozen=True)
class Bundle:
    """One saved bundle as a load reads it: each layer's artifacts (key -> bytes), and what the load drops.

    ``saves``: how many saves of one process wrote it (more than one section of a
    type); ``dropped``: per layer, the keys of earlier sections that a load does not
    write (only the last section of each type is kept).
    """

    name: str
    size_bytes: int
    artifacts: Mapping[str, Mapping[str, int]]
    saves: int = 1
    dropped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def read(cls, name: str, blob: bytes) -> Bundle:
        sections = compat.bundle_sections(blob)
        loaded = compat.loaded_sections(sections)
        artifacts = {
            compat.BUNDLE_LAYERS.get(kind, kind): {key: size for key, size in items} for kind, items in loaded.items()
        }
        dropped: dict[str, set[str]] = {}
        for kind, items in sections:
            layer = compat.BUNDLE_LAYERS.get(kind, kind)
            dropped.setdefault(layer, set()).update(key for key, _ in items if key not in artifacts.get(layer, {}))
        kinds = [kind for kind, _ in sections if kind != compat.TRITON_LAYER]
        saves = max((kinds.count(kind) for kind in set(kinds)), default=1)
        return cls(
            name=name,
            size_bytes=len(blob),
            artifacts=artifacts,
            saves=saves,
            dropped={layer: tuple(sorted(keys)) for layer, keys in dropped.items() if keys},
        )

    def keys(self, layer: str) -> set[str]:
        return set(self.artifacts.get(layer, {}))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "size_bytes": self.size_bytes,
            "saves": self.saves,
            "layers": {
                layer: {"count": len(items), "bytes": sum(items.values())}
                for layer, items in self.artifacts.items()
                if items or layer == compat.TRITON_LAYER
            },
        }
        if self.dropped:
            out["dropped"] = {layer: list(keys) for layer, keys in self.dropped.items()}
        return out

    def summary(self) -> str:
        held = ", ".join(
            f"{layer_words(layer, len(items))} ({format_bytes(sum(items.values()))})"
            for layer, items in self.artifacts.items()
            if items
        )
        return f"{self.name} bundle: {format_bytes(self.size_bytes)}, {held or 'nothing'}"


@dataclass(frozen=True)
class BundleCycle:
    """The passes and bundles of ``bundle_cycle()``; ``.check()`` raises InvariantViolation naming what was lost."""

    function: str
    extend: str
    cold: PassResult
    reload: PassResult
    extend_pass: PassResult
    second_load: PassResult
    second_extend: PassResult
    first: Bundle
    second: Bundle
    strict: bool = False
    torch: str = ""
    rerecording: str = ""

    @property
    def passes(self) -> tuple[tuple[str, PassResult], ...]:
        return (
            ("cold", self.cold),
            ("reload", self.reload),
            ("extend", self.extend_pass),
            ("second_load", self.second_load),
            ("second_extend", self.second_extend),
        )

    def hit_keys(self) -> set[str]:
        """The keys the reload and extend passes hit: torch re-records those in the second save."""
        return {
            lookup.key
            for one in (self.reload, self.extend_pass)
            for lookup in one.lookups
            if lookup.outcome == "hit" and lookup.key
        }

    def lost(self) -> dict[str, list[str]]:
        """Per layer, the artifacts the first bundle held and the second lacks (as a load reads each)."""
        out = {}
        for layer in self.first.artifacts:
            missing = sorted(self.first.keys(layer) - self.second.keys(layer))
            if missing:
                out[layer] = missing
        return out

    def lost_though_hit(self) -> dict[str, list[str]]:
        """The lost artifacts that a lookup in the second interpreter hit: the save should hold them."""
        hits = self.hit_keys()
        lost = self.lost()
        out = {layer: [key for key in lost.get(layer, []) if key in hits] for layer in _LOOKED_UP}
        if any(out.values()) and compat.TRITON_LAYER in lost:
            # the kernels ride in the FX graphs: lost with them
            out[compat.TRITON_LAYER] = lost[compat.TRITON_LAYER]
        return {layer: keys for layer, keys in out.items() if keys}

    def not_rerecorded(self) -> dict[str, list[str]]:
        """The lost artifacts nothing hit in the second interpreter: torch leaves those out of its save."""
        hit_lost = {key for keys in self.lost_though_hit().values() for key in keys}
        return {
            layer: [key for key in keys if key not in hit_lost]
            for layer, keys in self.lost().items()
            if any(key not in hit_lost for key in keys)
        }

    def problems(self, rtol: float | None = None, atol: float | None = None) -> list[str]:
        """Every way the cycle fell short (empty: none), each line naming its step."""
        problems = []
        steps = (
            ("reload (first bundle loaded in a fresh interpreter)", self.cold, self.reload),
            ("second load: fn", self.cold, self.second_load),
            ("second load: extend", self.extend_pass, self.second_extend),
        )
        for step, cold, warm in steps:
            problems += [f"{step}: {line}" for line in warm_pass_problems(cold, warm, rtol=rtol, atol=atol)]
        hit_lost = self.lost_though_hit()
        if hit_lost:
            problems.append(
                f"the second bundle lacks {_named(hit_lost)} that the first held and the reload pass hit"
                + self._dropped_note()
            )
        if self.strict and self.not_rerecorded():
            problems.append(
                f"the second bundle lacks {_named(self.not_rerecorded())} that the first held "
                f"(strict=True): {self.rerecording}"
            )
        return problems

    def _dropped_note(self) -> str:
        if self.second.saves <= 1:
            return ""
        return (
            f": the process saved {self.second.saves} times, so the bundle holds each layer "
            f"{self.second.saves} times and torch's load keeps only the last save's ({_named(dict(self.second.dropped))} "
            "dropped); save once per process, after the last compile"
        )

    def notes(self) -> list[str]:
        """What passed but a user shipping bundles should know: torch's own omissions, each bundle's contents."""
        notes = [self.first.summary(), self.second.summary()]
        left_out = self.not_rerecorded()
        if left_out and not self.strict:
            notes.append(
                f"the second bundle lacks {_named(left_out)} that the first held: {self.rerecording} "
                f"(not a failure; strict=True makes it one); {UNION_ADVICE}"
            )
        return notes

    def check(self, rtol: float | None = None, atol: float | None = None) -> None:
        """Raise InvariantViolation: each problem, the bundles' contents, and how to save a whole bundle."""
        __tracebackhide__ = True
        problems = self.problems(rtol=rtol, atol=atol)
        if not problems:
            return
        lines = [f"the cache bundle did not round-trip ({BUNDLE_CYCLE_CALL} of {self.function})"]
        lines += [f"  - {problem}" for problem in problems]
        lines += [f"  {note}" for note in self.notes()]
        lines.append("  " + self.counter_line())
        if self.lost():
            lines.append(f"  hint: {UNION_ADVICE}")
        raise InvariantViolation("\n".join(lines))

    def counter_line(self) -> str:
        parts = []
        for name, one in self.passes:
            fx, aot = one.stats.fxgraph, one.stats.aot_autograd
            parts.append(
                f"{name}: fxgraph {fx.get('hit', 0)} hit/{fx.get('miss', 0)} miss, "
                f"aot_autograd {aot.get('hit', 0)} hit/{aot.get('miss', 0)} miss"
            )
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "function": self.function,
            "extend": self.extend,
            "torch": self.torch,
            "strict": self.strict,
            "steps": {name: one.to_json() for name, one in self.passes},
            "bundles": {"first": self.first.to_json(), "second": self.second.to_json()},
            "lost": self.lost(),
            "lost_though_hit": self.lost_though_hit(),
        }
        problems = self.problems()
        out["passed"] = not problems
        if problems:
            out["problems"] = problems
        if self.not_rerecorded():
            out["note"] = self.rerecording
        return out


def _named(by_layer: Mapping[str, list[str] | tuple[str, ...]]) -> str:
    """``2 FX graphs (fabc123def45, f00d...), 1 AOTAutograd entry (a1b2...)``: keys cut to 12 characters."""
    parts = []
    for layer, keys in by_layer.items():
        shown = ", ".join(key[:12] for key in list(keys)[:4]) + (", ..." if len(keys) > 4 else "")
        parts.append(f"{layer_words(layer, len(keys))} ({shown})")
    return ", ".join(parts)


# ----------------------------------------------------------------------------
# running the cycle
# ----------------------------------------------------------------------------


def _extend_target(fn_target: str, args: tuple, extend: Any) -> tuple[str, tuple, str]:
    """``extend`` as (importable name, its arguments, its label): a function called with ``args``, or new args for fn."""
    if extend is None:
        raise MisuseError(
            f"{BUNDLE_CYCLE_CALL} needs extend=: a second module-level function (called with the same arguments) "
            "or a tuple of new arguments for fn (new shapes), to compile something more after the first load"
        )
    if isinstance(extend, (tuple, list)):
        return fn_target, tuple(extend), f"{fn_target.split(':')[-1]} on new arguments"
    target = importable_name(extend, BUNDLE_CYCLE_CALL)
    return target, args, callable_label(extend)


def _interpreter(
    probe: PassSteps,
    label: str,
    passes: tuple[tuple[str, tuple, str], tuple[str, tuple, str]],
    seed: int,
    bundle: Path,
    save_to: Path | None,
) -> tuple[PassResult, PassResult]:
    """One fresh interpreter on an empty cache: ``bundle`` loaded, two passes run (and the bundle saved to ``save_to``)."""
    directory = probe.new_pass_directory(label)
    (first_target, first_args, first_name), (then_target, then_args, then_name) = passes
    cmd, out_path, env = child_pass_command(first_target, first_args, seed, directory, BUNDLE_CYCLE_CALL)
    then_cmd, then_out, _ = child_pass_command(
        then_target, then_args, seed, directory, BUNDLE_CYCLE_CALL, stem="then-pass"
    )
    cmd += [LOAD_ARTIFACTS_OPTION, str(bundle), THEN_OPTION, then_cmd[-1]]
    if save_to is not None:
        cmd += [SAVE_ARTIFACTS_OPTION, str(save_to)]
    first = probe.run_child_pass(
        cmd, out_path=out_path, what=f"{first_target}(...)", env=env, cwd=str(Path.cwd()), name=first_name
    )
    then = probe.read_child_pass(then_out, what=f"{then_target}(...)", cmd=cmd, name=then_name)
    return first, then


def run_bundle_cycle(
    probe: PassSteps,
    fn: Callable[..., Any] | str,
    args: tuple,
    extend: Any,
    strict: bool,
    mode: str,
    seed: int,
) -> BundleCycle:
    """``CacheProbe.bundle_cycle()``: the cold save, two fresh interpreters, the bundles read as a load reads them."""
    __tracebackhide__ = True
    if mode not in BUNDLE_CYCLE_MODES:
        raise MisuseError(
            f"bundle_cycle(mode={mode!r}) is not a known mode; use mode='subprocess' (each load runs in a fresh "
            "interpreter, as a restarted service does)"
        )
    refuse_unless_portable()
    target = importable_name(fn, BUNDLE_CYCLE_CALL)
    # each pass runs on a copy of the arguments as given: a step that writes into them leaves the next alone
    arguments = PassArguments(args)
    extend_target, extend_args, extend_label = _extend_target(target, arguments.fresh(), extend)
    call_fn = fn if callable(fn) else resolve_importable(target, BUNDLE_CYCLE_CALL)
    cold_dir = probe.new_pass_directory("bundle-cold")
    cold, first_blob = source_pass_and_artifacts(
        lambda: probe.run_pass_on_copy("cold", call_fn, arguments, seed, cold_dir), fn, BUNDLE_CYCLE_CALL
    )
    args = arguments.fresh()
    first_path = cold_dir / "first.bundle"
    first_path.write_bytes(first_blob)
    second_path = cold_dir / "second.bundle"
    passes = ((target, args, "reload"), (extend_target, extend_args, "extend"))
    reload, extend_pass = _interpreter(probe, "bundle-reload", passes, seed, first_path, second_path)
    if not second_path.exists() or not second_path.stat().st_size:
        raise InvariantViolation(
            f"{BUNDLE_CYCLE_CALL}: torch.compiler.save_cache_artifacts() saved nothing after the first bundle was "
            f"loaded and {extend_label} ran; the second interpreter compiled and hit nothing torch records"
        )
    second_passes = ((target, args, "second_load"), (extend_target, extend_args, "second_extend"))
    second_load, second_extend = _interpreter(probe, "bundle-second", second_passes, seed, second_path, None)
    return BundleCycle(
        function=callable_label(fn),
        extend=extend_label,
        cold=cold,
        reload=reload,
        extend_pass=extend_pass,
        second_load=second_load,
        second_extend=second_extend,
        first=Bundle.read("first", first_blob),
        second=Bundle.read("second", second_path.read_bytes()),
        strict=strict,
        torch=compat.torch_version(),
        rerecording=compat.bundle_rerecording(),
    )
