"""Modes agree: full graphs, breakable graphs and piecewise graphs of one function give eager's answer.

A serving engine runs one model in several CUDA-graph modes (vLLM's FULL,
PIECEWISE and breakable, chosen per batch), and users' bugs are the modes
disagreeing: full graphs diverging from piecewise at one batch size
(pytorch#182125), an attention backend picked at capture that differs from the one
run time picks (vllm#27114, vllm#29539).  ``agree_modes`` captures the function in
every mode asked for and runs each, for every size and trial, on the same fresh
inputs:

- ``"full"``: ``capture_graphs``, one graph per size;
- ``"breakable"``: ``capture_graphs(..., break_at=...)``, a chain of graphs per size
  with the break ops run eagerly between them (``breakable``);
- ``"piecewise"``: this package's FX-split piecewise capture (``piecewise_compile``)
  with the break ops as splitting ops.

Each mode's outputs are compared with eager and with each other mode's, with the
dtype's tolerances; full and breakable run the same kernels, so they must agree
bit for bit (``bitwise=False`` gives them the tolerances too).  Sizes between
captured sizes are included, padded up to the next captured size with zero rows
as piecewise padding pads them, and sliced back.  ``ModeAgreement.check()`` raises
naming the first size, trial and pair of modes that differ, with the worst element.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import _compat
from ..errors import InvariantViolation, MisuseError
from ..records.record import TestRecord, current_record
from .captured import _as_tuple, _module_of
from .numerics import TensorComparison, compare_tensor_trees, max_abs_error
from .sizes import validate_capture_sizes

__all__ = ["MODES", "ModeAgreement", "PairComparison", "agree_modes"]

MODES = ("full", "breakable", "piecewise")
# the modes that run the break ops eagerly, and so need them
NEEDS_BREAK_AT = ("breakable", "piecewise")
# the pair that runs the same kernels: bit for bit unless bitwise=False
SAME_KERNELS = ("full", "breakable")
HINT = (
    "a value read on the host while capturing (a Python flag, a step counter, the attention backend or "
    "metadata chosen at capture, vllm#27114) stays frozen in a full graph, while an op run eagerly between "
    "breakable or piecewise graphs reads it again at every replay; padded sizes that alone differ mean padding "
    "rows leak into real rows"
)


# per test record, the agreements noted so far (a test may check several functions)
_NOTED: weakref.WeakKeyDictionary[TestRecord, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class PairComparison:
    """Two modes' outputs at one size and trial: agreed or not, the worst element where not."""

    size: int
    trial: int
    first: str
    second: str
    path: str  # "captured" or "padded to N"
    passed: bool
    max_abs_err: float | None
    bitwise: bool = False
    failed: TensorComparison | None = None

    def describe(self, trials: int) -> str:
        where = "" if self.path == "captured" else f" ({self.path})"
        kind = " bit for bit (they run the same kernels)" if self.bitwise else ""
        detail = self.failed.describe(self.first, self.second) if self.failed is not None else "no outputs"
        return (
            f"batch size {self.size}{where}, trial {self.trial + 1} of {trials}: {self.first} and {self.second} "
            f"differ{kind}, {detail}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "trial": self.trial,
            "modes": [self.first, self.second],
            "path": self.path,
            "passed": self.passed,
            "max_abs_err": self.max_abs_err,
            "bitwise": self.bitwise,
        }


@dataclass(frozen=True)
class ModeAgreement:
    """What ``agree_modes`` found: every pair of modes at every size and trial."""

    modes: tuple[str, ...]
    captured_sizes: tuple[int, ...]
    sizes: tuple[int, ...]
    trials: int
    comparisons: tuple[PairComparison, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)

    @property
    def mismatches(self) -> tuple[PairComparison, ...]:
        return tuple(c for c in self.comparisons if not c.passed)

    def max_abs_err(self, first: str, second: str) -> float | None:
        """The largest error seen between two modes (``"eager"`` is one), None where they were not compared."""
        errors = [c.max_abs_err for c in self.comparisons if {c.first, c.second} == {first, second}]
        present = [e for e in errors if e is not None]
        return max(present) if present else None

    def message(self) -> str | None:
        """The failure of ``check()``: the first size, trial and pair that differ, and what else differed."""
        mismatches = self.mismatches
        if not mismatches:
            return None
        first = mismatches[0]
        others = sorted(
            {(c.size, c.first, c.second) for c in mismatches[1:]} - {(first.size, first.first, first.second)}
        )
        also = ""
        if others:
            listed = "; ".join(f"{size}: {a} vs {b}" for size, a, b in others[:8])
            more = f" and {len(others) - 8} more" if len(others) > 8 else ""
            also = f" Also differing (batch size: modes): {listed}{more}."
        return (
            f"CUDA-graph modes disagree (modes {', '.join(self.modes)}, captured sizes "
            f"{list(self.captured_sizes)}): first at {first.describe(self.trials)}.{also} Hint: {HINT}."
        )

    def check(self) -> ModeAgreement:
        """Raise InvariantViolation naming the first size, trial and pair of modes that differ."""
        __tracebackhide__ = True
        message = self.message()
        if message is not None:
            raise InvariantViolation(message)
        return self

    def to_json(self) -> dict[str, Any]:
        pairs = sorted({(c.first, c.second) for c in self.comparisons})
        return {
            "modes": list(self.modes),
            "captured_sizes": list(self.captured_sizes),
            "sizes": list(self.sizes),
            "trials": self.trials,
            "passed": self.passed,
            "max_abs_err": {f"{a} vs {b}": self.max_abs_err(a, b) for a, b in pairs},
            "mismatches": [c.to_json() for c in self.mismatches[:20]],
        }


def check_modes(modes: Any, break_at: Any) -> tuple[str, ...]:
    """The modes asked for, checked: known names, at least one, break ops where a mode needs them."""
    __tracebackhide__ = True
    if isinstance(modes, str):
        modes = (modes,)
    chosen = tuple(dict.fromkeys(modes)) if hasattr(modes, "__iter__") else None
    if not chosen:
        raise MisuseError(f"modes={modes!r} names no mode; give some of {MODES!r}, e.g. modes=('full', 'breakable')")
    for mode in chosen:
        if mode not in MODES:
            raise MisuseError(f"modes={list(chosen)!r}: {mode!r} is not a CUDA-graph mode; use any of {MODES!r}")
    needing = [m for m in chosen if m in NEEDS_BREAK_AT]
    if needing and not break_at:
        raise MisuseError(
            f"the {' and '.join(needing)} mode{'s' if len(needing) > 1 else ''} need the ops to break at: pass "
            f"break_at=('mylib::attention',) (or @pytest.mark.cudagraph(break_at=...)), or leave "
            f"{' and '.join(needing)} out of modes"
        )
    return chosen


def default_check_sizes(captured: Sequence[int]) -> tuple[int, ...]:
    """Every captured size and the size just above each gap between captured sizes (it is padded)."""
    sizes = set(captured)
    for low, high in zip(captured, captured[1:]):
        if high - low > 1:
            sizes.add(low + 1)
    return tuple(sorted(sizes))


def agree_modes(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Any],
    sizes: Sequence[int],
    modes: Sequence[str] = MODES,
    break_at: Any = None,
    trials: int = 3,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    check_sizes: Sequence[int] | None = None,
    bitwise: bool = True,
    piecewise_backend: Any = "inductor",
    record: TestRecord | None = None,
) -> ModeAgreement:
    """Capture ``fn`` in every mode of ``modes`` at ``sizes`` and compare them all on the same fresh inputs.

    ``make_inputs(n)`` gives the inputs of a batch of ``n`` (a CUDA tensor or a
    tuple of them, batch along dim 0) and is called again for every size and trial.
    ``check_sizes`` default to the captured sizes and the size just above each gap
    (padded up to the next captured size); none may exceed the largest captured
    size.  ``piecewise_backend`` compiles the piecewise pieces (``"inductor"``,
    ``"eager"``, ...).  The graphs are released before this returns, their results
    added to the running test's record with the agreement (``extra.mode_agreement``).
    Returns a :class:`ModeAgreement`; ``.check()`` raises.

    Example::

        agree_modes(model, make_inputs, [1, 2, 4, 8], break_at=("mylib::attention",)).check()
    """
    __tracebackhide__ = True
    chosen = check_modes(modes, break_at)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise MisuseError(f"trials={trials!r}: give at least one trial")
    captured = validate_capture_sizes(sizes, "sizes", caller="agree_modes")
    checked = (
        default_check_sizes(captured) if check_sizes is None else validate_capture_sizes(check_sizes, "check_sizes")
    )
    if checked[-1] > captured[-1]:
        raise MisuseError(
            f"check_sizes={list(checked)!r}: batch size {checked[-1]} is above the largest captured size "
            f"{captured[-1]}, where no graph of any mode runs; check sizes up to {captured[-1]}, or capture larger"
        )
    from .breakable import resolve_break_at

    ops = resolve_break_at(break_at) if any(m in NEEDS_BREAK_AT for m in chosen) else ()
    record = record if record is not None else current_record()
    with contextlib.ExitStack() as stack:
        runners = {mode: _runner(mode, fn, make_inputs, captured, ops, piecewise_backend, rtol, atol, record, stack)
                   for mode in chosen}  # fmt: skip
        comparisons = _compare_all(fn, make_inputs, captured, checked, trials, runners, rtol, atol, bitwise)
    agreement = ModeAgreement(chosen, captured, checked, trials, tuple(comparisons))
    if record is not None:
        noted = _NOTED.setdefault(record, [])
        noted.append(agreement.to_json())
        record.note("mode_agreement", list(noted))
    return agreement


def _runner(
    mode: str,
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Any],
    captured: tuple[int, ...],
    ops: tuple[Any, ...],
    backend: Any,
    rtol: float | None,
    atol: float | None,
    record: TestRecord | None,
    stack: contextlib.ExitStack,
) -> Callable[[int, tuple], Any]:
    """Capture ``fn`` in ``mode`` and return ``run(size, inputs)``; the graphs are released when ``stack`` closes."""
    __tracebackhide__ = True
    if mode == "piecewise":
        from ..piecewise import PiecewiseModule

        module = stack.enter_context(
            PiecewiseModule(
                _as_module(fn), [str(op) for op in ops], captured, backend=backend, rtol=rtol, atol=atol, record=record
            )
        )
        with torch.no_grad():
            module(*_as_tuple(make_inputs(captured[-1])))  # traces, splits and captures every size
        return lambda size, inputs: module(*inputs)
    from .capture import capture_graphs

    options: dict[str, Any] = {"rtol": rtol, "atol": atol, "record": record}
    if mode == "breakable":
        options["break_at"] = ops
    graph_set = stack.enter_context(capture_graphs(fn, make_inputs, captured, **options))

    def run(size: int, inputs: tuple) -> Any:
        padded = next(s for s in captured if s >= size)
        if padded == size:
            return graph_set.replay(size, *inputs)
        out = graph_set.replay(padded, *(_padded(t, padded) for t in inputs))
        return _compat.tree_map(lambda t: _sliced(t, padded, size), out)

    return run


def _compare_all(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Any],
    captured: tuple[int, ...],
    checked: tuple[int, ...],
    trials: int,
    runners: dict[str, Callable[[int, tuple], Any]],
    rtol: float | None,
    atol: float | None,
    bitwise: bool,
) -> list[PairComparison]:
    """Every size, every trial: eager and each mode on the same inputs, every pair compared."""
    __tracebackhide__ = True
    comparisons = []
    names = ["eager", *runners]
    for size in checked:
        padded = next(s for s in captured if s >= size)
        path = "captured" if padded == size else f"padded to {padded}"
        for trial in range(trials):
            inputs = _as_tuple(make_inputs(size))
            with torch.no_grad():
                outputs = {"eager": fn(*inputs)}
                for mode, run in runners.items():
                    outputs[mode] = run(size, inputs)
            for first, second in itertools.combinations(names, 2):
                exact = bitwise and {first, second} == set(SAME_KERNELS)
                tol = (0.0, 0.0) if exact else (rtol, atol)
                result = compare_tensor_trees(outputs[second], outputs[first], *tol)
                failed = next((c for c in result if not c.passed), None)
                # compare_tensor_trees names the sides (actual, expected): put them back in the pair's order
                comparison = PairComparison(
                    size, trial, second, first, path, failed is None, max_abs_error(result), exact, failed
                )
                comparisons.append(comparison)
            del outputs
    return comparisons


def _padded(tensor: Any, rows: int) -> Any:
    """``tensor`` with zero rows added along dim 0 up to ``rows`` (how piecewise padding pads a batch)."""
    if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0 or tensor.shape[0] >= rows:
        return tensor
    out = torch.zeros((rows, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    out[: tensor.shape[0]].copy_(tensor)
    return out


def _sliced(value: Any, padded: int, rows: int) -> Any:
    if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == padded:
        return value.narrow(0, 0, rows)
    return value


class _FunctionModule(torch.nn.Module):
    """A function as a module, for the piecewise capture, which traces a module's forward.

    The module the function belongs to (a bound method's, a partial's) is kept as a
    submodule, so its parameters are the piecewise graphs' static inputs.
    """

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn
        owner = _module_of(fn)
        if owner is not None:
            self.owner = owner

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _as_module(fn: Callable[..., Any]) -> torch.nn.Module:
    return fn if isinstance(fn, torch.nn.Module) else _FunctionModule(fn)
