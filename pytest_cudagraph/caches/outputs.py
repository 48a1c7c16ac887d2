"""The cold/warm comparison of outputs: what a function returned and recorded on each pass.

Bitwise unless tolerances are given (then ``allclose``, NaN equal to NaN): a warm
start must load the very artifacts the cold pass compiled.  Replay-vs-eager
comparison, with dtype-aware tolerances under which a NaN never passes, is
``graphs.numerics``' job, not this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def compare_recorded(
    cold: Mapping[str, Any], warm: Mapping[str, Any], rtol: float | None, atol: float | None
) -> list[str]:
    problems = []
    for name in cold:
        if name not in warm:
            problems.append(f"recorded {name!r}: recorded on the cold pass only")
    for name in warm:
        if name not in cold:
            problems.append(f"recorded {name!r}: recorded on the warm pass only")
        else:
            problems += cold_warm_differences(f"recorded {name!r}", cold[name], warm[name], rtol=rtol, atol=atol)
    return problems


def cold_warm_differences(
    label: str, cold: Any, warm: Any, rtol: float | None = None, atol: float | None = None
) -> list[str]:
    """Differences between two output trees (tensors, tuples, lists, dicts, scalars).

    Bitwise when ``rtol`` and ``atol`` are both None: the bytes of every tensor must
    match (so a NaN in the same place is equal, and ``-0.0`` differs from ``0.0``).
    Otherwise ``allclose`` with the given tolerances (a missing one is 0).

    >>> cold_warm_differences("y", torch.ones(2), torch.ones(2))
    []
    """
    import torch

    from ..graphs.output_trees import StructureMismatch, paired_leaves

    # the walk is shared with graphs.numerics (one meaning of "the structure differs"); whether two leaves
    # are equal is not: here bitwise (NaN equal to NaN), and each subtree that parts says how
    problems: list[str] = []
    for item in paired_leaves(cold, warm, label):
        where, a, b = item.path, item.actual, item.expected
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                problems.append(
                    f"{where}: a tensor on one pass, {type(b if isinstance(a, torch.Tensor) else a).__name__} on the other"
                )
                continue
            problem = _compare_tensors(a, b, rtol, atol)
            if problem:
                problems.append(f"{where}: {problem}")
        elif isinstance(item, StructureMismatch) and item.kind == "length":
            problems.append(f"{where}: {len(a)} items on the cold pass, {len(b)} on the warm pass")
        elif isinstance(item, StructureMismatch) and item.kind == "keys":
            problems.append(
                f"{where}: keys {sorted(map(str, a))} on the cold pass, {sorted(map(str, b))} on the warm pass"
            )
        elif a != b and not (a is None and b is None):
            problems.append(f"{where}: {a!r} on the cold pass, {b!r} on the warm pass")
    return problems


def _compare_tensors(a: Any, b: Any, rtol: float | None, atol: float | None) -> str | None:
    import torch

    a, b = a.detach().cpu(), b.detach().cpu()
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {tuple(a.shape)} {a.dtype} on the cold pass, {tuple(b.shape)} {b.dtype} on the warm pass"
    if rtol is None and atol is None:
        if _same_bytes(a, b):
            return None
        how = "not bitwise equal"
    else:
        if torch.allclose(a, b, rtol=rtol or 0.0, atol=atol or 0.0, equal_nan=True):
            return None
        how = f"not within rtol={rtol or 0.0}, atol={atol or 0.0}"
    if a.is_floating_point() or a.is_complex():
        diff = (
            a.to(torch.complex128 if a.is_complex() else torch.float64)
            - b.to(torch.complex128 if b.is_complex() else torch.float64)
        ).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        flat = int(diff.reshape(-1).argmax()) if diff.numel() else 0
    else:
        diff = a.ne(b)
        flat = int(diff.reshape(-1).to(torch.uint8).argmax()) if diff.numel() else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
    worst_a = a[index].item() if a.numel() else None
    worst_b = b[index].item() if b.numel() else None
    changed = int(a.ne(b).sum()) if not a.is_complex() else int((a != b).sum())
    return (
        f"{how}: {changed} of {a.numel()} elements differ, the largest at index {index} "
        f"(cold {worst_a!r}, warm {worst_b!r})"
    )


def _same_bytes(a: Any, b: Any) -> bool:
    import torch

    try:
        return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))
    except (RuntimeError, TypeError):  # sparse or quantized layouts have no byte view
        return bool(torch.equal(a, b))
