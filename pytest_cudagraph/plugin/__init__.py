"""The pytest plugin of pytest-cudagraph: options, markers, fixtures, the report and the summary.

pytest loads this package (the ``cudagraph`` entry point) in every run where the
plugin is installed, so it imports nothing heavy: torch is imported only once a
test uses a marker or fixture of the plugin, or an option asks for GPU work.  The
checks live in the library modules; this layer is the only one that imports
pytest, and it only wires the library to pytest.  Its modules, each registered
explicitly in ``pytest_configure``:

- ``startup``: the options checked, then acted on (devices, cache root);
- ``collection``: marker arguments checked, GPU tests gated, module groups;
- ``recording``: each test's record, the run's progress, the report, the summary;
- ``marker_checks``: the ``max_recompiles`` and ``compile_cache`` markers (the
  latter's cold and warm passes are ``compile_cache_marker``'s);
- ``fixtures``: ``cudagraphs``, ``recompiles``, ``compile_cache``, ``piecewise``;
- ``ranks``: ``cudagraph_ranks``, a test body on several ranks, one process per GPU;
- ``handles``: the objects the ``cudagraphs`` and ``piecewise`` fixtures hand to a
  test (imported by ``fixtures``; no hooks);
- ``state_isolation``: global torch state put back after each plugin test;
- ``xdist``: the controller's and the workers' sides under ``-n``;
- ``torch_trace``: torch's structured-trace records kept out of pytest's log capture.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from ..envvars import CHILD_PASS_ENV, INSTRUCTIONS_ENV
from ..errors import ReportError, UsageProblem
from . import collection, fixtures, marker_checks, rank_fixture, recording, startup, state_isolation, torch_trace, xdist
from .items import PROGRESS_KEY, STATE_KEY
from .markers import MARKER_DOCS
from .session import GROUP_CHOICES, RunState, read_options
from .xdist import WORKER_ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    """At start-up: the plugin's command-line and ini options."""
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
    parser.addini(
        torch_trace.INI_OPTION,
        "keep torch's structured-trace records (logger torch.__trace) in pytest's log capture and caplog; "
        "default false: they are kept out, so a failing test's captured log shows what matters",
        type="bool",
        default=False,
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """At start-up: the hooks other plugins and conftest files may implement (hookspecs.py)."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """After option parsing, before other plugins configure: check the options, then wire the plugin's parts."""
    for doc in MARKER_DOCS.values():
        config.addinivalue_line("markers", doc)
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
        startup.check_options(config, state)
        startup.apply_options(config, state)
    except (UsageProblem, ReportError) as exc:
        raise pytest.UsageError(str(exc)) from None

    if os.environ.get(INSTRUCTIONS_ENV):
        # a run pytest-cudagraph startup --instructions started under callgrind: count the compiles only
        from .. import _compat

        problem = _compat.count_compile_instructions()
        if problem is not None:
            raise pytest.UsageError(f"pytest-cudagraph startup --instructions: {problem}")

    if _hypothesis_profile_requested(config) == "cudagraph":
        # Hypothesis loads --hypothesis-profile in its own pytest_configure; register ours first.
        # The strategies module imports hypothesis, not torch.
        from ..strategies import register_profile

        register_profile()

    manager = config.pluginmanager
    for name, module in (
        ("cudagraph-collection", collection),
        ("cudagraph-recording", recording),
        ("cudagraph-marker-checks", marker_checks),
        ("cudagraph-fixtures", fixtures),
        ("cudagraph-ranks", rank_fixture),
        ("cudagraph-state-isolation", state_isolation),
    ):
        manager.register(module, name)
    if not config.getini(torch_trace.INI_OPTION):
        manager.register(torch_trace, "cudagraph-torch-trace")
    recording.register(config, state)
    xdist.register(config, state, config.stash.get(PROGRESS_KEY, None))


def _hypothesis_profile_requested(config: pytest.Config) -> str | None:
    try:
        return config.getoption("hypothesis_profile")
    except ValueError:  # hypothesis' plugin absent
        return None


def pytest_unconfigure(config: pytest.Config) -> None:
    """At the very end: the environment the run's cache root changed is put back."""
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.restore_environment()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """In the session header: torch, Triton, CUDA, the GPU, the cache root, and device placement."""
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.options.any_given:
        return None
    lines = [_header_line(state)]
    options = state.options
    workers = startup.xdist_workers(config)
    if options.devices is not None:
        if not state.devices:
            lines.append(
                f"cudagraph devices: {options.devices_raw} given, but no CUDA device is visible; nothing pinned"
            )
        elif workers:
            lines.append(
                f"cudagraph devices: xdist workers pinned round-robin to CUDA_VISIBLE_DEVICES {', '.join(state.devices)}"
            )
        else:
            lines.append(f"cudagraph devices: this process pinned to CUDA_VISIBLE_DEVICES={state.pinned_device}")
    if options.group == "module" and workers:
        lines.append("cudagraph group: the GPU tests of each module run on one xdist worker")
    return lines


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    """After collection: the header line, for a run that uses the plugin without any of its options."""
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
