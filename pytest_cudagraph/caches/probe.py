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

``@pytest.mark.compile_cache`` runs a whole test body that way (the plugin's
``compile_cache_marker`` module, built on ``new_pass_directory``, ``run_pass`` and
``run_child_pass``).
Nothing here changes global state for longer than the probe: the cache environment
variables, the configs it patches, logger levels and filters, Triton's listener and
the RNGs are restored on exit.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import _compat as compat
from ..compile.compile_time import CompileTime, compile_time_from_json, warm_cold_ratio, watch_compile_time
from ..compile.expect import ExpectBlock, checked_deltas
from ..envvars import CHILD_PASS_ENV, environment_set
from ..errors import InvariantViolation, MisuseError, UsageProblem
from ..text import count_noun, format_table
from . import keys as cache_keys
from .cache_root import INDUCTOR_ENV, TRITON_ENV, CacheRoot, ensure_private_dir
from .counters import CounterSnapshot, counter_snapshot, delta_between, triton_compiled_and_loaded, triton_kernel_dirs
from .keys import CacheLookup, MissExplanation

# Every pass of a cold/warm pair starts from these seeds (Python, torch, CUDA).
DEFAULT_SEED = 1234

LAYERS = ("fxgraph", "aot_autograd", "triton")
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
        out: dict[str, Any] = {layer: dict(getattr(self, layer)) for layer in LAYERS}
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
            **{layer: dict(data.get(layer) or {}) for layer in LAYERS},
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
        }


@dataclass(frozen=True)
class ColdWarm:
    """The two passes of ``cold_warm()``: unpacks as ``cold, warm = result``."""

    cold: PassResult
    warm: PassResult
    mode: str
    cache_dir: str

    def __iter__(self) -> Iterator[PassResult]:
        return iter((self.cold, self.warm))

    def problems(self, rtol: float | None = None, atol: float | None = None) -> list[str]:
        """Every way the warm pass falls short of a pure cache hit (empty: none)."""
        return warm_pass_problems(self.cold, self.warm, rtol=rtol, atol=atol)

    def explanations(self) -> list[MissExplanation]:
        """Why each lookup of the warm pass that missed did (``cache_keys.explain_misses`` against the cold pass)."""
        return cache_keys.explain_misses(self.cold.lookups, self.warm.lookups, "the cold pass")

    def check(
        self,
        rtol: float | None = None,
        atol: float | None = None,
        context: str | None = None,
        across_runs: tuple[MissExplanation, ...] = (),
    ) -> None:
        """Raise InvariantViolation naming layer, counters, the components that changed, bypass reasons and a hint.

        The invariant: the warm pass has at least one FX-graph hit (and AOTAutograd
        hit), no miss, no save, no bypass, no Triton kernel compiled, and its outputs
        equal the cold pass's (bitwise, or within rtol/atol when given).  Each warm
        miss is explained by the components that differ from the cold pass's same
        graph; ``across_runs`` adds what differs from an earlier run.
        """
        __tracebackhide__ = True
        problems = self.problems(rtol=rtol, atol=atol)
        if problems:
            raise InvariantViolation(
                format_failure(self, problems, rtol=rtol, atol=atol, context=context, across_runs=across_runs)
            )

    @property
    def compile_time_ratio(self) -> float | None:
        """Warm compile time over cold (0.03: the warm start took 3% of the cold one); None when not measured."""
        if self.cold.compile_time is None or self.warm.compile_time is None:
            return None
        return warm_cold_ratio(self.cold.compile_time.total_s, self.warm.compile_time.total_s)

    def to_json(self) -> dict[str, Any]:
        out = {"mode": self.mode, "cold": self.cold.to_json(), "warm": self.warm.to_json()}
        if self.compile_time_ratio is not None:
            out["compile_time_ratio"] = self.compile_time_ratio
        return out


@dataclass(frozen=True)
class ProbeResult:
    """A probe's whole-life counters (the report's ``caches``) and its cold/warm passes."""

    stats: CacheStats
    passes: tuple[PassResult, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return self.stats.to_json()


# ----------------------------------------------------------------------------
# readings: counters, disk, logs, Triton listener
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reading:
    counters: CounterSnapshot
    # FX-graph cache entries written since the probe started (compat.counting_fx_graph_cache_writes)
    fx_written: int
    kernel_dirs: frozenset[str]
    listener_compiled: int
    listener_loaded: int
    reasons_seen: int
    # layer -> why, for the layers the user had turned off at this moment
    off_by_user: tuple[tuple[str, str], ...] = ()


class _BypassLog(logging.Filter):
    """Collects torch's bypass reasons from its INFO records without printing more than before.

    The loggers are lowered to INFO only while the probe runs, and this filter passes on
    only the records the user's own logging level would have let through.
    """

    def __init__(self, layer: str, prefix: str, threshold: int, sink: list[tuple[str, str]]):
        super().__init__()
        self.layer, self.prefix, self.threshold, self.sink = layer, prefix, threshold, sink

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.prefix):
            reason = str(record.args[0]) if record.args else record.getMessage()
            self.sink.append((self.layer, reason))
        return record.levelno >= self.threshold


@contextlib.contextmanager
def _capture_bypass_reasons(sink: list[tuple[str, str]]) -> Iterator[None]:
    installed = []
    try:
        for name, (layer, prefix) in compat.cache_bypass_loggers().items():
            logger = logging.getLogger(name)
            old_level = logger.level
            catcher = _BypassLog(layer, prefix, logger.getEffectiveLevel(), sink)
            installed.append((logger, old_level, catcher))
            logger.addFilter(catcher)
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
        yield
    finally:
        for logger, old_level, catcher in installed:
            logger.removeFilter(catcher)
            logger.setLevel(old_level)


@contextlib.contextmanager
def _count_triton_compiles(counts: dict[str, int]) -> Iterator[bool]:
    """Chain a counter into ``triton.knobs.compilation.listener``; yields whether one exists."""
    knobs = compat.triton_compilation_knobs()
    if knobs is None:
        yield False
        return
    previous = knobs.listener

    def listener(*args: Any, **kwargs: Any) -> Any:
        counts["loaded" if kwargs.get("cache_hit") else "compiled"] += 1
        if previous is not None:
            return previous(*args, **kwargs)
        return None

    knobs.listener = listener
    try:
        yield True
    finally:
        knobs.listener = previous


@contextlib.contextmanager
def seeded_rngs(seed: int = DEFAULT_SEED) -> Iterator[None]:
    """Seed Python's, torch's (CPU and every CUDA device) and NumPy's RNGs; restore them after."""
    import torch

    py_state = random.getstate()
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    numpy = sys.modules.get("numpy")
    np_state = numpy.random.get_state() if numpy is not None else None
    try:
        random.seed(seed)
        torch.manual_seed(seed)  # also seeds every CUDA device, lazily if CUDA is not initialised
        if numpy is not None:
            numpy.random.seed(seed % 2**32)
        yield
    finally:
        random.setstate(py_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        if np_state is not None:
            numpy.random.set_state(np_state)


def cache_environment(directory: Path) -> dict[str, str]:
    """Point Inductor (and so AOTAutograd) and Triton into ``directory``."""
    return {INDUCTOR_ENV: str(directory), TRITON_ENV: str(Path(directory) / "triton")}


# ----------------------------------------------------------------------------
# the probe
# ----------------------------------------------------------------------------


class CacheProbe:
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
        self._dirs: list[Path] = []
        self._stack: contextlib.ExitStack | None = None
        self._reasons: list[tuple[str, str]] = []
        self._listener_counts = {"compiled": 0, "loaded": 0}
        self._write_counts: dict[str, int] = {}
        self._has_listener = False
        self._start: _Reading | None = None
        self._recorded: dict[str, Any] = {}
        self._passes: list[PassResult] = []
        # every cold_warm() and portable() pair, in order, for the report
        self._pairs: list[ColdWarm] = []
        self._subdirs = 0
        self._last_pair_dir: Path | None = None
        # how many passes of each name this probe ran (their labels: cold, cold-2, ...)
        self._pass_names: dict[str, int] = {}

    # -- life cycle ---------------------------------------------------------
    def __enter__(self) -> CacheProbe:
        self.cache_dir = self._make_dir()
        self._dirs.append(self.cache_dir)
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(environment_set(cache_environment(self.cache_dir)))
            stack.enter_context(compat.enable_default_off_caches())
            stack.enter_context(compat.counting_fx_graph_cache_writes(self._write_counts))
            stack.enter_context(_capture_bypass_reasons(self._reasons))
            self._has_listener = stack.enter_context(_count_triton_compiles(self._listener_counts))
            compat.clear_in_memory_compile_caches()
            self._start = self._read()
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc: Any) -> None:
        self._final = self._stats_since(self._start) if self._start is not None else None
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
        if self._owns_temp and self.cache_dir is not None:
            shutil.rmtree(self.cache_dir, ignore_errors=True)

    def _make_dir(self) -> Path:
        try:
            if self._given_dir is not None:
                return ensure_private_dir(self._given_dir, "compile cache directory")
            root = self._root
            if root is None:
                self._owns_temp = True
                return Path(tempfile.mkdtemp(prefix="pytest-cudagraph-probe-"))
            if not isinstance(root, CacheRoot):
                root = CacheRoot(ensure_private_dir(Path(root), "cache root"), persistent=True)
            return root.new_probe_dir(self._name)
        except UsageProblem as exc:
            # the same check as at session start, but here a call inside a test gave the path
            raise MisuseError(str(exc)) from None

    def _require_active(self, what: str) -> None:
        if self._stack is None:
            raise MisuseError(
                f"compile_cache.{what}() was called outside its 'with cache_probe()' block; call it inside"
            )

    # -- reading ------------------------------------------------------------
    def _read(self) -> _Reading:
        return _Reading(
            counters=counter_snapshot(),
            fx_written=self._write_counts.get("fxgraph_written", 0),
            kernel_dirs=triton_kernel_dirs(d / "triton" for d in self._dirs),
            listener_compiled=self._listener_counts["compiled"],
            listener_loaded=self._listener_counts["loaded"],
            reasons_seen=len(self._reasons),
            off_by_user=tuple(compat.cache_layers_off_by_user().items()),
        )

    def _stats_between(self, before: _Reading, after: _Reading) -> CacheStats:
        delta = delta_between(before.counters, after.counters)
        fxgraph = dict(delta.fxgraph)
        fxgraph["saved"] = after.fx_written - before.fx_written
        aot = dict(delta.aot_autograd)
        new_dirs = len(after.kernel_dirs - before.kernel_dirs)
        bundler = {k: v for k, v in delta.triton.items() if k not in ("compiled", "loaded", "new_kernel_dirs")}
        compiled, loaded = triton_compiled_and_loaded(new_dirs, bundler)
        triton = {"compiled": compiled, "loaded": loaded, "new_kernel_dirs": new_dirs}
        if self._has_listener:
            listener_compiled = after.listener_compiled - before.listener_compiled
            listener_loaded = after.listener_loaded - before.listener_loaded
            triton["compiled"] = max(compiled, listener_compiled)
            triton["loaded"] = loaded + listener_loaded
            triton["listener_compiled"] = listener_compiled
            triton["listener_loaded"] = listener_loaded
        triton.update(bundler)
        reasons = tuple(self._reasons[before.reasons_seen : after.reasons_seen])
        disabled = dict(before.off_by_user)
        disabled.update(after.off_by_user)
        return CacheStats(fxgraph=fxgraph, aot_autograd=aot, triton=triton, bypass_reasons=reasons, disabled=disabled)

    def _stats_since(self, before: _Reading) -> CacheStats:
        return self._stats_between(before, self._read())

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
        checked = checked_deltas("CacheProbe.expect()", deltas, EXPECT_CACHE_FIGURES, "expect(fxgraph_hit=1)")

        def explain(reasons_before: int) -> list[str]:
            reasons = list(dict.fromkeys(reason for _, reason in self._reasons[reasons_before:]))
            return ["", "bypass reasons inside the block:", *[f"  - {r}" for r in reasons]] if reasons else []

        return ExpectBlock(
            "CacheProbe.expect()",
            checked,
            EXPECT_CACHE_FIGURES,
            read=lambda: cache_figures(self.stats()),
            active=lambda: self._stack is not None,
            needs="an active probe: use it inside `with cache_probe() as probe:` or with the compile_cache fixture",
            start=lambda: len(self._reasons),
            explain=explain,
            enters_as=self,
        )

    def stats(self) -> CacheStats:
        """Counters of every layer since the probe started (cumulative over all passes)."""
        if self._stack is None:
            final = getattr(self, "_final", None)
            if final is not None:
                return final
            self._require_active("stats")
        return self._stats_since(self._start)

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
            stats = _sum_stats(stats, child.stats)
        return ProbeResult(stats=stats, passes=tuple(self._passes))

    # -- recording outputs --------------------------------------------------
    def record(self, name: str, value: Any) -> None:
        """Keep ``value`` (a tensor, or a tuple/dict of them) to compare cold against warm.

        Under ``@pytest.mark.compile_cache`` each pass records its own set; the warm
        set must equal the cold one (bitwise unless the marker gives rtol/atol).
        """
        if name in self._recorded:
            raise MisuseError(
                f"compile_cache.record({name!r}, ...) was called twice in one pass; give each recorded value its own name"
            )
        self._recorded[name] = _detached_copy(value)

    # -- directories --------------------------------------------------------
    def new_pass_directory(self, label: str) -> Path:
        """A fresh, empty, private subdirectory of the probe's directory, for one pair of passes to share."""
        self._require_active("new_pass_directory")
        self._subdirs += 1
        path = self.cache_dir / f"{label}-{self._subdirs}"
        path.mkdir(mode=0o700)
        self._dirs.append(path)
        return path

    @contextlib.contextmanager
    def _use_directory(self, directory: Path) -> Iterator[None]:
        if directory not in self._dirs:
            self._dirs.append(directory)
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
            try:
                before = self._read()
                started = time.perf_counter()
                with seeded_rngs(seed), cache_keys.pass_scope(label) as lookups:
                    with watch_compile_time(report=False) as compile_watch:
                        value = call()
                duration = time.perf_counter() - started
                after = self._read()
                recorded = self._recorded
            finally:
                self._recorded = saved_recorded
        stats = self._stats_between(before, after)
        if compile_watch.caches_off:  # set inside the body, undone before it ended
            stats = replace(stats, disabled={**compile_watch.caches_off, **stats.disabled})
        result = PassResult(
            name=name,
            stats=stats,
            outputs=_detached_copy(value),
            recorded=recorded,
            cache_dir=str(directory),
            duration_s=duration,
            before=_absolute(before),
            after=_absolute(after),
            lookups=tuple(lookups.lookups),
            label=label,
            compile_time=compile_watch.result,
        )
        self._passes.append(result)
        return result

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
        starts from the same seeds.  Nothing is asserted here: call ``.check()``.
        """
        self._require_active("cold_warm")
        if mode not in ("inprocess", "subprocess"):
            raise MisuseError(
                f"cold_warm(mode={mode!r}) is not a known mode; use mode='inprocess' or mode='subprocess'"
            )
        refuse_if_caches_disabled("cold_warm()")
        target = importable_name(fn) if mode == "subprocess" else None
        call_fn = resolve_importable(fn) if isinstance(fn, str) else fn
        pair_dir = self.new_pass_directory("cold_warm")
        self._last_pair_dir = pair_dir
        cold = self.run_pass("cold", lambda: call_fn(*args), seed, pair_dir)
        if mode == "inprocess":
            warm = self.run_pass("warm", lambda: call_fn(*args), seed, pair_dir)
        else:
            warm = self._callable_pass_in_child(target, args, seed, pair_dir)
        pair = ColdWarm(cold=cold, warm=warm, mode=mode, cache_dir=str(pair_dir))
        cache_keys.annotate_active(pair.explanations())
        self._pairs.append(pair)
        return pair

    def portable(self, fn: Callable[..., Any], *args: Any, seed: int = DEFAULT_SEED) -> ColdWarm:
        """Move the probe's cache into an empty directory (mega-cache artifacts) and run warm there.

        Runs ``fn(*args)`` against the probe's latest cache (that of the last
        ``cold_warm()``, else the probe's own directory), saves what it used with
        ``torch.compiler.save_cache_artifacts()``, loads that into an empty directory
        and runs again.  The returned pair (``source, moved``) passes ``.check()`` when
        the moved cache gives only hits.  Needs torch 2.7+.
        """
        self._require_active("portable")
        missing = compat.portable_cache_artifacts_missing()
        if missing:
            raise MisuseError(
                f"compile_cache.portable() needs {missing}; use cold_warm(mode='subprocess') on this torch"
            )
        refuse_if_caches_disabled("portable()")
        source_dir = self._last_pair_dir or self.cache_dir
        with compat.fresh_cache_artifact_recording():
            source = self.run_pass("source", lambda: fn(*args), seed, source_dir)
            blob = compat.save_cache_artifacts()
        if blob is None:
            raise InvariantViolation(
                f"compile_cache.portable(): torch.compiler.save_cache_artifacts() returned nothing after running "
                f"{_callable_label(fn)}; the function compiled nothing with Inductor, or every graph bypassed the cache"
            )
        moved_dir = self.new_pass_directory("portable")
        with self._use_directory(moved_dir):
            compat.clear_in_memory_compile_caches()
            compat.load_cache_artifacts(blob)
        moved = self.run_pass("moved", lambda: fn(*args), seed, moved_dir)
        pair = ColdWarm(cold=source, warm=moved, mode="portable", cache_dir=str(moved_dir))
        cache_keys.annotate_active(
            cache_keys.explain_misses(source.lookups, moved.lookups, compared_with="the source pass")
        )
        self._pairs.append(pair)
        return pair

    # -- subprocess passes --------------------------------------------------
    def _callable_pass_in_child(self, target: str, args: tuple, seed: int, directory: Path) -> PassResult:
        import torch

        spec_path = directory / "warm-pass.spec.pt"
        out_path = directory / "warm-pass.out.pt"
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
                f"cold_warm(mode='subprocess'): the arguments of {target} cannot be saved for the child interpreter "
                f"({type(exc).__name__}: {exc}); pass tensors and plain Python values"
            ) from None
        env = child_environment(directory)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        cmd = [sys.executable, "-m", "pytest_cudagraph.caches", str(spec_path)]
        return self.run_child_pass(cmd, out_path=out_path, what=f"{target}(...)", env=env, cwd=os.getcwd())

    def run_child_pass(self, cmd: list[str], *, out_path: Path, what: str, env: dict[str, str], cwd: str) -> PassResult:
        """Run ``cmd``, a fresh interpreter that runs one warm pass and writes it to ``out_path``; return that pass.

        The child writes with ``write_pass_output()``; ``env`` starts from
        ``child_environment()``.  Raises InvariantViolation with the child's last lines
        when it wrote no result or an error.
        """
        __tracebackhide__ = True
        label = self._next_label("warm")
        proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
        payload = _read_child_output(out_path)
        if payload is None or payload.get("error"):
            detail = (payload or {}).get("error") or _tail(proc.stdout + proc.stderr)
            raise InvariantViolation(
                f"compile_cache: the warm pass of {what} in a fresh interpreter did not finish (exit code "
                f"{proc.returncode}); its last lines:\n{_indent(detail)}\nrerun it alone with: {' '.join(cmd)}"
            )
        result = PassResult(
            name="warm",
            stats=CacheStats.from_json(payload["stats"]),
            outputs=payload.get("outputs"),
            recorded=payload.get("recorded") or {},
            cache_dir=payload["cache_dir"],
            duration_s=float(payload.get("duration_s", 0.0)),
            before=payload.get("before") or {},
            after=payload.get("after") or {},
            process=f"a fresh interpreter (pid {payload.get('pid')})",
            # the child numbered its graphs within its one pass; the label is this probe's
            lookups=tuple(
                replace(lookup, pass_name=label)
                for lookup in cache_keys.lookups_from_json(payload.get("lookups") or ())
            ),
            label=label,
            compile_time=compile_time_from_json(payload.get("compile_time")),
        )
        cache_keys.deliver_lookups(result.lookups)
        self._passes.append(result)
        return result


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


# ----------------------------------------------------------------------------
# the invariant and its message
# ----------------------------------------------------------------------------


def refuse_if_caches_disabled(what: str) -> None:
    """Fail before compiling anything when no warm pass could hit: every disk cache layer is off.

    A single layer turned off (AOTAutograd's, as some projects do on some torch
    versions) leaves the others to check: the passes report it as ``disabled``.
    AOTAutograd's cache stores its entries through the FX-graph cache, so with that
    one off (or ``force_disable_caches``) nothing is left.
    """
    __tracebackhide__ = True
    off = compat.cache_layers_off_by_user()
    reasons = [reason for reason in compat.cache_disabled_reasons() if reason not in off.values()]
    if "fxgraph" in off:
        reasons.append(off["fxgraph"])
    if reasons:
        raise InvariantViolation(
            f"compile_cache: {what} cannot show a warm start because the compile caches are disabled: "
            f"{'; '.join(reasons)}; unset that variable (or config) for this test"
        )


def warm_pass_problems(
    cold: PassResult, warm: PassResult, rtol: float | None = None, atol: float | None = None
) -> list[str]:
    """The violated parts of the warm-start invariant, one short line each.

    A layer the user turned off during a pass (before it, or inside the body, as
    torch's compile records show) cannot hit on the warm pass whatever the cache
    holds: it is ``disabled``, its counters are not read as misses (which would point
    at cache keys), and the other layers are checked.  AOTAutograd's cache stores its
    entries through the FX-graph cache, so with that one off nothing is left: that
    fails, naming the setting.
    """
    problems = []
    off = {**cold.stats.disabled, **warm.stats.disabled}
    if "fxgraph" in off:  # AOTAutograd's entries live in the FX-graph cache: nothing is left to check
        problems.append(
            f"every compile cache layer was off during the passes ({off['fxgraph']}), so the warm pass "
            f"cannot hit any; a layer that is off alone is reported as disabled and the others are checked"
        )
    checked = [layer for layer in ("fxgraph", "aot_autograd") if layer not in off and "fxgraph" not in off]
    if "fxgraph" in checked and not cold.stats.compiled_anything:
        problems.append("the cold pass compiled nothing with Inductor (no FX-graph cache lookup at all)")
    # first, why: one line per warm lookup that missed, naming the components that differ from the
    # cold pass's same graph (FX-graph lookups before AOTAutograd's, whose key holds the graph's too)
    explanations = [
        explanation
        for explanation in cache_keys.explain_misses(cold.lookups, warm.lookups, "the cold pass")
        if explanation.lookup.layer in checked
    ]
    explanations.sort(key=lambda explanation: cache_keys.LAYERS.index(explanation.lookup.layer))
    problems += [explanation.text() for explanation in explanations]
    w = warm.stats
    if "fxgraph" in checked and w.fxgraph.get("hit", 0) < 1:
        problems.append("fxgraph: no hit on the warm pass")
    if "aot_autograd" in checked and cold.stats.aot_autograd.get("miss", 0) + cold.stats.aot_autograd.get("hit", 0) > 0:
        if w.aot_autograd.get("hit", 0) < 1:
            problems.append("aot_autograd: no hit on the warm pass")
    for layer in checked:
        for key in ("miss", "guard_miss", "saved", "bypass"):
            if getattr(w, layer).get(key, 0):
                problems.append(f"{layer}: {key} {getattr(w, layer)[key]} on the warm pass")
    if w.triton.get("compiled", 0):
        problems.append(f"triton: {count_noun(w.triton['compiled'], 'kernel')} compiled on the warm pass")
    problems += cold_warm_differences("returned", cold.outputs, warm.outputs, rtol=rtol, atol=atol)
    problems += _compare_recorded(cold.recorded, warm.recorded, rtol=rtol, atol=atol)
    return problems


def _compare_recorded(
    cold: Mapping[str, Any], warm: Mapping[str, Any], rtol: float | None, atol: float | None
) -> list[str]:
    problems = []
    for name in cold:
        if name not in warm:
            problems.append(f"recorded {name!r}: recorded on the cold pass only")
    for name in warm:
        if name not in cold:
            problems.append(f"recorded {name!r}: recorded on the warm pass only")
        else:
            problems += cold_warm_differences(f"recorded {name!r}", cold[name], warm[name], rtol=rtol, atol=atol)
    return problems


def cold_warm_differences(
    label: str, cold: Any, warm: Any, rtol: float | None = None, atol: float | None = None
) -> list[str]:
    """Differences between two output trees (tensors, tuples, lists, dicts, scalars).

    Bitwise when ``rtol`` and ``atol`` are both None: the bytes of every tensor must
    match (so a NaN in the same place is equal, and ``-0.0`` differs from ``0.0``).
    Otherwise ``allclose`` with the given tolerances (a missing one is 0).

    >>> cold_warm_differences("y", torch.ones(2), torch.ones(2))
    []
    """
    import torch

    problems: list[str] = []

    def walk(where: str, a: Any, b: Any) -> None:
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                problems.append(
                    f"{where}: a tensor on one pass, {type(b if isinstance(a, torch.Tensor) else a).__name__} on the other"
                )
                return
            problem = _compare_tensors(a, b, rtol, atol)
            if problem:
                problems.append(f"{where}: {problem}")
        elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                problems.append(f"{where}: {len(a)} items on the cold pass, {len(b)} on the warm pass")
                return
            for i, (x, y) in enumerate(zip(a, b)):
                walk(f"{where}[{i}]", x, y)
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            if set(a) != set(b):
                problems.append(
                    f"{where}: keys {sorted(map(str, a))} on the cold pass, {sorted(map(str, b))} on the warm pass"
                )
                return
            for key in a:
                walk(f"{where}[{key!r}]", a[key], b[key])
        elif a != b and not (a is None and b is None):
            problems.append(f"{where}: {a!r} on the cold pass, {b!r} on the warm pass")

    walk(label, cold, warm)
    return problems


def _compare_tensors(a: Any, b: Any, rtol: float | None, atol: float | None) -> str | None:
    import torch

    a, b = a.detach().cpu(), b.detach().cpu()
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {tuple(a.shape)} {a.dtype} on the cold pass, {tuple(b.shape)} {b.dtype} on the warm pass"
    if rtol is None and atol is None:
        if _same_bytes(a, b):
            return None
        how = "not bitwise equal"
    else:
        if torch.allclose(a, b, rtol=rtol or 0.0, atol=atol or 0.0, equal_nan=True):
            return None
        how = f"not within rtol={rtol or 0.0}, atol={atol or 0.0}"
    if a.is_floating_point() or a.is_complex():
        diff = (
            a.to(torch.complex128 if a.is_complex() else torch.float64)
            - b.to(torch.complex128 if b.is_complex() else torch.float64)
        ).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        flat = int(diff.reshape(-1).argmax()) if diff.numel() else 0
    else:
        diff = a.ne(b)
        flat = int(diff.reshape(-1).to(torch.uint8).argmax()) if diff.numel() else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
    worst_a = a[index].item() if a.numel() else None
    worst_b = b[index].item() if b.numel() else None
    changed = int(a.ne(b).sum()) if not a.is_complex() else int((a != b).sum())
    return (
        f"{how}: {changed} of {a.numel()} elements differ, the largest at index {index} "
        f"(cold {worst_a!r}, warm {worst_b!r})"
    )


def _same_bytes(a: Any, b: Any) -> bool:
    import torch

    try:
        return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))
    except (RuntimeError, TypeError):  # sparse or quantized layouts have no byte view
        return bool(torch.equal(a, b))


def _hints(result: ColdWarm) -> list[str]:
    cold, warm = result.cold.stats, result.warm.stats
    reasons = warm.reasons() or cold.reasons()
    hints = []
    off = {**result.cold.stats.disabled, **result.warm.stats.disabled}
    if off:
        hints.append(
            "a cache layer you turn off cannot show a warm start: unset its environment variable, or drop "
            "the config change that turns it off (in the test, a fixture or a conftest), for this test; "
            "the plugin turns on only layers this torch leaves off by default"
        )
    disabled = [reason for reason in compat.cache_disabled_reasons() if reason not in off.values()]
    if disabled:
        hints.append(f"the compile caches are disabled now: {'; '.join(disabled)}; unset that variable or config")
    if any("custom" in r.lower() for r in reasons):
        hints.append(
            "a custom Inductor pass (post_grad_custom_*_pass, joint_custom_*_pass, pre_grad_custom_pass) is not a "
            f"{compat.CUSTOM_GRAPH_PASS_CLASS} with a stable uuid(), so no graph using it can be "
            "cached; subclass CustomGraphPass and return a uuid() that changes only when the pass changes"
        )
    elif reasons:
        hints.append(
            "the bypass reason above names what makes the graph uncacheable (freezing, an unpicklable "
            "constant, a non-cacheable higher-order op, a custom pass without uuid())"
        )
    if not cold.compiled_anything and "fxgraph" not in off:
        hints.append(
            "compile with the Inductor backend inside the test body; backend='eager'/'aot_eager' do not use "
            "the FX-graph cache, and a function compiled before the cold pass is not compiled again; "
            "a body that sets force_disable_caches=True or fx_graph_cache=False turns the caches off too"
        )
    missed = [
        layer
        for layer in ("fxgraph", "aot_autograd")
        if layer not in off and (getattr(warm, layer).get("miss", 0) or getattr(warm, layer).get("guard_miss", 0))
    ]
    if missed and not reasons and "fxgraph" not in off:
        hint = (
            "the warm pass computed other cache keys than the cold pass: a config that differs between passes "
            f"({' / '.join(compat.CACHE_KEY_CONFIG_MODULES)} patched in one pass only, or an environment variable), "
            "or inputs of another shape, dtype or device"
        )
        if result.mode == "subprocess":
            hint += "; in subprocess mode also config set outside the test body or the test module (a conftest hook)"
        hints.append(hint)
    if (warm.fxgraph.get("saved", 0) or warm.aot_autograd.get("saved", 0)) and not (
        warm.fxgraph.get("miss", 0) or warm.aot_autograd.get("miss", 0)
    ):
        hints.append(
            "the warm pass saved entries although nothing missed: something re-saves what it loaded "
            "(vLLM PR #35921 was this bug)"
        )
    if warm.triton.get("compiled", 0):
        hints.append(
            "Triton compiled kernels on the warm pass: the FX-graph cache missed, TRITON_ALWAYS_COMPILE "
            "(knobs.compilation.always_compile) is set, or Triton's cache directory was not shared"
        )
    if cold.compiled_anything and not warm.compiled_anything:
        hints.append(
            "nothing reached the FX-graph cache on the warm pass: the body did not call the compiled "
            "function again, or it was compiled outside the body (a fixture) and answered from memory"
        )
    return hints


def _counter_rows(result: ColdWarm) -> list[list[str]]:
    """Each layer's counters in the cold and the warm pass: this test's own counts, never the process's totals."""
    rows = [["layer", "counter", "cold", "warm", "expected on warm"]]
    expected = {
        "hit": ">= 1",
        "miss": "0",
        "guard_miss": "0",
        "saved": "0",
        "bypass": "0",
        "compiled": "0",
        "loaded": "any",
    }
    off = {**result.cold.stats.disabled, **result.warm.stats.disabled}
    for layer in LAYERS:
        cold_layer = getattr(result.cold.stats, layer)
        warm_layer = getattr(result.warm.stats, layer)
        for key in ("hit", "miss", "guard_miss", "bypass", "saved", "compiled", "loaded"):
            if key not in warm_layer and key not in cold_layer:
                continue
            rows.append(
                [
                    layer,
                    key,
                    str(cold_layer.get(key, 0)),
                    str(warm_layer.get(key, 0)),
                    "- (disabled)" if layer in off else expected[key],
                ]
            )
    return rows


def format_failure(
    result: ColdWarm,
    problems: list[str],
    rtol: float | None = None,
    atol: float | None = None,
    context: str | None = None,
    across_runs: tuple[MissExplanation, ...] = (),
) -> str:
    """The failure report: what failed, the counter table, the bypass reasons, earlier runs' differences, hints.

    Each warm miss is one of the problems, naming the components that changed;
    ``across_runs`` adds what differs from an earlier run of the same test.
    """
    head = context or f"compile_cache.cold_warm(mode={result.mode!r})"
    lines = [
        f"{head}: the warm pass was not a pure cache hit ({count_noun(len(problems), 'problem')}); cache dir {result.cache_dir}"
    ]
    lines += [f"  - {p}" for p in problems]
    lines.append("")
    lines += format_table(_counter_rows(result), indent="  ")
    for name, stats in (("cold", result.cold.stats), ("warm", result.warm.stats)):
        for layer in ("fxgraph", "aot_autograd"):
            for reason in stats.reasons(layer):
                lines.append(f"  bypass reason ({layer}, {name} pass): {reason}")
            if getattr(stats, layer).get("bypass", 0) and not stats.reasons(layer):
                # a torch may count a bypass without logging why (compat.cache_bypass_loggers): say so, not nothing
                lines.append(
                    f"  bypass reason ({layer}, {name} pass): not logged by this torch "
                    f"(its counter moved; the {'other layer' if layer == 'aot_autograd' else 'log'} "
                    f"may name it)"
                )
    for explanation in across_runs:
        lines.append(f"  compared with {explanation.compared_with}: {explanation.text()}")
    lines.append(
        f"  warm pass ran in {result.warm.process}; outputs compared "
        f"{'bitwise' if rtol is None and atol is None else f'with rtol={rtol}, atol={atol}'}"
    )
    if any(p.startswith(("returned", "recorded")) for p in problems):
        lines.append(
            "  hint: a hit that loads the wrong artifact gives other outputs; so does a body that is not "
            "deterministic (inputs not drawn from the seeded Python/torch/CUDA RNGs, nondeterministic "
            "kernels: give rtol/atol to the marker)"
        )
    for hint in _hints(result):
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# importable callables and the child interpreter
# ----------------------------------------------------------------------------


def _callable_label(fn: Any) -> str:
    return fn if isinstance(fn, str) else getattr(fn, "__qualname__", repr(fn))


def resolve_importable(name: str) -> Any:
    """The object named ``"package.module:qualname"`` (or ``"package.module.qualname"``)."""
    module_name, _, qualname = name.partition(":")
    if not qualname:
        module_name, _, qualname = name.rpartition(".")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise MisuseError(
            f"cold_warm: {name!r} cannot be imported ({type(exc).__name__}: {exc}); "
            f"give 'package.module:function' of a module-level function"
        ) from None
    return obj


def importable_name(fn: Any) -> str:
    """``"module:qualname"`` for a function a fresh interpreter can import and call."""
    if isinstance(fn, str):
        resolve_importable(fn)
        return fn if ":" in fn else ":".join(fn.rsplit(".", 1))
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        raise MisuseError(
            f"cold_warm(mode='subprocess'): {_callable_label(fn)} (module {module}) cannot be imported by a fresh "
            f"interpreter; define it at module level of an importable module, or pass 'package.module:function'"
        )
    name = f"{module}:{qualname}"
    if resolve_importable(name) is not fn:
        raise MisuseError(
            f"cold_warm(mode='subprocess'): {name} imports as another object than the function given (rebound or "
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
            before=_plain(result.before),
            after=_plain(result.after),
            recorded=_to_cpu(dict(result.recorded)),
            lookups=cache_keys.lookups_to_json(result.lookups, full=True),
            compile_time=result.compile_time.to_json() if result.compile_time is not None else None,
        )
        try:
            payload["outputs"] = _to_cpu(result.outputs)
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


def _child_main(argv: list[str]) -> int:
    """``python -m pytest_cudagraph.caches SPEC``: one warm pass of a callable, results to SPEC's out."""
    import torch

    spec = torch.load(argv[0], weights_only=False)  # our own file, in the probe's private directory
    try:
        fn = resolve_importable(spec["target"])
        with compat.applied_compile_config(spec.get("config") or {}):
            with cache_probe(directory=Path(spec["cache_dir"])) as probe:
                result = probe.run_pass("warm", lambda: fn(*spec["args"]), spec["seed"], probe.cache_dir)
    except BaseException:
        write_pass_output(spec["out"], None, error=traceback.format_exc(limit=-8))
        return 1
    write_pass_output(spec["out"], result)
    return 0


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


def _detached_copy(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.detach().clone())


def _to_cpu(value: Any) -> Any:
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


def _absolute(reading: _Reading) -> dict[str, dict[str, int]]:
    """Absolute values of torch's counters (and on-disk entry counts) at one moment."""
    from .counters import COUNTER_MAP

    out: dict[str, dict[str, int]] = {}
    for layer, keys in COUNTER_MAP.items():
        out[layer] = {key: int(reading.counters.values.get(src, 0)) for key, src in keys.items()}
    out["fxgraph"]["saved"] = reading.fx_written
    out["triton"]["new_kernel_dirs"] = len(reading.kernel_dirs)
    return out


def _sum_stats(a: CacheStats, b: CacheStats) -> CacheStats:
    def add(x: Mapping[str, int], y: Mapping[str, int]) -> dict[str, int]:
        return {k: x.get(k, 0) + y.get(k, 0) for k in {**x, **y}}

    return CacheStats(
        fxgraph=add(a.fxgraph, b.fxgraph),
        aot_autograd=add(a.aot_autograd, b.aot_autograd),
        triton=add(a.triton, b.triton),
        bypass_reasons=a.bypass_reasons + b.bypass_reasons,
        disabled={**a.disabled, **b.disabled},
    )


def _plain(value: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    return {k: dict(v) for k, v in value.items()}


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())
