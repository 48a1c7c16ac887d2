"""The startup benchmark's results: one run's sample, the statistics of some runs, a node id's runs, the whole benchmark.

The frozen data and the report they write are ``pytest_cudagraph.records.startup``'s,
every name importable from here too; their table is ``render.startup_text``'s
(``startup_table_lines``).  Plain data: no torch, no pytest.
"""

from __future__ import annotations

from ..records.startup import (
    FIGURES,
    ORDER,
    PASSES,
    SPREAD,
    STATISTIC,
    TRIMMED_SPREAD,
    NodeStartup,
    RunSample,
    StartupResult,
    Stats,
    trimmed_spread,
)

__all__ = [
    "FIGURES",
    "ORDER",
    "PASSES",
    "SPREAD",
    "STATISTIC",
    "TRIMMED_SPREAD",
    "NodeStartup",
    "RunSample",
    "StartupResult",
    "Stats",
    "trimmed_spread",
]
