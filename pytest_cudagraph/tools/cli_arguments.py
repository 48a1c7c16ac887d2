"""The ``pytest-cudagraph`` command line: each command's arguments, and the limits' types (``build_parser``).

A limit of a compare rule must be a finite number >= 0: NaN compares false with
every growth and infinity allows any, so either would turn its rule off while
``compare`` still said "no regression" (argparse then exits 2 naming the option).
What each command does with its arguments is ``cli``'s.  Plain data: no torch.
"""

from __future__ import annotations

import argparse
import math
import re
import textwrap
from typing import Any

from ..render.plain_text import MIB
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
)
from .instructions import DEFAULT_INSTRUCTIONS_THRESHOLD
from .startup_cost import DEFAULT_TIMEOUT_S as STARTUP_TIMEOUT_S

__all__ = ["CommandParser", "HelpText", "build_parser"]


class HelpText(argparse.HelpFormatter):
    """argparse's help with lines broken at spaces only: a rule's name (``recompile-limit``) or a list of them stays whole."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(re.sub(r"\s+", " ", text).strip(), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line for line in self._split_lines(text, width - len(indent)))


def _percent(text: str) -> float:
    """A percentage option: ``10`` and ``10%`` both mean 10 % (returned as 0.10)."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage; give a number such as 10") from None
    _check_limit(text, value, "a growth percentage such as 10")
    return value / 100.0


def _seconds(text: str) -> float:
    """A non-negative number of seconds (``1`` or ``1s``)."""
    return _amount(text, "s", "seconds", "0.5")


def _mib(text: str) -> float:
    """A non-negative number of MiB (``2`` or ``2MiB``), returned in bytes."""
    return _amount(text, "MiB", "MiB", "2") * MIB


def _error(text: str) -> float:
    """A non-negative absolute error (``1e-6``)."""
    return _amount(text, "", "absolute error", "1e-6")


def _amount(text: str, suffix: str, unit: str, example: str) -> float:
    try:
        value = float(text.removesuffix(suffix) if suffix else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}; give one such as {example}") from None
    _check_limit(text, value, f"{unit} such as {example}")
    return value


def _check_limit(text: str, value: float, wanted: str) -> None:
    """A rule's limit must be a finite number >= 0: NaN compares false with every growth and infinity
    allows any, so either would turn the rule off while ``compare`` still said "no regression"."""
    if math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a finite number, so no growth could exceed it; give {wanted}"
        )
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give {wanted}")


class CommandParser(argparse.ArgumentParser):
    """A command's parser: its help in ``HelpText``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpText)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per job, each with a parser of its own (``_add_*_parser``)."""
    parser = argparse.ArgumentParser(
        prog="pytest-cudagraph",
        formatter_class=HelpText,
        description="Work with pytest-cudagraph run reports (written with --cudagraph-report): compare two runs, "
        "explain their cache keys, show or merge reports, write pytest-split's durations, print the reports' "
        "JSON Schema; and run the start-up benchmark, which runs tests in fresh interpreters.",
    )
    parser.add_argument("--version", action="version", version=f"pytest-cudagraph {_installed_version()}")
    commands = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        parser_class=CommandParser,
    )
    commands.required = True
    _add_compare_parser(commands)
    _add_explain_parser(commands)
    _add_show_parser(commands)
    _add_merge_parser(commands)
    _add_durations_parser(commands)
    _add_startup_parser(commands)
    _add_schema_parser(commands)
    return parser


def _installed_version() -> str:
    """The installed distribution's version (tools import nothing of the package's entry module)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("pytest-cudagraph")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: run it from an installed checkout, pip install -e .)"


def _add_compare_parser(commands: argparse._SubParsersAction) -> None:
    """``compare BASE.json NEW.json``: the rules, their limits, what the text shows."""
    compare = commands.add_parser(
        "compare",
        help="compare two reports; exit 1 on a regression",
        description="Show what changed per test between two reports, and exit 1 when a selected rule "
        "flags a regression or the new run did not run to its end (2 when a report is unreadable, malformed "
        "or of another schema).",
    )
    compare.add_argument(
        "base",
        metavar="BASE.json|BASE.csv",
        help="the earlier report (e.g. the old torch version), or an expected-values file of instruction counts "
        "(startup --write-expected)",
    )
    compare.add_argument("new", metavar="NEW.json", help="the later report")
    compare.add_argument(
        "--fail-on",
        action="append",
        metavar="RULES",
        help=f"comma-separated regression rules, repeatable: {', '.join(ALL_RULES)}, 'all', 'default' or 'none' "
        f"(default: {', '.join(DEFAULT_RULES)})",
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
        type=_error,
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
        # argparse would write nargs="+" as "X [X ...]": one or two reports and a test, once
        usage="%(prog)s [-h] BASE.json [NEW.json] [TEST]",
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
    """``show REPORT.json [--html OUT.html | --markdown]``."""
    show = commands.add_parser(
        "show",
        help="print a report's summary table, or render it as one HTML page",
        description="Print a report's per-test table, with --markdown a summary in Markdown, or with --html write "
        "a self-contained HTML page (inline CSS and SVG charts, no scripts, no network).",
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
