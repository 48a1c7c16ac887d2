"""How many CUDA graphs the cudagraph trees recorded over a block, across the block's own resets of Dynamo.

Three ways to count, the first this torch has:

* Dynamo's CUDAGRAPH_RECORDING start callback (2.8+, ``_compat.watch_cudagraph_recordings``);
* the tree call meter's count of ``record_function`` calls (``_compat.TreeCallMeter``);
* the tree manager's nodes that are new since the block began.

``torch._dynamo.reset()`` in the block (``torch.compiler.reset()`` calls it) takes
the callback off Dynamo and shuts the trees down.  The count answers each reset it
sees (``_compat.on_dynamo_reset``): it adds the nodes of the trees about to go,
and registers the callback again right after.  The meter also registers the
callback again before each recording, so a reset reached by a name the plugin
does not wrap misses nothing while the meter sees every call.  Where the count
cannot know what it missed, :meth:`RecordingCount.lost_sight` says so in one
sentence naming the line after which recordings could not be counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _compat
from ..compile.call_site import user_call_site

__all__ = ["RecordingCount"]


class RecordingCount:
    """The recordings of the cudagraph trees between :meth:`start` and :meth:`stop`.

    ``nodes()`` reads the tree manager's node count (the last way of counting);
    ``meter`` is the block's ``TreeCallMeter`` (or None).  ``resets``: the user's line
    of each reset seen, in order.
    """

    def __init__(self, nodes: Callable[[], int], meter: Any = None):
        self._read_nodes = nodes
        self._meter = meter
        self.resets: list[str] = []
        self.mode = "nodes"
        self._callback: Any = None
        self._callback_count = 0
        self._meter_before = 0
        self._nodes_before = 0
        self._nodes_counted = 0
        self._sight: Any = None
        self._lost: str | None = None

    def start(self) -> RecordingCount:
        meter = self._meter
        metered = meter is not None and meter.available
        try:
            self._callback = _compat.watch_cudagraph_recordings(self._on_recording)
            if self._callback is not None:
                self.mode = "callback"
                if metered:
                    meter.on_before_recording = self._before_recording
            elif metered:
                self.mode = "meter"
                self._meter_before = meter.recorded_graphs
            else:
                self._nodes_before = self._read_nodes()
            self._sight = _compat.on_dynamo_reset(before=self._before_reset, after=self._after_reset)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._sight is not None:
            self._sight.close()
            self._sight = None
        if self._callback is not None:
            self._callback.close()
        if self._meter is not None and self._meter.on_before_recording == self._before_recording:
            self._meter.on_before_recording = None

    def value(self) -> int:
        """The recordings counted so far (see :meth:`lost_sight` before trusting it)."""
        if self.mode == "callback":
            return self._callback_count
        if self.mode == "meter":
            return self._meter.recorded_graphs - self._meter_before
        return self._nodes_counted + max(0, self._read_nodes() - self._nodes_before)

    # -- answering resets -----------------------------------------------------
    def _on_recording(self) -> None:
        self._callback_count += 1

    def _before_recording(self) -> None:
        try:
            self._callback.ensure()
        except Exception as exc:  # the recording goes on; the count says what it could not count
            self._lose(
                f"recordings after {self._after_what()} could not be counted (registering Dynamo's recording "
                f"callback again failed: {_text(exc)})"
            )

    def _before_reset(self, frame: Any) -> None:
        site = user_call_site(start=frame) if frame is not None else None
        self.resets.append(site.describe() if site is not None else "a line outside the user's code")
        if self.mode == "nodes":
            self._nodes_counted += max(0, self._read_nodes() - self._nodes_before)

    def _after_reset(self, frame: Any) -> None:
        if self._callback is not None:
            self._callback.ensure()
        if self.mode == "nodes":
            self._nodes_before = self._read_nodes()

    # -- what it could not see ------------------------------------------------
    def lost_sight(self) -> str | None:
        """One sentence naming what could not be counted, from which line on; None where nothing was missed."""
        if self._lost is None:
            self._lost = self._check()
        return self._lost

    def _check(self) -> str | None:
        errors = self._sight.errors if self._sight is not None else []
        if errors:
            return (
                f"recordings after {self._after_what()} could not be counted (answering the reset failed: {errors[0]})"
            )
        if self._callback is not None and self._callback.ensure() and not self._meter_sees_every_recording():
            return (
                f"recordings after Dynamo's callbacks were cleared {self._where_unseen()} could not be counted "
                "(a reset by a name the plugin does not watch, such as a `reset` imported from torch._dynamo "
                "before the watch began)"
            )
        return None

    def _meter_sees_every_recording(self) -> bool:
        return self._meter is not None and self._meter.intact()

    def _lose(self, sentence: str) -> None:
        if self._lost is None:
            self._lost = sentence

    def _after_what(self) -> str:
        return f"the reset at {self.resets[-1]}" if self.resets else "the start of the watch"

    def _where_unseen(self) -> str:
        if self.resets:
            return f"somewhere after the reset at {self.resets[-1]}"
        return "somewhere in the block"


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
