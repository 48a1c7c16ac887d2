"""pytest-cudagraph: validate CUDA graphs, graph pools, Dynamo recompiles and compile caches.

Importing this package does not import torch: the plain API below is loaded on
first attribute access, so ``pytest`` pays nothing for the plugin until a test
uses it.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it: each plain-API entry point, then the types
# it and its results hand back, then the errors
_LAZY = {
    # capture_graphs -> GraphSet; .check_replay() -> GraphReplayCheck; .check_pool() -> PoolCheck;
    # .graph(size) -> CapturedGraph; .result() -> GraphSetResult
    "capture_graphs": "graphs.capture",
    "GraphSet": "graphs.capture",
    "GraphReplayCheck": "graphs.capture",
    "GraphSetResult": "graphs.capture",
    "CapturedGraph": "graphs.capture",
    "PoolCheck": "graphs.pool_check",
    # capture_graphs(..., break_at=...): each size's CapturedGraph holds a GraphChain
    "GraphChain": "graphs.breakable",
    # agree_modes -> ModeAgreement (.check(), .comparisons: PairComparison)
    "agree_modes": "graphs.agree",
    "ModeAgreement": "graphs.agree",
    "PairComparison": "graphs.agree",
    # count_rerecords -> {function: FunctionRerecords}; TreeWatch.result().rerecords is the same
    "count_rerecords": "graphs.rerecords",
    "FunctionRerecords": "graphs.rerecords",
    # watch_recompiles -> RecompileWatch; .result() -> RecompileStats (.by_function, .graph_breaks)
    "watch_recompiles": "compile.recompiles",
    "RecompileWatch": "compile.recompiles",
    "RecompileStats": "compile.recompiles",
    "FunctionRecompiles": "compile.recompiles",
    "GraphBreaks": "compile.recompiles",
    "GraphBreakSite": "compile.recompiles",
    "RecompileEvent": "compile.recompiles",
    # cache_probe -> CacheProbe; .stats() -> CacheStats; .cold_warm() -> ColdWarm of PassResults;
    # .result() -> ProbeResult
    "cache_probe": "caches.probe",
    "CacheProbe": "caches.probe",
    "CacheStats": "caches.probe",
    "ColdWarm": "caches.probe",
    "PassResult": "caches.probe",
    "ProbeResult": "caches.probe",
    # piecewise_compile -> PiecewiseModule; .stats -> PiecewiseStats;
    # .check_replay() -> PiecewiseReplayCheck of SizeChecks; .result() -> PiecewiseResult
    "piecewise_compile": "piecewise",
    "PiecewiseModule": "piecewise",
    "PiecewiseStats": "piecewise",
    "PiecewiseReplayCheck": "piecewise",
    "SizeCheck": "piecewise",
    "PiecewiseResult": "piecewise",
    # watch_trees -> TreeWatch; .result() -> ReduceOverheadResult
    "watch_trees": "graphs.reduce_overhead",
    "TreeWatch": "graphs.reduce_overhead",
    "ReduceOverheadResult": "graphs.reduce_overhead",
    # observe_graphs -> GraphObservation; .result() -> ObservedGraphs of ObservedCaptures
    "observe_graphs": "graphs.observe",
    "GraphObservation": "graphs.observe",
    "ObservedGraphs": "graphs.observe_verdict",
    "ObservedCapture": "graphs.observe_verdict",
    # run_ranks -> RanksResult (per_rank: RankResult); a failing rank raises RanksFailed
    "run_ranks": "ranks",
    "RanksResult": "ranks",
    "RankResult": "ranks",
    "RanksFailed": "ranks",
    "load_report": "records.report",
    "CudagraphError": "errors",
    "UsageProblem": "errors",
    "MisuseError": "errors",
    "MarkerArgumentError": "plugin.markers",
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
