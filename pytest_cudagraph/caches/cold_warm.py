"""``CacheProbe.cold_warm()``'s passes: a cold pass against an empty directory, then a warm one in this or a fresh interpreter.

``cold_warm_target`` makes the checks that come before any directory is made (a
known mode, a disk cache layer on, ``fn`` importable where a child runs it);
``run_cold_warm`` runs the pair in the probe's new pair directory and explains the
warm pass's misses in the active logs.  The probe is a ``PassSteps``: this module
imports nothing of ``probe``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import MisuseError
from . import keys as cache_keys
from .arguments import PassArguments
from .child import child_pass_command, importable_name, resolve_importable
from .pass_steps import PassSteps
from .warm_start import ColdWarm, refuse_if_caches_disabled


def cold_warm_target(fn: Callable[..., Any] | str, mode: str) -> tuple[str | None, Callable[..., Any]]:
    """``fn``'s importable name where a fresh interpreter runs the warm pass (None in process), and the callable."""
    if mode not in ("inprocess", "subprocess"):
        raise MisuseError(f"cold_warm(mode={mode!r}) is not a known mode; use mode='inprocess' or mode='subprocess'")
    refuse_if_caches_disabled("cold_warm()")
    call = f"compile_cache.cold_warm(mode={mode!r})"
    target = importable_name(fn, call) if mode == "subprocess" else None
    call_fn = resolve_importable(fn, call) if isinstance(fn, str) else fn
    return target, call_fn


def run_cold_warm(
    probe: PassSteps,
    target: str | None,
    call_fn: Callable[..., Any],
    arguments: PassArguments,
    seed: int,
    pair_dir: Path,
    mode: str,
) -> ColdWarm:
    """The cold pass, then the warm one (in a child where ``target`` names ``fn``), both caching in ``pair_dir``."""
    call = f"compile_cache.cold_warm(mode={mode!r})"
    if target is not None:
        # the child's spec holds the arguments as they were given, before any pass ran on them
        cmd, out_path, env = child_pass_command(target, arguments.original, seed, pair_dir, call)
    cold = probe.run_pass_on_copy("cold", call_fn, arguments, seed, pair_dir)
    if target is None:
        warm = probe.run_pass_on_copy("warm", call_fn, arguments, seed, pair_dir)
    else:
        warm = probe.run_child_pass(cmd, out_path=out_path, what=f"{target}(...)", env=env, cwd=os.getcwd())
    changed = arguments.changed_problem("compile_cache.cold_warm()") if target is None else None
    pair = ColdWarm(cold=cold, warm=warm, mode=mode, cache_dir=str(pair_dir), arguments_problem=changed or "")
    cache_keys.annotate_active(pair.explanations())
    return pair
