"""Documented import path: ``pytest_cudagraph.compile_time`` is ``pytest_cudagraph.compile.compile_time``.

The module itself is put in this name's place, so every name, private ones and
monkeypatching included, is the same object under both paths.
"""

import sys

from .compile import compile_time as _module

sys.modules[__name__] = _module
