"""Documented import path: ``pytest_cudagraph.report`` is ``pytest_cudagraph.records.report``.

The module itself is put in this name's place, so every name, private ones and
monkeypatching included, is the same object under both paths.
"""

import sys

from .records import report as _module

sys.modules[__name__] = _module
