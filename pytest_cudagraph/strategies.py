"""Hypothesis strategies for CUDA graph tests, and the ``cudagraph`` settings profile.

Importing this module imports hypothesis but not torch (``dtypes()`` imports torch
when it is called), so the plugin can register the profile cheaply.

- ``batch_sizes()``: one positive batch size;
- ``capture_sizes()``: a sorted list of distinct batch sizes, as capture lists are;
- ``shapes()``: a tensor shape whose first dimension is left to the batch size;
- ``dtypes()``: floating dtypes a model is run in.

The profile ``cudagraph`` has no deadline (a first capture or compile takes seconds)
and a bounded number of examples; select it with ``--hypothesis-profile=cudagraph``
or ``settings.load_profile("cudagraph")``.

Bad bounds raise ``MisuseError`` (a ValueError).

Example::

    from hypothesis import given
    from pytest_cudagraph.strategies import capture_sizes

    @given(sizes=capture_sizes(max_size=64))
    def test_replay(sizes):
        with capture_graphs(model, make_inputs, sizes) as gs:
            gs.check_replay()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .errors import MisuseError

PROFILE = "cudagraph"
PROFILE_MAX_EXAMPLES = 10

DEFAULT_DTYPES = ("float32", "bfloat16", "float16")


def batch_sizes(min_size: int = 1, max_size: int = 512) -> st.SearchStrategy[int]:
    """One batch size in ``[min_size, max_size]``; shrinks towards ``min_size``."""
    if min_size < 1 or max_size < min_size:
        raise MisuseError(f"batch_sizes({min_size}, {max_size}): need 1 <= min_size <= max_size")
    return st.integers(min_value=min_size, max_value=max_size)


def capture_sizes(
    min_size: int = 1, max_size: int = 512, min_count: int = 1, max_count: int = 8
) -> st.SearchStrategy[list[int]]:
    """A sorted list of ``min_count``..``max_count`` distinct batch sizes in ``[min_size, max_size]``."""
    if min_count < 1 or max_count < min_count:
        raise MisuseError(f"capture_sizes: need 1 <= min_count <= max_count, got {min_count}, {max_count}")
    if max_size - min_size + 1 < min_count:
        raise MisuseError(f"capture_sizes: {min_count} distinct sizes do not fit in [{min_size}, {max_size}]")
    return st.lists(batch_sizes(min_size, max_size), min_size=min_count, max_size=max_count, unique=True).map(sorted)


def shapes(
    min_dims: int = 1, max_dims: int = 3, min_side: int = 1, max_side: int = 64
) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape of ``min_dims``..``max_dims`` sides, each in ``[min_side, max_side]``.

    Prepend the batch size to get an input shape: ``(size, *shape)``.
    """
    if min_dims < 0 or max_dims < min_dims or min_side < 0 or max_side < min_side:
        raise MisuseError("shapes: need 0 <= min_dims <= max_dims and 0 <= min_side <= max_side")
    return st.lists(st.integers(min_value=min_side, max_value=max_side), min_size=min_dims, max_size=max_dims).map(
        tuple
    )


def dtypes(names: Sequence[str] = DEFAULT_DTYPES) -> st.SearchStrategy[Any]:
    """A torch dtype out of ``names`` (default float32, bfloat16, float16); imports torch now."""
    import torch

    unknown = [n for n in names if not isinstance(getattr(torch, n, None), torch.dtype)]
    if unknown:
        raise MisuseError(f"dtypes: {unknown} are not torch dtypes")
    if not names:
        raise MisuseError("dtypes: give at least one dtype name")
    return st.sampled_from([getattr(torch, n) for n in names])


def register_profile() -> None:
    """Register the ``cudagraph`` Hypothesis profile (the plugin calls this before Hypothesis loads a profile)."""
    settings.register_profile(
        PROFILE,
        deadline=None,
        max_examples=PROFILE_MAX_EXAMPLES,
        suppress_health_check=[HealthCheck.too_slow],
    )


# Also at import, for scripts that import the strategies and load the profile themselves.
register_profile()
