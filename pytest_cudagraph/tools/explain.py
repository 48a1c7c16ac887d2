"""``pytest-cudagraph explain``: why two runs' cache keys differ, or what one run's misses found.

- ``explain_arguments``: which arguments are reports and which is the TEST;
- ``pick_test``: the node id a TEST names (itself, or the only id holding it);
- ``explain_report_lines``: load the reports and word their lookups
  (``render.key_text``), with notes where a report records none.

A TEST that names no test or several is a ``BadTest``: one line, exit 2.  Reads
JSON only; never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import MisuseError
from ..records.key_diff import diff_reports, has_cache_keys, records_cache_keys
from ..records.loaded import read_report
from ..render.key_text import explain_lines, one_run_lines
from ..render.plain_text import clip

__all__ = ["BadTest", "explain_arguments", "explain_report_lines", "pick_test"]


class BadTest(MisuseError):
    """``explain``'s TEST names no test or several, or its arguments are too many: one line, exit 2."""


def explain_arguments(given: Sequence[str]) -> tuple[list[str], str | None]:
    """(the reports, the test or None): the second of two arguments is a report if it is a file or ends in .json."""
    if len(given) > 3:
        raise BadTest(
            f"explain takes at most three arguments (BASE.json NEW.json TEST), got {len(given)}; "
            "quote a node id that holds spaces"
        )
    if len(given) == 3:
        return list(given[:2]), given[2]
    if len(given) == 2 and not _is_report_argument(given[1]):
        return [given[0]], given[1]
    return list(given), None


def _is_report_argument(given: str) -> bool:
    """A report: a name ending in .json, or another file but a test file (``test_x.py``, ``test_x.py::t``: a TEST)."""
    if given.endswith(".json"):
        return True
    if "::" in given or given.endswith(".py"):
        return False
    return Path(given).is_file()


def pick_test(wanted: str, candidates: Sequence[str], where: str) -> str:
    """The node id ``wanted`` names: itself, or the only id holding it; BadTest otherwise."""
    if wanted in candidates:
        return wanted
    matches = [nodeid for nodeid in candidates if wanted in nodeid]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise BadTest(f"no test in {where} matches {wanted!r}; give its node id or a part of it that only it holds")
    listed = ", ".join(clip(m, 100) for m in matches[:3]) + (", ..." if len(matches) > 3 else "")
    raise BadTest(f"{wanted!r} matches {len(matches)} tests in {where} ({listed}); give more of the node id")


def explain_report_lines(paths: Sequence[str], wanted: str | None) -> list[str]:
    """explain's lines: one report's misses, or two reports' lookups paired and their keys' differences.

    ``wanted`` (a node id or a part only it holds) narrows them to one test; BadTest
    when it names no test, several, or a test of one of two reports only.
    """
    reports = [read_report(path) for path in paths]
    labels = [Path(path).name for path in paths]
    tests = [report.tests for report in reports]
    where = " and ".join(paths)
    if len(reports) == 1:
        nodeid = pick_test(wanted, list(tests[0]), where) if wanted is not None else None
        return one_run_lines(reports[0], labels[0], nodeid)
    in_both = [nodeid for nodeid in tests[0] if nodeid in tests[1]]
    nodeid = None
    if wanted is not None:
        if wanted not in in_both:
            for index, other in ((0, 1), (1, 0)):
                if wanted in tests[index] and wanted not in tests[other]:
                    raise BadTest(
                        f"test {wanted} is in {paths[index]} only, so there is nothing to pair its lookups with; "
                        f"explain it alone with pytest-cudagraph explain {paths[index]} TEST"
                    )
        nodeid = pick_test(wanted, in_both, where)
    diff = diff_reports(reports[0], reports[1])
    if nodeid is not None and nodeid not in diff.tests:
        lines = [f"{nodeid}: no cache lookups recorded (no cache_keys) in {labels[0]} or {labels[1]}"]
    elif not any(has_cache_keys(record) for table in tests for record in table.values()):
        lines = [f"no test in {labels[0]} or {labels[1]} recorded a cache lookup (cache_keys): nothing to explain"]
    else:
        lines = explain_lines(diff, (labels[0], labels[1]), nodeid)
        for index in (0, 1):
            if not records_cache_keys(reports[index]):
                lines.insert(
                    1,
                    f"note: {labels[index]} records no cache lookups (an earlier plugin version wrote it, or nothing "
                    f"compiled with Inductor), so every lookup of {labels[1 - index]} shows as unpaired",
                )
    return lines
