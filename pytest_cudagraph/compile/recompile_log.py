"""What Dynamo's logs tell a recompile watch, booked as they come: recompiles, recompile-limit hits, graph breaks.

``RecompileLog`` is the listener ``RecompileWatch`` hands to its ``DynamoLogTap``:
at each "Recompiling function ..." record it reads the reasons Dynamo has just
appended to its guard-failure table (or, where the table has none, the record's
own), the user's line that called the function and the watch's own evaluation of
every cached entry's guards; a recompile-limit WARNING is booked on the attempt it
follows; a graph break keeps its site.  The watch turns these into its figures.
"""

from __future__ import annotations

from typing import Any

from .. import _compat as compat
from .call_site import CallSite, resumed_function, user_call_site
from .dynamo_log import (
    graph_break_description,
    limit_hit_description,
    reasons_from_message,
    recompiled_code,
    recompiled_function,
)
from .guard_failures import FailedGuard, evaluated_guard
from .recompile_stats import GraphBreakSite, _Event

__all__ = ["RecompileLog"]


class RecompileLog:
    """Every recompile and recompile-limit hit (``events``, in order) and graph break (``break_sites``) a watch saw."""

    def __init__(self) -> None:
        self.events: list[_Event] = []
        self.orphan_limit_hits: list[str] = []
        # a limit hit with no recompile record before it (its attempt was not logged as one)
        self.orphan_events: list[_Event] = []
        self.break_sites: list[GraphBreakSite] = []
        self._seen: dict[Any, tuple[list, int]] = {}

    def start(self) -> None:
        """Forget an earlier block's bookings; the reasons already in Dynamo's table are not new."""
        self.events.clear()
        self.orphan_limit_hits.clear()
        self.orphan_events.clear()
        self.break_sites.clear()
        self._seen = _guard_failure_positions()

    def _new_guard_failures(self) -> list[str]:
        new: list[str] = []
        now = _guard_failure_positions()
        for code, (reasons, length) in now.items():
            before = self._seen.get(code)
            start = before[1] if before is not None and before[0] is reasons else 0
            new.extend(reasons[start:length])
        self._seen = now
        return new

    def on_recompile(self, message: str) -> None:
        reasons = self._new_guard_failures() or reasons_from_message(message)
        code = recompiled_code(message)
        self.events.append(
            _Event(
                recompiled_function(message),
                reasons,
                call_site=_call_site(code),
                evaluated=_evaluated_guards(),
            )
        )

    def on_graph_break(self, message: str) -> None:
        described = graph_break_description(message)
        if described is not None:
            reason, location = described
            self.break_sites.append(GraphBreakSite(reason, location, user_call_site()))

    def on_limit_hit(self, message: str) -> None:
        function, text = limit_hit_description(message)
        # Dynamo logs the reasons of this attempt just before the WARNING: that
        # attempt compiled nothing, so it is booked as the limit hit.
        if self.events and self.events[-1].function == function and self.events[-1].limit_hit is None:
            self.events[-1].limit_hit = text
        else:
            self.orphan_limit_hits.append(text)
            self.orphan_events.append(_Event(function, [], call_site=_call_site(None), limit_hit=text))


def _evaluated_guards() -> list[FailedGuard] | None:
    """The watch's own evaluation of every cached entry's guards, inside the recompile record; None if not done."""
    found = compat.failing_guards_of_recompile()
    return None if found is None else [evaluated_guard(item) for item in found]


def _call_site(code: tuple[str, str, int] | None) -> CallSite | None:
    """The user's line that called the function being recompiled: its own frame (``code``) is not it."""

    # The code after a graph break is a resume function Dynamo made, called from the
    # frame of the function that broke: that frame is the compiled code too.
    resumed = resumed_function(code[0]) if code is not None else None

    def is_compiled_function(frame: Any) -> bool:
        f_code = frame.f_code
        if code is None:
            return False
        if (f_code.co_name, f_code.co_filename, f_code.co_firstlineno) == code:
            return True
        return resumed is not None and f_code.co_name == resumed and f_code.co_filename == code[1]

    return user_call_site(is_compiled_function)


def _guard_failure_positions() -> dict[Any, tuple[list, int]]:
    # The list object is kept, not only its length: reset() drops the lists,
    # and a fresh list as long as the old one must still read as new.
    return {code: (reasons, len(reasons)) for code, reasons in list(compat.guard_failures_table().items())}
