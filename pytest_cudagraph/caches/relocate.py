"""Relocation: does a warm start still hit after the project, HOME, the temporary directory and the cache move?

A cache key that holds a path breaks every hit once that path moves: a CI
runner's checkout in another directory, a container with another HOME, a cache
directory restored to another place.  ``CacheProbe.relocate(fn, *args)``:

1. runs ``fn(*args)`` cold in this process, in a fresh cache directory;
2. moves (renames) that cache directory to another path, and copies ``fn``'s
   module file to another directory;
3. runs the warm pass in a fresh interpreter (``caches.child``) whose working
   directory, ``HOME`` and ``TMPDIR`` are new directories, which imports ``fn``'s
   module from the copy and uses the moved cache.

The pair (``RelocatedPair``: ``cold, warm``) passes ``.check()`` only when every
cache layer that was on hits (the warm-start invariant of ``warm_start``).  A miss
is explained by the key components that differ from the cold pass's, and a
component whose value holds one of the moved paths is named as such
(``fxgraph: post_grad_custom_post_pass holds a path: /old/work -> /new/work (the
working directory)``).  The cache is renamed, not copied, so that nothing can still
reach the old place: an entry that refers to it fails here instead of passing.

Only the function's module moves: the packages it imports come from where they
are (this process's ``sys.path``, the working directory's entry made absolute).  A
function defined in a package's ``__init__.py`` moves with that file, and the
package's submodules are imported from where they are.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MisuseError
from . import keys as cache_keys
from .arguments import PassArguments
from .child import child_pass_command, importable_name, resolve_importable
from .keys import KEYED_LAYERS, CacheLookup, same_graph
from .pass_steps import PassSteps
from .warm_start import ColdWarm, refuse_if_caches_disabled

# the child's option: import NAME from FILE before anything else
MODULE_OPTION = "--module"
# the child's option after MODULE_OPTION, for a package's __init__.py: where its submodules are
PACKAGE_OPTION = "--package-path"
RELOCATE_CALL = "compile_cache.relocate()"


@dataclass(frozen=True)
class Move:
    """One thing that moved between the passes: ``what`` (``"the working directory"``), its old and new path."""

    what: str
    old: str
    new: str


@dataclass(frozen=True)
class RelocatedPair(ColdWarm):
    """``(cold, warm)`` of ``relocate()``: the warm pass ran in a fresh interpreter after everything moved."""

    moves: tuple[Move, ...] = ()
    call_name = RELOCATE_CALL

    def problems(self, rtol: float | None = None, atol: float | None = None) -> list[str]:
        """The warm-start invariant's problems, the components that hold a moved path first."""
        return path_components(self.cold.lookups, self.warm.lookups, self.moves) + super().problems(rtol, atol)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "moved": {move.what: [move.old, move.new] for move in self.moves}}


def path_components(cold: Sequence[CacheLookup], warm: Sequence[CacheLookup], moves: Sequence[Move]) -> list[str]:
    """``"<layer>: <component> holds a path: <old> -> <new> (<what>)"`` for each differing component of a warm miss.

    A component is compared with the same graph's in the cold pass; it "holds a
    path" when its cold value contains a moved path and its warm value the new
    one.  Values torch gave only as hashes cannot be read: such a difference is
    listed among the miss's components, without this line.
    """
    lines: list[str] = []
    for lookup in sorted(warm, key=lambda one: KEYED_LAYERS.index(one.layer) if one.layer in KEYED_LAYERS else 9):
        if lookup.outcome != "miss" or lookup.components is None:
            continue
        matched = same_graph(cold, lookup)
        if matched is None or matched.components is None:
            continue
        for name, (digest, value) in lookup.components.items():
            old_pair = matched.components.get(name)
            if old_pair is None or old_pair[0] == digest or old_pair[1] is None or value is None:
                continue
            for move in moves:
                if move.old in old_pair[1] and move.new in value:
                    line = f"{lookup.layer}: {name} holds a path: {move.old} -> {move.new} ({move.what})"
                    if line not in lines:
                        lines.append(line)
                    break
    return lines


def _module_file(target: str) -> tuple[str, Path]:
    module_name = target.partition(":")[0]
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path or not str(path).endswith(".py"):
        raise MisuseError(
            f"compile_cache.relocate(): the module {module_name} of the function has no .py file to copy; "
            f"define the function in a module of its own file"
        )
    return module_name, Path(path)


def _python_path() -> str:
    """This process's import path for the child, the working directory's entry (``""``) made absolute."""
    entries = [p if p else os.getcwd() for p in sys.path]
    return os.pathsep.join(dict.fromkeys(entries))


def run_relocate(probe: PassSteps, fn: Callable[..., Any] | str, args: tuple, seed: int) -> RelocatedPair:
    """``CacheProbe.relocate()``: the cold pass here, everything moved, the warm pass in a fresh interpreter there."""
    __tracebackhide__ = True
    refuse_if_caches_disabled("relocate()")
    target = importable_name(fn, RELOCATE_CALL)
    module_name, module_file = _module_file(target)
    call_fn = fn if callable(fn) else resolve_importable(target, RELOCATE_CALL)
    cold_dir = probe.new_pass_directory("relocate")
    # the cold pass runs on a copy: the child's spec, saved after it, holds the arguments as given
    arguments = PassArguments(args)
    cold = probe.run_pass_on_copy("cold", call_fn, arguments, seed, cold_dir)
    place = probe.new_pass_directory("relocated")
    parts = {name: place / name for name in ("code", "home", "tmp", "work")}
    for path in parts.values():
        path.mkdir(mode=0o700)
    moved_cache = place / "cache"
    # renamed, not copied: an entry that still refers to the old place must fail, not load from there
    shutil.move(str(cold_dir), str(moved_cache))
    copied = parts["code"] / module_file.name
    shutil.copy2(module_file, copied)
    module_option = [MODULE_OPTION, module_name, str(copied)]
    if module_file.name == "__init__.py":
        # a package: its submodules are imported from where they are, as the packages it imports are
        module_option += [PACKAGE_OPTION, str(module_file.parent)]
    moves = (
        Move("the working directory", os.getcwd(), str(parts["work"])),
        Move("HOME", os.path.expanduser("~"), str(parts["home"])),
        Move("TMPDIR", tempfile.gettempdir(), str(parts["tmp"])),
        Move("the cache directory", str(cold_dir), str(moved_cache)),
        Move("the function's module", str(module_file.parent), str(parts["code"])),
    )
    cmd, out_path, env = child_pass_command(target, args, seed, moved_cache, RELOCATE_CALL)
    cmd += module_option
    env.update(HOME=str(parts["home"]), TMPDIR=str(parts["tmp"]), TMP=str(parts["tmp"]), TEMP=str(parts["tmp"]))
    env["PYTHONPATH"] = _python_path()
    warm = probe.run_child_pass(
        cmd, out_path=out_path, what=f"{target}(...)", env=env, cwd=str(parts["work"]), name="relocated"
    )
    pair = RelocatedPair(
        cold=cold,
        warm=warm,
        mode="relocate",
        cache_dir=str(moved_cache),
        arguments_problem=arguments.changed_problem(RELOCATE_CALL) or "",
        moves=moves,
    )
    cache_keys.annotate_active(pair.explanations())
    return pair
