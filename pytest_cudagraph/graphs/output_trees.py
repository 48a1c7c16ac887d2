"""Two output trees walked side by side: each pair of leaves at the same path, or where their structure parts.

An output is a tree of tuples, lists and mappings with tensors and plain values as
leaves.  Two checks compare two of them: ``graphs.numerics.compare_tensor_trees``
(a replay against eager, dtype-aware tolerances) and
``caches.outputs.cold_warm_differences`` (a warm pass against the cold one,
bitwise).  Both walk the trees with ``paired_leaves``, so they agree on what a
difference in structure is; what makes two leaves equal stays each caller's own.

Paths read as the user indexes the output: ``output[0]``, ``output['logits']``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["LeafPair", "StructureMismatch", "paired_leaves"]


@dataclass(frozen=True)
class LeafPair:
    """Two leaves at the same path: tensors, plain values, or a tensor against a plain value."""

    path: str
    actual: Any
    expected: Any


@dataclass(frozen=True)
class StructureMismatch:
    """Where the trees part: ``length`` (sequences of other lengths), ``keys`` (mappings of other keys), or
    ``shape`` (a container against a leaf, or a sequence against a mapping).  Nothing under it is walked."""

    path: str
    kind: Literal["length", "keys", "shape"]
    actual: Any
    expected: Any


def _kind(value: Any, tensor_type: type) -> str:
    # a tensor is a leaf before anything else: a tensor subclass may also look like a sequence
    if isinstance(value, tensor_type):
        return "leaf"
    if isinstance(value, (list, tuple)):
        return "sequence"
    if isinstance(value, Mapping):
        return "mapping"
    return "leaf"


def paired_leaves(actual: Any, expected: Any, path: str = "output") -> Iterator[LeafPair | StructureMismatch]:
    """Each pair of leaves, in ``actual``'s order, and each place the two trees' structures part.

    A tuple and a list of the same length are the same structure; mappings are the
    same when they hold the same keys (in any order), walked in ``actual``'s order.

    >>> [item.path for item in paired_leaves((torch.ones(1), {"a": 1}), [torch.ones(1), {"a": 2}])]
    ['output[0]', "output[1]['a']"]
    """
    import torch

    stack: list[tuple[str, Any, Any]] = [(path, actual, expected)]
    while stack:
        where, a, b = stack.pop()
        kind_a, kind_b = _kind(a, torch.Tensor), _kind(b, torch.Tensor)
        if kind_a == kind_b == "leaf":
            yield LeafPair(where, a, b)
        elif kind_a != kind_b:
            yield StructureMismatch(where, "shape", a, b)
        elif kind_a == "sequence":
            if len(a) != len(b):
                yield StructureMismatch(where, "length", a, b)
            else:
                stack.extend(reversed([(f"{where}[{i}]", x, y) for i, (x, y) in enumerate(zip(a, b))]))
        elif set(a) != set(b):
            yield StructureMismatch(where, "keys", a, b)
        else:
            stack.extend(reversed([(f"{where}[{key!r}]", a[key], b[key]) for key in a]))
