"""The plugin switched on: every option checked first, then acted on, then the feature modules wired.

Bad option values stop the run at once with one sentence (pytest's usage error,
exit 4), even when no test uses the plugin: an option given switches the plugin
on at configure (``activation.wanted_from_start``).  Everything is checked before
anything is changed, so a run stopped by a bad option leaves the cache root, the
environment and the devices as they were.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..envvars import CHILD_PASS_ENV, INSTRUCTIONS_ENV
from ..errors import ReportError, UsageProblem
from .items import PROGRESS_KEY, STATE_KEY, is_worker, xdist_workers
from .session import RunState, read_options
from .xdist import WORKER_DEVICES, WORKER_ROOT

if TYPE_CHECKING:
    from .run_so_far import RunSoFar


def start_features(
    config: pytest.Config, so_far: RunSoFar | None, session: pytest.Session | None, collected: bool
) -> None:
    """Check the options, act on them, and register the feature modules (``activation.activate``).

    ``so_far``: what the run did before; ``session``: given once the session has
    started (switched on at collection or later); ``collected``: collection had
    finished (switched on by a running test).
    """
    from . import (
        failure_annotations,
        failure_display,
        fixture_compiles,
        job_summary,
        junit,
        marker_checks,
        observe,
        recording,
        torch_trace,
        xdist,
    )

    try:
        options = read_options(config)
        if os.environ.get(CHILD_PASS_ENV):
            # a child pytest running one warm pass for its parent: the parent's addopts must not
            # make it write (or compare) the run's report, which is the parent's to write
            options = dataclasses.replace(options, report_path=None, baseline_path=None)
        state = RunState(options=options, rootdir=Path(str(config.rootpath)), config=config)
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None and workerinput.get(WORKER_ROOT):
            state.shared_root_hint = Path(workerinput[WORKER_ROOT])
        config.stash[STATE_KEY] = state
        check_options(config, state)
        apply_options(config, state)
    except (UsageProblem, ReportError) as exc:
        raise pytest.UsageError(str(exc)) from None

    if os.environ.get(INSTRUCTIONS_ENV):
        # a run pytest-cudagraph startup --instructions started under callgrind: count the compiles only
        from .. import _compat

        problem = _compat.count_compile_instructions()
        if problem is not None:
            raise pytest.UsageError(f"pytest-cudagraph startup --instructions: {problem}")

    if _option(config, "hypothesis_profile") == "cudagraph":
        # Hypothesis loads --hypothesis-profile in its own pytest_configure; register ours first.
        # The strategies module imports hypothesis, not torch.
        from ..strategies import register_profile

        register_profile()

    manager = config.pluginmanager
    manager.register(marker_checks, "cudagraph-marker-checks")
    manager.register(observe, "cudagraph-observe")
    manager.register(torch_trace, "cudagraph-torch-trace")
    fixture_compiles.register(config)
    recording.register(config, state, so_far, session, collected)
    xdist.register(config, state, config.stash.get(PROGRESS_KEY, None))
    junit.register(config)
    job_summary.register(config, state)
    failure_annotations.register(config, state)
    failure_display.register(config)
    if "torch" in sys.modules:
        # switched on inside a test phase: take pytest's handlers off torch's loggers for this phase too
        torch_trace.detach_pytest_handlers(config)


def _option(config: pytest.Config, name: str) -> object:
    try:
        return config.getoption(name)
    except ValueError:  # hypothesis' plugin absent
        return None


def check_options(config: pytest.Config, state: RunState) -> None:
    """Raise UsageProblem for the first bad option value; change nothing."""
    options = state.options
    if options.cache_dir is not None and (options.cache_dir.exists() or options.cache_dir.is_symlink()):
        from ..caches.cache_root import check_secure_dir

        check_secure_dir(options.cache_dir, "--cudagraph-cache-dir")
    if is_worker(config):
        return  # the rest is the controller's: it checked the report, baseline and devices once for the run
    if options.report_path is not None:
        from ..records.report import check_report_path_writable

        problem = check_report_path_writable(options.report_path) or _output_clash(config, state)
        if problem:
            raise UsageProblem(problem)
    if options.baseline_path is not None:
        from ..records.report import load_report

        try:
            state.baseline = load_report(options.baseline_path)
        except ReportError as exc:
            raise UsageProblem(f"--cudagraph-baseline: {exc}") from None
    if options.require_gpu:
        _check_a_gpu_is_visible()
    _check_device_options(config, state)
    from .job_summary import check_summary_option

    check_summary_option(config)


def _output_clash(config: pytest.Config, state: RunState) -> str | None:
    """Why the report or the job summary cannot be written where they are asked to: over a file of another kind
    (``records.output_paths``), or over a path given to collect; None when they can.

    ``pytest --cudagraph-report test_q.py``, the value forgotten, makes the module the report's path.
    """
    from ..records.output_paths import REPORT, refusal
    from .job_summary import SUMMARY_ENV, summary_path

    report = state.options.report_path
    given = [Path(str(config.invocation_params.dir), arg.split("::")[0]) for arg in config.args]
    # the command meant, where a forgotten value made a test module the report's path
    fix = "pytest --cudagraph-report=cudagraph.json" + (f" {report.name}" if report and report.suffix == ".py" else "")
    summary = summary_path(config, state)
    outputs = [(f"--cudagraph-report={report}", report, f"give the report a path of its own: {fix}")]
    outputs.append((f"${SUMMARY_ENV}={summary}", summary, f"point ${SUMMARY_ENV} at a file of its own"))
    for option, path, remedy in outputs:
        collected = next((arg for arg in given if path is not None and _same_path(path, arg)), None)
        if collected is not None:
            return f"{option} is {collected}, a path this run collects, which writing would replace; {remedy}"
    if report is None:
        return None
    return refusal(f"--cudagraph-report={report}", report, REPORT, fix)


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _check_a_gpu_is_visible() -> None:
    from .._compat import cuda_available

    if not cuda_available():
        import torch

        raise UsageProblem(
            f"--cudagraph-require-gpu: no CUDA device is visible (torch {torch.__version__}, "
            f"CUDA {torch.version.cuda or 'not built in'}); run on a GPU runner or drop the flag"
        )


def _check_device_options(config: pytest.Config, state: RunState) -> None:
    """--cudagraph-group against --dist, and --cudagraph-devices resolved against the visible devices."""
    options = state.options
    distributed = xdist_workers(config) > 0
    if options.group == "module" and distributed:
        dist = config.getoption("dist")
        if dist != "load":  # -n's default; the plugin's scheduler takes its place
            raise UsageProblem(
                f"--cudagraph-group=module schedules the tests itself, in place of xdist's default --dist load, "
                f"but the run asks for --dist {dist}; drop --dist or drop --cudagraph-group"
            )
        state.group_scheduling = True
    if options.devices is not None:
        from .._compat import cuda_device_count
        from .devices import resolve_devices, visible_device_ids

        state.devices = resolve_devices(
            options.devices, visible_device_ids(cuda_device_count()), options.devices_raw or ""
        )


def apply_options(config: pytest.Config, state: RunState) -> None:
    """After every check passed: pin this process to its GPU, point the caches into the root, prune."""
    _pin_devices(config, state)
    if state.options.cache_dir is not None:
        state.apply_run_cache_environment()
        if not is_worker(config):
            # before any xdist worker starts, so no worker's probe is deleted
            state.cache_root().prune_probes()


def _pin_devices(config: pytest.Config, state: RunState) -> None:
    """--cudagraph-devices: pin an xdist worker to its GPU, or a run without workers to the first."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        from ..graphs.capture_cost import set_shared_device
        from .devices import device_for_worker, gpu_sharing_note, pin_process

        devices = workerinput.get(WORKER_DEVICES) or []
        # the device-wide memory figures of a capture count every worker on the GPU
        set_shared_device(
            gpu_sharing_note(devices, str(workerinput.get("workerid", "gw0")), int(workerinput.get("workercount", 1)))
        )
        if devices:
            worker = str(workerinput.get("workerid", "gw0"))
            state.pinned_device = device_for_worker(devices, worker)
            pin_process(state.pinned_device, f"xdist worker {worker}")
        return
    if not state.devices or xdist_workers(config) > 0:
        return
    from .._compat import cuda_device_count
    from .devices import pin_process

    state.pinned_device = state.devices[0]
    pin_process(state.pinned_device, "this pytest process")
    if cuda_device_count() != 1:
        raise UsageProblem(
            f"--cudagraph-devices: this pytest process could not be pinned to device {state.pinned_device}, "
            f"CUDA had already fixed its visible devices; set CUDA_VISIBLE_DEVICES={state.pinned_device} "
            f"before starting pytest instead"
        )
