"""What ``torch.compile(mode="reduce-overhead")`` did with CUDA graphs: recordings and skips.

Reduce-overhead hands compiled graphs to Inductor's cudagraph trees, which record a
CUDA graph per new input shape (after a warm-up run) and silently fall back to
running without graphs when they cannot record one: mutated inputs, CPU tensors,
dynamic shapes past a limit.  Those skips only show as a WARNING and a counter, so
a model can lose its graphs without any test noticing.  ``watch_trees`` counts,
over a block:

- ``recordings``: CUDA graphs recorded (Dynamo's CUDAGRAPH_RECORDING callback, or
  the tree manager's node count where that callback does not exist);
- ``skips`` and ``skip_reasons``: ``counters["inductor"]["cudagraph_skips"]`` and the
  "skipping cudagraphs due to ..." messages, verbatim;
- ``recorded_non_static_inputs``: inputs copied into the graph before each replay
  (a cost that a static input avoids);
- ``skipped``: each skip as data (:class:`CudagraphSkip`): torch's reason, the
  function and source line, and the input it concerns by the user's argument name
  (pytorch#117281: torch names no input of a mutation skip);
- ``regions`` and ``calls``: how much got cudagraphed (pytorch#124506): every
  compiled region that ran and whether it ran as a graph, every call and what it
  did (replayed, recorded, warm-up, without a graph);
- ``rerecords``: per function, the shapes it was recorded at in order, and its
  re-recordings, a new shape recorded while an earlier recording exists (``rerecords``).

``assert_fully_cudagraphed()`` fails when any region ran without a graph, naming
each skip; ``@pytest.mark.cudagraph(trees="all")`` applies it to a whole test.

A ``torch._dynamo.reset()`` in the block (``torch.compiler.reset()`` too) takes the
recording callback off Dynamo and shuts the trees down; a ``torch._logging.set_logs()``
puts the skip loggers' levels back.  The watch answers each (``_compat.resets``):
it registers its callback again, counts the trees it had before the reset, and
lowers the levels again.  Where it cannot know what it missed, its result carries
``lost_sight``, one sentence naming what could not be counted after which line;
``recordings`` then raises instead of giving a short count, and both of the
marker's verdicts fail with that sentence.
"""

from __future__ import annotations

import linecache
import logging
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _compat
from ..compile.call_site import (
    in_function,
    is_library_file,
    relative_path,
    resumed_function,
    same_statement,
)
from ..compile.guard_failures import local_names
from ..errors import InvariantViolation
from ..records.record import TestRecord, current_record
from ..render.plain_text import count_noun
from .rerecords import FunctionRerecords, count_rerecords
from .tree_recordings import RecordingCount

__all__ = ["CudagraphSkip", "ReduceOverheadResult", "TreeWatch", "watch_trees"]

# what a call of a region did (_compat.TreeCallMeter's outcomes)
CALL_KINDS = ("replayed", "recorded", "warmup", "without_graph")
SKIP_PREFIX = re.compile(r"^(?:skipping cudagraphs? due to )+")
SKIP_FRAME = re.compile(r'File "(?P<file>.+?)", line (?P<line>\d+), in (?P<function>\S+)(?:\n(?P<code>[^\n]*))?')
CPU_NODE = re.compile(r"cpu device \((?P<node>\w+)\)")


@dataclass(frozen=True)
class CudagraphSkip:
    """One "skipping cudagraphs due to ..." of reduce-overhead, as data.

    * ``reason``: torch's reason without its prefix and stack, e.g. ``"mutated inputs (1 instances)"``;
    * ``function``: the user's function it happened in (a graph-break continuation named
      after the function it continues), None when torch gave no stack;
    * ``location``/``code``: ``file:line`` and source of the op that caused it (the mutation,
      the CPU use), where torch's message has it;
    * ``arguments``: the user's names of the inputs it concerns (``x``, ``self.cache``), or the
      graph's input names (``arg0_1``) where no user name could be found;
    * ``named_by``: ``"identity"`` (the same tensor found among the caller's variables),
      ``"graph input"`` (Dynamo's source of the graph input), ``"placeholder"`` or ``"none"``.
    """

    reason: str
    function: str | None = None
    location: str | None = None
    code: str = ""
    arguments: tuple[str, ...] = ()
    named_by: str = "none"
    message: str = ""

    def describe(self) -> str:
        """One line: the reason, the argument, the function and its line."""
        parts = [self.reason]
        if self.arguments:
            noun = "argument" if len(self.arguments) == 1 else "arguments"
            parts.append(f"{noun} {', '.join(repr(a) for a in self.arguments)}")
        if self.function:
            parts.append(f"in {self.function}")
        if self.location:
            parts.append(f"at {self.location}" + (f" `{self.code}`" if self.code else ""))
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "function": self.function,
            "location": self.location,
            "code": self.code,
            "arguments": list(self.arguments),
            "named_by": self.named_by,
        }


def parse_skip_message(message: str) -> CudagraphSkip:
    """A skip WARNING's text as a :class:`CudagraphSkip` (no argument names: those need the live frames)."""
    head = re.split(r"\.?\s*Found from\s*:?", message, maxsplit=1)[0].strip()
    reason = SKIP_PREFIX.sub("", head).strip().rstrip(".")
    frames = SKIP_FRAME.findall(message)
    if not frames:
        return CudagraphSkip(reason, message=message)
    file, line, function, code = frames[-1]  # the innermost: the op itself
    if not code.strip() or code.lstrip().startswith("File "):
        import linecache

        code = linecache.getline(file, int(line))
    return CudagraphSkip(
        reason,
        function=resumed_function(function) or function,
        location=f"{relative_path(file)}:{line}",
        code=code.strip(),
        message=message,
    )


_COUNTERS = {
    "skips": "cudagraph_skips",
    "recorded_non_static_inputs": "cudagraph_recorded_non_static_inputs",
    "partitions": "cudagraph_partitions",
}


@dataclass(frozen=True)
class ReduceOverheadResult:
    """Reduce-overhead figures over one watched block (report section ``reduce_overhead``)."""

    recordings: int
    skips: int
    skip_reasons: tuple[str, ...]
    recorded_non_static_inputs: int
    partitions: int
    tree_nodes: int
    pool_bytes: int | None
    skipped: tuple[CudagraphSkip, ...] = ()
    # region name -> {"replayed", "recorded", "warmup", "without_graph"} calls; None where not metered
    regions: Mapping[str, Mapping[str, int]] | None = None
    # function -> its recordings and re-recordings at new shapes (rerecords.py); None where not metered
    rerecords: Mapping[str, FunctionRerecords] | None = None
    # what the watch could not count, and from which line on; None where it saw everything
    lost_sight: str | None = None

    @property
    def calls(self) -> dict[str, int] | None:
        """Calls of every region by what they did, or None where this torch's trees could not be metered."""
        if self.regions is None:
            return None
        total = dict.fromkeys(CALL_KINDS, 0)
        for calls in self.regions.values():
            for kind, n in calls.items():
                total[kind] = total.get(kind, 0) + n
        return total

    @property
    def regions_cudagraphed(self) -> int | None:
        """Regions that ran as a CUDA graph at least once."""
        if self.regions is None:
            return None
        return sum(1 for calls in self.regions.values() if calls.get("replayed", 0) + calls.get("recorded", 0))

    @property
    def fraction_of_calls(self) -> float | None:
        """Calls that ran as graphs (recorded or replayed) among the calls after each region's warm-up."""
        calls = self.calls
        if not calls:
            return None
        graphs = calls["replayed"] + calls["recorded"]
        counted = graphs + calls["without_graph"]
        return graphs / counted if counted else None

    def to_json(self) -> dict[str, Any]:
        out = {
            "recordings": self.recordings,
            "skips": self.skips,
            "skip_reasons": list(self.skip_reasons),
            "recorded_non_static_inputs": self.recorded_non_static_inputs,
            "partitions": self.partitions,
            "tree_nodes": self.tree_nodes,
            "pool_bytes": self.pool_bytes,
            "skipped": [skip.to_json() for skip in self.skipped],
        }
        if self.regions is not None:
            out["regions"] = {name: dict(calls) for name, calls in self.regions.items()}
            out["regions_total"] = len(self.regions)
            out["regions_cudagraphed"] = self.regions_cudagraphed
            out["calls"] = self.calls
            out["fraction_of_calls"] = self.fraction_of_calls
        if self.rerecords is not None:
            out["rerecords"] = {name: counts.to_json() for name, counts in self.rerecords.items()}
        if self.lost_sight is not None:
            out["lost_sight"] = self.lost_sight
        return out


class _ReasonHandler(logging.Handler):
    """Keeps each skip message, and what it concerns while the skipping code's frames are still live."""

    def __init__(self, sink: list[str], details: list[CudagraphSkip]):
        super().__init__(level=logging.WARNING)
        self.sink = sink
        self.details = details

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a broken log call must not break the test
            message = str(record.msg)
        self.sink.append(message)
        skip = parse_skip_message(message)
        try:
            context = _compat.cudagraph_skip_context()
            skip = _with_arguments(_at_live_line(skip, context), context)
        except Exception:  # what could not be read stays torch's text
            pass
        self.details.append(skip)


def _at_live_line(skip: CudagraphSkip, context: dict[str, Any] | None) -> CudagraphSkip:
    """The skip's line checked against the code that runs.

    Torch takes the line from the graph's stack traces, which Inductor's FX graph
    cache keeps from whichever function first compiled the same graph, maybe in
    another file.  A line inside a function of the live stack (or the one Dynamo is
    compiling) stands; else the same statement is looked up in those functions.
    """
    from dataclasses import replace

    if skip.location is None:
        return skip
    file, _, line = skip.location.rpartition(":")
    codes = _live_user_code(context.get("frame") if context else None)
    if context and context.get("code") is not None:
        codes.append(context["code"])
    if not codes or any(in_function(code, file, int(line)) for code in codes):
        return skip
    found = same_statement(codes, file, int(line))
    if found is None:
        return skip
    filename, number, function = found
    return replace(
        skip,
        location=f"{relative_path(filename)}:{number}",
        code=linecache.getline(filename, number).strip(),
        function=resumed_function(function) or function,
    )


def _live_user_code(start: Any) -> list[Any]:
    """Code objects of the user's frames on the stack, outermost first."""
    frame = start if start is not None else sys._getframe(1)
    codes = []
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_library_file(filename) and not _compat.is_generated_code(filename):
            codes.append(frame.f_code)
        frame = frame.f_back
    return list(reversed(codes))


def _with_arguments(skip: CudagraphSkip, context: dict[str, Any] | None) -> CudagraphSkip:
    """The skip with the user's names of the inputs it concerns, found from the live frames."""
    from dataclasses import replace

    # no context: a skip torch logs from a compiled graph loaded from the FX graph cache,
    # which keeps only its reason; the graph input's own name is all there is then
    context = context or {}
    tensors = context.get("tensors") or []
    if tensors:
        names = _names_by_identity(context.get("frame"), tensors)
        found = [n for n in names if n]
        if found and len(found) == len(names):
            return replace(skip, arguments=tuple(found), named_by="identity")
        placeholders = context.get("placeholders") or []
        return replace(skip, arguments=tuple(n or p for n, p in zip(names, placeholders)), named_by="placeholder")
    sources = context.get("sources") or {}
    node = CPU_NODE.search(skip.reason)
    if node and node["node"] in sources:
        source = sources[node["node"]]
        return replace(skip, arguments=(local_names(source),), named_by="graph input")
    if node:
        return replace(skip, arguments=(node["node"],), named_by="placeholder")
    return skip


def _names_by_identity(start: Any, tensors: list[Any]) -> list[str | None]:
    """Each tensor's name among the variables of the user's frame that made the call, and its two callers.

    Reduce-overhead passes the user's tensors through Dynamo, AOTAutograd and Inductor
    as the same Python objects, so the user's own variable is found by identity;
    a module's parameters and buffers are found as ``name.param``.
    """
    import torch

    frame = start
    while frame is not None and (
        is_library_file(frame.f_code.co_filename) or _compat.is_generated_code(frame.f_code.co_filename)
    ):
        frame = frame.f_back
    names: dict[int, str] = {}
    for _ in range(3):
        if frame is None:
            break
        for name, value in list(frame.f_locals.items()):
            if isinstance(value, torch.Tensor):
                names.setdefault(id(value), name)
            elif isinstance(value, torch.nn.Module):
                for sub, tensor in [*value.named_parameters(), *value.named_buffers()]:
                    names.setdefault(id(tensor), f"{name}.{sub}")
            elif isinstance(value, (list, tuple)):
                for index, item in enumerate(value):
                    if isinstance(item, torch.Tensor):
                        names.setdefault(id(item), f"{name}[{index}]")
        frame = frame.f_back
    return [names.get(id(t)) for t in tensors]


class TreeWatch:
    """Counts cudagraph-tree recordings and skips while active (a context manager).

    Invariant it lets a test state: ``watch.recordings == n`` and ``watch.skips == 0``
    (or ``"mutated inputs" in watch.skip_reasons[0]`` for an expected skip).
    Everything it touches (log handlers, logger levels, callbacks) is undone on exit,
    and kept in place across a ``torch._dynamo.reset()`` or ``torch._logging.set_logs()``
    in the block.

    Example::

        with watch_trees() as trees:
            compiled(x64); compiled(x64); compiled(x32); compiled(x32)
        assert trees.recordings == 2 and trees.skips == 0
    """

    def __init__(self, device: int | None = None, record: TestRecord | None = None):
        self.device = device
        self.record = record
        self.skip_reasons: list[str] = []
        self.skipped: list[CudagraphSkip] = []
        self._meter: Any = None
        self._count: RecordingCount | None = None
        self._log_taps: list[Any] = []
        self._logs_sight: Any = None
        self._counters_before: dict[str, int] = {}
        self._result: ReduceOverheadResult | None = None
        self.active = False

    def _device(self) -> int:
        import torch

        return torch.cuda.current_device() if self.device is None else self.device

    def _counter(self, name: str) -> int:
        return _compat.counter_value("inductor", name)

    def _nodes(self) -> int:
        return _compat.cudagraph_tree_node_count(_compat.cudagraph_tree_manager(self._device()))

    def __enter__(self) -> TreeWatch:
        _compat.load_cudagraph_trees()  # creates the loggers and the manager registry

        self._counters_before = {key: self._counter(name) for key, name in _COUNTERS.items()}
        try:
            self._meter = _compat.TreeCallMeter().__enter__()
            self._count = RecordingCount(self._nodes, self._meter).start()
            for name in _compat.cudagraph_skip_logger_names():
                handler = _ReasonHandler(self.skip_reasons, self.skipped)
                tap = _compat.LoggerTap(logging.getLogger(name), handler, logging.WARNING)
                tap.apply()
                self._log_taps.append(tap)
            # set_logs() puts the loggers' levels back to torch's: lower them again
            self._logs_sight = _compat.on_set_logs(after=self._tap_again)
        except BaseException:
            self._release()
            raise
        self.active = True
        return self

    def _tap_again(self, frame: Any) -> None:
        for tap in self._log_taps:
            tap.apply()

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        try:
            self._result = self._snapshot()
        finally:
            self.active = False
            self._release()
        record = self.record if self.record is not None else current_record()
        if record is not None:
            record.set("reduce_overhead", self._result)

    def _release(self) -> None:
        if self._logs_sight is not None:
            self._logs_sight.close()
            self._logs_sight = None
        for tap in self._log_taps:
            tap.restore()
        self._log_taps.clear()
        if self._count is not None:
            self._count.stop()
        if self._meter is not None:
            self._meter.__exit__(None, None, None)

    def _lost_sight(self) -> str | None:
        """What the watch could not see, in one sentence, or None."""
        lost = self._count.lost_sight() if self._count is not None else None
        if lost is None and self._meter is not None and self._meter.available and not self._meter.intact():
            lost = (
                "calls and recordings after a method of torch's cudagraph tree manager was patched over the "
                "plugin's could not be counted"
            )
        if lost is None and self._logs_sight is not None and self._logs_sight.errors:
            lost = f"skips after a torch._logging.set_logs() could not be read ({self._logs_sight.errors[0]})"
        return lost

    def _snapshot(self) -> ReduceOverheadResult:
        deltas = {key: self._counter(name) - self._counters_before.get(key, 0) for key, name in _COUNTERS.items()}
        manager = _compat.cudagraph_tree_manager(self._device())
        nodes = _compat.cudagraph_tree_node_count(manager)
        recordings = self._count.value() if self._count is not None else 0
        pool = _compat.cudagraph_tree_pool(manager) if manager is not None else None
        pool_bytes = None
        if pool is not None:
            from .memory import pool_bytes as read_pool_bytes

            pool_bytes = read_pool_bytes(pool, self._device())
        return ReduceOverheadResult(
            recordings=recordings,
            skips=deltas["skips"],
            skip_reasons=tuple(self.skip_reasons),
            recorded_non_static_inputs=deltas["recorded_non_static_inputs"],
            partitions=deltas["partitions"],
            tree_nodes=nodes,
            pool_bytes=pool_bytes,
            skipped=tuple(self.skipped),
            regions=self._regions(),
            rerecords=self._rerecords(),
            lost_sight=self._lost_sight(),
        )

    def _rerecords(self) -> dict[str, FunctionRerecords] | None:
        meter = self._meter
        if meter is None or not meter.available:
            return None
        return count_rerecords(meter.recordings)

    def _regions(self) -> dict[str, dict[str, int]] | None:
        meter = self._meter
        if meter is None or not meter.available:
            return None
        out: dict[str, dict[str, int]] = {}
        for region in meter.regions.values():
            name = region["name"]
            while name in out:  # two regions of one name (every partition is "partition_0")
                name += "'"
            out[name] = dict(region["calls"])
        return out

    # -- figures (live while active, final after exit) ---------------------------
    def result(self) -> ReduceOverheadResult:
        return self._result if self._result is not None and not self.active else self._snapshot()

    @property
    def recordings(self) -> int:
        """CUDA graphs recorded in the block; raises InvariantViolation where the watch lost sight of some."""
        __tracebackhide__ = True
        result = self.result()
        if result.lost_sight is not None:
            raise InvariantViolation(f"watch_trees(): {result.lost_sight}, so its count of recordings is not given")
        return result.recordings

    @property
    def skips(self) -> int:
        return self.result().skips

    @property
    def recorded_non_static_inputs(self) -> int:
        return self.result().recorded_non_static_inputs

    def assert_fully_cudagraphed(self, context: str | None = None) -> None:
        """Fail unless every compiled region that ran in the block ran as a CUDA graph.

        Raises :class:`InvariantViolation` naming each skip (torch's reason, the input
        by the user's argument name where it can be found, the function and line), each
        region that ran without a graph or was only warmed up, and the fraction of
        calls that ran as graphs.

        Example::

            with watch_trees() as trees:
                step(x); step(x)
            trees.assert_fully_cudagraphed()
        """
        __tracebackhide__ = True
        message = not_fully_cudagraphed(self.result(), context)
        if message is not None:
            raise InvariantViolation(message)


def watch_trees(device: int | None = None, record: TestRecord | None = None) -> TreeWatch:
    """A ``TreeWatch`` over the ``with`` block; it reports into ``record`` (default: the running test's).

    Its ``result()`` is a :class:`ReduceOverheadResult`.
    """
    return TreeWatch(device=device, record=record)


# what to try, by the words of torch's skip reason
SKIP_HINTS = (
    (
        "mutated inputs",
        "return the new value instead of changing an input in place, or make that tensor a buffer or "
        "parameter of the module (static inputs may be mutated)",
    ),
    (
        "cpu device",
        "move that input to the GPU before the call (graph partition, on by default in torch 2.9+, "
        "cudagraphs the code around a CPU op instead of skipping)",
    ),  # fmt: skip
    ("dynamic shape", "mark the sizes that vary, or pad to a few fixed sizes: trees record one graph per shape"),
    ("non-Tensor inputs", "pass tensors, not Python values, to the compiled function"),
    ("incompatible op", "move that op out of the compiled function, or register it as cudagraph-safe"),
)


def not_fully_cudagraphed(result: ReduceOverheadResult, context: str | None = None) -> str | None:
    """The failure of ``assert_fully_cudagraphed``, or None when every region ran as a graph.

    A watch that lost sight (``result.lost_sight``) fails too, in one sentence first.
    """
    regions = result.regions or {}
    no_graph = {name: calls for name, calls in regions.items() if calls.get("without_graph")}
    warm_only = {
        name: calls
        for name, calls in regions.items()
        if not calls.get("replayed") and not calls.get("recorded") and not calls.get("without_graph")
    }
    silent_skips = max(0, result.skips - len(result.skipped))
    where = f"{context}: " if context else ""
    lost = f"{where}{result.lost_sight}, so this check vouches for nothing after it." if result.lost_sight else None
    if not result.skipped and not no_graph and not warm_only and not silent_skips:
        return lost
    lines = [lost, ""] if lost else []
    if result.regions is not None:
        total, graphs = len(regions), result.regions_cudagraphed or 0
        fraction = result.fraction_of_calls
        share = f"; {fraction:.0%} of the calls after warm-up ran as graphs" if fraction is not None else ""
        lines.append(
            f"{where}reduce-overhead ran {count_noun(total - graphs, 'compiled region')} of {total} without a "
            f"CUDA graph{share}."
        )
    else:
        lines.append(f"{where}reduce-overhead skipped CUDA graphs ({count_noun(result.skips, 'skip')}).")
    if result.skipped:
        lines += ["", "skipped:", *[f"  - {skip.describe()}" for skip in result.skipped]]
    if silent_skips:
        lines.append(
            f"  - {count_noun(silent_skips, 'compiled graph')} skipped without a message (a graph with no CUDA "
            "tensor in it runs on the CPU, never as a CUDA graph)"
        )
    if no_graph:
        lines += ["", "regions that ran without a graph (calls):"]
        lines += [f"  - {name}: {_calls_text(calls)}" for name, calls in no_graph.items()]
    if warm_only:
        lines += ["", "regions only warmed up (cudagraph trees run a function eagerly on its first call and "
                      "record it on the next; call it at least twice):"]  # fmt: skip
        lines += [f"  - {name}: {_calls_text(calls)}" for name, calls in warm_only.items()]
    hints = [hint for words, hint in SKIP_HINTS if any(words in skip.reason for skip in result.skipped)]
    if hints:
        lines += ["", "what to try:", *[f"  - {hint}" for hint in hints]]
    return "\n".join(lines)


def _calls_text(calls: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in calls.items() if n)
