"""Documented import path: ``pytest_cudagraph.recompiles`` is ``pytest_cudagraph.compile.recompiles``.

The module itself is put in this name's place, so every name, private ones and
monkeypatching included, is the same object under both paths.
"""

import sys

from .compile import recompiles as _module

sys.modules[__name__] = _module
