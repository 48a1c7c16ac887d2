"""dtypes: the default tolerances for comparing tensors, and which dtypes this torch has.

Imports torch lazily.
"""

from __future__ import annotations

from typing import Any

# dtype name -> (rtol, atol): the values torch.testing.assert_close uses (2.4-2.14)
_ASSERT_CLOSE_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
# 8-bit floats carry 2-3 mantissa bits; one step apart is a rounding difference.
# assert_close has no entry for them; these are the plugin's own.
_FLOAT8_TOLERANCES = {
    "float8_e4m3fn": (0.125, 1e-3),
    "float8_e5m2": (0.25, 1e-3),
}


def default_tolerance_table() -> dict[Any, tuple[float, float]]:
    """``{torch dtype: (rtol, atol)}`` for comparing floating and complex tensors.

    The values ``torch.testing.assert_close`` uses, plus the 8-bit float dtypes this
    torch has (``torch.float8_e4m3fn``, ``torch.float8_e5m2``; a torch without them is
    left without their entries).
    """
    import torch

    table = {getattr(torch, name): tolerances for name, tolerances in _ASSERT_CLOSE_TOLERANCES.items()}
    for name, tolerances in _FLOAT8_TOLERANCES.items():
        if hasattr(torch, name):
            table[getattr(torch, name)] = tolerances
    return table
