"""Watch Dynamo for recompiles, with every guard-failure reason verbatim.

A recompile is a compile of a code object that Dynamo has compiled before: one of
its guards failed (a new shape or dtype, a changed Python scalar, global, closure
value, module attribute, or grad mode), so Dynamo traced it again.  Each one costs
a full compile, and past ``config.recompile_limit`` Dynamo gives up and runs the
function eagerly, *silently*: only a WARNING on Dynamo's ``convert_frame`` logger
shows it.  :func:`watch_recompiles` counts both, per function.

How it listens (and why it survives a Dynamo reset in the test body):

* Dynamo logs one "Recompiling function ..." record per recompile on the
  ``recompiles`` artifact logger, synchronously, right after it appended that
  recompile's reasons to its guard-failure table; the watch reads the new reasons
  at each record (dynamo_log.py taps the logger).  A reset clears the table but
  not the logging state, and nothing is read only at the end.
* The recompile-limit WARNING of Dynamo's ``convert_frame`` logger is caught too;
  the recompile attempt it follows is booked as a limit hit, not as a recompile
  (nothing was compiled: Dynamo ran the function eagerly).
* Graph breaks are a separate figure: the delta of ``counters["graph_break"]``.
* A ``torch._logging.set_logs()`` in the block turns the artifact off and puts
  the loggers back to torch's defaults: the tap applies itself again right after
  (``_compat.on_set_logs``).  Where it still finds itself cut off when the block
  ends, ``lost_sight`` says so and :meth:`RecompileWatch.assert_at_most` fails.

Everything the watch changes (artifact set, logger levels, propagation, handlers,
``error_on_recompile``, the compile stance) is restored when it exits.
"""

from __future__ import annotations

from typing import Any

from .. import _compat as compat
from ..errors import InvariantViolation, MisuseError
from ..records import running
from ..records.record import current_record
from .dynamo_log import DynamoLogTap, function_from_refusal, reasons_from_message
from .expect import ExpectBlock, checked_deltas
from .guard_failures import flat_reason
from .recompile_log import RecompileLog
from .recompile_messages import compile_refused, happened_inside, too_many_recompiles
from .recompile_stats import (
    FunctionRecompiles,
    GraphBreaks,
    GraphBreakSite,
    RecompileEvent,
    RecompileStats,
    _by_function,
    _Event,
    _graph_breaks_since,
    first_call_site,
)

__all__ = [
    "watch_recompiles",
    "RecompileWatch",
    "RecompileStats",
    "RecompileEvent",
    "FunctionRecompiles",
    "GraphBreaks",
    "GraphBreakSite",
]

# the setting error_on_recompile refuses with, as a user sets it
REFUSAL_FLAG = "torch._dynamo.config.error_on_recompile"

# ----------------------------------------------------------------------------
# the watch
# ----------------------------------------------------------------------------


class RecompileWatch:
    """Counts Dynamo recompiles per function, with every guard-failure reason, while active.

    Invariant checked by :meth:`assert_at_most`: the code under watch recompiled at
    most ``n`` times and never hit the recompile limit (past the limit Dynamo runs
    the function eagerly without a word, so a hit always fails).

    Attributes, live during the block and final after it:

    * ``count``: recompiles (compiles of an already-compiled code object beyond its first);
    * ``reasons``: every guard-failure reason verbatim, e.g.
      ``"0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"``
      (one per cached entry that failed, so a third compile brings two);
    * ``by_function``: ``"name (file:line)"`` -> :class:`FunctionRecompiles`;
    * ``limit_hits``: one readable line per recompile-limit hit (function, limit, last reason);
    * ``graph_breaks``: :class:`GraphBreaks`, a separate figure.

    Example::

        with watch_recompiles() as w:
            f(torch.ones(4))
            f(torch.ones(8))      # size mismatch -> one recompile
        assert w.count == 1
        w.assert_at_most(1)

    Two ways to make a compile fail at once, at the call that caused it, with
    :class:`InvariantViolation` naming the function and the reasons:

    * ``watch_recompiles(raise_on_recompile=True)``: for the whole watch, each
      function's first compile is its warm-up and its first *recompile* raises;
    * ``with w.no_compiles():`` (:meth:`no_compiles`): inside the block the warm-up
      is over, and *any* compile raises, a function's first one included.

    :meth:`expect` checks the change of the figures over a block, as vLLM's
    compilation counter does::

        with w.expect(count=1, limit_hits=0):
            f(torch.ones(16))   # exactly one recompile, no limit hit
    """

    # watches active in this process: only the outermost reports into the running test's
    # record, so that a watch inside the recompiles fixture's is not counted twice
    _open_watches = 0

    def __init__(self, *, raise_on_recompile: bool = False):
        self.raise_on_recompile = raise_on_recompile
        # every recompile, limit hit and graph break's site, as Dynamo's logs tell them
        self._log = RecompileLog()
        self._active = False
        self._breaks_before: dict[str, int] = {}
        self._breaks_after: dict[str, int] | None = None
        self._tap = DynamoLogTap(self._log.on_recompile, self._log.on_limit_hit, self._log.on_graph_break)
        # what refused recompiles once raise_on_recompile had set it (None: not asked)
        self._refusing: Any = None

    # -- context manager --------------------------------------------------
    def __enter__(self) -> RecompileWatch:
        if self._active:
            raise MisuseError("this RecompileWatch is already active; create a new one with watch_recompiles()")
        compat.register_dynamo_loggers()
        _start_like_the_marker()

        self._log.start()
        self._breaks_after = None
        self._breaks_before = dict(compat.graph_break_counter())
        self._refusing = None
        self._tap.attach()
        if self.raise_on_recompile:
            try:
                patch = compat.error_on_recompile()
                patch.__enter__()
            except BaseException:
                self._tap.detach()
                raise
            self._tap.add_undo(lambda: patch.__exit__(None, None, None))
            self._refusing = compat.compile_refusal_state()
        self._active = True
        RecompileWatch._open_watches += 1
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        __tracebackhide__ = True
        if not self._active:
            return
        self._active = False
        RecompileWatch._open_watches -= 1
        replaced = self._refusing is not None and compat.compile_refusal_state() != self._refusing
        try:
            self._breaks_after = dict(compat.graph_break_counter())
        finally:
            self._tap.detach()
        if RecompileWatch._open_watches == 0:
            # the outermost watch reports: it saw everything a watch inside it saw
            self._report_to_current_test()
        if exc is not None and self.raise_on_recompile and compat.is_recompile_refusal(exc):
            raise InvariantViolation(self._refusal_message(exc, "after its warm-up compile")) from None
        if exc is None and replaced:
            raise InvariantViolation(
                f"watch_recompiles(raise_on_recompile=True): the body set its own compile stance or {REFUSAL_FLAG} "
                f"inside the watch, so recompiles after that were not refused ({self.count} counted); set them "
                "outside the watch"
            )

    def _report_to_current_test(self) -> None:
        record = current_record()
        if record is None:
            return
        previous = record.get("recompiles")
        stats = self.result()
        record.set("recompiles", previous.merged(stats) if isinstance(previous, RecompileStats) else stats)

    # -- blocks -------------------------------------------------------------
    def no_compiles(self) -> _NoCompileBlock:
        """End the warm-up: inside ``with w.no_compiles():`` any Dynamo compile raises InvariantViolation.

        Unlike ``watch_recompiles(raise_on_recompile=True)``, which lets each function
        compile once, the block refuses every compile, a function's first included.

        Uses ``torch.compiler.set_stance("fail_on_recompile")`` where its refusal names
        the function (not torch 2.6), so a function seen for the first time inside the
        block fails too: warm up every function you call before entering.  The message
        names the function and the guard-failure reasons (torch 2.11+ gives them to the
        stance).  Where the stance cannot name it, ``error_on_recompile`` refuses
        recompiles only, with the function and reasons; first compiles pass.

        Example::

            with watch_recompiles() as w:
                f(x)                    # warm-up compile
                with w.no_compiles():
                    f(x)                # cached: fine
                    f(x.double())       # raises InvariantViolation: dtype mismatch
        """
        return _NoCompileBlock(self)

    def expect(self, **deltas: int) -> ExpectBlock:
        """Check how much each named figure changes inside the ``with`` block.

        The figures (see :data:`EXPECT_FIGURES`): ``count`` (recompiles),
        ``reasons`` (guard-failure reasons), ``limit_hits`` (recompile-limit hits)
        and ``graph_breaks``.  Each keyword gives the exact change expected, a
        non-negative int; figures not named are not checked.  Needs an active watch.

        Failure (InvariantViolation), when the block ends without an error: one row
        per named figure with its value before and after the block, the expected and
        the actual change, then the recompiles and limit hits seen inside the block.
        An unknown figure name is a MisuseError listing the known ones.

        Example::

            with watch_recompiles() as w:
                f(torch.ones(4))                            # first compile: not a recompile
                with w.expect(count=1, limit_hits=0):
                    f(torch.ones(8))                        # size mismatch: one recompile
                with w.expect(count=0):
                    f(torch.ones(8))                        # cached
        """
        __tracebackhide__ = True
        checked = checked_deltas("RecompileWatch.expect()", deltas, EXPECT_FIGURES, "expect(count=1)")

        return ExpectBlock(
            "RecompileWatch.expect()",
            checked,
            EXPECT_FIGURES,
            read=self.figures,
            active=lambda: self._active,
            needs="an active watch: use it inside `with watch_recompiles() as w:`",
            start=lambda: (len(self._log.events), len(self._log.orphan_limit_hits)),
            explain=lambda start_state: _happened_since(self, start_state),
            enters_as=self,
        )

    def figures(self) -> dict[str, int]:
        """The figures ``expect`` checks, now: ``{name: value}`` for each of :data:`EXPECT_FIGURES`."""
        return {
            "count": self.count,
            "reasons": len(self.reasons),
            "limit_hits": len(self.limit_hits),
            "graph_breaks": self.graph_breaks.count,
        }

    # -- figures ----------------------------------------------------------
    @property
    def count(self) -> int:
        return sum(1 for e in self._log.events if e.limit_hit is None)

    @property
    def reasons(self) -> list[str]:
        return [r for e in self._log.events if e.limit_hit is None for r in e.reasons]

    @property
    def limit_hits(self) -> list[str]:
        return [e.limit_hit for e in self._log.events if e.limit_hit is not None] + list(self._log.orphan_limit_hits)

    @property
    def by_function(self) -> dict[str, FunctionRecompiles]:
        return _by_function(self._log.events)

    @property
    def events(self) -> list[RecompileEvent]:
        """Every recompile and limit hit as a :class:`RecompileEvent`, in order: call site, guards, verbatim text."""
        return [e.public() for e in self._log.events] + [e.public() for e in self._log.orphan_events]

    @property
    def verbatim_reasons(self) -> list[str]:
        """Torch's guard-failure reasons exactly as it wrote them (comments, user stacks), for exact matching."""
        return [r for e in self._log.events if e.limit_hit is None for r in e.verbatim]

    @property
    def graph_breaks(self) -> GraphBreaks:
        after = self._breaks_after if self._breaks_after is not None else dict(compat.graph_break_counter())
        return _graph_breaks_since(self._breaks_before, after, self._log.break_sites)

    @property
    def lost_sight(self) -> str | None:
        """What the watch could not count, in one sentence, read when the block ends; None where it saw everything."""
        return self._tap.lost_sight

    def result(self) -> RecompileStats:
        return RecompileStats(
            count=self.count,
            reasons=tuple(self.reasons),
            limit_hits=tuple(self.limit_hits),
            by_function=self.by_function,
            graph_breaks=self.graph_breaks,
            events=tuple(self.events),
            lost_sight=self.lost_sight,
        )

    # -- the check ----------------------------------------------------------
    def assert_at_most(self, n: int, context: str | None = None, *, watch_in_test: bool = True) -> None:
        """Fail unless at most ``n`` recompiles happened and the recompile limit was never hit.

        Raises :class:`InvariantViolation` whose message is the whole report: the
        count against ``n``, a table of function and guard-failure reason, the limit
        hits, the graph breaks, and what to try.  ``watch_in_test=False``: the test
        holds no handle on this watch (the ``max_recompiles`` marker's own), so the
        message names the report's events, not ``.events``.

        Example::

            with watch_recompiles() as w:
                run_model()
            w.assert_at_most(0)
        """
        __tracebackhide__ = True
        count, hits = self.count, self.limit_hits
        if self.lost_sight is not None:
            where = f"{context}: " if context else ""
            raise InvariantViolation(
                f"{where}{self.lost_sight}, so at most {n} recompiles is not vouched for ({count} counted before)."
            )
        if count <= n and not hits:
            return
        error = InvariantViolation(self.failure_report(n, context, watch_in_test=watch_in_test))
        error.site = first_call_site(self.events)
        raise error

    def failure_report(self, n: int, context: str | None = None, *, watch_in_test: bool = True) -> str:
        """The text :meth:`assert_at_most` raises (also when the check passes: a summary of what happened)."""
        return too_many_recompiles(
            n,
            self.count,
            self.events,
            self.limit_hits,
            self.graph_breaks,
            self.reasons,
            compat.recompile_limit_setting(),
            context,
            watch_in_test=watch_in_test,
        )

    def _refusal_message(self, exc: BaseException, when: str) -> str:
        return _refusal_message(self._log.events, exc, when)

    def __repr__(self) -> str:
        return (
            f"<RecompileWatch count={self.count} limit_hits={len(self.limit_hits)} "
            f"graph_breaks={self.graph_breaks.count}{' raise_on_recompile' if self.raise_on_recompile else ''}>"
        )


class _NoCompileBlock:
    """``with watch.no_compiles():`` -- no Dynamo compile may happen inside (see RecompileWatch.no_compiles)."""

    def __init__(self, watch: RecompileWatch):
        self.watch = watch
        self._stance: Any = None
        self._refusing: Any = None

    def __enter__(self) -> RecompileWatch:
        if not self.watch._active:
            raise MisuseError(
                "RecompileWatch.no_compiles() needs an active watch: use it inside `with watch_recompiles() as w:`"
            )
        self._stance = compat.fail_on_any_compile()
        self._stance.__enter__()
        self._refusing = compat.compile_refusal_state()
        return self.watch

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        __tracebackhide__ = True
        replaced = compat.compile_refusal_state() != self._refusing
        self._stance.__exit__(None, None, None)
        if exc is not None and compat.is_recompile_refusal(exc):
            raise InvariantViolation(
                self.watch._refusal_message(exc, "inside `with w.no_compiles():`, after the warm-up")
            ) from None
        if exc is None and replaced:
            raise InvariantViolation(
                "inside `with w.no_compiles():` the body set its own compile stance or "
                f"{REFUSAL_FLAG}, so compiles after that were not refused; set them outside the block"
            )


# the figures RecompileWatch.expect() checks, in the order its failure lists them
EXPECT_FIGURES = ("count", "reasons", "limit_hits", "graph_breaks")


def _happened_since(watch: RecompileWatch, start_state: tuple[int, int]) -> list[str]:
    """What ``RecompileWatch.expect``'s failure lists: the recompiles and limit hits since ``start_state``."""
    events = watch._log.events[start_state[0] :]
    hits = [e.limit_hit for e in events if e.limit_hit is not None]
    hits += watch._log.orphan_limit_hits[start_state[1] :]
    return happened_inside([e.public() for e in events], hits, [r for e in events for r in e.reasons])


def _refusal_message(recorded: list[_Event], exc: BaseException, when: str) -> str:
    """The message of a refused compile: the last recompile's function and reasons, else the refusal's own."""
    events = [e for e in recorded if e.limit_hit is None]
    if events:
        function, reasons, event = events[-1].function, events[-1].reasons, events[-1].public()
    else:
        function, reasons = (
            function_from_refusal(str(exc)),
            [flat_reason(r) for r in reasons_from_message(str(exc))],
        )
        event = None
    return compile_refused(function, reasons, str(exc), when, event)


def _start_like_the_marker() -> None:
    """In a test, the first watch starts from an empty Dynamo cache, as ``max_recompiles``' test does.

    Otherwise its count follows the test order: a shared compiled function that an
    earlier test called is warm (0 recompiles), cold where this test runs first (1).
    Only while the test has compiled nothing yet: the reset then drops only what
    earlier tests left, never the test's own warm-up (a watch after it counts on
    that warm state, as before).  Outside a test, nothing is reset.
    """
    if running.frames_at_begin is None or running.started_from_empty:
        return
    running.started_from_empty = True
    if compat.counter_value("frames", "total") == running.frames_at_begin:
        start_from_empty_dynamo_cache()


def start_from_empty_dynamo_cache() -> None:
    """Drop every code object's compiled entries, so the next test's counts are its own.

    Dynamo's cache is process-global: entries compiled by an earlier test stay
    attached to shared code objects, and a later test's guard failures would then
    list them, and count toward the recompile limit, as if the test caused them.
    After the reset a function's first compile in the test is a compile, not a
    recompile.
    """
    compat.reset_dynamo()


def watch_recompiles(*, raise_on_recompile: bool = False) -> RecompileWatch:
    """Watch Dynamo recompiles inside a ``with`` block; usable in ``@hypothesis.given`` bodies.

    Returns a :class:`RecompileWatch`.  With ``raise_on_recompile=True`` the first
    recompile of any function raises :class:`InvariantViolation` at once, from the
    call that caused it (its first compile is the warm-up; to refuse first compiles
    too, use ``with w.no_compiles():``).  Inside a test that uses the plugin, the
    figures are added to the test's report record when the block ends.

    Example::

        from pytest_cudagraph import watch_recompiles

        @given(batch=st.integers(1, 64))
        def test_no_recompile(batch):
            with watch_recompiles() as w:
                model(torch.randn(batch, 16))
            w.assert_at_most(1)
    """
    return RecompileWatch(raise_on_recompile=raise_on_recompile)
