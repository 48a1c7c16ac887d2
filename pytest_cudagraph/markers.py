"""Documented import path: ``pytest_cudagraph.markers`` is ``pytest_cudagraph.plugin.markers``.

The module itself is put in this name's place, so every name, private ones and
monkeypatching included, is the same object under both paths.
"""

import sys

from .plugin import markers as _module

sys.modules[__name__] = _module
