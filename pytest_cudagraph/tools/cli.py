"""The ``pytest-cudagraph`` command: compare two reports, explain their cache keys, show one, merge shards, write
pytest-split's durations.

::

    pytest-cudagraph compare BASE.json NEW.json [--fail-on RULES] [--pool-threshold PCT] [--json | --markdown]
    pytest-cudagraph explain BASE.json NEW.json [TEST]     (or: explain REPORT.json [TEST])
    pytest-cudagraph show REPORT.json [--html OUT.html | --markdown]
    pytest-cudagraph merge SHARD.json... -o ALL.json
    pytest-cudagraph durations REPORT.json... [-o .test_durations]
    pytest-cudagraph startup NODEID... --runs N --report OUT.json [--timeout S] [-- PYTEST_ARGS]
    python -m pytest_cudagraph compare BASE.json NEW.json

Exit status of ``compare``: 0 when no selected rule fired, 1 on a regression (an
incomplete new run always is one), 2 when an input is unreadable, malformed or
incompatible (one line on stderr, no traceback).  ``explain``, ``show``, ``merge``
and ``durations`` exit 0, or 2 on an unreadable or refused input or an unwritable
output (``merge`` refuses shards that are not one whole split run; ``explain`` a
TEST that names no test, or several).  No input makes any of them exit 1 otherwise: an unexpected exception is exit 2 too, with
its type and place in the one line.  ``startup`` (startup_bench.py) exits 0 when every run passed, 1 when one failed,
crashed or timed out (its report is written, incomplete), 2 on bad arguments.  Reads JSON only; never imports torch
(``startup``'s runs are child processes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import ReportError
from ..records.comparison import run_completeness
from ..records.loaded import LoadedReport, read_report
from ..records.report import collector_paused, load_report, write_text_atomically
from ..text import MIB, clip, count_noun, terminal_safe
from .compare import compare_reports
from .compare_rules import (
    ALL_RULES,
    DEFAULT_MEMORY_FLOOR_BYTES,
    DEFAULT_MEMORY_THRESHOLD,
    DEFAULT_NUMERICS_FLOOR,
    DEFAULT_NUMERICS_GROWTH,
    DEFAULT_POOL_THRESHOLD,
    DEFAULT_RULES,
    DEFAULT_TIME_FLOOR_S,
    DEFAULT_TIME_THRESHOLD,
    parse_rules,
)
from .instructions import DEFAULT_INSTRUCTIONS_THRESHOLD
from .startup_cost import DEFAULT_TIMEOUT_S as STARTUP_TIMEOUT_S

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2


def _percent(text: str) -> float:
    """A percentage option: ``10`` and ``10%`` both mean 10 % (returned as 0.10)."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage; give a number such as 10") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give a growth percentage such as 10")
    return value / 100.0


def _seconds(text: str) -> float:
    """A non-negative number of seconds (``1`` or ``1s``)."""
    return _amount(text, "s", "seconds", "0.5")


def _mib(text: str) -> float:
    """A non-negative number of MiB (``2`` or ``2MiB``), returned in bytes."""
    return _amount(text, "MiB", "MiB", "2") * MIB


def _amount(text: str, suffix: str, unit: str, example: str) -> float:
    try:
        value = float(text.removesuffix(suffix))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}; give one such as {example}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give {unit} such as {example}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per job, each with a parser of its own (``_add_*_parser``)."""
    parser = argparse.ArgumentParser(
        prog="pytest-cudagraph",
        description="Compare or show pytest-cudagraph run reports (written with --cudagraph-report).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    _add_compare_parser(commands)
    _add_explain_parser(commands)
    _add_show_parser(commands)
    _add_merge_parser(commands)
    _add_durations_parser(commands)
    _add_startup_parser(commands)
    _add_schema_parser(commands)
    return parser


def _add_compare_parser(commands: argparse._SubParsersAction) -> None:
    """``compare BASE.json NEW.json``: the rules, their limits, what the text shows."""
    compare = commands.add_parser(
        "compare",
        help="compare two reports; exit 1 on a regression",
        description="Show what changed per test between two reports, and exit 1 when a selected rule "
        "flags a regression or the new run did not run to its end (2 when a report is unreadable, malformed "
        "or of another schema).",
    )
    compare.add_argument("base", metavar="BASE.json", help="the earlier report (e.g. the old torch version)")
    compare.add_argument("new", metavar="NEW.json", help="the later report")
    compare.add_argument(
        "--fail-on",
        action="append",
        metavar="RULES",
        help=f"comma-separated regression rules, repeatable: {', '.join(ALL_RULES)}, 'all', 'default' or 'none' "
        f"(default: {','.join(DEFAULT_RULES)})",
    )
    _add_compare_limits(compare)
    compare.add_argument("--timings", action="store_true", help="also show duration_s and capture_s changes")
    compare.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also list differences within noise (replay errors within tolerance, timing ratios, memory that "
        "depends on the test order)",
    )
    output = compare.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the comparison as JSON instead of tables")
    output.add_argument(
        "--markdown", action="store_true", help="print it as Markdown, for a CI job's summary or a PR comment"
    )


def _add_compare_limits(compare: argparse.ArgumentParser) -> None:
    """compare's limits: the pool, numerics, time, memory and instruction thresholds and floors."""
    compare.add_argument(
        "--pool-threshold",
        type=_percent,
        default=DEFAULT_POOL_THRESHOLD,
        metavar="PCT",
        help=f"pool growth in percent that counts as a regression (default {DEFAULT_POOL_THRESHOLD * 100:g})",
    )
    compare.add_argument(
        "--numerics-growth",
        type=_percent,
        default=DEFAULT_NUMERICS_GROWTH,
        metavar="PCT",
        help="growth of the replay error in percent that counts as a regression, on top of "
        f"--numerics-floor (default {DEFAULT_NUMERICS_GROWTH * 100:g}, i.e. doubled)",
    )
    compare.add_argument(
        "--numerics-floor",
        type=float,
        default=DEFAULT_NUMERICS_FLOOR,
        metavar="ERR",
        help=f"absolute error growth always tolerated (default {DEFAULT_NUMERICS_FLOOR:g})",
    )
    compare.add_argument(
        "--time-threshold",
        type=_percent,
        default=DEFAULT_TIME_THRESHOLD,
        metavar="PCT",
        help="compile-time, capture-time, startup-time: growth of a startup median in percent that counts, if it "
        f"also passes --time-floor and the two runs' spreads (default {DEFAULT_TIME_THRESHOLD * 100:g})",
    )
    compare.add_argument(
        "--time-floor",
        type=_seconds,
        default=DEFAULT_TIME_FLOOR_S,
        metavar="SECONDS",
        help=f"growth of a startup median in seconds always tolerated (default {DEFAULT_TIME_FLOOR_S:g})",
    )
    compare.add_argument(
        "--memory-threshold",
        type=_percent,
        default=DEFAULT_MEMORY_THRESHOLD,
        metavar="PCT",
        help=f"graph-memory: growth in percent that counts (default {DEFAULT_MEMORY_THRESHOLD * 100:g})",
    )
    compare.add_argument(
        "--memory-floor",
        type=_mib,
        default=DEFAULT_MEMORY_FLOOR_BYTES,
        metavar="MIB",
        help=f"graph-memory: growth in MiB always tolerated (default {DEFAULT_MEMORY_FLOOR_BYTES / MIB:g})",
    )
    compare.add_argument(
        "--instructions-threshold",
        type=_percent,
        default=DEFAULT_INSTRUCTIONS_THRESHOLD,
        metavar="PCT",
        help="compile-instructions, and an expected-values BASE.csv without margins of its own: growth in percent "
        f"of a cold or warm compile's instructions that counts (default {DEFAULT_INSTRUCTIONS_THRESHOLD * 100:g})",
    )


def _add_explain_parser(commands: argparse._SubParsersAction) -> None:
    """``explain BASE.json [NEW.json] [TEST]``: why cache keys differ."""
    explain = commands.add_parser(
        "explain",
        help="why cache keys differ: every component in which two runs' keys differ (or one run's misses)",
        description="With two reports: for each test whose cache keys differ (or only TEST, a node id or a part "
        "of one that only it holds), its lookups paired across the runs, their keys and outcomes, and every "
        "component in which the keys differ, with both values; the components every lookup's key differs in "
        "are listed once, first. With one report: its misses and bypasses, with what the plugin found against "
        "an earlier lookup (the cold pass). The second argument is a report when it is a file or ends in .json. "
        "Exit 0, or 2 on an unreadable report or a TEST that names no test or several.",
    )
    explain.add_argument(
        "explain_args",
        metavar="BASE.json [NEW.json] [TEST]",
        nargs="+",
        help="two reports and, optionally, a test; or one report and, optionally, a test",
    )


def _add_show_parser(commands: argparse._SubParsersAction) -> None:
    """``show REPORT.json [--html OUT.html]``."""
    show = commands.add_parser(
        "show",
        help="print a report's summary table, or render it as one HTML page",
        description="Print a report's per-test table, with --markdown a summary in Markdown, or with --html write a self-contained HTML page "
        "(inline CSS and SVG charts, no scripts, no network).",
    )
    show.add_argument("report", metavar="REPORT.json")
    output = show.add_mutually_exclusive_group()
    output.add_argument("--html", metavar="OUT.html", help="write the HTML page here")
    output.add_argument(
        "--markdown",
        action="store_true",
        help="print a summary in Markdown for a CI job's page or a PR comment: the verdict, failures, the tests",
    )


def _add_merge_parser(commands: argparse._SubParsersAction) -> None:
    """``merge SHARD.json... -o ALL.json``: the shards of one pytest-split run."""
    merge = commands.add_parser(
        "merge",
        help="merge the reports of a run split by pytest-split into one report",
        description="Merge the reports of every shard of one run split with pytest-split (--splits N --group I) "
        "into the report of the whole run. Refused (exit 2) when a shard is missing or given twice, the shards "
        "come from different splits, builds or suites, a file is not a shard report, or a test ran in two shards.",
    )
    merge.add_argument("shards", metavar="SHARD.json", nargs="+", help="the report of each shard, in any order")
    merge.add_argument("-o", "--output", required=True, metavar="ALL.json", help="write the merged report here")


def _add_schema_parser(commands: argparse._SubParsersAction) -> None:
    """``schema [-o FILE]``: the report's JSON Schema."""
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of a report",
        description="Print the JSON Schema (draft 2020-12) of the reports this plugin writes, generated from the "
        "report's types, so that a CI job can validate a report with any JSON Schema validator.",
    )
    schema.add_argument("-o", "--output", metavar="FILE", help="write the schema to FILE instead of printing it")


def _add_durations_parser(commands: argparse._SubParsersAction) -> None:
    """``durations REPORT.json... [-o FILE]``: pytest-split's durations file."""
    durations = commands.add_parser(
        "durations",
        help="write pytest-split's durations file from reports",
        description="Write the test durations that reports recorded (every test that finished) as pytest-split's "
        "durations file, so that the next run is split by them (pytest --splits N --group I "
        "--durations-path FILE). A later report's duration of a test replaces an earlier one's.",
    )
    durations.add_argument("reports", metavar="REPORT.json", nargs="+", help="reports, e.g. the last run's shards")
    durations.add_argument(
        "-o",
        "--output",
        default=".test_durations",
        metavar="FILE",
        help="the durations file to write (default: .test_durations, pytest-split's default --durations-path)",
    )


def _add_startup_parser(commands: argparse._SubParsersAction) -> None:
    """``startup NODEID... --runs N --report OUT.json [-- PYTEST_ARGS]``: the startup benchmark."""
    startup = commands.add_parser(
        "startup",
        help="measure a test's cold and warm start, each run in a fresh interpreter; write medians and spreads",
        description="Run each NODEID N times cold (an empty compile-cache directory per run) and N times warm "
        "(cold run 1's directory), alternating, each in a fresh python -m pytest; write the median and spread "
        "(max - min) of each run's wall time, test duration, compile time and its phases, and capture time into "
        "a report that compare reads (--fail-on compile-time,startup-time). Arguments after -- go to pytest. "
        "A measurement, not an assertion: exit 0, 1 when a run failed, crashed or timed out (the report keeps "
        "every run measured and says it is incomplete), 2 on bad arguments or an unwritable report.",
    )
    startup.add_argument("nodeids", metavar="NODEID", nargs="+", help="the test(s) to measure, as pytest names them")
    startup.add_argument("--runs", type=int, default=5, metavar="N", help="cold runs and warm runs each (default 5)")
    startup.add_argument("--report", required=True, metavar="OUT.json", help="write the startup report here")
    startup.add_argument(
        "--timeout",
        type=float,
        default=STARTUP_TIMEOUT_S,
        metavar="SECONDS",
        help=f"kill a run after this long, counted as failed (default {STARTUP_TIMEOUT_S:g})",
    )
    startup.add_argument(
        "--keep", metavar="DIR", help="keep the runs' caches, reports and logs in a new directory under DIR"
    )
    startup.add_argument(
        "--instructions",
        action="store_true",
        help="run each run under callgrind (valgrind) and count the instructions torch.compile executes, "
        "collecting only while a frame compiles; compare reads them with --fail-on compile-instructions",
    )
    startup.add_argument(
        "--write-expected",
        metavar="FILE.csv",
        help="with --instructions: also write the counts as an expected-values file to commit; "
        "compare FILE.csv NEW.json checks a later run against it",
    )
    startup.add_argument(
        "--instructions-margin",
        type=_percent,
        default=DEFAULT_INSTRUCTIONS_THRESHOLD,
        metavar="PCT",
        help="the noise margin --write-expected writes for each count "
        f"(default {DEFAULT_INSTRUCTIONS_THRESHOLD * 100:g})",
    )


def _fail(message: str, stderr: TextIO) -> int:
    _write(stderr, f"pytest-cudagraph: {message}\n")
    return EXIT_BAD_INPUT


def _write(stream: TextIO, text: str) -> None:
    """Write ``text``, every line the commands print; the arrow of "torch 2.13 → 2.14" becomes "->" where the
    console cannot print it.

    Control characters are written as their escapes (text.terminal_safe): node ids, messages and env
    fields come from reports, and ``\\x1b[8m`` in one would hide the lines after it, the verdict among them.
    """
    text = terminal_safe(text)
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = text.replace("→", "->").encode("ascii", "replace").decode("ascii")
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:  # `pytest-cudagraph compare a b | head`: the exit status still counts
        # Python would report the failed flush again at exit; point stdout at /dev/null
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass


def _compare(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        rules = parse_rules(args.fail_on)
    except ValueError as exc:
        return _fail(str(exc), stderr)
    if str(args.base).endswith(".csv"):  # an expected-values file, as startup --write-expected writes it
        return _compare_expected(args, stdout, stderr)
    try:
        base = read_report(args.base)
        new = read_report(args.new)
    except ReportError as exc:
        return _fail(str(exc), stderr)
    comparison = compare_reports(
        base,
        new,
        rules=rules,
        pool_threshold=args.pool_threshold,
        numerics_growth=args.numerics_growth,
        numerics_floor=args.numerics_floor,
        include_timings=args.timings,
        labels=(Path(args.base).name, Path(args.new).name),
        sources=(args.base, args.new),
        time_threshold=args.time_threshold,
        time_floor=args.time_floor,
        memory_threshold=args.memory_threshold,
        memory_floor=args.memory_floor,
        instructions_threshold=args.instructions_threshold,
    )
    if args.json:
        _write(stdout, json.dumps(comparison.to_json(), indent=2, default=str) + "\n")
    elif args.markdown:
        from ..render.markdown import comparison_markdown
        from .compare_rules import INCOMPLETE_RULE

        _write(stdout, comparison_markdown(comparison, incomplete_rule=INCOMPLETE_RULE))
    else:
        _write(stdout, comparison.format_text(verbose=args.verbose) + "\n")
    return EXIT_REGRESSION if comparison.regressed else EXIT_OK


def _compare_expected(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``compare EXPECTED.csv NEW.json``: each expected compile-instruction count against the report's."""
    from .instructions import check_expected, read_expected

    try:
        rows = read_expected(args.base)
        new = load_report(args.new)
    except ReportError as exc:
        return _fail(str(exc), stderr)
    lines, failed = check_expected(rows, new)
    recorded = new.get("summary")
    summary: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    if summary.get("complete") is False:
        lines.append(f"INCOMPLETE: {args.new} is the record of a run that did not run to its end")
        failed = True
    verdict = "REGRESSION" if failed else "no regression"
    lines.append(f"{verdict}: {len(rows)} expected instruction counts checked against {Path(args.new).name}")
    _write(stdout, "\n".join(lines) + "\n")
    return EXIT_REGRESSION if failed else EXIT_OK


def _explain(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from .explain import BadTest, explain_arguments, explain_report_lines

    try:
        paths, wanted = explain_arguments(args.explain_args)
        args.reports = paths  # named in the line of an unexpected error
        lines = explain_report_lines(paths, wanted)
    except BadTest as exc:
        return _fail(str(exc), stderr)
    _write(stdout, "\n".join(lines) + "\n")
    return EXIT_OK


def _show(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..render.summary import terminal_summary_lines

    if args.html is not None and _same_file(Path(args.html), [args.report]) is not None:
        return _fail(
            f"--html {args.html} is the report {args.report}, which writing the page would overwrite; "
            f"give another path for the page, such as {Path(args.report).with_suffix('.html').name}",
            stderr,
        )
    try:
        loaded = read_report(args.report)
    except ReportError as exc:
        return _fail(str(exc), stderr)
    if args.html is None:
        from ..records.loaded import given
        from ..render.key_text import show_lines
        from ..render.record_text import detail_lines
        from ..render.shard_text import describe_shard

        # the terminal summary draws records as mappings (the live run's are unchecked): each record as read
        records = {nodeid: loaded.record_data(nodeid) for nodeid in loaded.tests}
        summary = given(loaded.report.summary)
        shard = given(summary.shard) if summary is not None else None
        run = run_completeness(loaded)
        if args.markdown:
            from ..render.markdown import run_markdown

            page = run_markdown(
                records,
                title=f"pytest-cudagraph: {Path(args.report).name}",
                incomplete_reasons=run.reasons,
                not_run_count=run.not_run_count,
                notes=[describe_shard(shard)] if shard is not None else [],
            )
            _write(stdout, page)
            return EXIT_OK
        lines = terminal_summary_lines(records, None, max_rows=None) or ["the report has no tests"]
        if shard is not None:
            lines.append(describe_shard(shard))
        if not run.complete:
            lines.append(
                f"INCOMPLETE run: {'; '.join(run.reasons)} ({count_noun(run.not_run_count, 'selected test')} not run)"
            )
        lines += show_lines(loaded)
        lines += detail_lines(loaded)
        _write(stdout, "\n".join(lines) + "\n")
        return EXIT_OK
    from ..render.show import render_html

    out = Path(args.html)
    page = render_html(loaded, title=f"pytest-cudagraph report: {Path(args.report).name}")
    try:
        write_text_atomically(out, page)
    except OSError as exc:
        return _fail(f"cannot write {out} ({exc.strerror or type(exc).__name__}); give a writable path", stderr)
    _write(stdout, f"wrote {out}\n")
    return EXIT_OK


def _same_file(output: Path, inputs: Sequence[str]) -> str | None:
    """The input that ``output`` names (through a link or another spelling), if any."""
    for given in inputs:
        try:
            if output.resolve() == Path(given).resolve() or (output.exists() and output.samefile(given)):
                return given
        except OSError:
            continue
    return None


def _load_all(paths: Sequence[str]) -> list[tuple[str, LoadedReport]]:
    return [(path, read_report(path)) for path in paths]


def _cannot_write(out: Path, exc: OSError) -> str:
    return f"cannot write {out} ({exc.strerror or type(exc).__name__}); give a writable path"


def _merge(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..records.report import write_report
    from ..render.shard_text import describe_shard
    from .merge import merge_shard_reports

    out = Path(args.output)
    clash = _same_file(out, args.shards)
    if clash is not None:
        return _fail(
            f"-o {args.output} is the shard report {clash}, which merging would overwrite; "
            f"give another path for the merged report, such as all.json",
            stderr,
        )
    try:
        merged = merge_shard_reports(_load_all(args.shards))
    except ReportError as exc:
        return _fail(f"merge refused: {exc}", stderr)
    try:
        write_report(out, merged)
    except OSError as exc:
        return _fail(_cannot_write(out, exc), stderr)
    summary = merged["summary"]
    lines = [f"wrote {out}: {describe_shard(summary['shard'])}; {summary['tests']} records"]
    run = run_completeness(merged)
    if not run.complete:
        lines.append(f"INCOMPLETE run: {'; '.join(run.reasons)}")
    _write(stdout, "\n".join(lines) + "\n")
    return EXIT_OK


def _durations(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from .merge import durations_file_text, durations_from_reports

    out = Path(args.output)
    clash = _same_file(out, args.reports)
    if clash is not None:
        return _fail(
            f"-o {args.output} is the report {clash}, which writing the durations would overwrite; "
            f"give pytest-split's durations file, such as .test_durations",
            stderr,
        )
    try:
        durations, notes = durations_from_reports(_load_all(args.reports))
    except ReportError as exc:
        return _fail(str(exc), stderr)
    try:
        write_text_atomically(out, durations_file_text(durations))
    except OSError as exc:
        return _fail(_cannot_write(out, exc), stderr)
    for note in notes:
        _write(stderr, f"pytest-cudagraph: note: {note}\n")
    _write(
        stdout,
        f"wrote {out}: durations of {count_noun(len(durations), 'test')} (pytest --splits N --durations-path {out})\n",
    )
    return EXIT_OK


def _startup(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..records.report import check_report_path_writable, write_report
    from ..render.startup_text import startup_table_lines
    from .startup_cost import check_timeout, run_startup

    if args.runs < 1:
        return _fail(f"--runs {args.runs}: give at least 1 (3 or more, for a spread)", stderr)
    bad_timeout = check_timeout(args.timeout)
    if bad_timeout is not None:  # 0, -1, nan, inf: no limit a run could be held to
        return _fail(bad_timeout, stderr)
    if args.keep and not Path(args.keep).is_dir():
        what = "is not a directory" if Path(args.keep).exists() else "does not exist"
        return _fail(f"--keep {args.keep} {what}; give an existing directory to keep the runs in", stderr)
    if args.keep and not os.access(args.keep, os.W_OK | os.X_OK):
        return _fail(f"--keep {args.keep} is not writable; give a directory you can write to", stderr)
    if args.write_expected and not args.instructions:
        return _fail("--write-expected needs --instructions: it writes the instruction counts", stderr)
    if args.instructions:
        from .instructions import valgrind_missing

        missing = valgrind_missing()
        if missing is not None:
            return _fail(missing, stderr)
    problem = check_report_path_writable(args.report)
    if problem is not None:  # worded for the plugin's option
        return _fail(problem.replace(f"--cudagraph-report={args.report}", f"--report {args.report}"), stderr)
    result = run_startup(
        args.nodeids,
        args.runs,
        pytest_args=getattr(args, "pytest_args", ()),
        timeout=args.timeout,
        keep=Path(args.keep) if args.keep else None,
        progress=lambda line: _write(stderr, line + "\n"),
        instructions=args.instructions,
    )
    out = Path(args.report)
    report = result.to_report()
    try:
        write_report(out, report)
        if args.write_expected and not result.complete:
            _write(stderr, f"pytest-cudagraph: {args.write_expected} not written: the runs are incomplete\n")
        elif args.write_expected:
            from .instructions import expected_rows, expected_text

            write_text_atomically(
                Path(args.write_expected), expected_text(expected_rows(report, args.instructions_margin))
            )
    except OSError as exc:
        return _fail(_cannot_write(Path(args.write_expected or out), exc), stderr)
    _write(stdout, "\n".join([*startup_table_lines(result), f"wrote {out}"]) + "\n")
    for error in result.errors:
        _write(stderr, f"pytest-cudagraph: {error}\n")
    return EXIT_OK if result.complete else EXIT_REGRESSION


def _schema(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..records.report import write_text_atomically
    from ..records.schema import report_json_schema

    text = json.dumps(report_json_schema(), indent=2) + "\n"
    if args.output is None:
        stdout.write(text)
        return 0
    write_text_atomically(Path(args.output), text)
    stdout.write(f"wrote {args.output}: the JSON Schema of pytest-cudagraph/1 reports\n")
    return 0


_COMMANDS = {
    "compare": _compare,
    "explain": _explain,
    "show": _show,
    "merge": _merge,
    "durations": _durations,
    "startup": _startup,
    "schema": _schema,
}


def _split_pytest_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``startup ... -- PYTEST_ARGS``: (the command's own arguments, those for pytest); other commands keep ``--``."""
    argv = list(argv)
    if argv[:1] == ["startup"] and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    return argv, []


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Entry point of the ``pytest-cudagraph`` console script; returns the exit status."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv, pytest_args = _split_pytest_args(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.pytest_args = pytest_args
    command = _COMMANDS[args.command]
    try:
        # two reports in memory are millions of objects the cyclic collector would walk, in vain, again and again
        with collector_paused():
            return command(args, stdout, stderr)
    except ReportError as exc:
        return _fail(str(exc), stderr)
    except Exception as exc:
        # Exit 1 means "regression": a crash on some input must not read as one, nor as a
        # traceback; its type and place stay in the line so that a bug is still reported.
        return _fail(_unexpected(args, exc), stderr)


def _unexpected(args: argparse.Namespace, exc: Exception) -> str:
    named = [getattr(args, "base", None), getattr(args, "new", None), getattr(args, "report", None)]
    named += [*(getattr(args, "shards", None) or ()), *(getattr(args, "reports", None) or ())]
    files = " and ".join(str(f) for f in named if f)
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    detail = clip(exc, 200)
    return (
        f"{args.command} of {files} failed with {type(exc).__name__}{where}"
        + (f" ({detail})" if detail else "")
        + "; this is a bug in pytest-cudagraph or a report it does not understand, so report it with the files, "
        "or give reports written by this plugin version"
    )
