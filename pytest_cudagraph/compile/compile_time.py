"""Compile time per phase, per compiled frame, from torch's own compilation metrics.

``torch.compile`` spends its start-up time in phases nested in each other: Dynamo
traces the frame, hands the graph to the backend (AOTAutograd), which hands the
forward and backward graphs to Inductor, which lowers them, generates code and
compiles kernels.  Torch times each phase (``dynamo_timed``) and keeps one record
per compiled frame, plus one per backward compiled lazily at the first
``.backward()`` (``_compat.CompilationMetricsTap``).  :func:`watch_compile_time`
reads the records made inside its block and splits each frame's time so that the
phases add up to the total:

- ``dynamo_s``: Dynamo itself (bytecode analysis, tracing, guards), the frame's
  compile minus the backend compile;
- ``aot_autograd_s``: the backend compile minus Inductor (AOTAutograd's tracing,
  partitioning, its cache lookup; with ``backend="eager"`` the backend call);
- ``inductor_s``: Inductor (lowering and code generation, kernel compiles included);
- ``inductor_codegen_s``: the part of ``inductor_s`` spent generating and loading code;
- ``kernel_compile_s``: waiting for kernel compiles (Triton kernels on a GPU; on the CPU torch's
  same timer covers the C++ kernels); on a cold compile it is inside ``inductor_codegen_s``,
  on a cache hit it is the kernels' loading;
- ``cache_saved_s``: not spent: what each FX-graph cache hit's entry cost when it
  was compiled (torch's own figure), summed.

``dynamo_s + aot_autograd_s + inductor_s == total_s``.  A phase this torch does not
record is absent from ``phases`` and named in ``unavailable``, never reported as 0.

Example::

    with watch_compile_time() as watch:
        torch.compile(model)(x)
    print(watch.result.total_s, watch.result.phases["inductor_s"])
    for frame in watch.result.frames:
        print(frame.compile_id, frame.function, frame.total_s)

Inside a test the result goes to the test's record (``compile_time``); a test
that uses a plugin marker or fixture is measured whole, and each cold and warm
pass of ``cache_probe().cold_warm()`` and ``@pytest.mark.compile_cache`` gets its
own figure (``PassResult.compile_time``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import _compat as compat
from ..records.cold_warm import pass_times
from ..records.record import TestRecord, current_record
from .dynamo_log import function_label

__all__ = [
    "CompileTime",
    "FrameCompileTime",
    "CompileTimeWatch",
    "watch_compile_time",
    "PHASES",
    "compile_time_from_json",
]

PHASES = ("dynamo_s", "aot_autograd_s", "inductor_s", "inductor_codegen_s", "kernel_compile_s", "cache_saved_s")
# the torch capabilities (_compat.COMPILE_METRIC_CAPABILITIES) each phase is computed from
_PHASE_NEEDS = {
    "dynamo_s": ("frame_us", "backend_us"),
    "aot_autograd_s": ("backend_us", "inductor_us", "backward_us"),
    "inductor_s": ("inductor_us",),
    "inductor_codegen_s": ("codegen_us",),
    "kernel_compile_s": ("kernel_compile_us",),
    "cache_saved_s": ("cache_saved_us",),
}


def _s(us: float) -> float:
    return round(max(us, 0.0) / 1e6, 6)


@dataclass(frozen=True)
class FrameCompileTime:
    """One compiled frame: torch's ``compile_id`` (``"0/1"``: frame 0, its second compile), its function, its times.

    ``function`` is ``"name (file:line)"``; a backward compiled inside the block for a
    frame compiled before it is ``"backward of <compile_id>"``.  ``failed`` is the
    exception type that ended the compile, if one did.
    """

    compile_id: str
    function: str
    total_s: float
    phases: Mapping[str, float]
    failed: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "compile_id": self.compile_id,
            "function": self.function,
            "total_s": self.total_s,
            "phases": dict(self.phases),
        }
        if self.failed:
            out["failed"] = self.failed
        return out


@dataclass(frozen=True)
class CompileTime:
    """The compile time of a block (the report's ``compile_time``): total, per phase, per frame.

    ``phases`` holds the phases this torch records (see the module docstring);
    ``unavailable`` the ones it does not; ``notes`` anything that makes the figures
    partial (records torch dropped).  ``passes``: in a test's section, the cold and
    warm passes it ran (``{"label", "cold_s", "warm_s", "warm_cold_ratio", "cold_startup_s", "warm_startup_s"}``;
    the start-up seconds, interpreter, imports and the CPU probe, are not in ``cold_s``/``warm_s``).
    """

    total_s: float = 0.0
    phases: Mapping[str, float] = field(default_factory=dict)
    frames: tuple[FrameCompileTime, ...] = ()
    unavailable: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    passes: tuple[Mapping[str, Any], ...] = ()

    @property
    def note(self) -> str | None:
        """One sentence: which phases this torch does not record, and what else makes the figures partial."""
        parts = []
        if self.unavailable:
            parts.append(f"not recorded by this torch: {', '.join(self.unavailable)}")
        parts += list(self.notes)
        return "; ".join(parts) or None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total_s": self.total_s,
            "phases": dict(self.phases),
            "frames": [frame.to_json() for frame in self.frames],
        }
        if self.unavailable:
            out["unavailable"] = list(self.unavailable)
        if self.note:
            out["note"] = self.note
        if self.passes:
            out["passes"] = [dict(p) for p in self.passes]
        return out


def compile_time_from_records(
    records: Iterable[Mapping[str, Any]], missing: Iterable[str] = (), notes: Iterable[str] = ()
) -> CompileTime:
    """Sum torch's compilation records (``_compat.CompilationMetricsTap`` dicts) per frame and per block.

    ``missing``: the capabilities this torch does not record; the phases that need
    one are left out.  A column that is None in a record is a phase that did not run.
    """
    missing = set(missing)
    available = [phase for phase in PHASES if not missing.intersection(_PHASE_NEEDS[phase])]
    frames: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("is_runtime"):
            continue  # runtime autotuning: not part of a compile
        compile_id = record.get("compile_id") or "?"
        frame = frames.setdefault(
            compile_id, {"function": None, "failed": None, "sums": dict.fromkeys(_FRAME_SUMS, 0.0)}
        )
        sums = frame["sums"]
        value = {key: float(record.get(key) or 0) for key in compat.COMPILE_METRIC_CAPABILITIES}
        inner = ("inductor_us", "codegen_us", "kernel_compile_us", "cache_saved_us")
        for key in inner:
            sums[key] += value[key]
        if record.get("is_forward", True):
            total = value["frame_us"] if "frame_us" not in missing else float(record.get("duration_us") or 0)
            sums["total_us"] += total
            sums["dynamo_us"] += total - value["backend_us"]
            sums["aot_us"] += value["backend_us"] - value["inductor_us"]
            if record.get("name"):
                frame["function"] = function_label(
                    record["name"], record.get("filename") or "?", record.get("line") or 0
                )
        else:
            total = value["backward_us"] if "backward_us" not in missing else float(record.get("duration_us") or 0)
            sums["total_us"] += total
            sums["aot_us"] += total - value["inductor_us"]
        if record.get("fail_type"):
            frame["failed"] = str(record["fail_type"])
    result_frames = []
    for compile_id, frame in frames.items():
        sums = frame["sums"]
        phases = {phase: _s(sums[_PHASE_SOURCE[phase]]) for phase in available}
        result_frames.append(
            FrameCompileTime(
                compile_id=compile_id,
                function=frame["function"] or f"backward of {compile_id}",
                total_s=_s(sums["total_us"]),
                phases=phases,
                failed=frame["failed"],
            )
        )
    totals = {phase: round(sum(f.phases[phase] for f in result_frames), 6) for phase in available}
    return CompileTime(
        total_s=round(sum(f.total_s for f in result_frames), 6),
        phases=totals,
        frames=tuple(result_frames),
        unavailable=tuple(phase for phase in PHASES if phase not in available),
        notes=tuple(notes),
    )


_FRAME_SUMS = ("total_us", "dynamo_us", "aot_us", "inductor_us", "codegen_us", "kernel_compile_us", "cache_saved_us")
_PHASE_SOURCE = {
    "dynamo_s": "dynamo_us",
    "aot_autograd_s": "aot_us",
    "inductor_s": "inductor_us",
    "inductor_codegen_s": "codegen_us",
    "kernel_compile_s": "kernel_compile_us",
    "cache_saved_s": "cache_saved_us",
}


class CompileTimeWatch:
    """Reads torch's compilation records made while it is active; ``.result`` is the :class:`CompileTime`.

    Use :func:`watch_compile_time`.  With ``report=True`` (the default) the result
    is set as the running test's ``compile_time`` section on exit.
    """

    def __init__(self, report: bool | TestRecord = True):
        self._report = report
        self._tap: Any = None
        # while it reads, a reset in the body keeps Dynamo's compiled codes known, so that
        # a frame compiled before it is still named after the function a decorator wraps
        self._reset_sight: Any = None
        self._result: CompileTime | None = None
        # cache layer -> the setting that had it off while a frame of the block compiled
        self.caches_off: dict[str, str] = {}

    def start(self) -> CompileTimeWatch:
        """Start reading (what ``with`` does); for a watch that spans hooks, as the plugin's per-test one."""
        self._tap = compat.CompilationMetricsTap().start()
        if "torch._dynamo" in sys.modules:  # a block that starts before torch is loaded compiled nothing yet
            self._reset_sight = compat.on_dynamo_reset()
        return self

    def stop(self) -> CompileTime:
        """Stop reading and return the result (what leaving ``with`` does)."""
        tap, self._tap = self._tap, None
        sight, self._reset_sight = self._reset_sight, None
        if sight is not None:
            sight.close()
        if tap is None:
            return self.result
        records, notes = tap.stop()
        # a layer is off for the block only where every frame compiled with it off: one helper
        # compiled under a patch does not make the model's own lookups unchecked
        compiled = [one for one in records if not one.get("is_runtime")]
        if compiled:
            for layer, why in (compiled[0].get("caches_off") or {}).items():
                if all(layer in (one.get("caches_off") or {}) for one in compiled):
                    self.caches_off[layer] = why
        # a block that compiled nothing before torch's compiler was loaded need not load it
        missing = compat.compile_metric_columns_missing() if records else ()
        self._result = compile_time_from_records(records, missing, notes)
        record = self._report if isinstance(self._report, TestRecord) else None
        if record is None and self._report is True:
            record = current_record()
        if record is not None:
            record.set("compile_time", self._result)
        return self._result

    def __enter__(self) -> CompileTimeWatch:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def result(self) -> CompileTime:
        """The figures of the block; read after it ends."""
        if self._result is not None and self._tap is None:
            return self._result
        raise RuntimeError("watch_compile_time(): .result is read after the 'with' block ends")


def watch_compile_time(report: bool | TestRecord = True) -> CompileTimeWatch:
    """Measure ``torch.compile``'s time per phase and per compiled frame inside a ``with`` block.

    The figures are torch's own (``dynamo_timed``), read from its compilation
    metrics: nothing is timed twice, and nothing is slowed down.  A frame whose
    backward compiles at the first ``.backward()`` counts that backward too when
    it runs inside the block.  ``report=False`` keeps the result out of the
    running test's record; a ``TestRecord`` reports into that one.
    """
    return CompileTimeWatch(report=report)


def finish_test_compile_time(watch: CompileTimeWatch, record: TestRecord) -> CompileTime:
    """At a test's teardown: its whole compile time, with its cold/warm passes, as its ``compile_time`` section.

    ``watch`` was started at the test's setup with ``report=False``; the passes
    are read from what the record already holds (``PassResult.compile_time`` under
    ``extra``), so a pair run by the marker or by ``cold_warm()`` is listed
    (``records.cold_warm.pass_times``: the report's file stores them there only).
    """
    result = watch.stop()
    pairs = pass_times(record.to_json())
    if pairs:
        result = replace(result, passes=tuple(pairs))
    record.set("compile_time", result)
    return result


def compile_time_from_json(data: Any) -> CompileTime | None:
    """The :class:`CompileTime` ``to_json()`` wrote (a child interpreter's pass); None for None."""
    if not isinstance(data, Mapping):
        return None
    frames = tuple(
        FrameCompileTime(
            compile_id=str(f.get("compile_id")),
            function=str(f.get("function")),
            total_s=float(f.get("total_s") or 0.0),
            phases=dict(f.get("phases") or {}),
            failed=f.get("failed"),
        )
        for f in data.get("frames") or ()
    )
    unavailable = tuple(data.get("unavailable") or ())
    note = data.get("note")
    prefix = f"not recorded by this torch: {', '.join(unavailable)}"
    notes = [part for part in (note or "").split("; ") if part and not (unavailable and part == prefix)]
    return CompileTime(
        total_s=float(data.get("total_s") or 0.0),
        phases=dict(data.get("phases") or {}),
        frames=frames,
        unavailable=unavailable,
        notes=tuple(notes),
        passes=tuple(data.get("passes") or ()),
    )
