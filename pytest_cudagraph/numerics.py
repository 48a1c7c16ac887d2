"""Documented import path: ``pytest_cudagraph.numerics`` is ``pytest_cudagraph.graphs.numerics``.

The module itself is put in this name's place, so every name, private ones and
monkeypatching included, is the same object under both paths.
"""

import sys

from .graphs import numerics as _module

sys.modules[__name__] = _module
