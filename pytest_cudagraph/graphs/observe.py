"""Observing the CUDA graphs the code under test captures itself: ``observe_graphs()``.

An engine captures its own graphs (vLLM's ``CUDAGraphWrapper``, SGLang's
``CudaGraphRunner``, TensorRT-LLM's runners, Hugging Face's static-cache
generation through cudagraph trees).  ``observe_graphs()`` records every graph
captured inside the block, on any stream, from raw ``torch.cuda.CUDAGraph``
captures, ``torch.cuda.graph(...)`` blocks and cudagraph trees alike, through the
gateway (``_compat.observing_graphs``: torch's graph hooks in 2.14+, a wrapper of
``CUDAGraph``'s methods installed only for the block before that).  Per capture
it records (``observe_verdict.ObservedCapture``):

- the call site: the first frame outside torch, the plugin and Inductor's
  generated code, which is the engine's line;
- the pool (its id), and the pool's reserved bytes before and after;
- the blocks still allocated in the pool right after the capture;
- the device memory behind the allocator: with the wrapper, across
  ``capture_begin`` to ``capture_end`` (instantiation included); with torch's
  hooks, across instantiation only (the start hook runs inside the capture,
  where the plugin makes no CUDA call);
- the capture's seconds (``capture_begin`` to the end of instantiation);
- the shapes of the tensors the captured region read where they can be seen: a
  cudagraph-tree recording's inputs that are not static, else the CUDA tensors
  the capturing function holds in its local variables (directly, or in a tuple,
  list or dict) when the capture begins, parameters and CPU tensors apart;
- its replays before the observation ended, and whether it was still alive then.

Captures the plugin makes itself (``capture_graphs``, the cudagraphs fixture)
are not recorded: their own checks cover them.  Nor is the empty graph a
cudagraph tree manager captures to make its pool.

The recording is ``observe_recorder.GraphRecorder``'s; the verdict
``observe_verdict``'s; and two scores the test asks for while observing,
``check_estimate()`` (the engine's graph-memory estimate against what its graphs
hold) and ``check_coverage()`` (every batch the engine serves replays a graph),
are ``observe_scores``'.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from .. import _compat
from ..errors import InvariantViolation, MisuseError
from ..records.record import TestRecord, current_record
from .capture_cost import shared_device
from .observe_recorder import AllocatorReadings, GraphRecorder, Readings, error_text, refresh_read_frames
from .observe_scores import Coverage, EstimateScore, measure_coverage
from .observe_verdict import ObservedCapture, ObservedGraphs, ObserveOptions

__all__ = ["GraphObservation", "observe_graphs"]

PoolKey = tuple[int, int]


class GraphObservation:
    """Records every CUDA graph captured while active (a context manager); ``result()`` is the verdict.

    On exit it puts the gateway's hooks or wrappers back, also when the block
    raised, and reports into ``record`` (default: the running test's) as the
    section ``observed_graphs``.

    Example::

        with observe_graphs(expect_sizes=[1, 2, 4, 8]) as observed:
            runner = DecodeRunner(model, sizes=[1, 2, 4, 8])
            runner.capture()
            runner(torch.randn(4, 256, device="cuda"))
        observed.check()   # InvariantViolation naming what failed
    """

    def __init__(
        self,
        options: ObserveOptions | None = None,
        *,
        device: int | None = None,
        record: TestRecord | None = None,
        readings: Readings | None = None,
    ):
        self.options = options or ObserveOptions()
        self.record = record
        self.readings = readings if readings is not None else AllocatorReadings(device)
        self.recorder = GraphRecorder(self.readings)
        self.hooks = ""
        self.active = False
        self._context: Any = None
        self._result: ObservedGraphs | None = None
        self._workspace: frozenset[int] | None = None
        # check_estimate() and check_coverage() results, in call order
        self.scores: list[EstimateScore | Coverage] = []

    def __enter__(self) -> GraphObservation:
        if isinstance(self.readings, AllocatorReadings) and self.readings.device_index is None:
            self.readings.device_index = _current_device()
        self._context = _compat.observing_graphs(self.recorder)
        self.hooks = self._context.__enter__()
        self.active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        self.active = False
        try:
            # a graph the observed code deleted is released while the release is still heard; no gc.collect():
            # it costs more than every capture's own observation together (a graph held only by a reference
            # cycle is listed as alive at the end)
            refresh_read_frames(sys._getframe(1))
        finally:
            self._context.__exit__(None, None, None)
            self._result = self._build()
        record = self.record if self.record is not None else current_record()
        if record is not None:
            record.set("observed_graphs", self._result)

    def _build(self) -> ObservedGraphs:
        at_end: tuple[tuple[PoolKey, int], ...] = ()
        errors = list(self.recorder.errors)
        try:
            at_end = self.recorder.finish()
            workspace = self.readings.workspace_sizes() if self.recorder.captures else frozenset()
        except Exception as error:  # a reading that failed is said, not passed over
            errors.append(error_text(error))
            workspace = frozenset()
        return self._with_scores(
            ObservedGraphs(
                captures=tuple(self.recorder.captures),
                options=self.options,
                hooks=self.hooks,
                pool_bytes_at_end=at_end,
                workspace_sizes=workspace,
                errors=tuple(errors),
                shared_device=shared_device() if self.recorder.captures else None,
            )
        )

    def result(self) -> ObservedGraphs:
        """The verdict: final after the block, what was recorded so far while it runs."""
        if self._result is not None and not self.active:
            return self._result
        return self._with_scores(
            ObservedGraphs(
                tuple(self.recorder.captures),
                self.options,
                self.hooks,
                errors=tuple(self.recorder.errors),
                workspace_sizes=self._workspace_sizes(),
            )
        )

    def _workspace_sizes(self) -> frozenset[int]:
        """cuBLAS's workspace sizes, read once the first graph is captured (the score sets its blocks apart)."""
        if self._workspace is None and self.recorder.captures:
            try:
                self._workspace = self.readings.workspace_sizes()
            except Exception:
                self._workspace = frozenset()
        return self._workspace or frozenset()

    @property
    def captures(self) -> tuple[ObservedCapture, ...]:
        return self.result().captures

    def check(self, context: str | None = None) -> None:
        """Raise :class:`InvariantViolation` with the verdict's message when any check failed."""
        __tracebackhide__ = True
        result = self.result()
        if not result.passed:
            raise InvariantViolation(result.message(context or ""))

    def check_estimate(self, estimate_bytes: int, *, within: float = 0.10) -> EstimateScore:
        """Score the engine's own graph-memory estimate against what its graphs hold (``pool_peak_bytes``).

        Fails (:class:`InvariantViolation`) when ``estimate_bytes`` is off by more
        than ``within`` (a fraction) either way; the message gives the estimate, the
        measured peak and the ratio, cuBLAS's workspace in the pools on a line of
        its own, the largest single graph and the sum over sizes.  Call it once the
        engine has captured, inside the observation or after it.  The score goes to
        the report (``observed_graphs.estimates``) either way.
        """
        __tracebackhide__ = True
        if isinstance(estimate_bytes, bool) or not isinstance(estimate_bytes, int) or estimate_bytes < 0:
            raise MisuseError(
                f"check_estimate(estimate_bytes={estimate_bytes!r}): give the engine's estimate as a number of bytes "
                f"(an int, 0 or more)"
            )
        if isinstance(within, bool) or not isinstance(within, (int, float)) or not 0 <= within < 10:
            raise MisuseError(f"check_estimate(within={within!r}): give a fraction such as 0.10 (10% either way)")
        result = self.result()
        captured = [c for c in result.captures if c.failed is None]
        if not captured:
            raise MisuseError(
                "check_estimate(): no CUDA graph was captured while observed, so there is nothing to score the "
                "estimate against; call it after the engine has captured its graphs, inside the observation"
            )
        try:
            score = result.score_estimate(estimate_bytes, within)
        except ValueError:
            raise InvariantViolation(
                "check_estimate(): the pools the graphs were captured into could not be read, so the estimate "
                "cannot be scored" + (f" ({result.errors[0]})" if result.errors else "")
            ) from None
        self.scores.append(score)
        self._update_record()
        if not score.passed:
            raise InvariantViolation(score.message())
        return score

    def check_coverage(
        self,
        call: Callable[[Any], Any],
        batches: Iterable[int],
        make_input: Callable[[int], Any],
        *,
        max_padding: int | None = None,
    ) -> Coverage:
        """Call the engine once per batch size and check that every call replayed a graph.

        ``call(make_input(batch))`` runs for each batch in ``batches`` (for example
        ``range(1, max_num_seqs + 1)``); the graph replays during each call are
        counted.  Fails (:class:`InvariantViolation`) listing the batches as ranges
        (``33-48 ran eager: no graph replayed``) when a call replayed no graph, and
        when one replayed a graph captured for a size more than ``max_padding``
        above the batch.  The replay ratio and the padding per batch go to the report
        (``observed_graphs.coverage``).  Must run inside the observation.
        """
        __tracebackhide__ = True
        if not self.active:
            raise MisuseError(
                "check_coverage(): the observation is not running; call it inside `with observe_graphs() as "
                "observed:` or in a test with @pytest.mark.cudagraph(observe=True)"
            )
        sizes = [int(b) for b in batches]
        if not sizes or any(b < 1 for b in sizes):
            raise MisuseError(f"check_coverage(batches={sizes!r}): give the batch sizes to serve, each 1 or more")
        if max_padding is not None and (
            isinstance(max_padding, bool) or not isinstance(max_padding, int) or max_padding < 0
        ):
            raise MisuseError(
                f"check_coverage(max_padding={max_padding!r}): give a number of rows (0 or more), or None"
            )
        coverage = measure_coverage(
            call,
            sizes,
            make_input,
            self.recorder.replay_counts,
            lambda: {c.index: c.size for c in self.recorder.captures},
            max_padding,
        )
        self.scores.append(coverage)
        self._update_record()
        if not coverage.passed:
            raise InvariantViolation(coverage.message())
        return coverage

    def _update_record(self) -> None:
        """Put the scores into the built verdict where the observation has ended (they join it on exit otherwise)."""
        if self._result is not None and not self.active:
            self._result = self._with_scores(self._result)
            record = self.record if self.record is not None else current_record()
            if record is not None:
                record.set("observed_graphs", self._result)

    def _with_scores(self, result: ObservedGraphs) -> ObservedGraphs:
        return replace(
            result,
            estimates=tuple(s for s in self.scores if isinstance(s, EstimateScore)),
            coverage=tuple(s for s in self.scores if isinstance(s, Coverage)),
        )


def _current_device() -> int | None:
    if not _compat.cuda_available():
        return None
    import torch

    return int(torch.cuda.current_device())


def observe_graphs(
    expect_sizes: Iterable[int] | None = None,
    *,
    one_pool: bool = True,
    pool_check: bool = True,
    require_replay: bool = False,
    allow_capture_failures: bool = False,
    device: int | None = None,
    record: TestRecord | None = None,
) -> GraphObservation:
    """A ``GraphObservation`` over the ``with`` block: every CUDA graph captured inside it, and the verdict.

    ``expect_sizes``: the sizes the engine must capture (its config's list);
    ``one_pool=False``, ``pool_check=False`` turn those checks off;
    ``require_replay=True`` fails on a graph never replayed;
    ``allow_capture_failures=True`` lets a failed capture pass.
    """
    options = ObserveOptions(
        one_pool=bool(one_pool),
        pool_check=bool(pool_check),
        expect_sizes=None if expect_sizes is None else tuple(int(s) for s in expect_sizes),
        require_replay=bool(require_replay),
        allow_capture_failures=bool(allow_capture_failures),
    )
    return GraphObservation(options, device=device, record=record)
