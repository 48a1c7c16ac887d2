"""A run, or a comparison of two runs, as Markdown for a CI job's page or a pull-request comment.

``pytest-cudagraph show REPORT --markdown``, the run's own job summary
(``--cudagraph-summary``, appended to ``$GITHUB_STEP_SUMMARY``) and
``buildkite-agent annotate`` all take this text.  A run reads::

    ### pytest-cudagraph: run.json

    **FAILED**: 1 failed, 2 passed; 4 graphs captured; 1 recompile

    #### Failures

    - `tests/test_mlp.py::test_rec` failed, **max_recompiles** at `tests/test_mlp.py:15`: @pytest.mark.max_recompiles(0):
      Dynamo recompiled 1 time, expected at most 0. First: 0/0: tensor 'x' dtype mismatch. expected Float, actual Double

    #### Tests under `tests/`

    | test                   | outcome | graphs  | pool / largest      | recompiles | fxgraph | aot     | triton  |
    | ---------------------- | ------- | ------- | ------------------- | ---------- | ------- | ------- | ------- |
    | `test_mlp.py::test_rec` | failed  | -       | -                   | 1          | -       | -       | -       |

and a comparison: its verdict line, the regressions with their rules and
sentences, the environment that changed, then each changed test's table of
figures.  Failures come first, each with its one-line cause
(``render.failure_line``); the table's cells are the terminal section's
(``render.summary.summary_row``), so the page, the terminal and the job summary
agree.  Everything from a report is escaped (``render.markdown_blocks``), and the
raw text stays within 120 columns where its words allow.  Every list stops at
``MAX_TESTS`` or ``MAX_ROWS`` items, saying how many more the report holds, and a
page stays under ``MAX_BYTES`` (GitHub drops a job summary over 1 MiB), its
verdict first.  Reads records only;
nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..records.comparison import NOTHING_COMPARED_RULE, Comparison, TestComparison
from ..records.json_values import mapping_of as section
from ..records.key_diff import lookups_of
from ..records.report import summarize
from .compare_text import delta_text, explain_command_of, incomplete_lines, summary_line, value_text
from .failure_line import failure_cause, failure_rule, failure_site
from .key_text import compare_lines, lookup_table_lines, lookups_legend, prominent, run_wide_lines
from .markdown_blocks import MAX_BYTES, WIDTH, code, fenced, paragraph, table, table_fits, text, within_bytes
from .plain_text import clip, clip_nodeid, count_noun
from .summary import (
    ATTENTION_OUTCOMES,
    EMPTY_CELLS,
    HEADER,
    disabled_layer_lines,
    first_use_lines,
    legend_lines,
    measured_nothing,
    needs_attention,
    skip_lines,
    summary_row,
    totals_line,
)

__all__ = ["MAX_ROWS", "MAX_TESTS", "comparison_markdown", "run_markdown", "run_verdict"]

# a job page or a comment is read, not searched: beyond this many rows the report is the place
MAX_ROWS = 60
MAX_TESTS = 30
# the test column is never clipped narrower than this, even if the table then outgrows WIDTH
NARROWEST_ID = 30


# ----------------------------------------------------------------------------
# a run
# ----------------------------------------------------------------------------


def run_verdict(records: Mapping[str, Mapping[str, Any]], incomplete: bool) -> str:
    """``FAILED``, ``INCOMPLETE`` (or both), else ``PASSED``, or ``SKIPPED`` when no test ran to a result."""
    outcomes: Mapping[str, int] = summarize(records)["outcomes"]
    words = []
    if any(outcomes.get(outcome) for outcome in ATTENTION_OUTCOMES):
        words.append("FAILED")
    if incomplete:
        words.append("INCOMPLETE")
    if not words:
        ran = any(outcomes.get(outcome) for outcome in ("passed", "xfailed", "xpassed"))
        words.append("PASSED" if ran else "SKIPPED" if records else "NO TESTS")
    return " and ".join(words)


def run_markdown(
    records: Mapping[str, Mapping[str, Any]],
    *,
    title: str,
    incomplete_reasons: Sequence[str] = (),
    not_run_count: int = 0,
    notes: Sequence[str] = (),
    max_rows: int | None = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
) -> str:
    """A run's Markdown: title, verdict line, failures with their causes, the table of tests, the lines under it.

    ``records``: node id -> record, as the report holds them; ``incomplete_reasons``:
    why the run did not run to its end (none when it did); ``notes``: lines said
    under the verdict (the shard, where the report went).
    """
    lines = [f"### {text(title)}", ""]
    verdict = run_verdict(records, bool(incomplete_reasons))
    lines += paragraph(f"**{verdict}**: {text(totals_line(records) if records else 'no test recorded')}")
    if incomplete_reasons:
        not_run = f" ({count_noun(not_run_count, 'selected test')} not run)" if not_run_count else ""
        lines += ["", *paragraph(f"**INCOMPLETE run**: {text('; '.join(incomplete_reasons) + not_run)}")]
    for note in notes:
        lines += ["", *paragraph(text(note))]
    ordered = sorted(records.items(), key=lambda item: (not needs_attention(item[1]), item[0]))
    failed = [(nodeid, record) for nodeid, record in ordered if record.get("outcome") in ATTENTION_OUTCOMES]
    if failed:
        lines += ["", f"#### Failures ({len(failed)})", ""]
        shown = failed if max_rows is None else failed[:max_rows]
        for nodeid, record in shown:
            lines += paragraph(_failure_item(nodeid, record), first="- ", indent="  ")
        if len(shown) < len(failed):
            lines.append(f"- ... {len(failed) - len(shown)} more failures (the report holds every one)")
    if records:
        lines += ["", *_tests_section(ordered, max_rows)]
    return within_bytes("\n".join(lines) + "\n", max_bytes)


def _failure_item(nodeid: str, record: Mapping[str, Any]) -> str:
    """``` `id` failed, **rule** at `file:line`: cause ```; a failure of the test's own code has no rule."""
    item = f"{code(nodeid)} {text(record.get('outcome', 'failed'))}"
    rule, site = failure_rule(record), failure_site(record)
    if rule is not None:
        item += f", **{text(rule)}**"
        if site is not None:
            item += f" at {code(f'{site[0]}:{site[1]}')}"
    cause = failure_cause(record)
    return f"{item}: {text(cause)}" if cause else item


def _file_and_name(nodeid: str) -> tuple[str, str]:
    """``("tests/test_mlp.py", "test_rec[bs8]")``: a test's file, and its name within the file."""
    file, separator, name = nodeid.partition("::")
    return (file, name) if separator else ("", nodeid)


def _name_cell(name: str, others: Sequence[str]) -> str:
    """A test's name in code; clipped in the middle only where its row would be wider than WIDTH unpadded."""
    # "| " + name + " | " + the others joined by " | " + " |", the name between two backticks
    room = WIDTH - sum(len(cell) + 3 for cell in others) - 4 - 2
    return code(clip_nodeid(name, max(room, NARROWEST_ID)))


def _tests_section(ordered: Sequence[tuple[str, Mapping[str, Any]]], max_rows: int | None) -> list[str]:
    """``#### Tests``: a table per file (the files with failures first), what it left out, the legend.

    A table per file keeps the test column to the tests' names, so that the rows fit
    the width; the columns empty in every row of the run are left out of every table,
    and the tables are laid out alike.  As in the terminal, a skipped test that
    measured nothing (a GPU test on a CPU runner) has no row: the lines under the
    tables count it.  Under each table, the first failed guard of each test that
    recompiled; after the tables, the tests' cache lookups.
    """
    rows = {nodeid: summary_row(nodeid, record) for nodeid, record in ordered}
    listed = [(nodeid, record) for nodeid, record in ordered if not measured_nothing(record, rows[nodeid])]
    shown = list(listed if max_rows is None else listed[:max_rows])
    keep = [i for i in range(len(HEADER)) if i < 2 or any(rows[nodeid][i] not in EMPTY_CELLS for nodeid, _ in shown)]
    cells = {nodeid: [text(rows[nodeid][i]) for i in keep[1:]] for nodeid, _ in shown}
    by_file: dict[str, list[str]] = {}
    for nodeid, _ in shown:  # the order of their first test: files with failures come first
        by_file.setdefault(_file_and_name(nodeid)[0], []).append(nodeid)
    header = [HEADER[i] for i in keep]
    tables = {
        file: [[_name_cell(_file_and_name(nodeid)[1], cells[nodeid]), *cells[nodeid]] for nodeid in nodeids]
        for file, nodeids in by_file.items()
    }
    aligned = all(table_fits(header, table_rows) for table_rows in tables.values())
    records = dict(ordered)
    lines = [f"#### Tests ({len(ordered)})"]
    for file, nodeids in by_file.items():
        if file:
            lines += ["", code(file)]
        lines += ["", *table(header, tables[file], aligned=aligned)]
        reasons = [(nodeid, _recompile_reason(records[nodeid])) for nodeid in nodeids]
        reasons = [(nodeid, reason) for nodeid, reason in reasons if reason]
        if reasons:
            lines.append("")
            for nodeid, reason in reasons:
                item = f"{code(_file_and_name(nodeid)[1])} recompiled, first failed guard: {text(reason)}"
                lines += paragraph(item, first="- ", indent="  ")
    if len(shown) < len(listed):
        lines += ["", f"... {len(listed) - len(shown)} more tests (the report holds every test)"]
    legend = legend_lines([rows[nodeid] for nodeid, _ in shown])
    unlisted = len(ordered) - len(listed)
    below = [*skip_lines(records, unlisted), *first_use_lines(records), *disabled_layer_lines(records), *legend]
    if below:
        lines.append("")
        for line in below:
            lines += paragraph(text(line), first="- ", indent="  ")
    return lines + _lookups_section([nodeid for nodeid, _ in shown], records)


def _recompile_reason(record: Mapping[str, Any]) -> str | None:
    """The first failed guard of a test's first recompile, with its values; else the first reason recorded."""
    recompiles = section(record.get("recompiles"))
    for event in recompiles.get("events") or ():
        if not isinstance(event, Mapping) or event.get("limit_hit") is not None:
            continue
        for guard in event.get("guards") or ():
            if isinstance(guard, Mapping) and guard.get("guard"):
                values = [f"{name} {guard[name]}" for name in ("expected", "actual") if guard.get(name) is not None]
                return clip(guard["guard"], 200) + (f" ({', '.join(values)})" if values else "")
        for reason in event.get("reasons") or ():
            return clip(reason, 200, first_line=True)
    reasons = recompiles.get("reasons")
    if isinstance(reasons, list) and reasons and recompiles.get("count"):
        return clip(reasons[0], 200, first_line=True)
    return None


def _lookups_section(nodeids: Sequence[str], records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The cache lookups of the tests that record them, as ``show`` prints them, folded under one summary line."""
    chosen = [nodeid for nodeid in nodeids if lookups_of(records[nodeid])]
    if not chosen:
        return []
    chosen.sort(key=lambda nodeid: not any(prominent(lookup) for lookup in lookups_of(records[nodeid])))
    lines = ["", f"<details><summary>Cache lookups of {count_noun(len(chosen), 'test')}</summary>", ""]
    capitals = any(prominent(lookup) for nodeid in chosen for lookup in lookups_of(records[nodeid]))
    lines += paragraph(text(lookups_legend(capitals)))
    for nodeid in chosen:
        lines += ["", code(nodeid), "", *fenced(lookup_table_lines(records[nodeid], indent="", width=WIDTH))]
    return [*lines, "", "</details>"]


# ----------------------------------------------------------------------------
# a comparison of two runs
# ----------------------------------------------------------------------------


def comparison_markdown(
    comparison: Comparison,
    *,
    incomplete_rule: str,
    title: str | None = None,
    max_tests: int | None = MAX_TESTS,
    max_bytes: int = MAX_BYTES,
) -> str:
    """A comparison's Markdown: verdict line, regressions, environment changes, each changed test's figures, notes.

    The run regression of ``incomplete_rule`` is worded by the INCOMPLETE lines, and
    ``nothing-compared`` by the verdict line, as in ``compare``'s text.
    """
    c = comparison
    base_label, new_label = c.labels
    lines = [f"### {text(title or f'pytest-cudagraph compare: {base_label} → {new_label}')}", ""]
    verdict, _, rest = summary_line(c).partition(": ")
    lines += paragraph(f"**{text(verdict)}**: {text(rest)}")
    regressions = [
        (code(test.nodeid), regression.rule, regression.message) for test in c.tests for regression in test.regressions
    ]
    worded = (incomplete_rule, NOTHING_COMPARED_RULE)  # by the INCOMPLETE lines, by the verdict line
    regressions += [("", r.rule, r.message) for r in c.run_regressions if r.rule not in worded]
    if regressions:
        lines += ["", f"#### Regressions ({len(regressions)})", ""]
        for where, rule, message in _first(regressions, max_tests):
            head = f"{where} **{text(rule)}**" if where else f"**{text(rule)}**"
            lines += paragraph(f"{head}: {text(message)}", first="- ", indent="  ")
        lines += _more(regressions, max_tests, "regressions (`pytest-cudagraph compare` lists them all)")
    if not c.new_run.complete:
        lines += ["", *fenced(incomplete_lines(c.labels, c.new_run, c.vanished_tests))]
    if c.env_changes:
        changes = _first(c.env_changes, MAX_ROWS)
        rows = [[text(key), text(_or_dash(base)), text(_or_dash(new))] for key, base, new in changes]
        lines += ["", "#### Environment", "", *table(["", text(base_label), text(new_label)], rows)]
        lines += _more(c.env_changes, MAX_ROWS, "environment fields changed", after_table=True)
        if c.env_same:
            same = ", ".join(f"{k} {_or_dash(v)}" for k, v in _first(c.env_same, MAX_ROWS))
            lines += ["", *paragraph(text(f"same: {same}" + (", ..." if len(c.env_same) > MAX_ROWS else "")))]
    if c.cache_keys is not None and c.cache_keys.run_wide:
        lines += ["", *fenced(run_wide_lines(c.cache_keys.run_wide, explain_command_of(c.labels, c.sources)))]
    changed = sorted((t for t in c.tests if t.changed), key=lambda t: (not t.regressions, t.nodeid))
    if changed:
        lines += ["", f"#### Changed tests ({len(changed)})"]
        shown = changed if max_tests is None else changed[:max_tests]
        for test in shown:
            lines += ["", *_changed_test(test, c.labels, c.sources)]
        if len(shown) < len(changed):
            lines += [
                "",
                f"... {len(changed) - len(shown)} more changed tests (`pytest-cudagraph compare` lists them all)",
            ]
    for heading, nodeids in (("New tests", c.new_tests), ("Vanished tests", c.vanished_tests)):
        if nodeids:
            lines += ["", f"#### {heading} ({len(nodeids)})", ""]
            lines += [f"- {code(nodeid)}" for nodeid in _first(nodeids, max_tests)]
            lines += _more(nodeids, max_tests, "")
    notes = c.notes()
    if notes:
        lines += ["", "#### Notes", ""]
        for note in _first(notes, MAX_ROWS):
            lines += paragraph(text(note), first="- ", indent="  ")
        lines += _more(notes, MAX_ROWS, "notes (`pytest-cudagraph compare` lists them all)")
    return within_bytes("\n".join(lines) + "\n", max_bytes)


def _first(items: Sequence[Any], limit: int | None) -> Sequence[Any]:
    return items if limit is None else items[:limit]


def _more(items: Sequence[Any], limit: int | None, what: str, *, after_table: bool = False) -> list[str]:
    """The list item that says how many of ``items`` a list of ``limit`` left out; none when it left none out.

    ``after_table``: under a table, after a blank line, which ends it.
    """
    if limit is None or len(items) <= limit:
        return []
    return [""] * after_table + [f"- ... {len(items) - limit} more" + (f" {what}" if what else "")]


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _changed_test(test: TestComparison, labels: tuple[str, str], sources: tuple[str, str] | None) -> list[str]:
    """One changed test: its id and state, the table of its changes, its notes, its cache-key lines."""
    if test.regressions:
        state = f"REGRESSED ({', '.join(dict.fromkeys(r.rule for r in test.regressions))})"
    else:
        state = "changed"
    lines = paragraph(f"{code(test.nodeid)} **{text(state)}**")
    if test.changes:
        changes = _first(test.changes, MAX_ROWS)
        rows = [
            [
                text(change.metric),
                text(value_text(change.metric, change.base)),
                text(value_text(change.metric, change.new)),
                text(delta_text(change.metric, change.base, change.new)),
                text(change.rule or ""),
            ]
            for change in changes
        ]
        lines += ["", *table(["metric", text(labels[0]), text(labels[1]), "change", "rule"], rows)]
        lines += _more(test.changes, MAX_ROWS, "figures changed", after_table=True)
    for note in _first(test.notes, MAX_ROWS):
        lines += ["", *paragraph(text(f"note: {note}"))]
    if test.cache_keys is not None and test.cache_keys.behaviour_changed:
        lines += ["", *fenced(compare_lines(test.cache_keys, explain_command_of(labels, sources, test.nodeid), labels))]
    return lines
