"""The warm pass in a fresh interpreter: importable callables, the spec it runs, the result it hands back.

``cold_warm(mode="subprocess")`` saves a spec (the callable's importable name, its
arguments, the seed, the cache directory and the config that goes into the cache
keys) and runs ``python -m pytest_cudagraph.caches SPEC`` (``__main__``), which
runs one warm pass in that directory and writes it with ``write_pass_output``; the
parent reads it back (``child_pass``).  The compile_cache marker's child pytest
writes its pass the same way.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..compile.compile_time import compile_time_from_json
from ..envvars import CHILD_PASS_ENV
from ..errors import InvariantViolation, MisuseError
from . import keys as cache_keys
from .readings import cache_environment
from .results import CacheStats, PassResult, plain_counters, to_cpu

# the child's options: a second pass after the first (its spec), and where to save the Mega-Cache after both
THEN_OPTION = "--then"
SAVE_ARTIFACTS_OPTION = "--save-artifacts"

# ----------------------------------------------------------------------------
# importable callables and the child interpreter
# ----------------------------------------------------------------------------


def callable_label(fn: Any) -> str:
    return fn if isinstance(fn, str) else getattr(fn, "__qualname__", repr(fn))


def resolve_importable(name: str, call: str = "compile_cache.cold_warm()") -> Any:
    """The object named ``"package.module:qualname"`` (or ``"package.module.qualname"``).

    ``call``: the call that was given the name, as its refusal names it
    (``"compile_cache.relocate()"``).
    """
    module_name, _, qualname = name.partition(":")
    if not qualname:
        module_name, _, qualname = name.rpartition(".")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise MisuseError(
            f"{call}: {name!r} cannot be imported ({type(exc).__name__}: {exc}); "
            f"give 'package.module:function' of a module-level function"
        ) from None
    return obj


def importable_name(fn: Any, call: str = "compile_cache.cold_warm(mode='subprocess')") -> str:
    """``"module:qualname"`` for a function a fresh interpreter can import and call.

    ``call``: the call that needs it, as its refusal names it (``"compile_cache.relocate()"``).
    """
    if isinstance(fn, str):
        resolve_importable(fn, call)
        return fn if ":" in fn else ":".join(fn.rsplit(".", 1))
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        raise MisuseError(
            f"{call}: {callable_label(fn)} (module {module}) cannot be imported by a fresh "
            f"interpreter; define it at module level of an importable module, or pass 'package.module:function'"
        )
    name = f"{module}:{qualname}"
    if resolve_importable(name, call) is not fn:
        raise MisuseError(
            f"{call}: {name} imports as another object than the function given (rebound or "
            f"wrapped under the same name); pass the module-level name of the function to run"
        )
    return name


def child_environment(directory: Path) -> dict[str, str]:
    """This process's environment for a child interpreter running a pass in the cache ``directory``."""
    env = dict(os.environ)
    env.update(cache_environment(directory))
    # the child is a plain run, not one more xdist worker of the parent
    for name in list(env):
        if name.startswith("PYTEST_XDIST_") or name in ("PYTEST_CURRENT_TEST", CHILD_PASS_ENV):
            env.pop(name)
    return env


def child_pass_command(
    target: str,
    args: tuple,
    seed: int,
    directory: Path,
    call: str = "compile_cache.cold_warm(mode='subprocess')",
    stem: str = "warm-pass",
) -> tuple[list[str], Path, dict[str, str]]:
    """Save the spec of a warm pass of ``target(*args)`` in ``directory``: the command, its out path and env.

    The spec holds ``args`` as they are now; ``stem`` names its files (a second pass
    of the same child, ``bundle_cycle``'s, has its own).  Raises MisuseError, naming
    ``call``, when the arguments cannot be saved for the child interpreter.
    """
    import torch

    spec_path = directory / f"{stem}.spec.pt"
    out_path = directory / f"{stem}.out.pt"
    try:
        torch.save(
            {
                "target": target,
                "args": args,
                "seed": seed,
                "cache_dir": str(directory),
                "out": str(out_path),
                "config": compat.changed_compile_config(),
            },
            spec_path,
        )
    except Exception as exc:
        raise MisuseError(
            f"{call}: the arguments of {target} cannot be saved for the child interpreter "
            f"({type(exc).__name__}: {exc}); pass tensors and plain Python values"
        ) from None
    env = child_environment(directory)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cmd = [sys.executable, "-m", "pytest_cudagraph.caches", str(spec_path)]
    return cmd, out_path, env


def child_pass(
    cmd: list[str], *, out_path: Path, what: str, env: dict[str, str], cwd: str, label: str, name: str = "warm"
) -> PassResult:
    """Run ``cmd``, a fresh interpreter that writes one warm pass to ``out_path``; that pass, its lookups as ``label``.

    Raises InvariantViolation with the child's last lines when it wrote no result or an error.
    """
    __tracebackhide__ = True
    launched_at = time.time()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    return pass_from_output(
        out_path,
        what=what,
        cmd=cmd,
        label=label,
        name=name,
        launched_at=launched_at,
        exit_code=proc.returncode,
        output=proc.stdout + proc.stderr,
    )


def pass_from_output(
    out_path: Path,
    *,
    what: str,
    cmd: list[str],
    label: str,
    name: str,
    launched_at: float,
    exit_code: int | None = None,
    output: str = "",
) -> PassResult:
    """The pass a child interpreter wrote to ``out_path`` (``write_pass_output``), its lookups as ``label``.

    Raises InvariantViolation with the child's last lines when it wrote no result or an error.
    """
    __tracebackhide__ = True
    payload = _read_child_output(out_path)
    if payload is None or payload.get("error"):
        detail = (payload or {}).get("error") or _tail(output)
        raise InvariantViolation(
            f"compile_cache: the warm pass of {what} in a fresh interpreter did not finish (exit code "
            f"{exit_code}); its last lines:\n{_indent(detail)}\nrerun it alone with: {' '.join(cmd)}"
        )
    return PassResult(
        name=name,
        stats=CacheStats.from_json(payload["stats"]),
        outputs=payload.get("outputs"),
        recorded=payload.get("recorded") or {},
        cache_dir=payload["cache_dir"],
        duration_s=float(payload.get("duration_s", 0.0)),
        before=payload.get("before") or {},
        after=payload.get("after") or {},
        process=f"a fresh interpreter (pid {payload.get('pid')})",
        # the child numbered its graphs within its one pass; the label is the parent probe's
        lookups=tuple(
            replace(lookup, pass_name=label) for lookup in cache_keys.lookups_from_json(payload.get("lookups") or ())
        ),
        label=label,
        compile_time=compile_time_from_json(payload.get("compile_time")),
        startup=_child_startup(payload, launched_at),
        started_at=float(payload.get("started_at") or 0.0),
    )


def _child_startup(payload: dict[str, Any], launched_at: float) -> dict[str, float]:
    """The child's start-up parts, its interpreter's start (launch to the pass: Python, imports, pytest) first."""
    startup = {name: float(value) for name, value in (payload.get("startup") or {}).items()}
    started_at = payload.get("started_at")
    if isinstance(started_at, (int, float)) and started_at >= launched_at:
        startup = {"interpreter_s": round(started_at - launched_at, 4), **startup}
    return startup


def _read_child_output(path: Path) -> dict[str, Any] | None:
    import torch

    if not path.exists():
        return None
    # written by our own child into this probe's private (0700) directory
    return torch.load(path, weights_only=False, map_location="cpu")


def write_pass_output(path: str | Path, result: PassResult | None, error: str | None = None) -> None:
    """In a child interpreter: hand its pass (or the error that stopped it) to the parent's ``run_child_pass``.

    Counters, recorded tensors, outputs and the pass's cache lookups (whole, as
    ``cache_keys.lookups_to_json(full=True)``) go in one ``torch.save`` file.
    """
    import torch

    payload: dict[str, Any] = {"pid": os.getpid(), "error": error}
    if result is not None:
        payload.update(
            stats=result.stats.to_json(),
            cache_dir=result.cache_dir,
            duration_s=result.duration_s,
            before=plain_counters(result.before),
            after=plain_counters(result.after),
            recorded=to_cpu(dict(result.recorded)),
            lookups=cache_keys.lookups_to_json(result.lookups, full=True, with_code=True),
            compile_time=result.compile_time.to_json() if result.compile_time is not None else None,
            startup=dict(result.startup),
            started_at=result.started_at,
        )
        try:
            payload["outputs"] = to_cpu(result.outputs)
            torch.save(payload, str(path) + ".tmp")
        except Exception as exc:
            payload["outputs"] = None
            payload["error"] = (
                f"the return value ({type(result.outputs).__name__}) cannot be saved for the parent "
                f"({type(exc).__name__}: {exc}); return tensors, or tuples/lists/dicts of tensors"
            )
            torch.save(payload, str(path) + ".tmp")
    else:
        torch.save(payload, str(path) + ".tmp")
    os.replace(str(path) + ".tmp", path)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())
