"""Documented import path: ``pytest_cudagraph.memory`` is ``pytest_cudagraph.graphs.memory``.

The module itself is put in this name's place, so every name, private ones and
monkeypatching included, is the same object under both paths.
"""

import sys

from .graphs import memory as _module

sys.modules[__name__] = _module
