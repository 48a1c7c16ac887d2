"""The ``pytest-cudagraph`` command: compare two reports, explain their cache keys, show one, merge shards, write
pytest-split's durations.

::

    pytest-cudagraph --version
    pytest-cudagraph compare BASE.json NEW.json [--fail-on RULES] [--pool-threshold PCT] [--json | --markdown]
    pytest-cudagraph compare BASE.csv NEW.json          (expected instruction counts, startup --write-expected)
    pytest-cudagraph explain BASE.json [NEW.json] [TEST]
    pytest-cudagraph show REPORT.json [--html OUT.html | --markdown]
    pytest-cudagraph merge SHARD.json... -o ALL.json
    pytest-cudagraph durations REPORT.json... [-o .test_durations]
    pytest-cudagraph startup NODEID... --runs N --report OUT.json [--timeout S] [-- PYTEST_ARGS]
    python -m pytest_cudagraph compare BASE.json NEW.json

Exit status of ``compare``: 0 when no selected rule fired, 1 on a regression (an
incomplete new run always is one, and so are reports that share no test), 2 when an input is unreadable, malformed or
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
import errno
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import CudagraphError, ReportError
from ..records.comparison import run_completeness
from ..records.loaded import LoadedReport, read_report
from ..records.output_paths import DURATIONS, HTML_PAGE, REPORT, refusal
from ..records.report import collector_paused, load_report, write_text_atomically
from ..render.plain_text import clip, count_noun, terminal_safe
from ..render.workflow_commands import inert_lines
from .cli_arguments import build_parser
from .compare import compare_reports
from .compare_rules import parse_rules

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
# what ``schema -o DIR`` suggests
SCHEMA_FILE = "pytest-cudagraph-report.schema.json"


class OutputLost(CudagraphError):
    """Standard output or error could not be written (``> /dev/full``, a closed descriptor): one line, exit 2."""


def _fail(message: str, stderr: TextIO) -> int:
    try:
        _write(stderr, f"pytest-cudagraph: {message}\n")
    except OutputLost:  # standard error is lost too: the exit status is all that is left to say it
        pass
    return EXIT_BAD_INPUT


def _write(stream: TextIO, text: str) -> None:
    """Write ``text``, every line the commands print; the arrow of "torch 2.13 → 2.14" becomes "->" where the
    console cannot print it.

    Control characters are written as their escapes (text.terminal_safe): node ids, messages and env
    fields come from reports, and ``\\x1b[8m`` in one would hide the lines after it, the verdict among them.
    Nor does a line start as a GitHub workflow command (``::add-mask::``): ``inert_lines``.
    """
    text = inert_lines(terminal_safe(text))
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
    except OSError as exc:  # a full disk behind `> out.txt`, /dev/full: not a bug of the command
        name = {"<stdout>": "standard output", "<stderr>": "standard error"}.get(str(getattr(stream, "name", "")))
        raise OutputLost(f"cannot write to {name or 'the output'} ({os_error_words(exc)})") from None


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
    from ..render.summary import terminal_summary_lines, wrapped

    if args.html is not None:
        fix = f"another path for the page, such as {Path(args.report).with_suffix('.html').name}"
        refused = _overwrites_input("--html", args.html, [args.report], "report", "writing the page", fix, HTML_PAGE)
        if refused is not None:
            return _fail(refused, stderr)
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
            lines += wrapped(describe_shard(shard))
        if not run.complete:
            lines += wrapped(
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


def _overwrites_input(
    option: str, output: str, inputs: Sequence[str], kind: str, writing: str, fix: str, output_kind: str
) -> str | None:
    """The refusal ``"-o OUT is the report IN, which writing the durations would overwrite; give FIX"`` when the
    path given to ``option`` names one of the command's ``inputs`` (each a ``kind``), or an existing file that is
    no ``output_kind`` (``records.output_paths``); None when it may be written."""
    clash = _same_file(Path(output), inputs)
    if clash is None:
        return refusal(f"{option} {output}", output, output_kind, fix)
    return f"{option} {output} is the {kind} {clash}, which {writing} would overwrite; give {fix}"


def _load_all(paths: Sequence[str]) -> list[tuple[str, LoadedReport]]:
    return [(path, read_report(path)) for path in paths]


def _cannot_write(out: Path, exc: OSError) -> str:
    return f"cannot write {out} ({os_error_words(exc)}); give a writable path"


def os_error_words(exc: OSError) -> str:
    """The OS's own words for a failed write, with the error's name: ``No space left on device [ENOSPC]``."""
    name = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or type(exc).__name__
    return f"{reason} [{name}]" if name else reason


def _merge(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..records.report import write_report
    from ..render.shard_text import describe_shard
    from .merge import merge_shard_reports

    out = Path(args.output)
    fix = "another path for the merged report, such as all.json"
    refused = _overwrites_input("-o", args.output, args.shards, "shard report", "merging", fix, REPORT)
    if refused is not None:
        return _fail(refused, stderr)
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
    fix = "pytest-split's durations file, such as .test_durations"
    refused = _overwrites_input("-o", args.output, args.reports, "report", "writing the durations", fix, DURATIONS)
    if refused is not None:
        return _fail(refused, stderr)
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
    clash = _startup_output_clash(args)
    if clash is not None:  # found after the whole benchmark, it would have cost the runs and the file
        return _fail(clash, stderr)
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


def _startup_output_clash(args: argparse.Namespace) -> str | None:
    """Why ``startup``'s outputs cannot be written where they are asked to: over a test file it measures, or
    over each other; None when they can."""
    test_files = list(dict.fromkeys(nodeid.split("::")[0] for nodeid in args.nodeids))
    outputs = [("--report", args.report)] + ([("--write-expected", args.write_expected)] if args.write_expected else [])
    for flag, output in outputs:
        measured = _same_file(Path(output), test_files)
        if measured is not None:
            return (
                f"{flag} {output} is the test file {measured} the benchmark measures, which writing would "
                f"overwrite; give another path, such as {'startup.json' if flag == '--report' else 'expected.csv'}"
            )
    foreign = refusal(f"--report {args.report}", args.report, REPORT, "another path, such as startup.json")
    if foreign is not None:
        return foreign
    if args.write_expected and _same_file(Path(args.write_expected), [args.report]) is not None:
        return (
            f"--write-expected {args.write_expected} is the --report path {args.report}: one file cannot hold both; "
            f"give the expected values their own file, such as expected.csv"
        )
    return None


def _schema(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..records.json_schema import report_json_schema
    from ..records.report import write_text_atomically

    text = json.dumps(report_json_schema(), indent=2) + "\n"
    if args.output is None:
        _write(stdout, text)
        return EXIT_OK
    out = Path(args.output)
    if out.is_dir():
        return _fail(
            f"-o {out} is a directory; give a file to write the schema to, such as {out / SCHEMA_FILE}", stderr
        )
    try:
        write_text_atomically(out, text)
    except OSError as exc:
        return _fail(_cannot_write(out, exc), stderr)
    _write(stdout, f"wrote {out}: the JSON Schema of pytest-cudagraph/3 reports\n")
    return EXIT_OK


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
    except OutputLost as exc:
        return _fail(str(exc), stderr)
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
