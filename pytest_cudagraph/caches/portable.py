"""Portable cache artifacts: a probe's cache saved with ``torch.compiler.save_cache_artifacts()``, loaded elsewhere.

``CacheProbe.portable()`` runs a function against the probe's latest cache (the
``source`` pass), saves the mega-cache artifacts it used, loads them into an empty
directory and runs again there (the ``moved`` pass): a pair that passes
``.check()`` when the moved cache gives only hits.  Needs torch 2.7+.

``mode="inprocess"`` (the default) loads and runs the moved pass in this
interpreter, every in-memory cache dropped first; ``mode="subprocess"`` does both
in a fresh interpreter (``python -m pytest_cudagraph.caches SPEC --load-artifacts
FILE``), as a machine that received the artifacts would: nothing this process
compiled or imported can answer there.  It needs an importable function, as
``cold_warm(mode="subprocess")`` does, and costs the child's start (torch's import
and Inductor's start-up): a tiny function's moved pass took 25.6 s in a fresh
interpreter against 2.4 s in process on two shared CPU cores (torch 2.13), so
``"inprocess"`` stays the default.

The pair says how many Triton kernels the moved pass loaded and compiled
(``PortablePair.triton_note``).  A Mega-Cache that leaves the kernels out (the
moved pass compiles them again) fails ``check()`` naming the Triton layer; where
the source pass ran no Triton kernel at all (a CPU: Inductor generates C++), the
note says so, and the Triton layer is neither a pass nor a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..errors import InvariantViolation, MisuseError
from . import keys as cache_keys
from .arguments import PassArguments
from .child import callable_label, child_pass_command, importable_name, resolve_importable
from .pass_steps import PassSteps
from .results import PassResult
from .warm_start import ColdWarm, refuse_if_caches_disabled

PORTABLE_MODES = ("inprocess", "subprocess")
PORTABLE_CALL = "compile_cache.portable()"
# the child's option: load the artifacts in FILE into its cache directory before its pass
LOAD_ARTIFACTS_OPTION = "--load-artifacts"
_TRITON_ACTIVITY = ("compiled", "loaded", "new_kernel_dirs", "bundler_saved_files", "listener_compiled")


@dataclass(frozen=True)
class PortablePair(ColdWarm):
    """``(source, moved)`` of ``portable()``, with what the moved pass did with Triton kernels."""

    call_name = PORTABLE_CALL

    @property
    def triton_used(self) -> bool:
        """The source pass compiled or loaded any Triton kernel (False on a CPU, where Inductor generates C++)."""
        return any(self.cold.stats.triton.get(name, 0) for name in _TRITON_ACTIVITY)

    @property
    def triton_note(self) -> str:
        """One line: Triton kernels loaded and compiled in the moved pass, or that there were none to move."""
        if not self.triton_used:
            return (
                "triton: not used (the source pass compiled no Triton kernel: on a CPU Inductor generates C++), "
                "so the artifacts carry none; neither a pass nor a failure of the Triton layer"
            )
        moved = self.warm.stats.triton
        return f"triton: the moved pass loaded {moved.get('loaded', 0)} and compiled {moved.get('compiled', 0)} kernels"

    def problems(self, rtol: float | None = None, atol: float | None = None) -> list[str]:
        problems = super().problems(rtol=rtol, atol=atol)
        compiled = self.warm.stats.triton.get("compiled", 0)
        if self.triton_used and compiled:
            problems.insert(
                0,
                f"triton: this torch's Mega-Cache (torch.compiler.save_cache_artifacts) left the Triton kernels out: "
                f"the moved pass compiled {compiled} again",
            )
        return problems

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "triton": self.triton_note}


def refuse_unless_portable() -> None:
    """Fail before running anything where this torch cannot move a cache, or every disk cache layer is off."""
    missing = compat.portable_cache_artifacts_missing()
    if missing:
        raise MisuseError(f"compile_cache.portable() needs {missing}; use cold_warm(mode='subprocess') on this torch")
    refuse_if_caches_disabled("portable()")


def source_pass_and_artifacts(
    run_source: Callable[[], PassResult], fn: Any, call: str = PORTABLE_CALL
) -> tuple[PassResult, bytes]:
    """Run the source pass recording only its own mega-cache artifacts; the pass and the saved artifacts.

    Raises InvariantViolation when torch saved nothing (``fn`` compiled nothing with
    Inductor, or every graph bypassed the cache).
    """
    with compat.fresh_cache_artifact_recording():
        source = run_source()
        blob = compat.save_cache_artifacts()
    if blob is None:
        raise InvariantViolation(
            f"{call}: torch.compiler.save_cache_artifacts() returned nothing after running "
            f"{callable_label(fn)}; the function compiled nothing with Inductor, or every graph bypassed the cache"
        )
    return source, blob


def load_artifacts(blob: bytes) -> None:
    """Load saved artifacts into the cache directories now set, with nothing left in memory to answer instead."""
    compat.clear_in_memory_compile_caches()
    compat.load_cache_artifacts(blob)


def portable_pair(source: PassResult, moved: PassResult, moved_dir: Path, arguments_problem: str = "") -> PortablePair:
    """The pair ``(source, moved)``, the moved pass's misses explained against the source pass in the active logs."""
    pair = PortablePair(
        cold=source, warm=moved, mode="portable", cache_dir=str(moved_dir), arguments_problem=arguments_problem
    )
    cache_keys.annotate_active(
        cache_keys.explain_misses(source.lookups, moved.lookups, compared_with="the source pass")
    )
    return pair


def run_portable(
    probe: PassSteps, fn: Callable[..., Any] | str, args: tuple, seed: int, mode: str, source_dir: Path
) -> PortablePair:
    """``CacheProbe.portable()``: the source pass in ``source_dir``, its artifacts loaded into an empty directory, the moved pass."""
    __tracebackhide__ = True
    if mode not in PORTABLE_MODES:
        raise MisuseError(f"portable(mode={mode!r}) is not a known mode; use mode='inprocess' or mode='subprocess'")
    refuse_unless_portable()
    call = f"compile_cache.portable(mode={mode!r})"
    target = importable_name(fn, call) if mode == "subprocess" else None
    call_fn = fn if callable(fn) else resolve_importable(str(fn), call)
    # each pass runs on a copy of the arguments as given, so the child's spec, saved later, holds them so too
    arguments = PassArguments(args)
    source, blob = source_pass_and_artifacts(
        lambda: probe.run_pass_on_copy("source", call_fn, arguments, seed, source_dir), fn
    )
    moved_dir = probe.new_pass_directory("portable")
    if mode == "inprocess":
        with probe._use_directory(moved_dir):
            load_artifacts(blob)
        moved = probe.run_pass_on_copy("moved", call_fn, arguments, seed, moved_dir)
    else:
        artifacts = moved_dir / "artifacts.bin"
        artifacts.write_bytes(blob)
        cmd, out_path, env = child_pass_command(str(target), args, seed, moved_dir, call)
        cmd += [LOAD_ARTIFACTS_OPTION, str(artifacts)]
        moved = probe.run_child_pass(
            cmd, out_path=out_path, what=f"{target}(...)", env=env, cwd=str(Path.cwd()), name="moved"
        )
    return portable_pair(source, moved, moved_dir, arguments.changed_problem(PORTABLE_CALL) or "")
