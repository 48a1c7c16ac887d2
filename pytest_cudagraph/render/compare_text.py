"""``compare``'s text: the side-by-side report of two runs, its notes and its one-line verdict.

``pytest_cudagraph.tools.compare`` judges two reports into a ``Comparison``; this
module words it::

    environment:
      torch  2.13.0  → 2.14.1
      same: python 3.11.7

    tests/test_mlp.py::test_mlp  REGRESSED (pool)
      metric             torch-2.13.json  torch-2.14.json  change
      graphs.pool_bytes  60.0 MiB         72.0 MiB         +20.0%  <- pool
      pool: graph pool 60.0 MiB -> 72.0 MiB (+20.0%, threshold 10%); largest graph 42.0 MiB -> 42.0 MiB

    REGRESSION: 1 test in both reports: 1 changed, 1 regressed; 0 new, 0 vanished (by rule: pool 1)

The render layer never imports the tools: the results it reads are
``records.comparison``'s (where the notes about the two runs, ``run_notes``, are
worded, as the JSON carries them), and the one rule name it needs is passed in.
Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..records.comparison import (
    NOTHING_COMPARED_RULE,
    Comparison,
    RunCompleteness,
    TestComparison,
    run_notes,
    selection_text,
)
from ..records.json_values import number
from .key_text import compare_lines, explain_command, run_wide_lines
from .plain_text import clip, count_noun, fit_table, format_bytes, wrap_lines

# the text's width: prose is broken at spaces, tables fitted; a node id stays whole on a line of its own
WIDTH = 120

__all__ = [
    "changed_test_lines",
    "comparison_text",
    "delta_text",
    "env_lines",
    "explain_command_of",
    "incomplete_lines",
    "run_notes",
    "selection_text",
    "WIDTH",
    "summary_line",
    "value_text",
    "verdict_lines",
]


# ----------------------------------------------------------------------------
# the report
# ----------------------------------------------------------------------------


def comparison_text(comparison: Comparison, *, incomplete_rule: str, arrow: str = "→", verbose: bool = False) -> str:
    """The side-by-side report: environment diff, one table per changed test, new/vanished, run notes, summary.

    ``verbose`` also lists the differences within noise, marked so, and the tests
    that have nothing else.  The run regression of ``incomplete_rule`` is worded by
    the INCOMPLETE lines instead of a line of its own, ``nothing-compared`` by the verdict line.
    """
    c = comparison
    lines = env_lines(c.env_changes, c.env_same, arrow)
    if c.cache_keys is not None and c.cache_keys.run_wide:
        lines += ["", *run_wide_lines(c.cache_keys.run_wide, explain_command_of(c.labels, c.sources))]
    for test in c.tests:
        if test.changed or (verbose and test.noise):
            lines += ["", *changed_test_lines(test, c.labels, c.sources, verbose)]
    if c.new_tests:
        lines += ["", f"new tests ({len(c.new_tests)}):"] + [f"  {n}" for n in c.new_tests]
    if c.vanished_tests:
        # listed whether or not the vanished rule is selected: a silent gap is how a crash hides
        lines += ["", f"vanished tests ({len(c.vanished_tests)}):"] + [f"  {n}" for n in c.vanished_tests]
    for regression in c.run_regressions:
        if regression.rule not in (incomplete_rule, NOTHING_COMPARED_RULE):
            lines.append(f"{regression.rule}: {regression.message}")
    if not c.new_run.complete:
        lines += ["", *incomplete_lines(c.labels, c.new_run, c.vanished_tests)]
    notes = c.notes()
    if notes:
        lines += ["", *notes]
    return "\n".join([*wrap_lines(lines, WIDTH), "", *verdict_lines(c, verbose)])


def env_lines(
    env_changes: Sequence[tuple[str, Any, Any]], env_same: Sequence[tuple[str, Any]], arrow: str
) -> list[str]:
    """``environment:`` and a row per field that differs (or ``environment: unchanged``), then those that do not."""
    lines: list[str] = []
    if env_changes:
        lines.append("environment:")
        rows = [[key, _env_text(base), f"{arrow} {_env_text(new)}"] for key, base, new in env_changes]
        lines += _indented(fit_table(rows, WIDTH - 2, wrap={1: 20, 2: 20}), "  ")
    else:
        lines.append("environment: unchanged")
    if env_same:
        lines.append("  same: " + ", ".join(f"{k} {_env_text(v)}" for k, v in env_same))
    return lines


def changed_test_lines(
    test: TestComparison, labels: tuple[str, str], sources: tuple[str, str] | None = None, verbose: bool = False
) -> list[str]:
    """One test: its head (REGRESSED, changed, within noise), its table of changes, the rules that fired, notes."""
    base_label, new_label = labels
    if test.regressions:
        rules = ", ".join(dict.fromkeys(r.rule for r in test.regressions))
        lines = [f"{test.nodeid}  REGRESSED ({rules})"]
    else:
        lines = [f"{test.nodeid}  {'changed' if test.changed else 'within noise'}"]
    rows = [["metric", base_label, new_label, "change", ""]]
    for change in (*test.changes, *(test.noise if verbose else ())):
        rows.append(
            [
                change.metric,
                value_text(change.metric, change.base),
                value_text(change.metric, change.new),
                delta_text(change.metric, change.base, change.new),
                f"<- {change.rule}" if change.rule else "(within noise)" if change in test.noise else "",
            ]
        )
    if len(rows) > 1:
        lines += _indented(fit_table(rows, WIDTH - 2, wrap={1: 12, 2: 12}), "  ")
    lines += [f"  {regression.rule}: {regression.message}" for regression in test.regressions]
    lines += [f"  note: {note}" for note in test.notes]
    if test.cache_keys is not None and test.cache_keys.behaviour_changed:
        lines += compare_lines(test.cache_keys, explain_command_of(labels, sources, test.nodeid), labels)
    return lines


def explain_command_of(labels: tuple[str, str], sources: tuple[str, str] | None, nodeid: str | None = None) -> str:
    """The ``explain`` command the text suggests: the reports' paths, else their labels, else placeholders."""
    # a comparison made inside a run (--cudagraph-baseline) has neither paths nor file names
    named = labels if labels != ("base", "new") else ("BASE.json", "NEW.json")
    base, new = sources or named
    return explain_command(base, new, nodeid)


def incomplete_lines(labels: tuple[str, str], run: RunCompleteness, vanished_tests: Sequence[str]) -> list[str]:
    """INCOMPLETE, why, and what the new run is missing: its tests that never finished, the base's absent ones."""
    base_label, new_label = labels
    lines = [f"INCOMPLETE: {new_label} is the record of a run that did not run to its end: {'; '.join(run.reasons)}"]
    if run.not_run_count:
        lines.append(f"  not run ({run.not_run_count} of the selected tests):")
        lines += [f"    {nodeid}" for nodeid in run.not_run]
        if run.not_run_count > len(run.not_run):
            lines.append(f"    ... and {run.not_run_count - len(run.not_run)} more (the report lists the first)")
    if vanished_tests:
        lines.append(
            f"  absent from it: {count_noun(len(vanished_tests), 'test')} of {base_label} (listed under vanished tests)"
        )
    return lines


def summary_line(comparison: Comparison, verbose: bool = False) -> str:
    """``REGRESSION: ...`` with the count per rule, or ``no regression: ...`` with the rules checked.

    ``NOTHING COMPARED: ...`` where no test is in both reports (the ``nothing-compared`` regression), and
    ``no regression, but MOST TESTS VANISHED (...)`` where more than half the base's tests are missing.
    The tests that differ only within noise are counted, with where to see them:
    ``--verbose`` lists them, and with ``verbose`` the text above did.
    """
    return _joined(*_verdict_parts(comparison, verbose))


def verdict_lines(comparison: Comparison, verbose: bool = False, width: int = WIDTH) -> list[str]:
    """``summary_line`` in ``width`` columns, the verdict kept whole on the last line.

    Where the line is too long, what it adds in brackets goes on the lines above
    (``rules checked: ...``, the tests within noise), so the last line still opens
    with REGRESSION or no regression.
    """
    head, quiet, rules = _verdict_parts(comparison, verbose)
    for above, last in (([], _joined(head, quiet, rules)), ([quiet.removeprefix("; ")], _joined(head, "", rules))):
        if len(last) <= width:
            return [*wrap_lines([line for line in above if line], width), last]
    return [*wrap_lines([line for line in (quiet.removeprefix("; "), rules) if line], width), head]


def _joined(head: str, quiet: str, rules: str) -> str:
    """The verdict's parts on one line: the rules clause in brackets where there is one."""
    return f"{head}{quiet} ({rules})" if rules else f"{head}{quiet}"


def _verdict_parts(comparison: Comparison, verbose: bool) -> tuple[str, str, str]:
    """The verdict with its counts, the clause on the tests within noise (``; ...`` or empty), the rules clause."""
    c = comparison
    if c.nothing_compared:
        message = next(r.message for r in c.run_regressions if r.rule == NOTHING_COMPARED_RULE)
        others = {rule: n for rule, n in c.rule_counts().items() if rule != NOTHING_COMPARED_RULE}
        also = f" (also by rule: {', '.join(f'{rule} {n}' for rule, n in others.items())})" if others else ""
        return f"NOTHING COMPARED: {message}{also}", "", ""
    changed = [t for t in c.tests if t.changed]
    regressed_tests = [t for t in c.tests if t.regressions]
    text = (
        f"{count_noun(len(c.tests), 'test')} in both reports: {len(changed)} changed, {len(regressed_tests)} regressed; "
        f"{len(c.new_tests)} new, {len(c.vanished_tests)} vanished"
    )
    quiet_count = sum(1 for t in c.tests if t.noise and not t.changed)
    quiet = ""
    if quiet_count:
        where = ", listed above" if verbose else " (--verbose lists them)"
        quiet = f"; {quiet_count} more differ only within noise{where}"
    if c.regressed:
        counts = ", ".join(f"{rule} {n}" for rule, n in c.rule_counts().items())
        return f"REGRESSION: {text}", quiet, f"by rule: {counts}"
    rules = ", ".join(c.rules) if c.rules else "none"
    if c.mostly_vanished:
        base_tests = len(c.tests) + len(c.vanished_tests)
        head = f"no regression, but MOST TESTS VANISHED ({len(c.vanished_tests)} of the {base_tests} of {c.labels[0]})"
        return f"{head}: {text}", quiet, f"rules checked: {rules}"
    return f"no regression: {text}", quiet, f"rules checked: {rules}"


# ----------------------------------------------------------------------------
# cells
# ----------------------------------------------------------------------------


def _indented(lines: Sequence[str], indent: str) -> list[str]:
    return [indent + line if line else line for line in lines]


def _env_text(value: Any) -> str:
    return "-" if value is None else str(value)


def value_text(metric: str, value: Any) -> str:
    """One value of a test's table: bytes as MiB, instruction counts with separators, lists and text clipped."""
    if value is None:
        return "-"
    if isinstance(value, list):
        text = ",".join(map(str, value)) if len(value) <= 8 else f"{value[0]}..{value[-1]} ({len(value)})"
        return clip(text, 40)
    if metric.endswith("_bytes") and number(value) is not None:
        return format_bytes(value)
    if ".compile_instructions." in metric and number(value, finite=True) is not None:
        return f"{number(value):,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return clip(value, 40)


def delta_text(metric: str, base: Any, new: Any) -> str:
    """The change column: a percentage for bytes and instructions, a signed difference else; ``new``, ``gone``."""
    b, n = number(base), number(new)
    if b is None or n is None or isinstance(base, str) or isinstance(new, str):
        return "" if base is not None and new is not None else ("new" if base is None else "gone")
    if math.isnan(b) or math.isnan(n):
        return ""
    if metric.endswith("_bytes"):
        return f"{(n - b) / b:+.1%}" if b else ("+" if n > b else "") + format_bytes(n - b)
    if ".compile_instructions." in metric and b:
        return f"{(n - b) / b:+.2%}"
    if float(b).is_integer() and float(n).is_integer():
        return f"{int(n - b):+d}"
    return f"{n - b:+.3g}"
