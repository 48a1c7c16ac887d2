"""A test's figures as JUnit XML properties: ``(name, value)`` pairs for its ``<testcase>``.

Under ``--junitxml`` the plugin adds these to each test's ``user_properties``, and
pytest writes them as ``<property name="cudagraph.pool_bytes" value="62914560"/>``
inside the test's ``<testcase>`` (``plugin/junit.py``).  The names are stable and
documented in ``docs/reference.md``; each reads one field of the test's record:

==========================================  ============================================================
property                                    the record's field
==========================================  ============================================================
``cudagraph.graphs_captured``               ``graphs.captured``
``cudagraph.pool_bytes``                    ``graphs.pool_bytes``
``cudagraph.largest_graph_bytes``           ``graphs.largest_graph_bytes``
``cudagraph.first_use_bytes``               ``graphs.first_use_bytes``
``cudagraph.behind_allocator_bytes``        ``graphs.behind_allocator_bytes``
``cudagraph.piecewise.<same four>``         ``piecewise.graphs_captured``, ``.pool_bytes``, ``.first_use_bytes``,
                                            ``.behind_allocator_bytes``
``cudagraph.reduce_overhead.recordings``    ``reduce_overhead.recordings`` (and ``.pool_bytes``)
``cudagraph.rank<N>.<graph figure>``        ``ranks.per_rank[N].graphs``: the five graph figures per rank
``cudagraph.recompiles``                    ``recompiles.count``
``cudagraph.recompile_limit_hits``          ``recompiles.limit_hits`` (their number)
``cudagraph.graph_breaks``                  ``recompiles.graph_breaks.count``
``cudagraph.cache.<layer>.<counter>``       every integer counter of ``caches.<layer>`` (``fxgraph``,
                                            ``aot_autograd``, ``triton``): ``hit``, ``miss``, ``saved``,
                                            ``bypass``; ``compiled``, ``loaded`` ...
``cudagraph.cold.cache.<layer>.<counter>``  the first cold/warm pair's passes (the ``compile_cache``
``cudagraph.warm.cache.<layer>.<counter>``  marker's, else the first ``cold_warm()``): their counters
``cudagraph.compile_s``                     ``compile_time.total_s``
``cudagraph.cold.compile_s``,               ``compile_time.passes[0].cold_s`` and ``.warm_s``
``cudagraph.warm.compile_s``
==========================================  ============================================================

A value is the report's own, as text: an integer as its digits, a float as Python
writes it (``repr``: it reads back to the same float), ``nan`` and ``inf`` as the
report writes them.  A field the record lacks, or holds as ``null`` (not
measured), gives no property.  Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..records.cold_warm import pass_pairs
from ..records.report import limit_hit_count

__all__ = ["CACHE_LAYERS", "GRAPH_FIGURES", "PREFIX", "junit_properties", "property_value"]

PREFIX = "cudagraph."
# (property, field of the graphs section)
GRAPH_FIGURES = (
    ("graphs_captured", "captured"),
    ("pool_bytes", "pool_bytes"),
    ("largest_graph_bytes", "largest_graph_bytes"),
    ("first_use_bytes", "first_use_bytes"),
    ("behind_allocator_bytes", "behind_allocator_bytes"),
)
PIECEWISE_FIGURES = (
    ("graphs_captured", "graphs_captured"),
    ("pool_bytes", "pool_bytes"),
    ("first_use_bytes", "first_use_bytes"),
    ("behind_allocator_bytes", "behind_allocator_bytes"),
)
REDUCE_OVERHEAD_FIGURES = (("recordings", "recordings"), ("pool_bytes", "pool_bytes"))
CACHE_LAYERS = ("fxgraph", "aot_autograd", "triton")


def property_value(value: Any) -> str | None:
    """A figure as a property's text; None for what is no figure (null, a flag, text other than nan and inf)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if value in ("nan", "inf", "-inf"):
        return str(value)
    return None


def _section(mapping: Any, name: str) -> Mapping[str, Any]:
    value = mapping.get(name) if isinstance(mapping, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _figures(prefix: str, section: Mapping[str, Any], fields: tuple[tuple[str, str], ...]) -> Iterator[tuple[str, str]]:
    for name, field in fields:
        value = property_value(section.get(field))
        if value is not None:
            yield f"{prefix}{name}", value


def _counters(prefix: str, caches: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every integer counter of each layer, in the record's order."""
    for layer in CACHE_LAYERS:
        for counter, count in _section(caches, layer).items():
            if isinstance(count, int) and not isinstance(count, bool):
                yield f"{prefix}cache.{layer}.{counter}", str(count)


def junit_properties(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The record's figures as ``(name, value)`` pairs, in the order of the table above; empty when it has none."""
    found = list(_figures(PREFIX, _section(record, "graphs"), GRAPH_FIGURES))
    found += _figures(f"{PREFIX}piecewise.", _section(record, "piecewise"), PIECEWISE_FIGURES)
    found += _figures(f"{PREFIX}reduce_overhead.", _section(record, "reduce_overhead"), REDUCE_OVERHEAD_FIGURES)
    ranks = _section(record, "ranks").get("per_rank")
    for index, rank in enumerate(ranks if isinstance(ranks, list) else ()):
        number = rank.get("rank") if isinstance(rank, Mapping) else None
        number = number if isinstance(number, int) and not isinstance(number, bool) else index
        found += _figures(f"{PREFIX}rank{number}.", _section(rank, "graphs"), GRAPH_FIGURES)
    recompiles = _section(record, "recompiles")
    if recompiles:
        found += _figures(PREFIX, recompiles, (("recompiles", "count"),))
        if "limit_hits" in recompiles:
            found.append((f"{PREFIX}recompile_limit_hits", str(limit_hit_count(recompiles))))
        found += _figures(PREFIX, _section(recompiles, "graph_breaks"), (("graph_breaks", "count"),))
    found += _counters(PREFIX, _section(record, "caches"))
    pairs = pass_pairs(record)
    if pairs:
        found += _counters(f"{PREFIX}cold.", pairs[0].cold)
        found += _counters(f"{PREFIX}warm.", pairs[0].warm)
    compile_time = _section(record, "compile_time")
    found += _figures(PREFIX, compile_time, (("compile_s", "total_s"),))
    passes = compile_time.get("passes")
    if isinstance(passes, list) and passes and isinstance(passes[0], Mapping):
        found += _figures(f"{PREFIX}cold.", passes[0], (("compile_s", "cold_s"),))
        found += _figures(f"{PREFIX}warm.", passes[0], (("compile_s", "warm_s"),))
    return found
