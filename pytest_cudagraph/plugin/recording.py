"""Per-test records, how far the run got, the report at the end and the terminal summary.

A finished test's record travels on its teardown report: xdist sends every report
to the controller as the test ends (pytest serialises the report's attributes), so
a worker that crashes later, or a Ctrl-C, loses no record of a test that finished.
The report is written by the process that sees every report: the xdist controller
under ``-n``, the pytest process otherwise.

A test that uses the plugin also records every FX-graph and AOTAutograd cache
lookup it made, from its setup to its teardown (``cache_keys``), with why each
miss missed; under a persistent ``--cudagraph-cache-dir`` the keys are kept for the
next run (``cache_keys.KeyIndex``), and a miss is explained by what changed since.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

from ..graphs import open_objects
from ..records.json_values import json_safe
from ..records.progress import RunProgress
from ..records.record import CACHE_START_EMPTY, CACHE_START_SHARED, StartedCaches, TestRecord, set_current_record
from ..render.workflow_commands import inert_lines
from . import pytest_split as shards
from .fixture_compiles import REPORT_SETUPS_ATTR, watch_of
from .items import (
    ATTEMPT_KEY,
    CACHE_KEYS_KEY,
    CACHE_SNAPSHOT_KEY,
    FAILURE_KEY,
    MARKERS_KEY,
    OUTCOME_KEY,
    PROGRESS_KEY,
    RECORD_KEY,
    RERUNS_KEY,
    RUN_ID_KEY,
    SKIP_REASON_KEY,
    STATE_KEY,
    STORED_KEYS_KEY,
    is_worker,
    record_of,
    report_nodeid,
    uses_plugin,
)
from .markers import MarkerArgumentError, parse_item_markers
from .ran_no_test import ran_no_test
from .run_so_far import RunSoFar
from .session import RunState

REPORT_RECORD_ATTR = "cudagraph_record"
# The test's compile-time watch, from its setup to its teardown (compile_time.CompileTimeWatch).
COMPILE_TIME_KEY = pytest.StashKey[Any]()


def start_test(item: pytest.Item) -> None:
    """Before each test's setup (``activation``): check markers added after collection; make the test's record current."""
    # Parsed again: markers added after collection (item.add_marker in a conftest
    # hook) never went through the checks at collection.
    problem = None
    try:
        item.stash[MARKERS_KEY] = parse_item_markers(item)
    except MarkerArgumentError as exc:
        problem = f"{item.nodeid}: {exc}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    # Every test has a current record, so that the plain API (watch_recompiles(),
    # capture_graphs()) reports into its test even where no marker or fixture is used;
    # a record that stays empty is not written (finish_record).
    set_current_record(record_of(item))
    open_objects.start_test()
    watch = watch_of(item.config)
    if watch is not None:
        watch.item = item  # a wider-scoped fixture set up for it compiles apart from it
    if "torch" in sys.modules:
        # Cache counters are read only where torch is already loaded: a test that
        # compiled something gets its cache deltas reported, and nothing imports torch.
        from ..caches.counters import counter_snapshot

        item.stash[CACHE_SNAPSHOT_KEY] = counter_snapshot()
    if uses_plugin(item):
        start_cache_key_capture(item)
        from ..compile.compile_time import watch_compile_time

        item.stash[COMPILE_TIME_KEY] = watch_compile_time(report=False).start()


# ----------------------------------------------------------------------------
# cache keys: every lookup of a test, and what an earlier run stored
# ----------------------------------------------------------------------------


def start_cache_key_capture(item: pytest.Item) -> None:
    """From the test's setup to its teardown: every FX-graph and AOTAutograd lookup, with its key's components.

    Only for tests that use the plugin: while the capture is on, torch builds every
    structured-trace payload of a compile (about 1% of a cold compile).  Imports no
    torch: the handler waits on the logger until torch writes to it.
    """
    import contextlib

    from ..caches.keys import capture_lookups

    stack = contextlib.ExitStack()
    log = stack.enter_context(capture_lookups())
    item.stash[CACHE_KEYS_KEY] = (log, stack)


def stop_cache_key_capture(item: pytest.Item) -> Any:
    """End the test's capture; its ``cache_keys.LookupLog`` (None when none was started)."""
    captured = item.stash.get(CACHE_KEYS_KEY, None)
    if captured is None:
        return None
    del item.stash[CACHE_KEYS_KEY]
    log, stack = captured
    stack.close()
    return log


def active_lookup_log(item: pytest.Item) -> Any:
    """The test's running ``cache_keys.LookupLog``, or None."""
    captured = item.stash.get(CACHE_KEYS_KEY, None)
    return captured[0] if captured else None


def _key_index(item: pytest.Item) -> Any:
    """The test's cross-run key index under a persistent ``--cudagraph-cache-dir``; None otherwise.

    None also in the child pytest of a ``compile_cache`` warm pass: its parent stores the pass.
    """
    from ..envvars import CHILD_PASS_ENV

    state = item.config.stash[STATE_KEY]
    if state.options.cache_dir is None or os.environ.get(CHILD_PASS_ENV):
        return None
    from ..caches.keys import KeyIndex, index_directory_name

    return KeyIndex(state.cache_root().cache_keys_dir_of(index_directory_name(report_nodeid(item))))


def run_id(config: pytest.Config) -> tuple[str, str]:
    """This pytest process's id in the key index and its time (ISO, UTC), made on first use."""
    if RUN_ID_KEY not in config.stash:
        import datetime

        from ..caches.keys import new_run_id

        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        config.stash[RUN_ID_KEY] = (new_run_id(), created)
    return config.stash[RUN_ID_KEY]


def cross_run_explanations(item: pytest.Item, lookups: Any) -> list[Any]:
    """Why these lookups of the test missed, against the keys an earlier run stored for the same graphs.

    Empty without a persistent ``--cudagraph-cache-dir``.  The index is read once per
    test (the ``compile_cache`` marker asks before its check, the record at teardown).
    """
    index = _key_index(item)
    if index is None:
        return []
    from ..caches.keys import explain_across_runs

    contents = item.stash.get(STORED_KEYS_KEY, None)
    if contents is None:
        contents = item.stash[STORED_KEYS_KEY] = index.read()  # never raises: a bad entry is a note
    return explain_across_runs(lookups, contents.stored, run_id(item.config)[0], probe_passes=True)


def _finish_cache_keys(item: pytest.Item, record: TestRecord | None) -> TestRecord | None:
    """The test's lookups into its record (``cache_keys``), explained across runs and stored for the next run."""
    log = stop_cache_key_capture(item)
    if log is None or not log.lookups:
        return record
    from ..caches.keys import note_version_gaps

    note_version_gaps(log)
    for explanation in cross_run_explanations(item, log.lookups):
        log.annotate(explanation, replace_existing=False)  # the cold pass explains a warm miss first
    contents = item.stash.get(STORED_KEYS_KEY, None)
    for note in contents.notes if contents is not None else ():
        log.add_note(note)
    index = _key_index(item)
    if contents is not None and contents.refused is not None:
        log.add_note(f"the key index was not used (nothing read, nothing kept for the next run): {contents.refused}")
    elif index is not None:
        from ..errors import UsageProblem

        torch = sys.modules.get("torch")
        this_run, created = run_id(item.config)
        try:
            index.store(log.lookups, created, str(getattr(torch, "__version__", "?")), this_run)
        except OSError as exc:
            log.add_note(f"the keys were not kept for the next run ({exc.strerror or exc})")
        except UsageProblem as exc:  # an index directory another user could write: a note, not the run's end
            log.add_note(f"the keys were not kept for the next run: {exc}")
    record = record or record_of(item)
    record.set("cache_keys", log)
    return record


def attach_record(item: pytest.Item, report: pytest.TestReport) -> None:
    """After a test's teardown (``activation``): its finished record onto the teardown report, if it has one.

    The compiles of wider-scoped fixtures set up for it go along, apart (``fixture_compiles``).
    """
    finished = finish_record(item, item.stash.get(RECORD_KEY, None))
    if finished is not None:
        # a rerun plugin may drop this report unlogged and run the test again (items.start_attempt)
        item.stash[ATTEMPT_KEY] = finished
        # One JSON string, not the dict: pytest-xdist sends a report's attributes through
        # execnet, whose serializer fails on an int below -2**31 (a device reading's change
        # of more than 2 GiB, when another worker on the GPU frees memory meanwhile), and
        # that failure ends the worker's whole run.
        setattr(report, REPORT_RECORD_ATTR, json.dumps(json_safe(finished), allow_nan=False))
    watch = watch_of(item.config)
    if watch is not None:
        watch.item = None
        setups = watch.take()
        if setups:
            setattr(report, REPORT_SETUPS_ATTR, json.dumps(json_safe(setups), allow_nan=False))


def carried_record(report: pytest.TestReport) -> dict[str, Any] | None:
    """The finished record ``attach_record`` put on a report (``{"nodeid", "record"}``), or None."""
    carried = getattr(report, REPORT_RECORD_ATTR, None)
    return json.loads(carried) if carried else None


def finish_record(item: pytest.Item, record: TestRecord | None) -> dict[str, Any] | None:
    """The test's finished record as ``{"nodeid", "record"}`` (plain JSON data), or None if it has none."""
    set_current_record(None)
    record = _finish_cache_keys(item, record)
    compile_watch = item.stash.get(COMPILE_TIME_KEY, None)
    if compile_watch is not None:
        del item.stash[COMPILE_TIME_KEY]
        from ..compile.compile_time import finish_test_compile_time

        record = record or record_of(item)
        finish_test_compile_time(compile_watch, record)
    snapshot = item.stash.get(CACHE_SNAPSHOT_KEY, None)
    if snapshot is not None or "torch" in sys.modules:
        from ..caches.counters import counter_delta, counter_snapshot

        if snapshot is None:
            # torch was first imported by this test: every counter started at zero
            snapshot = counter_snapshot(empty=True)
        delta = counter_delta(snapshot)
        if delta is not None:
            record = record or record_of(item)
            if record.get("caches") is None:
                record.set("caches", StartedCaches(delta, CACHE_START_SHARED))
    counts = record.get("caches") if record is not None else None
    if record is not None and counts is not None and not isinstance(counts, StartedCaches):
        # set by the compile_cache marker or fixture: passes in directories the plugin made empty
        record.set("caches", StartedCaches(counts, CACHE_START_EMPTY))
    reruns = [earlier["record"] for earlier in item.stash.get(RERUNS_KEY, ())]
    if record is None and reruns:
        record = record_of(item)  # this attempt measured nothing, an earlier one did
    if record is None:
        return None
    record.outcome, record.duration_s = item.stash.get(OUTCOME_KEY, (None, 0.0))
    record.failure = item.stash.get(FAILURE_KEY, None)
    record.skip_reason = item.stash.get(SKIP_REASON_KEY, None)
    state = item.config.stash[STATE_KEY]
    if state.pinned_device is not None:
        record.placement = {
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "cuda_visible_devices": state.pinned_device,
        }
    entry = record.to_json()
    if reruns:
        entry["reruns"] = reruns  # each earlier attempt's own record, never added to this one's figures
    measured = set(entry) - {"outcome", "duration_s", "failure", "skip_reason"}
    if not uses_plugin(item) and not measured and "rule" not in (record.failure or {}):
        return None  # a test that used nothing of the plugin, measured nothing and failed no check of it
    from ..records.report import json_safe

    return {"nodeid": record.nodeid, "record": json_safe(entry)}


class RunRecorder:
    """In the process that writes the report: every test's record and the run's progress.

    Every finished test's record arrives on its teardown report, from this process or
    from a worker, so the report holds every test that finished whatever happens
    later; the progress says whether the run got to its end.
    """

    def __init__(self, state: RunState, progress: RunProgress):
        self.state = state
        self.progress = progress
        self._previous_sigterm: Any = None
        # --dist each runs every test on every worker: keep the worst run, not the last
        self.each = False
        self._first_worker: dict[str, str] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """At the start: SIGTERM (a CI job cancelled) ends the run as Ctrl-C does, so the report is written."""
        import signal
        import threading

        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        import signal

        self.progress.interrupted = "SIGTERM"
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise KeyboardInterrupt("SIGTERM")

    def _restore_sigterm(self) -> None:
        import signal

        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def pytest_unconfigure(self) -> None:
        """At the very end (also after a usage error stopped the run): give SIGTERM back its previous handler."""
        self._restore_sigterm()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """After collection without xdist: the tests selected to run, and none deselected unless said before."""
        self.progress.collected([item.nodeid for item in session.items])
        if self.progress.deselected is None:
            self.progress.deselected = 0

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """When -k, -m or a plugin deselects tests (without xdist; workers send their count)."""
        self.progress.add_deselected(len(items))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """After each collector, here or (failed ones) from a worker: count collection errors."""
        if report.failed:
            self.progress.collection_errors += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """After each phase of each test, here or on a worker: keep the record, count what finished."""
        if report.failed and not hasattr(report, "wasxfail"):
            self.progress.failures += 1
        finished = carried_record(report)
        if finished is not None:
            self._keep(finished["nodeid"], finished["record"], getattr(report, "node", None))
        for setup in json.loads(getattr(report, REPORT_SETUPS_ATTR, None) or "[]"):
            self.state.fixture_setups.append({**setup, "worker": _worker_of(report)})
        # every test's time, plugin or not: pytest-split needs them all (``pytest-cudagraph durations``)
        self.progress.add_duration(report.nodeid, report.duration, _worker_of(report))
        if report.when == "teardown":
            self.progress.finish(report.nodeid)

    def _keep(self, nodeid: str, record: dict[str, Any], node: Any) -> None:
        """Store a finished test's record; under ``--dist each`` the worst of its runs, with every run listed."""
        worker = _worker_name(node)
        earlier = self.state.records.get(nodeid)
        if earlier is not None and self.each:
            from ..records.report import merge_runs_of_one_test

            record = merge_runs_of_one_test(earlier, record, self._first_worker.get(nodeid, "?"), worker)
        self._first_worker.setdefault(nodeid, worker)
        self.state.records[nodeid] = record

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """At the end of the run: write the report and compare it with the baseline."""
        # From here a SIGTERM (a CI cancel sends a second one) ends the process as it
        # would without the plugin: raised inside this hook, pytest would print a
        # traceback and skip its own clean-up; the report is written atomically anyway.
        self._restore_sigterm()
        write_report_and_compare(session, self.state, self.progress, int(exitstatus))

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """In pytest's closing summary: the plugin's table, where the report went, the baseline's verdict."""
        lines = summary_lines(config, self.state, self.progress, int(exitstatus))
        if not lines:
            return
        terminalreporter.write_sep("=", "cudagraph")
        for line in inert_lines("\n".join(lines)).split("\n"):
            red = line.startswith(("REGRESSION", "INCOMPLETE", "NOTHING COMPARED")) or line == self.state.report_error
            yellow = line.startswith("no regression, but")
            terminalreporter.write_line(line, red=red, yellow=yellow, bold=red or yellow)


def _worker_name(node: Any) -> str:
    """The xdist worker a report came from (``gw0``), or ``main`` without xdist."""
    return str(getattr(getattr(node, "gateway", None), "id", "main"))


def _worker_of(report: pytest.TestReport) -> str:
    return _worker_name(getattr(report, "node", None))


def write_report_and_compare(session: pytest.Session, state: RunState, progress: RunProgress, exitstatus: int) -> None:
    options = state.options
    if options.report_path is None and state.baseline is None:
        return
    if ran_no_test(session.config, exitstatus) is not None:
        return  # a run of no test body measured nothing: the last report stays as it was
    from ..records.report import build_report, write_report
    from .environment import collect_environment

    env = collect_environment(state.rootdir)
    session.config.hook.pytest_cudagraph_update_env(config=session.config, env=env)
    report = build_report(
        env,
        state.records,
        exitstatus=exitstatus,
        run=progress.summary_fields(exitstatus),
        durations=progress.durations(),
        fixture_setups=state.fixture_setups,
    )
    if options.report_path is not None:
        try:
            write_report(options.report_path, report)
        except OSError as exc:
            # checked writable at start; a full disk or a vanished directory can still happen
            state.report_error = (
                f"cudagraph: the report was NOT written to {options.report_path} ({os_error_text(exc)})"
            )
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    if state.baseline is not None:
        from ..tools.compare import compare_reports

        # the paths, for the `pytest-cudagraph explain` command the comparison suggests
        sources = (str(options.baseline_path), str(options.report_path)) if options.report_path is not None else None
        comparison = compare_reports(state.baseline, report, rules=options.baseline_rules, sources=sources)
        state.baseline_comparison = comparison
        if comparison.regressed and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def os_error_text(exc: OSError) -> str:
    """The OS's own words for a failed write, with the hint that fits it."""
    import errno

    reason = exc.strerror or str(exc)
    name = errno.errorcode.get(exc.errno or 0)
    text = f"{reason} [{name}]" if name else reason
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{text}; free space or give another --cudagraph-report path"
    return f"{text}; give another --cudagraph-report path"


def summary_lines(config: pytest.Config, state: RunState, progress: RunProgress, exitstatus: int) -> list[str]:
    comparison = state.baseline_comparison
    if not state.records and state.options.report_path is None and comparison is None:
        return []
    from ..render.summary import section_width, terminal_summary_lines

    no_body = ran_no_test(config, exitstatus)
    # A run stopped by collection errors, or one that ran no test (--fixtures, --markers), holds only
    # the tests refused at collection: pytest's errors say it all.
    stopped_at_collection = progress.collection_errors > 0 and exitstatus == pytest.ExitCode.INTERRUPTED
    only_refused = bool(state.records) and all(
        isinstance(record.get("extra"), dict) and "collection_error" in record["extra"]
        for record in state.records.values()
    )
    lines = terminal_summary_lines(
        {} if stopped_at_collection or only_refused else state.records,
        None if no_body is not None else state.options.report_path,
        max_rows=None if config.get_verbosity() > 0 else 40,
        report_error=state.report_error,
        width=section_width(config.get_terminal_writer().fullwidth),
    )
    if no_body is not None and state.options.report_path is not None:
        lines.append(f"{no_body}: the report at {state.options.report_path} was left as it was")
    if progress.shard is not None and no_body is None:
        from ..render.shard_text import describe_shard

        lines.append(describe_shard(progress.shard_fields()))
    reasons = [] if no_body is not None else progress.incomplete_reasons(exitstatus)
    if reasons:
        written = state.options.report_path is not None and state.report_error is None
        lines.append(f"INCOMPLETE run{', the report says so' if written else ''}: " + "; ".join(reasons))
    if comparison is not None:
        lines += ["", f"compared with baseline {state.options.baseline_path}:"]
        lines += comparison.format_text().splitlines()
    return lines


def register(
    config: pytest.Config,
    state: RunState,
    so_far: RunSoFar | None = None,
    session: pytest.Session | None = None,
    collected: bool = False,
) -> None:
    """Wire the recorder into the process that writes the report (never an xdist worker); the shard everywhere.

    Switched on after the session started (``session`` given), the recorder starts
    from what the run did before (``so_far``) and from the collected tests once
    collection had finished (``collected``), and takes SIGTERM over then.
    """
    if is_worker(config):
        shards.register(config, None)
        return
    progress = config.stash[PROGRESS_KEY] = RunProgress(
        selection=_selection(config),
        maxfail=int(config.getoption("maxfail", 0) or 0),
        stepwise_stop=_stepwise_stop(config),
    )
    if so_far is not None:
        progress.collection_errors = so_far.collection_errors
        progress.deselected = so_far.deselected
        progress.failures = so_far.failures
        progress.finished.update(so_far.finished)
    if session is not None and collected:  # the recorder's pytest_collection_finish was not called
        progress.collected([item.nodeid for item in session.items])
        if progress.deselected is None:
            progress.deselected = 0
    recorder = RunRecorder(state, progress)
    recorder.each = _option(config, "dist") == "each"
    config.pluginmanager.register(recorder, "cudagraph-run-recorder")
    if session is not None:  # its pytest_sessionstart was not called either
        recorder.pytest_sessionstart(session)
    shards.register(config, progress)


def _option(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:  # the plugin that adds it (xdist) is not installed
        return None


def _stepwise_stop(config: pytest.Config) -> int | None:
    """The failure at which pytest's stepwise plugin stops the run: the first (--sw), the second (--sw-skip)."""
    if _option(config, "stepwise_skip"):
        return 2
    if _option(config, "stepwise") or _option(config, "stepwise_reset"):
        return 1
    return None


def _selection(config: pytest.Config) -> dict[str, str]:
    """The -k and -m expressions that narrowed the run, for the report's summary."""
    chosen = {"-k": config.getoption("keyword", ""), "-m": config.getoption("markexpr", "")}
    return {flag: str(expression) for flag, expression in chosen.items() if expression}
