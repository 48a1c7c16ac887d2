"""Torch's own compilation metrics: one record per compiled frame (and per lazily compiled backward).

Dynamo appends a ``CompilationMetrics`` record to ``torch._dynamo.utils``'s
bounded deque (``get_compilation_metrics()``, 64 records by default) when a
frame's compile ends, and another (``is_forward=False``) when AOTAutograd compiles
that frame's backward at its first ``.backward()``.  Each carries the cumulative
``dynamo_timed`` times of the phases nested in it; the columns read here exist in
2.6 through 2.14 (checked: 2.6, 2.13, 2.14.1):

- ``dynamo_cumulative_compile_time_us``: the whole frame compile (Dynamo and the backend);
- ``aot_autograd_cumulative_compile_time_us``: the backend compile inside it (AOTAutograd
  and what the backend calls; with ``backend="eager"`` just the backend call);
- ``inductor_cumulative_compile_time_us``: ``compile_fx_inner`` (lowering and code generation);
- ``inductor_code_gen_cumulative_compile_time_us``: code generation and loading the module;
- ``triton_compile_time_us``: waiting for the asynchronous kernel compiles (Triton on a
  GPU, the C++ kernels on the CPU);
- ``backward_cumulative_compile_time_us``: a backward record's whole compile;
- ``distributed_ephemeral_timeout_us``: on each FX-graph cache hit, the compile time
  the entry recorded when it was made (``CompiledFxGraph._time_taken_ns``), summed;
  the legacy ``remote_cache_time_saved_s`` is the same figure in seconds, local hits too.

A column is None in a record where its phase did not run (no Inductor on an
AOTAutograd cache hit).  A column this torch's ``CompilationMetrics`` lacks is
reported as missing (:func:`compile_metric_columns_missing`), never as zero.
Nothing here imports torch: a tap started before Dynamo is loaded knows that no
record existed before it.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

_UTILS = "torch._dynamo.utils"

# capability -> (column in microseconds, legacy column in seconds): the first one this torch has
_COLUMNS: dict[str, tuple[str, str | None]] = {
    "frame_us": ("dynamo_cumulative_compile_time_us", "entire_frame_compile_time_s"),
    "backend_us": ("aot_autograd_cumulative_compile_time_us", "backend_compile_time_s"),
    "inductor_us": ("inductor_cumulative_compile_time_us", "inductor_compile_time_s"),
    "codegen_us": ("inductor_code_gen_cumulative_compile_time_us", "code_gen_time_s"),
    "kernel_compile_us": ("triton_compile_time_us", None),
    "backward_us": ("backward_cumulative_compile_time_us", None),
    "cache_saved_us": ("distributed_ephemeral_timeout_us", "remote_cache_time_saved_s"),
}
COMPILE_METRIC_CAPABILITIES = tuple(_COLUMNS)

# records kept while a tap runs, so that a test compiling many frames loses none of them
_TAP_LIMIT = 100_000


def _utils() -> Any:
    """``torch._dynamo.utils`` if something loaded it already (then records may exist), else None."""
    return sys.modules.get(_UTILS)


def _field_names(utils: Any) -> frozenset[str]:
    cls = getattr(utils, "CompilationMetrics", None)
    if cls is None or not dataclasses.is_dataclass(cls):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(cls))


def compile_metric_columns_missing() -> tuple[str, ...]:
    """The capabilities (``frame_us``, ``inductor_us``, ...) this torch's compilation metrics do not record.

    Loads ``torch._dynamo.utils``; everything is missing when torch has no
    ``get_compilation_metrics()`` (a torch older than this plugin supports).
    """
    import importlib

    utils = importlib.import_module(_UTILS)
    if not callable(getattr(utils, "get_compilation_metrics", None)):
        return COMPILE_METRIC_CAPABILITIES
    names = _field_names(utils)
    return tuple(cap for cap, (column, legacy) in _COLUMNS.items() if column not in names and legacy not in names)


def _value_us(record: Any, column: str, legacy: str | None) -> int | None:
    value = getattr(record, column, None)
    if value is not None:
        return int(value)
    if legacy is not None:
        seconds = getattr(record, legacy, None)
        if seconds is not None:
            return int(round(float(seconds) * 1e6))
    return None


def _plain_record(record: Any) -> dict[str, Any]:
    """One ``CompilationMetrics`` as the library reads it: who, which pass, and each phase in microseconds."""
    out: dict[str, Any] = {
        "compile_id": None if record.compile_id is None else str(record.compile_id),
        "name": getattr(record, "co_name", None),
        "filename": getattr(record, "co_filename", None),
        "line": getattr(record, "co_firstlineno", None),
        # absent before 2.7 (no runtime records then): a record is a compile-time one
        "is_forward": getattr(record, "is_forward", None) is not False,
        "is_runtime": getattr(record, "is_runtime", None) is True,
        "fail_type": getattr(record, "fail_type", None),
        "duration_us": getattr(record, "duration_us", None),
    }
    for capability, (column, legacy) in _COLUMNS.items():
        out[capability] = _value_us(record, column, legacy)
    out["caches_off"] = caches_off_during_compile(record)
    return out


# (record column, config module, setting, value that turns caches off, layers it turns off).
# The record holds each config module's settings as JSON, taken while the frame compiled:
# a setting patched inside a test body is seen here, though it is undone before the body ends.
# force_disable_caches is torch.compiler.config's from 2.11, torch._inductor.config's before.
_CACHE_SETTINGS = (
    ("compiler_config", "torch.compiler.config", "force_disable_caches", True, ("fxgraph", "aot_autograd")),
    ("inductor_config", "torch._inductor.config", "force_disable_caches", True, ("fxgraph", "aot_autograd")),
    ("inductor_config", "torch._inductor.config", "fx_graph_cache", False, ("fxgraph", "aot_autograd")),
    ("functorch_config", "torch._functorch.config", "enable_autograd_cache", False, ("aot_autograd",)),
)


def caches_off_during_compile(record: Any) -> dict[str, str]:
    """Cache layer -> the setting that had it off while this frame compiled (empty where none did, or unknown).

    AOTAutograd stores its entries through the FX-graph cache, so a setting that
    turns the FX-graph cache off turns both off.
    """
    import json

    off: dict[str, str] = {}
    for column, module, setting, value, layers in _CACHE_SETTINGS:
        text = getattr(record, column, None)
        if not isinstance(text, str) or setting not in text:
            continue
        try:
            config = json.loads(text)
        except ValueError:
            continue
        if isinstance(config, dict) and config.get(setting) is value:
            for layer in layers:
                off.setdefault(layer, f"{module}.{setting} was {value} while the test compiled")
    return off


class CompilationMetricsTap:
    """The compilation-metrics records torch appends between :meth:`start` and :meth:`stop`.

    While it runs, torch's deque of records is widened (``set_compilation_metrics_limit``),
    so none is dropped however many frames compile; the old limit is set back on stop.
    A tap started before ``torch._dynamo.utils`` was loaded knows that every record
    found at stop is new; if torch dropped some anyway (the limit was not widened, or
    someone called ``clear_compilation_metrics()``), ``stop()`` says so.
    """

    def __init__(self) -> None:
        self._before: list[Any] | None = None
        self._old_limit: int | None = None

    def start(self) -> CompilationMetricsTap:
        utils = _utils()
        if utils is None or not callable(getattr(utils, "get_compilation_metrics", None)):
            self._before = []
            return self
        # the records themselves are kept, so their ids cannot be reused by new ones
        self._before = list(utils.get_compilation_metrics())
        deque = getattr(utils, "_compilation_metrics", None)
        set_limit = getattr(utils, "set_compilation_metrics_limit", None)
        maxlen = getattr(deque, "maxlen", None)
        if callable(set_limit) and maxlen is not None and maxlen < _TAP_LIMIT:
            self._old_limit = maxlen
            set_limit(_TAP_LIMIT)
        return self

    def stop(self) -> tuple[list[dict[str, Any]], list[str]]:
        """``(records, notes)``: the new records as plain dicts (compile ids, names, phases in µs), and caveats."""
        notes: list[str] = []
        utils = _utils()
        before = self._before or []
        self._before = None
        if utils is None or not callable(getattr(utils, "get_compilation_metrics", None)):
            return [], notes
        seen = {id(record) for record in before}
        now = list(utils.get_compilation_metrics())
        new = [record for record in now if id(record) not in seen]
        widened, self._old_limit = self._old_limit, None
        if widened is not None:
            utils.set_compilation_metrics_limit(widened)
            if before and len(new) == len(now):
                notes.append("torch's compilation records were cleared inside the block; compiles before that are lost")
        else:
            maxlen = getattr(getattr(utils, "_compilation_metrics", None), "maxlen", None)
            if maxlen is not None and len(now) >= maxlen and len(new) == len(now):
                notes.append(
                    f"torch keeps only its last {maxlen} compilation records; compiles before those are not counted"
                )
        return [_plain_record(record) for record in new], notes
