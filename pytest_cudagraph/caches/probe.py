"""Compile caches across runs: Inductor's FX-graph cache, AOTAutograd's cache and Triton's kernels.

A warm start of ``torch.compile`` should load everything from disk and compile
nothing.  ``cache_probe()`` gives an isolated cache directory and reads what each
layer did while it was active:

- ``fxgraph``: hits, misses and bypasses of Inductor's FX-graph cache (torch's
  counters), entries saved (each write of an entry counted as it happens, so an
  entry deleted afterwards still counts), and the bypass reasons torch logs;
- ``aot_autograd``: hits, misses, bypasses and saves of AOTAutograd's cache;
- ``triton``: kernels compiled and loaded.  On a warm FX-cache hit Triton is not
  called at all (the kernels come bundled with the FX entry), so compiles are
  counted as new kernel directories in the Triton cache and, where Triton has it
  (3.4+), as calls of its compilation listener that missed Triton's own cache.

A layer the user turned off (``TORCHINDUCTOR_AUTOGRAD_CACHE=0``,
functorch's ``config.patch(enable_autograd_cache=False)``) stays off under a
probe and is reported in ``stats().disabled``, not as misses; only a layer this
torch leaves off by default (AOTAutograd's in 2.6) is turned on for the probe.

``.cold_warm(fn, *args)`` runs ``fn`` against an empty cache, then again with every
in-memory compile cache dropped (``mode="inprocess"``) or in a fresh interpreter
(``mode="subprocess"``), so that only the disk can answer.  ``.check()`` on the
result asserts the invariant::

    warm pass: at least one hit, no miss, no save, no bypass, no Triton compile,
    and outputs equal to the cold pass's (bitwise unless rtol/atol are given)

Each pass keeps its cache lookups (``PassResult.lookups``: key and components of
every FX-graph and AOTAutograd lookup, ``cache_keys``), also from a child
interpreter; a failure names, per warm lookup that missed, the components that
differ from the cold pass's same graph (``fxgraph miss for graph 2 of the warm
pass: inductor_config[fallback_random]: False -> True``), or says that the key was
the same (the entry was evicted or deleted) or that the shape guards failed.

Example::

    from pytest_cudagraph import cache_probe

    def step(x, w):
        y = torch.compile(model)(x, w).sum()
        y.backward()
        return y.detach(), w.grad

    with cache_probe() as probe:
        cold, warm = probe.cold_warm(step, x, w, mode="subprocess")
    assert cold.stats.fxgraph["miss"] > 0 and warm.stats.fxgraph["hit"] > 0
    probe.cold_warm(step, x, w).check()   # raises InvariantViolation with a table

Cache soundness: ``.sweep(fn, *args, factors=...)`` asks whether the key changes
with each factor the compiled code depends on (a hit whose outputs differ from a
cold compile's is a false hit: ``sweep``); ``.relocate(fn, *args)`` runs the warm
pass in a fresh interpreter after the cache, the working directory, HOME, TMPDIR and
``fn``'s module moved (``relocate``); ``.portable(fn, *args, mode="subprocess")``
loads Mega-Cache artifacts in a fresh interpreter (``portable``).

``@pytest.mark.compile_cache`` runs a whole test body that way (the plugin's
``compile_cache_marker`` module, built on ``new_pass_directory``, ``run_pass`` and
``run_child_pass``).
Nothing here changes global state for longer than the probe: the cache environment
variables, the configs it patches, logger levels and filters, Triton's listener and
the RNGs are restored on exit.

The probe's parts, by job: ``results`` (``CacheStats``, ``PassResult``,
``ProbeResult``), ``readings`` (counters, logs, Triton's listener, seeded RNGs),
``warm_start`` (``ColdWarm``, the invariant and its message), ``outputs`` (the
cold/warm comparison of outputs), ``child`` (the warm pass in a fresh interpreter),
``portable`` (portable cache artifacts).  Their public names are importable from
here too.  ``cold_warm``, ``portable``, ``relocate`` and ``sweep`` get the probe as
``PassSteps`` (``pass_steps``), the steps they run passes with, and import nothing
of this module.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..compile.compile_time import watch_compile_time
from ..compile.expect import ExpectBlock, checked_deltas
from ..envvars import CHILD_PASS_ENV, environment_set
from ..errors import MisuseError, UsageProblem
from . import keys as cache_keys
from .arguments import PassArguments
from .bundle_cycle import BundleCycle
from .cache_root import CacheRoot, ensure_private_dir
from .child import (
    child_environment,
    child_pass,
    importable_name,
    pass_from_output,
    resolve_importable,
    write_pass_output,
)
from .cold_warm import cold_warm_target, run_cold_warm
from .keys import CacheLookup, MissExplanation
from .outputs import cold_warm_differences
from .portable import PortablePair, run_portable
from .precompiled import PrecompiledCheck
from .readings import DEFAULT_SEED, CacheMeter, Reading, absolute_counters, cache_environment, seeded_rngs
from .relocate import RelocatedPair, run_relocate
from .results import (
    CACHE_LAYERS,
    EXPECT_CACHE_FIGURES,
    CacheStats,
    PassResult,
    ProbeResult,
    cache_figures,
    detached_copy,
    sum_stats,
)
from .shipped import ShippedCacheChecks
from .sweep import SweepResult, run_sweep
from .sweep_factors import Factor
from .warm_start import ColdWarm, format_failure, refuse_if_caches_disabled, warm_pass_problems

__all__ = [
    "BundleCycle",
    "CHILD_PASS_ENV",
    "DEFAULT_SEED",
    "EXPECT_CACHE_FIGURES",
    "CACHE_LAYERS",
    "CacheLookup",
    "CacheProbe",
    "CacheStats",
    "ColdWarm",
    "Factor",
    "MissExplanation",
    "PassResult",
    "PortablePair",
    "PrecompiledCheck",
    "ProbeResult",
    "RelocatedPair",
    "SweepResult",
    "cache_environment",
    "cache_figures",
    "cache_probe",
    "child_environment",
    "cold_warm_differences",
    "format_failure",
    "importable_name",
    "refuse_if_caches_disabled",
    "resolve_importable",
    "seeded_rngs",
    "warm_pass_problems",
    "write_pass_output",
]


def probe_directory(root: CacheRoot | Path | None, name: str, given: Path | None) -> tuple[Path, bool]:
    """The directory a probe uses, and whether it is a temporary one the probe deletes on exit.

    ``given``: adopted (made private); else a fresh directory under ``root`` (a
    ``CacheRoot`` or a path); else a private temporary directory.
    """
    try:
        if given is not None:
            return ensure_private_dir(given, "compile cache directory"), False
        if root is None:
            return Path(tempfile.mkdtemp(prefix="pytest-cudagraph-probe-")), True
        if not isinstance(root, CacheRoot):
            root = CacheRoot(ensure_private_dir(Path(root), "cache root"), persistent=True)
        return root.new_probe_dir(name), False
    except UsageProblem as exc:
        # the same check as at session start, but here a call inside a test gave the path
        raise MisuseError(str(exc)) from None


# ----------------------------------------------------------------------------
# the probe
# ----------------------------------------------------------------------------


class CacheProbe(ShippedCacheChecks):
    """An isolated compile-cache directory and the per-layer counters while it is active.

    Use ``cache_probe()`` (or the ``compile_cache`` fixture).  On entry it points
    TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR into its directory and drops
    Dynamo's and Inductor's in-memory caches (so that code compiled earlier cannot
    answer from memory); on exit it restores both variables, every config and logger
    it touched, and Triton's listener.
    """

    def __init__(self, root: CacheRoot | Path | None = None, name: str = "probe", directory: Path | None = None):
        self._root = root
        self._name = name
        self._given_dir = Path(directory) if directory is not None else None
        self._owns_temp = False
        self.cache_dir: Path | None = None
        self._stack: contextlib.ExitStack | None = None
        # the counts and their hooks: cache directories, bypass reasons, writes, Triton's listener
        self._meter = CacheMeter()
        self._start: Reading | None = None
        self._recorded: dict[str, Any] = {}
        self._passes: list[PassResult] = []
        # every cold_warm(), portable() and relocate() pair, and every sweep(), in order, for the report
        self._pairs: list[ColdWarm] = []
        self._sweeps: list[SweepResult] = []
        self._subdirs = 0
        self._last_pair_dir: Path | None = None
        # how many passes of each name this probe ran (their labels: cold, cold-2, ...)
        self._pass_names: dict[str, int] = {}
        self._passes_running = 0
        # the sentence record() raises outside every pass, where what it keeps is compared with nothing; None
        # keeps it (a plain probe); the compile_cache fixture of a test without the marker sets it
        self.record_outside_pass: str | None = None

    # -- life cycle ---------------------------------------------------------
    def __enter__(self) -> CacheProbe:
        self.cache_dir, self._owns_temp = probe_directory(self._root, self._name, self._given_dir)
        self._meter.dirs.append(self.cache_dir)
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(environment_set(cache_environment(self.cache_dir)))
            stack.enter_context(compat.enable_default_off_caches())
            self._meter.install(stack)
            compat.clear_in_memory_compile_caches()
            self._start = self._meter.read()
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc: Any) -> None:
        self._final = self._meter.stats_since(self._start) if self._start is not None else None
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
        if self._owns_temp and self.cache_dir is not None:
            shutil.rmtree(self.cache_dir, ignore_errors=True)

    def _require_active(self, what: str) -> None:
        if self._stack is None:
            raise MisuseError(
                f"compile_cache.{what}() was called outside its 'with cache_probe()' block; call it inside"
            )

    # -- reading ------------------------------------------------------------
    def expect(self, **deltas: int) -> ExpectBlock:
        """Check how much each named cache figure changes inside the ``with`` block.

        The figures (:data:`EXPECT_CACHE_FIGURES`) are ``<layer>_<counter>``:
        ``fxgraph_hit``, ``fxgraph_miss``, ``fxgraph_bypass``, ``fxgraph_saved``, the
        same four of ``aot_autograd``, ``triton_compiled`` and ``triton_loaded``.  Each
        keyword gives the exact change expected; figures not named are not checked.
        A failure (InvariantViolation) shows each named figure before and after the
        block, the expected and the actual change, and the bypass reasons seen.

        Example::

            with cache_probe() as probe:
                step(x)                                          # cold: misses and saves
                torch.compiler.reset()
                with probe.expect(fxgraph_hit=1, fxgraph_miss=0, fxgraph_saved=0):
                    step(x)                                      # warm: one hit, nothing saved
        """
        __tracebackhide__ = True
        return _expect_block(self, deltas)

    def stats(self) -> CacheStats:
        """Counters of every layer since the probe started (cumulative over all passes)."""
        if self._stack is None:
            final = getattr(self, "_final", None)
            if final is not None:
                return final
            self._require_active("stats")
        assert self._start is not None  # __enter__ read it before the block began
        return self._meter.stats_since(self._start)

    @property
    def pairs(self) -> tuple[ColdWarm, ...]:
        """Every ``cold_warm()`` and ``portable()`` pair this probe ran, in order."""
        return tuple(self._pairs)

    def result(self) -> ProbeResult:
        """The frozen result for the report: whole-probe stats and the passes run.

        Passes that ran in a child interpreter are added in: their counters moved
        there, not here.
        """
        stats = self.stats()
        for child in (p for p in self._passes if p.process != "this interpreter"):
            stats = sum_stats(stats, child.stats)
        return ProbeResult(stats=stats, passes=tuple(self._passes))

    # -- recording outputs --------------------------------------------------
    def record(self, name: str, value: Any) -> None:
        """Keep ``value`` (a tensor, or a tuple/dict of them) to compare cold against warm.

        Under ``@pytest.mark.compile_cache`` each pass records its own set; the warm
        set must equal the cold one (bitwise unless the marker gives rtol/atol).
        Outside every pass it raises MisuseError where ``record_outside_pass`` is set.
        """
        __tracebackhide__ = True  # a misuse: the failure points at the test's call, not in here
        if not self._passes_running and self.record_outside_pass is not None:
            raise MisuseError(self.record_outside_pass)
        if name in self._recorded:
            raise MisuseError(
                f"compile_cache.record({name!r}, ...) was called twice in one pass; give each recorded value its own name"
            )
        self._recorded[name] = detached_copy(value)

    # -- directories --------------------------------------------------------
    def new_pass_directory(self, label: str) -> Path:
        """A fresh, empty, private subdirectory of the probe's directory, for one pair of passes to share."""
        self._require_active("new_pass_directory")
        self._subdirs += 1
        assert self.cache_dir is not None  # __enter__ set it before the block began
        path = self.cache_dir / f"{label}-{self._subdirs}"
        path.mkdir(mode=0o700)
        self._meter.dirs.append(path)
        return path

    @contextlib.contextmanager
    def _use_directory(self, directory: Path) -> Iterator[None]:
        if directory not in self._meter.dirs:
            self._meter.dirs.append(directory)
        with environment_set(cache_environment(directory)):
            yield

    # -- passes -------------------------------------------------------------
    # cold_warm() and portable() are made of these steps; a runner that starts the
    # warm pass itself (the compile_cache marker) uses them directly.
    def run_pass(self, name: str, call: Callable[[], Any], seed: int, directory: Path) -> PassResult:
        """Run ``call`` once, from ``seed``, with only the disk caches of ``directory`` able to answer.

        The tensors given to ``record()`` during the call are the pass's own; the
        pass is kept among the probe's passes.
        """
        self._require_active("run_pass")
        label = self._next_label(name)
        with self._use_directory(directory):
            compat.clear_in_memory_compile_caches()
            saved_recorded, self._recorded = self._recorded, {}
            self._passes_running += 1
            try:
                started_at = time.time()
                # the process's one-time compiler start-up (imports, the CPU probe),
                # timed apart: a fresh interpreter's warm pass would otherwise carry it in its compile
                startup = compat.start_compiler()
                before = self._meter.read()
                started = time.perf_counter()
                with seeded_rngs(seed), cache_keys.pass_scope(label) as lookups:
                    with watch_compile_time(report=False) as compile_watch:
                        value = call()
                duration = time.perf_counter() - started
                after = self._meter.read()
                recorded = self._recorded
            finally:
                self._recorded = saved_recorded
                self._passes_running -= 1
        stats = self._meter.stats_between(before, after)
        if compile_watch.caches_off:  # set inside the body, undone before it ended
            stats = replace(stats, disabled={**compile_watch.caches_off, **stats.disabled})
        result = PassResult(
            name=name,
            stats=stats,
            outputs=detached_copy(value),
            recorded=recorded,
            cache_dir=str(directory),
            duration_s=duration,
            before=absolute_counters(before),
            after=absolute_counters(after),
            lookups=tuple(lookups.lookups),
            label=label,
            compile_time=compile_watch.result,
            startup=startup,
            started_at=started_at,
        )
        self._passes.append(result)
        return result

    def run_pass_on_copy(
        self, name: str, fn: Callable[..., Any], arguments: PassArguments, seed: int, directory: Path
    ) -> PassResult:
        """``run_pass`` of ``fn`` on a fresh copy of its arguments, made before the pass starts (``arguments``)."""
        args = arguments.fresh()
        return self.run_pass(name, lambda: fn(*args), seed, directory)

    def _next_label(self, name: str) -> str:
        count = self._pass_names.get(name, 0) + 1
        self._pass_names[name] = count
        return name if count == 1 else f"{name}-{count}"

    def cold_warm(
        self, fn: Callable[..., Any] | str, *args: Any, mode: str = "inprocess", seed: int = DEFAULT_SEED
    ) -> ColdWarm:
        """Run ``fn(*args)`` against an empty cache, then warm; return ``ColdWarm`` (``cold, warm``).

        ``mode="inprocess"`` drops Dynamo's and Inductor's in-memory caches between
        the passes; ``mode="subprocess"`` runs the warm pass in a fresh interpreter
        sharing the cache directory, so ``fn`` must be importable: a module-level
        function (or ``"package.module:qualname"``) and picklable ``args``.  Each pass
        starts from the same seeds and gets a copy of ``args`` as they were given
        (``caches.arguments``: a step that calls ``backward()`` or advances a state
        in place leaves the next pass's inputs alone; the child's spec holds them as
        given).  Nothing is asserted here: call ``.check()``.
        """
        self._require_active("cold_warm")
        target, call_fn = cold_warm_target(fn, mode)
        arguments = PassArguments(args)
        pair_dir = self.new_pass_directory("cold_warm")
        self._last_pair_dir = pair_dir
        pair = run_cold_warm(self, target, call_fn, arguments, seed, pair_dir, mode)
        self._pairs.append(pair)
        return pair

    def portable(
        self, fn: Callable[..., Any] | str, *args: Any, seed: int = DEFAULT_SEED, mode: str = "inprocess"
    ) -> PortablePair:
        """Move the probe's cache into an empty directory (mega-cache artifacts) and run warm there.

        Runs ``fn(*args)`` against the probe's latest cache (that of the last
        ``cold_warm()``, else the probe's own directory), saves what it used with
        ``torch.compiler.save_cache_artifacts()``, loads that into an empty directory
        and runs again: here (``mode="inprocess"``) or in a fresh interpreter
        (``mode="subprocess"``, ``fn`` importable).  The pair (``source, moved``)
        passes ``.check()`` when the moved cache gives only hits; ``.triton_note``
        says how many Triton kernels the moved pass loaded and compiled.  Needs torch 2.7+.
        """
        self._require_active("portable")
        assert self.cache_dir is not None  # __enter__ set it before the block began
        pair = run_portable(self, fn, args, seed, mode, self._last_pair_dir or self.cache_dir)
        self._pairs.append(pair)
        return pair

    def relocate(self, fn: Callable[..., Any] | str, *args: Any, seed: int = DEFAULT_SEED) -> RelocatedPair:
        """Cold here; warm in a fresh interpreter after the cache, cwd, HOME, TMPDIR and ``fn``'s module moved (``relocate``)."""
        self._require_active("relocate")
        pair = run_relocate(self, fn, args, seed)
        self._pairs.append(pair)
        return pair

    def sweep(self, fn: Callable[..., Any], *args: Any, factors: Any = None, **options: Any) -> SweepResult:
        """Whether the cache keys on each factor (``sweep``): ``.verdicts``; ``.check()`` raises on a false hit.

        ``factors``: a mapping name -> zero-argument callable returning a context manager,
        a list of ``Factor``, or None (``default_factors``); ``options``: ``rtol``, ``atol``, ``seed``.
        """
        self._require_active("sweep")
        self._sweeps.append(run_sweep(self, fn, args, factors, **{"seed": DEFAULT_SEED, **options}))
        return self._sweeps[-1]

    @property
    def sweeps(self) -> tuple[SweepResult, ...]:
        """Every ``sweep()`` this probe ran, in order."""
        return tuple(self._sweeps)

    # -- subprocess passes --------------------------------------------------
    def run_child_pass(
        self, cmd: list[str], *, out_path: Path, what: str, env: dict[str, str], cwd: str, name: str = "warm"
    ) -> PassResult:
        """Run ``cmd``, a fresh interpreter that runs one warm pass and writes it to ``out_path``; return that pass.

        The child writes with ``write_pass_output()``; ``env`` starts from
        ``child_environment()``.  Raises InvariantViolation with the child's last lines
        when it wrote no result or an error.
        """
        __tracebackhide__ = True
        label = self._next_label(name)
        result = child_pass(cmd, out_path=out_path, what=what, env=env, cwd=cwd, label=label, name=name)
        cache_keys.deliver_lookups(result.lookups)
        self._passes.append(result)
        return result

    def read_child_pass(self, out_path: Path, *, what: str, cmd: list[str], name: str) -> PassResult:
        """A further pass the last child wrote (``bundle_cycle``'s children run two), kept as ``run_child_pass``'s."""
        label = self._next_label(name)
        result = pass_from_output(out_path, what=what, cmd=cmd, label=label, name=name, launched_at=time.time())
        cache_keys.deliver_lookups(result.lookups)
        self._passes.append(result)
        return result


def _expect_block(probe: CacheProbe, deltas: dict[str, int]) -> ExpectBlock:
    """``probe.expect(**deltas)``: the block that reads the probe's cache figures before and after."""
    __tracebackhide__ = True
    checked = checked_deltas("CacheProbe.expect()", deltas, EXPECT_CACHE_FIGURES, "expect(fxgraph_hit=1)")

    def explain(reasons_before: int) -> list[str]:
        reasons = list(dict.fromkeys(reason for _, reason in probe._meter.reasons[reasons_before:]))
        return ["", "bypass reasons inside the block:", *[f"  - {r}" for r in reasons]] if reasons else []

    return ExpectBlock(
        "CacheProbe.expect()",
        checked,
        EXPECT_CACHE_FIGURES,
        read=lambda: cache_figures(probe.stats()),
        active=lambda: probe._stack is not None,
        needs="an active probe: use it inside `with cache_probe() as probe:` or with the compile_cache fixture",
        start=lambda: len(probe._meter.reasons),
        explain=explain,
        enters_as=probe,
    )


def cache_probe(root: CacheRoot | Path | None = None, name: str = "probe", directory: Path | None = None) -> CacheProbe:
    """An isolated compile-cache directory with per-layer counters, as a context manager.

    ``root`` is the run's cache root (a ``CacheRoot`` or a path): the probe takes a
    fresh private directory under it.  Without a root it uses a private temporary
    directory, deleted on exit.  ``directory`` adopts an existing directory instead
    (how a child interpreter joins its parent's cache).

    Example::

        with cache_probe() as probe:
            torch.compile(fn)(x)
            assert probe.stats().fxgraph["miss"] >= 1
    """
    return CacheProbe(root=root, name=name, directory=directory)
