"""Capture sizes: the one validator of a list of batch sizes.

``capture_graphs`` (``sizes=``), ``piecewise_compile`` (``capture_sizes=``), the
``cudagraph`` marker and the ini option ``cudagraph_capture_sizes`` all take a list
of batch sizes.  They check it here, so the same mistake reads the same wherever it
is made: one sentence naming the argument, the value given and the fix.  Each caller
picks the error class: ``MisuseError`` (the default) inside a test, the marker's
``MarkerArgumentError`` at collection.  Imports no torch.
"""

from __future__ import annotations

import numbers
from typing import Any

from ..errors import MisuseError

EXAMPLE = "[1, 2, 4, 8]"


def capture_sizes_in_order(
    sizes: Any,
    where: str = "capture_sizes",
    *,
    caller: str = "the capture",
    error: type[Exception] = MisuseError,
    one_int: bool = True,
) -> tuple[int, ...]:
    """The positive batch sizes in ``sizes``, in the order given, duplicates dropped.

    ``sizes`` is an iterable of ints other than a string, or (with ``one_int=True``)
    an int alone, meaning one size; ``bool`` is not an int here.  ``where`` names the
    argument in the message (``"sizes"``, ``"@pytest.mark.cudagraph: capture_sizes"``),
    ``caller`` the call that needs it, ``error`` the exception raised
    (:class:`~pytest_cudagraph.errors.MisuseError` by default).

    Example::

        capture_sizes_in_order([8, 1, 8, 2], "sizes")   # (8, 1, 2)
    """
    if sizes is None:
        raise error(
            f"no capture sizes were given: {caller} needs {where}; pass {where}={EXAMPLE}, or set "
            f"@pytest.mark.cudagraph(capture_sizes=[...]) or the ini option cudagraph_capture_sizes"
        )
    if one_int and _is_size_int(sizes):
        sizes = [sizes]
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise error(f"{where}={sizes!r} is not a list of batch sizes; give positive integers such as {EXAMPLE}")
    given = list(sizes)
    if not given:
        raise error(f"{where}=[] is empty; give at least one positive batch size such as {EXAMPLE}")
    for size in given:
        if not _is_size_int(size) or size <= 0:
            raise error(
                f"{where}={given!r} must be a non-empty list of positive ints, but capture size {size!r} is not "
                f"a positive integer; give sizes such as {EXAMPLE}"
            )
    return tuple(dict.fromkeys(int(size) for size in given))


def validate_capture_sizes(
    sizes: Any,
    where: str = "capture_sizes",
    *,
    caller: str = "the capture",
    error: type[Exception] = MisuseError,
    one_int: bool = True,
) -> tuple[int, ...]:
    """The positive batch sizes in ``sizes``, sorted ascending and unique.

    Raises ``error`` (``MisuseError`` by default) with one sentence naming ``where``,
    the value given and the fix; see :func:`capture_sizes_in_order`.

    Example::

        validate_capture_sizes([8, 1, 8, 2])   # (1, 2, 8)
    """
    return tuple(sorted(capture_sizes_in_order(sizes, where, caller=caller, error=error, one_int=one_int)))


def _is_size_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
