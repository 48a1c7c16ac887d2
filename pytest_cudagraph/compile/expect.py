"""``with checker.expect(name=delta, ...):`` -- named figures must change by exactly that much inside a block.

The pattern of vLLM's compilation counter, shared by ``RecompileWatch.expect``
and ``CacheProbe.expect``: the figures are read when the block starts and when it
ends, and a difference other than the one expected raises InvariantViolation with
each figure's value before and after, the expected and the actual change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvariantViolation, MisuseError
from ..render.plain_text import expected_changes


def checked_deltas(what: str, deltas: Mapping[str, Any], known: Sequence[str], example: str) -> dict[str, int]:
    """``deltas`` if every name is a known figure and every value a non-negative int; else MisuseError."""
    unknown = sorted(set(deltas) - set(known))
    if unknown:
        raise MisuseError(
            f"{what} got unknown figure(s) {', '.join(map(repr, unknown))}; use the known figures {', '.join(known)}"
        )
    if not deltas:
        raise MisuseError(
            f"{what} was given no figure, so it would check nothing; "
            f"give expected changes such as {example}, out of {', '.join(known)}"
        )
    for name, delta in deltas.items():
        if isinstance(delta, bool) or not isinstance(delta, int) or delta < 0:
            raise MisuseError(
                f"{what.removesuffix('()')}({name}={delta!r}): the expected change is not a non-negative int; "
                f"give the exact change of {name} inside the block, such as {name}=0"
            )
    return dict(deltas)


class ExpectBlock:
    """The ``with`` block of an ``expect()``.

    ``read()`` returns the figures now; ``explain(before_state)`` adds what happened
    inside the block to a failure (``start()`` returns that state when the block
    starts); ``active()`` says whether the checker can still read; ``with ... as x``
    gives ``enters_as`` (the checker itself).
    """

    def __init__(
        self,
        what: str,
        deltas: dict[str, int],
        order: Sequence[str],
        read: Callable[[], dict[str, int]],
        active: Callable[[], bool],
        needs: str,
        start: Callable[[], Any] = lambda: None,
        explain: Callable[[Any], list[str]] = lambda state: [],
        enters_as: Any = None,
    ):
        self.what, self.deltas, self.order = what, deltas, order
        self._read, self._active, self._needs = read, active, needs
        self._start, self._explain = start, explain
        self._enters_as = enters_as
        self._before: dict[str, int] = {}
        self._state: Any = None

    def __enter__(self) -> Any:
        __tracebackhide__ = True
        if not self._active():
            raise MisuseError(f"{self.what} needs {self._needs}")
        self._before = self._read()
        self._state = self._start()
        return self._enters_as if self._enters_as is not None else self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        __tracebackhide__ = True
        if exc is not None:
            return  # the body's own error says more than figures it did not finish
        after = self._read()
        if any(after[name] - self._before[name] != delta for name, delta in self.deltas.items()):
            lines = expected_changes(self.what, self.deltas, self._before, after, self.order)
            raise InvariantViolation("\n".join(lines + self._explain(self._state)))
