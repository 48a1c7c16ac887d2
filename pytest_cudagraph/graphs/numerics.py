"""Replay-vs-eager comparison with dtype-aware tolerances.

A replayed graph must compute what the eager function computes on the same
inputs.  ``compare_tensors`` checks two tensors element by element with
``|a - e| <= atol + rtol * |e|`` and gives a ``TensorComparison``: whether they
agree, and the worst element (its index, both values and the error).
``compare_tensor_trees`` does that for every tensor leaf of two outputs (any nesting
of tuples, lists and dicts), one ``TensorComparison`` per leaf.  A NaN on either side
never passes, and infinities pass only where both sides agree.

Default tolerances depend on the dtype and match ``torch.testing.assert_close``;
integer and bool outputs must match exactly.

(The compile-cache check compares cold and warm outputs bitwise instead; that is
``caches``' own comparison, not this one.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import _compat
from .output_trees import StructureMismatch, paired_leaves

__all__ = [
    "DeferredComparisons",
    "TensorComparison",
    "compare_tensor_trees",
    "compare_tensors",
    "default_tolerances",
    "max_abs_error",
    "resolve_tolerances",
]

# dtype -> (rtol, atol): torch.testing.assert_close's, and the 8-bit floats this torch has
_DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = _compat.default_tolerance_table()

STATIC_CONTROL_FLOW_HINT = (
    "a graph replays the kernels recorded at capture, so Python control flow is frozen then "
    "(static control flow): a branch on host-side state (a flag, a step counter, a value read "
    "on the host before capture) keeps the branch taken at capture, and Python numbers or "
    "tensors created during capture instead of passed as inputs keep their capture-time "
    "values; make such state a tensor input, or capture one graph per branch"
)


def default_tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing tensors of ``dtype``; exact for integers and bool.

    >>> default_tolerances(torch.bfloat16)
    (0.016, 1e-05)
    >>> default_tolerances(torch.int64)
    (0.0, 0.0)
    """
    if dtype in _DEFAULT_TOLERANCES:
        return _DEFAULT_TOLERANCES[dtype]
    if dtype.is_floating_point or dtype.is_complex:
        return (1.3e-6, 1e-5)
    return (0.0, 0.0)


def resolve_tolerances(dtype: torch.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """The tolerances to use: the given ones, the dtype's default for any left out."""
    d_rtol, d_atol = default_tolerances(dtype)
    return (d_rtol if rtol is None else float(rtol), d_atol if atol is None else float(atol))


@dataclass(frozen=True)
class TensorComparison:
    """One output tensor of a replay compared with the reference, element by element.

    ``worst_index`` is the element furthest outside the tolerance (or the first NaN);
    ``problem`` holds a structural difference (shape, dtype, missing output) instead.
    """

    path: str
    passed: bool
    max_abs_err: float
    mismatches: int = 0
    numel: int = 0
    nan_count: int = 0
    worst_index: tuple[int, ...] | None = None
    actual_value: float | None = None
    expected_value: float | None = None
    rtol: float = 0.0
    atol: float = 0.0
    dtype: str = ""
    problem: str | None = None

    def describe(self, actual_name: str = "replay", expected_name: str = "eager") -> str:
        """One clause naming the worst element, both values and the error."""
        if self.problem is not None:
            return f"{self.path}: {self.problem}"
        index = "()" if not self.worst_index else "(" + ", ".join(map(str, self.worst_index)) + ")"
        a, e = self.actual_value, self.expected_value
        if self.nan_count:
            where = actual_name if a is not None and math.isnan(a) else expected_name
            return (
                f"{self.path}: {self.nan_count} of {self.numel} elements are NaN, first at index {index} "
                f"({actual_name} {_num(a)}, {expected_name} {_num(e)}); NaN never passes "
                f"(it came from {where})"
            )
        allowed = self.atol + self.rtol * abs(e) if e is not None and math.isfinite(e) else self.atol
        err = abs(a - e) if a is not None and e is not None else float("nan")
        return (
            f"{self.path}: worst element at index {index}: {actual_name} {_num(a)}, {expected_name} {_num(e)}, "
            f"abs error {_num(err)} (allowed {_num(allowed)} = atol {self.atol:g} + rtol {self.rtol:g} x |{expected_name}|); "
            f"{self.mismatches} of {self.numel} elements outside tolerance, max abs error "
            f"{_num(self.max_abs_err)}, dtype {self.dtype}"
        )


def _num(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.6g}"


def _unravel(flat_index: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for dim in reversed(shape):
        index.append(flat_index % dim if dim else 0)
        flat_index = flat_index // dim if dim else 0
    return tuple(reversed(index))


def _structural_problem(actual: torch.Tensor, expected: torch.Tensor, path: str) -> TensorComparison | None:
    """A shape or dtype that differs: decided on the host, no element compared."""
    if actual.shape != expected.shape:
        return TensorComparison(
            path,
            False,
            math.inf,
            problem=(f"shape {tuple(actual.shape)} differs from the reference's {tuple(expected.shape)}"),
        )
    if actual.dtype != expected.dtype:
        return TensorComparison(
            path, False, math.inf, problem=(f"dtype {actual.dtype} differs from the reference's {expected.dtype}")
        )
    return None


@dataclass(frozen=True)
class _Elementwise:
    """Both tensors in the working dtype and the per-element verdict, all on the device; nothing read back."""

    a: torch.Tensor
    e: torch.Tensor
    nan: torch.Tensor
    diff: torch.Tensor
    tolerance: torch.Tensor
    bad: torch.Tensor

    @classmethod
    def of(cls, actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> _Elementwise:
        if expected.device != actual.device:
            expected = expected.to(actual.device)
        work = torch.float64 if actual.dtype in (torch.float64, torch.int64, torch.complex128) else torch.float32
        if actual.is_complex():
            a = torch.view_as_real(actual).to(work)
            e = torch.view_as_real(expected).to(work)
        else:
            a = actual.to(work)
            e = expected.to(work)
        nan = torch.isnan(a) | torch.isnan(e)
        # equal values (including equal infinities) have zero error; inf - inf would be NaN
        diff = torch.where(a == e, torch.zeros_like(a), (a - e).abs())
        # an infinite reference allows no error (inf tolerance would let -inf match +inf)
        tolerance = torch.where(torch.isfinite(e), atol + rtol * e.abs(), torch.zeros_like(e))
        return cls(a, e, nan, diff, tolerance, (diff > tolerance) | nan)

    def counts(self) -> torch.Tensor:
        """[max abs error (NaN elements left out), elements outside tolerance, NaN elements] in the working dtype."""
        work = self.diff.dtype
        return torch.stack([self.diff.masked_fill(self.nan, 0).max(), self.bad.sum().to(work), self.nan.sum().to(work)])

    def worst(self) -> torch.Tensor:
        """The flat index of the element furthest outside the tolerance (any NaN ranks above everything)."""
        score = torch.where(
            self.tolerance > 0, self.diff / self.tolerance.clamp_min(1e-300), self.bad.to(self.diff.dtype) * 1e30
        )
        return score.masked_fill_(self.nan, math.inf).reshape(-1).argmax()

    def stats(self) -> torch.Tensor:
        """Everything a TensorComparison needs, as six float64 values on the device (see ``_from_stats``)."""
        # a one-element index tensor: indexing with a 0-dim tensor would read it back on the host
        flat = self.worst().reshape(1)
        values = torch.cat([self.a.reshape(-1).index_select(0, flat), self.e.reshape(-1).index_select(0, flat)])
        return torch.cat([self.counts().double(), flat.double(), values.double()])


@dataclass(frozen=True)
class _Compared:
    """What a verdict needs to know of the compared tensor, without keeping the tensor alive."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    numel: int
    is_complex: bool
    rtol: float
    atol: float

    @classmethod
    def of(cls, path: str, actual: torch.Tensor, rtol: float, atol: float) -> _Compared:
        dtype = str(actual.dtype).replace("torch.", "")
        return cls(path, dtype, tuple(actual.shape), actual.numel(), actual.is_complex(), rtol, atol)


def _from_stats(compared: _Compared, stats: Sequence[float]) -> TensorComparison:
    """The TensorComparison from the read-back ``[max_abs, n_bad, n_nan, worst, a, e]``."""
    max_abs, n_bad, n_nan, flat, a_val, e_val = stats
    path, numel, rtol, atol, dtype_name = compared.path, compared.numel, compared.rtol, compared.atol, compared.dtype
    if n_bad == 0:
        return TensorComparison(path, True, float(max_abs), 0, numel, 0, rtol=rtol, atol=atol, dtype=dtype_name)
    shape = compared.shape + ((2,) if compared.is_complex else ())
    index = _unravel(int(flat), shape)
    if compared.is_complex:
        index = index[:-1]  # the last dim is (real, imag)
    return TensorComparison(
        path=path,
        passed=False,
        max_abs_err=math.nan if n_nan else float(max_abs),
        mismatches=int(n_bad),
        numel=numel,
        nan_count=int(n_nan),
        worst_index=index,
        actual_value=float(a_val),
        expected_value=float(e_val),
        rtol=rtol,
        atol=atol,
        dtype=dtype_name,
    )


def compare_tensors(
    actual: torch.Tensor,
    expected: torch.Tensor,
    rtol: float | None = None,
    atol: float | None = None,
    path: str = "output",
) -> TensorComparison:
    """Compare two tensors element-wise; one host sync when they agree.

    Example::

        c = compare_tensors(replayed, eager_out)
        assert c.passed, c.describe()
    """
    problem = _structural_problem(actual, expected, path)
    if problem is not None:
        return problem
    r, a_tol = resolve_tolerances(actual.dtype, rtol, atol)
    compared = _Compared.of(path, actual, r, a_tol)
    if actual.numel() == 0:
        return _from_stats(compared, (0.0, 0, 0, 0, 0.0, 0.0))
    elementwise = _Elementwise.of(actual, expected, r, a_tol)
    max_abs, n_bad, _ = elementwise.counts().tolist()
    if n_bad == 0:
        return _from_stats(compared, (max_abs, 0, 0, 0, 0.0, 0.0))
    return _from_stats(compared, elementwise.stats().tolist())


class DeferredComparisons:
    """Many replay-vs-reference comparisons queued on the device and read back at once.

    ``add`` compares two outputs leaf by leaf as ``compare_tensor_trees`` does, but
    leaves each tensor's verdict on the device (six numbers); ``results`` reads
    them all with one host sync per device.  The element work runs in stream
    order, so the compared tensors may be dropped right after ``add``; the host
    never waits for the device between comparisons.

    Example::

        pending = DeferredComparisons()
        for size in sizes:
            pending.add(size, replay(size, x), fn(x))
        for size, comparisons in pending.results():
            ...
    """

    def __init__(self) -> None:
        # per add: its key and its leaves, each a TensorComparison or (_Compared, stats on the device)
        self._entries: list[tuple[Any, list[Any]]] = []

    def add(self, key: Any, actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None) -> None:
        self._entries.append((key, _compare_leaves(actual, expected, rtol, atol, deferred=True)))

    def results(self) -> list[tuple[Any, list[TensorComparison]]]:
        """Every ``add`` in order: its key and one TensorComparison per leaf."""
        pending = [leaf for _, leaves in self._entries for leaf in leaves if not isinstance(leaf, TensorComparison)]
        by_device: dict[torch.device, list[Any]] = {}
        for leaf in pending:
            by_device.setdefault(leaf[1].device, []).append(leaf)
        read: dict[int, list[float]] = {}
        for leaves in by_device.values():
            for leaf, stats in zip(leaves, torch.stack([leaf[1] for leaf in leaves]).tolist()):
                read[id(leaf)] = stats
        out = []
        for key, leaves in self._entries:
            out.append(
                (
                    key,
                    [
                        leaf if isinstance(leaf, TensorComparison) else _from_stats(leaf[0], read[id(leaf)])
                        for leaf in leaves
                    ],
                )
            )
        self._entries.clear()
        return out


def flatten_outputs(value: Any, path: str = "output") -> list[tuple[str, Any]]:
    """``(path, leaf)`` pairs of a nested output: ``output[0]``, ``output['logits']``, ..."""
    if isinstance(value, torch.Tensor) or value is None or isinstance(value, (int, float, bool, str)):
        return [(path, value)]
    if isinstance(value, dict):
        out = []
        for key in value:
            out.extend(flatten_outputs(value[key], f"{path}[{key!r}]"))
        return out
    if isinstance(value, (tuple, list)):
        out = []
        for i, item in enumerate(value):
            out.extend(flatten_outputs(item, f"{path}[{i}]"))
        return out
    return [(path, value)]


def compare_tensor_trees(
    actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None
) -> list[TensorComparison]:
    """Compare two (nested) outputs leaf by leaf: one TensorComparison per leaf; non-tensor leaves must be equal.

    A difference in structure (other paths) is one failed comparison naming both.

    Example::

        comparisons = compare_tensor_trees(replayed, eager_out, rtol=1e-3)
        failed = [c for c in comparisons if not c.passed]
    """
    return _compare_leaves(actual, expected, rtol, atol, deferred=False)


def _compare_leaves(actual: Any, expected: Any, rtol: float | None, atol: float | None, *, deferred: bool) -> list[Any]:
    """Per leaf a TensorComparison, or with ``deferred`` for a tensor pair with elements to compare,
    ``(_Compared, stats on the device)`` for ``DeferredComparisons`` to read back."""
    # the walk is shared with caches.outputs (one meaning of "the structure differs"); the verdict on two
    # leaves is not: here dtype-aware tolerances under which a NaN never passes, and any difference in
    # structure is one failed comparison naming every leaf of both
    pairs = list(paired_leaves(actual, expected))
    if any(isinstance(item, StructureMismatch) for item in pairs):
        a_paths = [p for p, _ in flatten_outputs(actual)]
        e_paths = [p for p, _ in flatten_outputs(expected)]
        return [
            TensorComparison(
                "output", False, math.inf, problem=f"the outputs differ in structure: {a_paths} vs {e_paths}"
            )
        ]
    results: list[Any] = []
    for path, a, e in ((item.path, item.actual, item.expected) for item in pairs):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor):
            problem = _structural_problem(a, e, path)
            if not deferred or problem is not None or a.numel() == 0:
                results.append(problem or compare_tensors(a, e, rtol, atol, path))
                continue
            r, a_tol = resolve_tolerances(a.dtype, rtol, atol)
            results.append((_Compared.of(path, a, r, a_tol), _Elementwise.of(a, e, r, a_tol).stats()))
        elif isinstance(a, torch.Tensor) or isinstance(e, torch.Tensor):
            results.append(
                TensorComparison(
                    path,
                    False,
                    math.inf,
                    problem=(
                        f"one side is a tensor and the other is {type(e if isinstance(a, torch.Tensor) else a).__name__}"
                    ),
                )
            )
        elif a != e:
            results.append(TensorComparison(path, False, math.inf, problem=f"{a!r} differs from the reference's {e!r}"))
    return results


def max_abs_error(comparisons: Sequence[TensorComparison]) -> float | None:
    """The largest absolute error over comparisons (NaN if any saw a NaN), None if empty."""
    values = [c.max_abs_err for c in comparisons if c.problem is None]
    if not values:
        return None
    if any(math.isnan(v) for v in values):
        return math.nan
    return max(values)


def replay_mismatch_message(
    comparison: TensorComparison,
    size: int,
    trial: int,
    trials: int,
    reference_name: str = "eager",
    cause: str | None = None,
) -> str:
    """The failure sentence of ``GraphSet.check_replay`` for one failing output.

    It ends with the static control flow hint, or with ``cause`` where the check
    knows better what the mismatch points to.
    """
    ending = cause if cause is not None else f"Hint: {STATIC_CONTROL_FLOW_HINT}."
    return (
        f"replay of batch size {size} differs from {reference_name} on trial {trial + 1} of {trials}, "
        f"{comparison.describe('replay', reference_name)}. {ending}"
    )
