"""pytest-cudagraph: validate CUDA graphs, graph pools, Dynamo recompiles and compile caches.

Importing this package does not import torch: the plain API below is loaded on
first attribute access, so ``pytest`` pays nothing for the plugin until a test
uses it.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "capture_graphs": "capture",
    "GraphSet": "capture",
    "watch_recompiles": "recompiles",
    "RecompileWatch": "recompiles",
    "cache_probe": "caches",
    "CacheProbe": "caches",
    "piecewise_compile": "piecewise",
    "watch_trees": "trees",
    "load_report": "report",
    "CudagraphError": "errors",
    "UsageProblem": "errors",
    "InvariantViolation": "errors",
    "CaptureError": "errors",
    "StaleGraphError": "errors",
    "ReportError": "errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_cudagraph' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
