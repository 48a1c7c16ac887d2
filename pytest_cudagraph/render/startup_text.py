"""The startup benchmark's table: per node id, the cold and warm median and spread of each figure, and warm/cold.

``pytest-cudagraph startup`` (``tools.startup_cost``) measures; this module words
its result::

    tests/test_model.py::test_decode: 3 cold runs and 3 warm runs (median, spread = max - min, seconds)
      figure                  cold  spread    warm  spread  warm/cold
      wall_s                42.100   2.100  13.400   0.900       0.32
      duration_s            30.000   0.000   3.000   0.000       0.10
      compile_s             29.800   1.800   2.420   0.120       0.08
        inductor            22.900   1.400   0.320   0.020       0.01
      capture_s              0.400   0.000   0.400   0.000       1.00
      compile_instructions       -               -                  -

The render layer never imports the tools: the result, its figures and the words
of its statistic are ``records.startup``'s.  Nothing here imports torch.
"""

from __future__ import annotations

from ..records.startup import FIGURES, SPREAD, STATISTIC, StartupResult, Stats
from .plain_text import count_noun, format_table

__all__ = ["startup_table_lines"]


def startup_table_lines(result: StartupResult) -> list[str]:
    """Per node id: one row per figure and phase, cold and warm median and spread, and warm/cold.

    The phases of the compile come under ``compile_s``; then the node's notes and
    errors, what interrupted the benchmark, the node ids not measured, INCOMPLETE.
    """
    lines: list[str] = []
    for node in result.nodes:
        cold, warm = len(node.of_kind("cold")), len(node.of_kind("warm"))
        lines.append(
            f"{node.nodeid}: {count_noun(cold, 'cold run')} and {count_noun(warm, 'warm run')} "
            f"({STATISTIC}, spread = {SPREAD}, seconds)"
        )
        rows = [["figure", "cold", "spread", "warm", "spread", "warm/cold"]]
        ratios = node.warm_over_cold()
        cold_phases, warm_phases = node.phase_stats("cold"), node.phase_stats("warm")
        for figure in FIGURES:
            rows.append(_row(figure, node.stats("cold", figure), node.stats("warm", figure), ratios.get(figure)))
            if figure != "compile_s":
                continue
            for name in dict.fromkeys([*cold_phases, *warm_phases]):  # the phases of the compile, under it
                c, w = cold_phases.get(name), warm_phases.get(name)
                ratio = w.median / c.median if c is not None and w is not None and c.median > 0 else None
                rows.append(_row(f"  {name}", c, w, ratio))
        lines += format_table(rows, align="<>>>>>", indent="  ")
        lines += [f"  note: {note}" for note in node.notes]
        lines += [f"  ERROR: {error}" for error in node.errors]
    if result.interrupted is not None:
        lines.append(f"INTERRUPTED: {result.interrupted}")
    lines += [f"{nodeid}: not measured" for nodeid in result.not_run]
    if not result.complete:
        lines.append("INCOMPLETE: the report keeps every run measured and says which are missing")
    return lines


def _row(name: str, cold: Stats | None, warm: Stats | None, ratio: float | None) -> list[str]:
    counted = name == "compile_instructions"

    def cells(stats: Stats | None) -> list[str]:
        if stats is None:
            return ["-", ""]
        if counted:
            return [f"{stats.median:,.0f}", f"{stats.spread:,.0f}"]
        return [f"{stats.median:.3f}", f"{stats.spread:.3f}"]

    return [name, *cells(cold), *cells(warm), "-" if ratio is None else f"{ratio:.2f}"]
