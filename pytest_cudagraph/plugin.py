"""pytest hooks of pytest-cudagraph: options, markers, fixtures, the report and the summary.

This module is loaded by every pytest run in an environment where the plugin is
installed, so it imports nothing heavy: torch is imported only once a test uses
a marker or fixture of the plugin, or an option asks for GPU work.  The checks
themselves live in the library modules (``capture``, ``recompiles``, ``caches``,
``piecewise``, ``report``); the hooks here only wire them to pytest.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import open_objects
from .devices import GROUP_CHOICES
from .errors import InvariantViolation, ReportError, UsageProblem
from .markers import MARKER_DOCS, MarkerArgumentError, parse_item_markers
from .progress import RunProgress
from .record import TestRecord, set_current_record
from .session import RunState, read_options

STATE_KEY = pytest.StashKey[RunState]()
RECORD_KEY = pytest.StashKey[TestRecord]()
MARKERS_KEY = pytest.StashKey[dict]()
CACHE_SNAPSHOT_KEY = pytest.StashKey[Any]()
RECOMPILE_WATCH_KEY = pytest.StashKey[Any]()
OUTCOME_KEY = pytest.StashKey[tuple]()
# The node id as collected: ``--dist loadgroup`` appends "@group" to it on workers,
# and the report must name a test the same way however the run was distributed.
NODEID_KEY = pytest.StashKey[str]()
STATE_SNAPSHOT_KEY = pytest.StashKey[Any]()
PROGRESS_KEY = pytest.StashKey[RunProgress]()
# A finished test's record travels on its teardown report: xdist sends every report to
# the controller as the test ends (pytest serialises the report's attributes), so a
# worker that crashes later, or a Ctrl-C, loses no record of a test that finished.
REPORT_RECORD_ATTR = "cudagraph_record"

PLUGIN_FIXTURES = frozenset({"cudagraphs", "recompiles", "compile_cache", "piecewise"})
WORKER_RECORDS = "cudagraph_records"
WORKER_ROOT = "cudagraph_cache_root"
WORKER_DEVICES = "cudagraph_devices"
WORKER_GROUPS = "cudagraph_groups_dir"
WORKER_DESELECTED = "cudagraph_deselected"
# Fixtures of CUDA graph work: with --cudagraph-group=module their tests stay on one worker, marked or not.
# Only the cudagraphs fixture is also gated by --cudagraph: piecewise runs on the CPU too, its pieces uncaptured.
GPU_FIXTURES = frozenset({"cudagraphs", "piecewise"})
GATED_FIXTURES = frozenset({"cudagraphs"})


# ----------------------------------------------------------------------------
# options and markers
# ----------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cudagraph", "CUDA graph and torch.compile cache validation (pytest-cudagraph)")
    group.addoption(
        "--cudagraph",
        action="store_true",
        default=False,
        help="run the tests marked cudagraph or using the cudagraphs fixture (without it they skip with 'needs --cudagraph').",
    )
    group.addoption(
        "--cudagraph-require-gpu",
        action="store_true",
        default=False,
        help="implies --cudagraph; stop at start with a usage error when no CUDA device is visible, "
        "instead of skipping the GPU tests.",
    )
    group.addoption(
        "--cudagraph-report",
        metavar="PATH",
        default=None,
        help="write the run's JSON report (schema pytest-cudagraph/1) to PATH.",
    )
    group.addoption(
        "--cudagraph-baseline",
        metavar="PATH",
        default=None,
        help="compare the run against an earlier report at the end; a regression fails the session.",
    )
    group.addoption(
        "--cudagraph-cache-dir",
        metavar="PATH",
        default=None,
        help="root of the compile caches (Inductor, AOTAutograd, Triton) for the whole run; "
        "default: a fresh private directory per run, used only by the plugin's checks.",
    )
    group.addoption(
        "--cudagraph-devices",
        metavar="auto|LIST",
        default=None,
        help="under pytest-xdist, pin each worker to one GPU, round-robin over LIST (indices such as 0,1) "
        "or over every visible GPU (auto); a worker's GPU is its cuda:0. Without -n the run itself is "
        "pinned to the first device of the list.",
    )
    group.addoption(
        "--cudagraph-group",
        choices=GROUP_CHOICES,
        default="none",
        help="module: under pytest-xdist, run all GPU tests of a module on one worker (the plugin's own "
        "scheduling), so that they share its GPU and its module-scoped fixtures; default: none.",
    )
    parser.addini(
        "cudagraph_capture_sizes",
        "default batch sizes for the cudagraphs fixture, e.g. '1 2 4 8'",
        default="",
    )
    parser.addini("cudagraph_rtol", "default relative tolerance of replay-vs-eager checks", default="")
    parser.addini("cudagraph_atol", "default absolute tolerance of replay-vs-eager checks", default="")
    parser.addini(
        "cudagraph_baseline_fail_on",
        "compare rules that make --cudagraph-baseline fail the run, as for 'pytest-cudagraph compare --fail-on' "
        "(e.g. 'default,graph-breaks'); default: the default rules",
        default="",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for doc in MARKER_DOCS.values():
        config.addinivalue_line("markers", doc)
    try:
        options = read_options(config)
    except UsageProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    state = RunState(
        options=options,
        rootdir=Path(str(config.rootpath)),
        config=config,
    )
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(WORKER_ROOT):
        state.shared_root_hint = Path(workerinput[WORKER_ROOT])
    config.stash[STATE_KEY] = state

    try:
        _validate_options_at_start(config, state)
    except (UsageProblem, ReportError) as exc:
        raise pytest.UsageError(str(exc)) from None

    if _hypothesis_profile_requested(config) == "cudagraph":
        # Hypothesis loads --hypothesis-profile in its own pytest_configure; register
        # ours first.  Importing the strategies module imports hypothesis, not torch.
        from . import strategies  # noqa: F401

    config.pluginmanager.register(_StateIsolation(), "cudagraph-state-isolation")
    if workerinput is not None:
        config.pluginmanager.register(_WorkerOutput(state), "cudagraph-xdist-worker")
        return
    progress = config.stash[PROGRESS_KEY] = RunProgress(
        selection=_selection(config), maxfail=int(config.getoption("maxfail", 0) or 0)
    )
    config.pluginmanager.register(_RunRecorder(state, progress), "cudagraph-run-recorder")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_ControllerInput(state, progress), "cudagraph-xdist-controller")


def _selection(config: pytest.Config) -> dict[str, str]:
    """The -k and -m expressions that narrowed the run, for the report's summary."""
    chosen = {"-k": config.getoption("keyword", ""), "-m": config.getoption("markexpr", "")}
    return {flag: str(expression) for flag, expression in chosen.items() if expression}


def _hypothesis_profile_requested(config: pytest.Config) -> str | None:
    try:
        return config.getoption("hypothesis_profile")
    except ValueError:  # hypothesis' plugin absent
        return None


def _validate_options_at_start(config: pytest.Config, state: RunState) -> None:
    """Bad option values stop the run at once, even if no test uses the plugin."""
    from .report import check_report_path_writable, load_report

    options = state.options
    if options.cache_dir is not None:
        # checked first, changed last: a run stopped by another bad option leaves the root alone
        from .cacheroot import check_secure_dir

        if options.cache_dir.exists() or options.cache_dir.is_symlink():
            check_secure_dir(options.cache_dir, "--cudagraph-cache-dir")
    if options.report_path is not None:
        problem = check_report_path_writable(options.report_path)
        if problem:
            raise UsageProblem(problem)
    if options.baseline_path is not None:
        try:
            state.baseline = load_report(options.baseline_path)
        except ReportError as exc:
            raise UsageProblem(f"--cudagraph-baseline: {exc}") from None
    if options.require_gpu and getattr(config, "workerinput", None) is None:
        from ._compat import cuda_available

        if not cuda_available():
            import torch

            raise UsageProblem(
                f"--cudagraph-require-gpu: no CUDA device is visible (torch {torch.__version__}, "
                f"CUDA {torch.version.cuda or 'not built in'}); run on a GPU runner or drop the flag"
            )
    _place_on_devices(config, state)
    if options.cache_dir is not None:
        state.apply_run_cache_environment()
        if getattr(config, "workerinput", None) is None:
            # before any xdist worker starts, so no worker's probe is deleted
            state.cache_root().prune_probes()


def _xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers this (controller) process starts; 0 without xdist or with -n 0."""
    try:
        count = config.getoption("numprocesses")
    except ValueError:  # xdist not installed
        return 0
    return int(count) if isinstance(count, int) and config.getoption("dist") != "no" else 0


def _place_on_devices(config: pytest.Config, state: RunState) -> None:
    """--cudagraph-devices and --cudagraph-group: pin this process, or prepare the workers' pins."""
    from .devices import device_for_worker, pin_process, resolve_devices, visible_device_ids

    options = state.options
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        devices = workerinput.get(WORKER_DEVICES) or []
        if devices:
            worker = str(workerinput.get("workerid", "gw0"))
            state.pinned_device = device_for_worker(devices, worker)
            pin_process(state.pinned_device, f"xdist worker {worker}")
        return

    distributed = _xdist_workers(config) > 0
    if options.group == "module" and distributed:
        dist = config.getoption("dist")
        if dist != "load":  # -n's default; the plugin's scheduler takes its place
            raise UsageProblem(
                f"--cudagraph-group=module schedules the tests itself, in place of xdist's default --dist load, "
                f"but the run asks for --dist {dist}; drop --dist or drop --cudagraph-group"
            )
        state.group_scheduling = True
    if options.devices is None:
        return
    from ._compat import cuda_device_count

    state.devices = resolve_devices(options.devices, visible_device_ids(cuda_device_count()), options.devices_raw or "")
    if state.devices and not distributed:
        state.pinned_device = state.devices[0]
        pin_process(state.pinned_device, "this pytest process")
        if cuda_device_count() != 1:
            raise UsageProblem(
                f"--cudagraph-devices: this pytest process could not be pinned to device {state.pinned_device}, "
                f"CUDA had already fixed its visible devices; set CUDA_VISIBLE_DEVICES={state.pinned_device} "
                f"before starting pytest instead"
            )


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.restore_environment()


# ----------------------------------------------------------------------------
# collection: marker validation and gating
# ----------------------------------------------------------------------------


def _uses_plugin(item: pytest.Item) -> bool:
    if item.stash.get(MARKERS_KEY, None):
        return True
    return bool(PLUGIN_FIXTURES.intersection(getattr(item, "fixturenames", ())))


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object):
    result = yield
    items = result if isinstance(result, list) else [result]
    problem = None
    for item in items:
        if isinstance(item, pytest.Item):
            item.stash[NODEID_KEY] = item.nodeid
            try:
                item.stash[MARKERS_KEY] = parse_item_markers(item)
            except MarkerArgumentError as exc:
                problem = problem or f"{item.nodeid}: {exc}"
                _record_collection_error(item, str(exc))
    if problem is not None:
        # A CollectError prints its message alone, without a traceback.
        raise collector.CollectError(problem)
    return result


def _record_collection_error(item: pytest.Item, message: str) -> None:
    """Keep a test refused at collection in the report as an error, so a comparison does not call it vanished."""
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None:
        record = TestRecord(item.nodeid)
        record.outcome = "error"
        record.note("collection_error", message)
        state.records[item.nodeid] = record.to_json()


def _marked_cudagraph_or_using(item: pytest.Item, fixtures: frozenset[str]) -> bool:
    return item.get_closest_marker("cudagraph") is not None or bool(
        fixtures.intersection(getattr(item, "fixturenames", ()))
    )


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[STATE_KEY]
    gpu_items = [item for item in items if _marked_cudagraph_or_using(item, GATED_FIXTURES)]
    groups_dir = (getattr(config, "workerinput", None) or {}).get(WORKER_GROUPS)
    if groups_dir:
        _write_module_groups(Path(groups_dir), config.workerinput["workerid"], items)
    if any(_uses_plugin(item) for item in items):
        state.uses_plugin = True
    if not gpu_items:
        return
    if not state.options.enabled:
        skip = pytest.mark.skip(reason="needs --cudagraph")
    else:
        from ._compat import cuda_available, no_cuda_skip_reason

        if cuda_available():
            return
        skip = pytest.mark.skip(reason=no_cuda_skip_reason())
    for item in gpu_items:
        item.add_marker(skip)


def _write_module_groups(directory: Path, worker_id: str, items: list[pytest.Item]) -> None:
    """Tell the controller's scheduler which GPU tests belong to which module (--cudagraph-group)."""
    from .devices import group_name, write_worker_groups

    groups = {}
    for item in items:
        module = item.getparent(pytest.Module)
        if _marked_cudagraph_or_using(item, GPU_FIXTURES) and module is not None:
            groups[item.nodeid] = group_name(module.nodeid)
    write_worker_groups(directory, worker_id, groups)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.options.any_given:
        return None
    lines = [_header_line(state)]
    options = state.options
    if options.devices is not None:
        if not state.devices:
            lines.append(f"cudagraph devices: {options.devices_raw} given, but no CUDA device is visible; nothing pinned")
        elif _xdist_workers(config):
            lines.append(
                f"cudagraph devices: xdist workers pinned round-robin to CUDA_VISIBLE_DEVICES {', '.join(state.devices)}"
            )
        else:
            lines.append(f"cudagraph devices: this process pinned to CUDA_VISIBLE_DEVICES={state.pinned_device}")
    if options.group == "module" and _xdist_workers(config):
        lines.append("cudagraph group: the GPU tests of each module run on one xdist worker")
    return lines


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.options.any_given or not state.uses_plugin:
        return None  # already in the header, or the run does not use the plugin
    return _header_line(state)


def _header_line(state: RunState) -> str:
    from .environment import header_line

    root = state.options.cache_dir or state.shared_root_hint
    if root is None and state.cache_root_if_created is not None:
        root = state.cache_root_if_created.path
    shown = str(root) if root is not None else "a fresh private directory per run (created on first use)"
    return header_line(shown)


# ----------------------------------------------------------------------------
# per-test records
# ----------------------------------------------------------------------------


def _report_nodeid(item: pytest.Item) -> str:
    return item.stash.get(NODEID_KEY, item.nodeid)


def _record(item: pytest.Item) -> TestRecord:
    record = item.stash.get(RECORD_KEY, None)
    if record is None:
        record = item.stash[RECORD_KEY] = TestRecord(_report_nodeid(item))
    return record


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Parsed again: markers added after collection (item.add_marker in a conftest
    # hook) never went through pytest_pycollect_makeitem.
    problem = None
    try:
        item.stash[MARKERS_KEY] = parse_item_markers(item)
    except MarkerArgumentError as exc:
        problem = f"{item.nodeid}: {exc}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    # Every test has a current record, so that the plain API (watch_recompiles(),
    # capture_graphs()) reports into its test even where no marker or fixture is used;
    # a record that stays empty is not written (_finish_record).
    set_current_record(_record(item))
    open_objects.start_test()
    if "torch" in sys.modules:
        # Cache counters are read only where torch is already loaded: a test that
        # compiled something gets its cache deltas reported, and nothing imports torch.
        from .counters import counter_snapshot

        item.stash[CACHE_SNAPSHOT_KEY] = counter_snapshot()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    marker = item.stash.get(MARKERS_KEY, {}).get("max_recompiles")
    if marker is None:
        return (yield)
    from .recompiles import start_from_empty_dynamo_cache, watch_recompiles

    watch = item.stash.get(RECOMPILE_WATCH_KEY, None)
    own = watch is None
    if own:
        start_from_empty_dynamo_cache()
        watch = watch_recompiles()
        watch.__enter__()
    try:
        result = yield
    finally:
        if own:
            watch.__exit__(None, None, None)
            _record(item).set("recompiles", watch.result())
    try:
        watch.assert_at_most(marker.n, context=f"@pytest.mark.max_recompiles({marker.n})")
    except InvariantViolation as exc:
        failure = str(exc)
    else:
        return result
    # Failed outside the except block: pytest would print the InvariantViolation
    # again as the "During handling ..." context.
    pytest.fail(failure, pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    marker = pyfuncitem.stash.get(MARKERS_KEY, {}).get("compile_cache")
    if marker is None:
        return None
    from .caches import run_marked_test

    state = pyfuncitem.config.stash[STATE_KEY]
    failure = None
    try:
        run_marked_test(pyfuncitem, marker, state.cache_root(), _record(pyfuncitem))
    except InvariantViolation as exc:
        failure = str(exc)
    if failure is not None:
        # outside the except block, so that pytest does not print the message twice
        pytest.fail(failure, pytrace=False)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    # Kept for every test (two fields, no torch): a test that compiles without using
    # the plugin still gets a record at teardown, and it needs the outcome then.
    outcome, duration = item.stash.get(OUTCOME_KEY, (None, 0.0))
    duration += report.duration
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    elif report.failed and outcome not in ("failed", "error"):
        outcome = "failed" if call.when == "call" else "error"
    elif report.skipped and outcome is None:
        outcome = "skipped"
    elif call.when == "call" and outcome is None:
        outcome = "passed"
    item.stash[OUTCOME_KEY] = (outcome, duration)
    if call.when == "teardown":
        finished = _finish_record(item, item.stash.get(RECORD_KEY, None))
        if finished is not None:
            setattr(report, REPORT_RECORD_ATTR, finished)
    return report


def _finish_record(item: pytest.Item, record: TestRecord | None) -> dict[str, Any] | None:
    """The test's finished record as ``{"nodeid", "record"}`` (plain JSON data), or None if it has none."""
    set_current_record(None)
    snapshot = item.stash.get(CACHE_SNAPSHOT_KEY, None)
    if snapshot is not None or "torch" in sys.modules:
        from .counters import counter_delta, counter_snapshot

        if snapshot is None:
            # torch was first imported by this test: every counter started at zero
            snapshot = counter_snapshot(empty=True)
        delta = counter_delta(snapshot)
        if delta is not None:
            record = record or _record(item)
            if record.get("caches") is None:
                record.set("caches", delta)
    if record is None:
        return None
    record.outcome, record.duration_s = item.stash.get(OUTCOME_KEY, (None, 0.0))
    state = item.config.stash[STATE_KEY]
    if state.pinned_device is not None:
        record.placement = {
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "cuda_visible_devices": state.pinned_device,
        }
    entry = record.to_json()
    if not _uses_plugin(item) and not set(entry) - {"outcome", "duration_s"}:
        return None  # a test that used nothing of the plugin and measured nothing
    from .report import json_safe

    return {"nodeid": record.nodeid, "record": json_safe(entry)}


class _StateIsolation:
    """Put back the global torch state that a test using the plugin changed (see isolation.py).

    Only what the test body and its function-scoped fixtures changed: the snapshot is
    taken once the fixtures of wider scope are set up (pytest sets those up first), at
    the first function-scoped fixture or, without one, when the call starts; it is put
    back by a finalizer of the test item, which runs after the function-scoped fixtures
    are torn down and before any module or session fixture is.  A session fixture
    that sets ``cache_size_limit`` for the whole run therefore keeps its setting.
    A skipped test sets up no fixture, so it takes no snapshot and imports no torch.
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
        """Before each fixture is set up: snapshot before the first function-scoped one of a test."""
        if fixturedef.scope != "function":
            # what a module- or session-scoped fixture opens is not the running test's to close
            with open_objects.suspended():
                return (yield)
        _snapshot_before_test(request.node)
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """When the test body starts: snapshot here if no function-scoped fixture did."""
        _snapshot_before_test(item)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        """After every fixture is torn down: close and record plain-API objects the test left open."""
        try:
            return (yield)
        finally:
            closed, errors = open_objects.close_left_open()
            if closed:
                _record(item).note("closed_by_plugin", closed)
            if errors:
                _record(item).note("close_errors", errors)


def _snapshot_before_test(item: Any) -> None:
    if not isinstance(item, pytest.Item) or STATE_SNAPSHOT_KEY in item.stash or not _uses_plugin(item):
        return
    from .isolation import TorchStateSnapshot

    snapshot = item.stash[STATE_SNAPSHOT_KEY] = TorchStateSnapshot.take()

    def restore() -> None:
        del item.stash[STATE_SNAPSHOT_KEY]
        leaked = [name for name in snapshot.restore() if name != "Dynamo caches"]
        if leaked:
            _record(item).note("restored_after_test", leaked)

    item.addfinalizer(restore)


# ----------------------------------------------------------------------------
# fixtures
# ----------------------------------------------------------------------------


def _capture_defaults(request: pytest.FixtureRequest) -> dict[str, Any]:
    state = request.config.stash[STATE_KEY]
    marker = request.node.stash.get(MARKERS_KEY, {}).get("cudagraph")
    sizes = (marker.capture_sizes if marker else None) or state.options.capture_sizes
    rtol = marker.rtol if marker and marker.rtol is not None else state.options.rtol
    atol = marker.atol if marker and marker.atol is not None else state.options.atol
    return {"sizes": sizes, "rtol": rtol, "atol": atol}


@pytest.fixture
def cudagraphs(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Capture a function per batch size in one shared pool and check replay, pointers and pool size.

    ``cudagraphs.capture(fn, make_inputs, sizes=None, ...)`` returns a GraphSet;
    defaults come from the test's ``cudagraph`` marker and the ini options.
    ``cudagraphs.watch_trees()`` counts reduce-overhead recordings and skips.
    Skips when no CUDA device is visible.
    """
    from .capture import CudagraphsFixture

    handle = CudagraphsFixture(record=_record(request.node), **_capture_defaults(request))
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def recompiles(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Watch Dynamo for the whole test: ``.count``, ``.reasons``, ``.by_function``, ``.assert_at_most(n)``.

    The test starts from an empty Dynamo cache (so do tests marked ``max_recompiles``):
    entries compiled by earlier tests would otherwise show up in this test's reasons.
    """
    from .recompiles import start_from_empty_dynamo_cache, watch_recompiles

    start_from_empty_dynamo_cache()
    with watch_recompiles() as watch:
        request.node.stash[RECOMPILE_WATCH_KEY] = watch
        try:
            yield watch
        finally:
            del request.node.stash[RECOMPILE_WATCH_KEY]
    _record(request.node).set("recompiles", watch.result())


@pytest.fixture
def compile_cache(request: pytest.FixtureRequest) -> Iterator[Any]:
    """An isolated compile-cache directory with per-layer counter deltas and ``.cold_warm()``."""
    from .caches import cache_probe

    state = request.config.stash[STATE_KEY]
    with cache_probe(root=state.cache_root(), name=request.node.name) as probe:
        yield probe
    record = _record(request.node)
    if record.get("caches") is None:
        record.set("caches", probe.result())


@pytest.fixture
def piecewise(request: pytest.FixtureRequest) -> Iterator[Any]:
    """``piecewise(module, splitting_ops, capture_sizes=None, ...)``: split at splitting ops, capture the rest."""
    from .piecewise import PiecewiseFixture

    handle = PiecewiseFixture(record=_record(request.node), **_capture_defaults(request))
    try:
        yield handle
    finally:
        handle.close()


# ----------------------------------------------------------------------------
# end of the run: report, baseline, summary
# ----------------------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(STATE_KEY, None)
    if state is None or getattr(config, "workerinput", None) is not None:
        return  # workers hand their records to the controller (_WorkerOutput)
    options = state.options
    if options.report_path is None and state.baseline is None:
        return
    if config.getoption("collectonly"):
        return  # a collection-only run measured nothing: the last report stays as it was
    from .environment import collect_environment
    from .report import build_report, write_report

    env = collect_environment(state.rootdir)
    config.hook.pytest_cudagraph_update_env(config=config, env=env)
    run = config.stash[PROGRESS_KEY].summary_fields(int(exitstatus))
    report = build_report(env, state.records, exitstatus=int(exitstatus))
    report["summary"].update(run)  # TEMP until build_report takes run=
    if options.report_path is not None:
        try:
            write_report(options.report_path, report)
        except OSError as exc:
            # checked writable at start; a full disk or a vanished directory can still happen
            state.report_error = f"cudagraph: the report was NOT written to {options.report_path} ({_os_error_text(exc)})"
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    if state.baseline is not None:
        from .compare import compare_reports

        comparison = compare_reports(state.baseline, report, rules=options.baseline_rules)
        state.baseline_comparison = comparison
        if comparison.regressed and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _os_error_text(exc: OSError) -> str:
    """The OS's own words for a failed write, with the hint that fits it."""
    import errno

    reason = exc.strerror or str(exc)
    name = errno.errorcode.get(exc.errno or 0)
    text = f"{reason} [{name}]" if name else reason
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{text}; free space or give another --cudagraph-report path"
    return f"{text}; give another --cudagraph-report path"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or getattr(config, "workerinput", None) is not None:
        return
    comparison = state.baseline_comparison
    report_error = state.report_error
    if not state.records and state.options.report_path is None and comparison is None:
        return
    from .summary import terminal_summary_lines

    collect_only = bool(config.getoption("collectonly"))
    lines = terminal_summary_lines(
        state.records,
        None if collect_only else state.options.report_path,
        max_rows=None if config.get_verbosity() > 0 else 40,
        report_error=report_error,
    )
    if collect_only and state.options.report_path is not None:
        lines.append(f"collection only: the report at {state.options.report_path} was left as it was")
    progress = config.stash.get(PROGRESS_KEY, None)
    reasons = progress.incomplete_reasons(int(exitstatus)) if progress is not None and not collect_only else []
    if reasons:
        lines.append("INCOMPLETE run, the report says so: " + "; ".join(reasons))
    if comparison is not None:
        lines += ["", f"compared with baseline {state.options.baseline_path}:"]
        lines += comparison.format_text().splitlines()
    terminalreporter.write_sep("=", "cudagraph")
    for line in lines:
        red = line.startswith(("REGRESSION", "INCOMPLETE")) or line == report_error
        terminalreporter.write_line(line, red=red, bold=red)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


# ----------------------------------------------------------------------------
# xdist: one cache root for all workers, records back to the controller
# ----------------------------------------------------------------------------


class _RunRecorder:
    """In the process that writes the report (the xdist controller under -n): records and progress.

    Every finished test's record arrives on its teardown report, from this process or
    from a worker, so the report holds every test that finished whatever happens
    later; the progress says whether the run got to its end.
    """

    def __init__(self, state: RunState, progress: RunProgress):
        self.state = state
        self.progress = progress
        self._previous_sigterm: Any = None

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

    def pytest_unconfigure(self) -> None:
        """At the very end: give SIGTERM back its previous handler."""
        import signal

        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """After collection without xdist: the tests selected to run."""
        self.progress.collected([item.nodeid for item in session.items])

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """When -k, -m or a plugin deselects tests (without xdist; workers send their count)."""
        self.progress.add_deselected(len(items))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """After each phase of each test, here or on a worker: keep the record, count what finished."""
        if report.failed and not hasattr(report, "wasxfail"):
            self.progress.failures += 1
        carried = getattr(report, REPORT_RECORD_ATTR, None)
        if carried:
            self.state.records[carried["nodeid"]] = carried["record"]
        if report.when == "teardown":
            self.progress.finish(report.nodeid)


class _ControllerInput:
    """On the xdist controller: give workers the shared cache root and devices; note crashes."""

    def __init__(self, state: RunState, progress: RunProgress):
        self.state = state
        self.progress = progress
        self.groups_dir: Path | None = None

    def pytest_configure_node(self, node: Any) -> None:
        # One root for every worker, created here once so that all workers agree.
        node.workerinput[WORKER_ROOT] = str(self.state.cache_root().path)
        node.workerinput[WORKER_DEVICES] = list(self.state.devices)
        if self.state.group_scheduling:
            node.workerinput[WORKER_GROUPS] = str(self._groups_dir())

    def _groups_dir(self) -> Path:
        # one directory per run, so that a persistent root never mixes two runs' groups
        if self.groups_dir is None:
            import uuid

            from .cacheroot import ensure_private_dir

            parent = ensure_private_dir(self.state.cache_root().path / "groups", "scheduling group directory")
            self.groups_dir = ensure_private_dir(parent / uuid.uuid4().hex, "scheduling group directory")
        return self.groups_dir

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if not self.state.group_scheduling:
            return None
        from .devices import module_group_scheduler

        return module_group_scheduler(config, log, self._groups_dir())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """When a worker has collected: the tests selected to run (every worker collects the same)."""
        self.progress.collected(list(ids))

    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """When a worker died under a test: that test gets a record saying so."""
        message = str(report.longrepr)
        self.progress.crash(crashitem, message)
        self.state.records[crashitem] = {"outcome": "crashed", "duration_s": 0.0, "extra": {"crash": message}}

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """When a worker ends: records of tests refused at collection, the deselected count, crashes."""
        from .report import merge_worker_records

        output = getattr(node, "workeroutput", None) or {}
        merge_worker_records(self.state.records, output.get(WORKER_RECORDS))
        if output.get(WORKER_DESELECTED) is not None and self.progress.deselected is None:
            self.progress.deselected = int(output[WORKER_DESELECTED])
        if error is not None:
            self.progress.worker_crashes.append(f"xdist worker {node.gateway.id} went down ({error})")

    def pytest_unconfigure(self) -> None:
        """At the very end: remove this run's scheduling groups from the (possibly persistent) cache root."""
        if self.groups_dir is not None:
            import shutil

            shutil.rmtree(self.groups_dir, ignore_errors=True)
            try:
                self.groups_dir.parent.rmdir()  # only if no other run uses it
            except OSError:
                pass
            self.groups_dir = None


class _WorkerOutput:
    """On an xdist worker: what travels to the controller at the end besides the test reports."""

    def __init__(self, state: RunState):
        self.state = state
        self.deselected = 0

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """When -k or -m deselects tests on this worker."""
        self.deselected += len(items)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """At the worker's end: records of tests refused at collection (finished tests went on their reports)."""
        from .report import encode_worker_records

        session.config.workeroutput[WORKER_RECORDS] = encode_worker_records(self.state.records)
        session.config.workeroutput[WORKER_DESELECTED] = self.deselected
