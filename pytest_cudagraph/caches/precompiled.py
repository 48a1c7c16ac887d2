"""``torch.compiler.precompile`` artifacts, loaded in a fresh interpreter and checked like a cache (torch 2.14+).

``CacheProbe.precompiled(fn, *args)`` precompiles ``fn`` here
(``python_code, cache = torch.compiler.precompile(fn, *args)``), then in a fresh
interpreter on an empty cache loads them (``torch.compiler.precompile.load(python_code,
cache)``: the real loader of these artifacts; ``torch.compiler.load_compiled_function``
loads ``torch.compile(...).aot_compile()`` results instead) and calls the result
(the ``load`` pass), then calls it on changed inputs (the ``changed`` pass): the
first tensor argument one row longer (``shape``) and the first floating one in
another dtype (``dtype``).  ``.check()`` fails when:

- the load pass compiled a graph: a Dynamo frame, an FX-graph or AOTAutograd miss
  or bypass, a Triton kernel;
- its output differs from ``fn``'s eager output (within the output dtype's
  ``torch.testing.assert_close`` tolerances unless rtol/atol are given);
- a changed input gave an answer that differs from eager on that input (a
  ``PrecompileError``, or an answer equal to eager's, passes).

Kernel binaries built during the load (``.so`` files new in the cache directory)
are counted, not failed: on a CPU torch 2.14.1's cache carries no C++ kernel
binary, so ``load`` builds each kernel from ``python_code`` (measured: 1 for
``relu(x @ w) * 2 + 1`` on 4x8 and 8x8 inputs, in 51 s for the whole check on two
shared cores).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..errors import InvariantViolation, MisuseError
from ..render.plain_text import count_noun
from .child import THEN_OPTION, callable_label, child_pass_command
from .outputs import cold_warm_differences
from .pass_steps import PassSteps
from .results import PassResult, detached_copy

PRECOMPILED_CALL = "compile_cache.precompiled()"
_LOADED: dict[str, Any] = {}  # in the child: python_code's path -> the loaded function, for the second pass


def _kernel_binaries(directory: Path) -> set[str]:
    return {str(path) for path in directory.rglob("*.so")}


def load_and_call(code_path: str, cache_path: str, args: tuple) -> dict[str, Any]:
    """In the child (the ``load`` pass): load the artifacts, call them; the output and the kernel binaries built."""
    directory = Path(code_path).parent
    before = _kernel_binaries(directory)
    loaded = compat.load_precompiled(Path(code_path).read_text(), Path(cache_path).read_bytes())
    _LOADED[code_path] = loaded
    output = loaded(*args)
    return {"output": output, "kernel_binaries_built": len(_kernel_binaries(directory) - before)}


def call_changed(code_path: str, variants: dict[str, tuple]) -> dict[str, Any]:
    """In the child (the ``changed`` pass): the loaded function on each changed input, or what it raised."""
    loaded = _LOADED[code_path]
    error_class = compat.precompile_error_class()
    out: dict[str, Any] = {}
    for name, args in variants.items():
        try:
            out[name] = {"outcome": "ran", "output": loaded(*args)}
        except Exception as exc:
            refused = error_class is not None and isinstance(exc, error_class)
            outcome = "PrecompileError" if refused else type(exc).__name__
            out[name] = {"outcome": outcome, "message": str(exc).splitlines()[0][:300] if str(exc) else ""}
    return out


def changed_inputs(args: tuple) -> dict[str, tuple]:
    """``shape``: the first tensor one row longer; ``dtype``: every floating tensor in float64 (float32 where it is)."""
    import torch

    variants: dict[str, tuple] = {}
    for index, arg in enumerate(args):
        if isinstance(arg, torch.Tensor) and arg.dim() > 0 and arg.shape[0] > 0:
            longer = torch.cat([arg, arg[:1]])
            variants["shape"] = args[:index] + (longer,) + args[index + 1 :]
            break
    floating = [arg for arg in args if isinstance(arg, torch.Tensor) and arg.is_floating_point()]
    if floating:
        other = torch.float32 if floating[0].dtype == torch.float64 else torch.float64
        variants["dtype"] = tuple(arg.to(other) if any(arg is f for f in floating) else arg for arg in args)
    return variants


def eager_answers(fn: Any, variants: dict[str, tuple]) -> tuple[dict[str, Any], dict[str, str]]:
    """``fn`` eager on each changed input: the answers, and the variants eager itself refuses (why), left unchecked."""
    answers, refused = {}, {}
    for name, args in variants.items():
        try:
            answers[name] = detached_copy(fn(*args))
        except Exception as exc:
            refused[name] = f"eager raised {type(exc).__name__} ({str(exc).splitlines()[0][:200] if str(exc) else ''})"
    return answers, refused


def _tolerances(value: Any, rtol: float | None, atol: float | None) -> tuple[float | None, float | None]:
    if rtol is not None or atol is not None:
        return rtol, atol
    import torch

    leaves = [leaf for leaf in compat.tree_leaves(value) if isinstance(leaf, torch.Tensor)]
    if not leaves:
        return None, None
    return compat.default_tolerance_table().get(leaves[0].dtype, (None, None))


@dataclass(frozen=True)
class PrecompiledCheck:
    """What ``precompiled()`` saw: the precompile here, the load and changed-input passes in a fresh interpreter."""

    function: str
    precompile: PassResult
    load: PassResult
    changed: PassResult
    eager: Any
    eager_changed: dict[str, Any]
    code_bytes: int
    cache_bytes: int
    torch: str = ""
    variants: tuple[str, ...] = field(default=())
    # changed inputs eager itself refuses (a float64 input against float32 weights): not checked, and why
    unchecked: dict[str, str] = field(default_factory=dict)

    def outcome(self, name: str) -> dict[str, Any]:
        return dict((self.changed.outputs or {}).get(name) or {})

    @property
    def kernel_binaries_built(self) -> int:
        return int((self.load.outputs or {}).get("kernel_binaries_built", 0))

    def problems(self, rtol: float | None = None, atol: float | None = None) -> list[str]:
        problems = []
        stats = self.load.stats
        # a miss is a compile; "saved" is not read here: load() primes the FX-graph cache, a write it counts
        for layer in ("fxgraph", "aot_autograd"):
            for counter in ("miss", "guard_miss", "bypass"):
                if getattr(stats, layer).get(counter, 0):
                    problems.append(f"load: {layer} {counter} {getattr(stats, layer)[counter]} (a graph was compiled)")
        if stats.triton.get("compiled", 0):
            problems.append(f"load: {count_noun(stats.triton['compiled'], 'Triton kernel')} compiled")
        frames = len(self.load.compile_time.frames) if self.load.compile_time is not None else 0
        if frames:
            problems.append(f"load: Dynamo compiled {count_noun(frames, 'frame')}")
        loaded = (self.load.outputs or {}).get("output")
        rtol, atol = _tolerances(self.eager, rtol, atol)
        problems += [f"load: {line}" for line in cold_warm_differences("output", self.eager, loaded, rtol, atol)]
        for name in self.variants:
            seen = self.outcome(name)
            if seen.get("outcome") == "ran":
                wrong = cold_warm_differences("output", self.eager_changed[name], seen.get("output"), rtol, atol)
                problems += [f"changed {name}: a wrong answer: {line}" for line in wrong]
            elif seen.get("outcome") != "PrecompileError":
                problems.append(
                    f"changed {name}: raised {seen.get('outcome')} ({seen.get('message')}), not torch's PrecompileError"
                )
        return problems

    def notes(self) -> list[str]:
        notes = [f"python_code {self.code_bytes} bytes, cache {self.cache_bytes} bytes (torch {self.torch})"]
        for name in self.variants:
            seen = self.outcome(name)
            what = "refused with PrecompileError" if seen.get("outcome") == "PrecompileError" else seen.get("outcome")
            notes.append(f"changed {name}: {what}" + (f": {seen['message']}" if seen.get("message") else ""))
        notes += [f"changed {name}: not checked: {why}" for name, why in self.unchecked.items()]
        if self.kernel_binaries_built:
            notes.append(
                f"load built {count_noun(self.kernel_binaries_built, 'kernel binary', 'kernel binaries')} from "
                "python_code (the cache carries none for this device: a CPU's C++ kernels are built at load)"
            )
        return notes

    def check(self, rtol: float | None = None, atol: float | None = None) -> None:
        """Raise InvariantViolation naming each problem: a compile on load, a wrong output, a wrong answer."""
        __tracebackhide__ = True
        problems = self.problems(rtol=rtol, atol=atol)
        if problems:
            lines = [f"the precompiled artifacts of {self.function} fell short ({PRECOMPILED_CALL})"]
            lines += [f"  - {problem}" for problem in problems]
            lines += [f"  {note}" for note in self.notes()]
            raise InvariantViolation("\n".join(lines))

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "torch": self.torch,
            "code_bytes": self.code_bytes,
            "cache_bytes": self.cache_bytes,
            "kernel_binaries_built": self.kernel_binaries_built,
            "steps": {"precompile": self.precompile.to_json(), "load": self.load.to_json()},
            "changed": {name: {k: v for k, v in self.outcome(name).items() if k != "output"} for name in self.variants},
            **({"unchecked": dict(self.unchecked)} if self.unchecked else {}),
            "passed": not self.problems(),
        }


def run_precompiled(probe: PassSteps, fn: Any, args: tuple, seed: int) -> PrecompiledCheck:
    """``CacheProbe.precompiled()``: precompile here, load and call in a fresh interpreter, changed inputs after."""
    __tracebackhide__ = True
    missing = compat.precompile_missing()
    if missing:
        raise MisuseError(f"{PRECOMPILED_CALL} needs torch.compiler.precompile: {missing}")
    if not callable(fn):
        raise MisuseError(f"{PRECOMPILED_CALL} needs the function itself, not {fn!r}")
    made: dict[str, Any] = {}
    directory = probe.new_pass_directory("precompiled")

    def precompile_fn() -> None:
        made["code"], made["cache"] = compat.precompile(fn, *args)

    precompile = probe.run_pass("precompile", precompile_fn, seed, directory)
    eager = detached_copy(fn(*args))
    eager_changed, eager_refused = eager_answers(fn, changed_inputs(args))
    variants = {name: changed for name, changed in changed_inputs(args).items() if name in eager_changed}
    child_dir = probe.new_pass_directory("precompiled-load")
    code_path, cache_path = child_dir / "precompiled.py.txt", child_dir / "precompiled.cache"
    code_path.write_text(made["code"])
    cache_path.write_bytes(made["cache"])
    here = f"{__name__}:"
    cmd, out_path, env = child_pass_command(
        here + "load_and_call", (str(code_path), str(cache_path), args), seed, child_dir, PRECOMPILED_CALL
    )
    then_cmd, then_out, _ = child_pass_command(
        here + "call_changed", (str(code_path), variants), seed, child_dir, PRECOMPILED_CALL, stem="then-pass"
    )
    cmd += [THEN_OPTION, then_cmd[-1]]
    label = callable_label(fn)
    load = probe.run_child_pass(
        cmd, out_path=out_path, what=f"{label} (precompiled)", env=env, cwd=str(Path.cwd()), name="load"
    )
    changed = probe.read_child_pass(then_out, what=f"{label} (precompiled, changed inputs)", cmd=cmd, name="changed")
    return PrecompiledCheck(
        function=label,
        precompile=precompile,
        load=load,
        changed=changed,
        eager=eager,
        eager_changed=eager_changed,
        code_bytes=len(made["code"].encode()),
        cache_bytes=len(made["cache"]),
        torch=compat.torch_version(),
        variants=tuple(variants),
        unchecked=eager_refused,
    )
