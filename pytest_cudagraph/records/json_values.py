"""Values as strict JSON holds them (NaN and infinities as strings, only text in strings), and as a reader takes them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as the strings "nan", "inf", "-inf".

    Strict JSON has no NaN (``jq`` and browsers reject it), yet a NaN replay error is
    exactly what a numerics report must keep; ``float("nan")`` reads it back.
    Objects that are not JSON (a ``torch.Size``, a path) become their ``str()``, and
    a lone surrogate in a string (not text; no reader could print it) its ``\\udXXX`` escape.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, str):
        return value if is_text(value) else value.encode("utf-8", "backslashreplace").decode("utf-8")
    if value is None or isinstance(value, (int, bool)):
        return value
    if isinstance(value, Mapping):
        return {json_safe(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return json_safe(to_json())
    return json_safe(str(value))


def is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (what "\\ud800" in JSON decodes to)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def list_of(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one (a report's field of another type reads as absent)."""
    return value if isinstance(value, list) else []


def mapping_of(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_int(value: Any) -> int:
    """A count from a record: ints, floats and numeric strings count; anything else is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return int(number) if math.isfinite(number) else 0


def number(value: Any, *, finite: bool = False) -> float | None:
    """A number from a report or a record as a float; None when it is absent or no number.

    The one NaN rule: NaN is a measurement (a replay error that went NaN, written as
    the string ``"nan"``), never an absence, so ``"nan"`` and ``float("nan")`` give
    NaN and ``"inf"`` gives infinity; an integer beyond a float's range gives an
    infinity of its sign.  ``finite=True`` is for arithmetic that needs a finite
    value (a chart's scale): NaN and infinities give None.  Booleans are no numbers.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            result = float(value)
        except OverflowError:  # load_report refuses such an int; a live record may still hold one
            result = math.inf if value > 0 else -math.inf
    elif isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            return None
    else:
        return None
    return None if finite and not math.isfinite(result) else result
