"""``compare``'s results: a change, a regression, a run's completeness, one test's comparison, the whole one.

The frozen data and their JSON are ``pytest_cudagraph.records.comparison``'s, every
name importable from here too; this module adds the text to the whole comparison
(``Comparison.format_text``, ``Comparison.summary_line``), which is
``pytest_cudagraph.render.compare_text``'s.  Plain data: no torch, no pytest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import comparison as _records
from ..records.comparison import Change, Regression, RunCompleteness, TestComparison, run_completeness
from ..render import compare_text
from .compare_rules import INCOMPLETE_RULE

__all__ = ["Change", "Comparison", "Regression", "RunCompleteness", "TestComparison", "run_completeness"]


@dataclass(frozen=True)
class Comparison(_records.Comparison):
    """The result of ``compare_reports`` (``records.comparison.Comparison``), with its text."""

    def format_text(self, *, arrow: str = "→", verbose: bool = False) -> str:
        """The side-by-side report (``render.compare_text.comparison_text``).

        ``verbose`` also lists the differences within noise, marked so, and the tests
        that have nothing else.
        """
        return compare_text.comparison_text(self, incomplete_rule=INCOMPLETE_RULE, arrow=arrow, verbose=verbose)

    def summary_line(self) -> str:
        return compare_text.summary_line(self)
