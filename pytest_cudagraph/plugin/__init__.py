"""The pytest plugin of pytest-cudagraph: options, markers, fixtures, the report and the summary.

pytest loads this package (the ``cudagraph`` entry point) in every run where the
plugin is installed, so it imports nothing heavy, and a run that uses none of the
plugin's features pays only for what it must register: the options, the markers,
the fixtures, and ``activation``'s few hooks, each of which checks one thing and
returns.  The rest is registered once the run uses the plugin (``activation``
says when).  torch is imported only once a test uses a marker or fixture of the
plugin, or an option asks for GPU work.  The checks live in the library modules;
this layer is the only one that imports pytest, and it only wires the library to
pytest.  Its modules:

- ``activation``: the hooks every run registers, and the switch to the rest;
- ``startup``: the plugin switched on: options checked, then acted on (devices,
  cache root), then the feature modules registered;
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
- ``junit``, ``failure_site``, ``failure_annotations``, ``job_summary``: each test's
  figures in the JUnit XML, which check failed a test and the user's line it points
  at, the GitHub annotations, the job summary in Markdown;
- ``torch_trace``: torch's structured-trace records kept out of pytest's log capture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from . import activation, fixtures, state_isolation
from .items import STATE_KEY

if TYPE_CHECKING:
    from .session import RunState

# --cudagraph-group's values (session.GROUP_CHOICES)
GROUP_CHOICES = ("none", "module")
# the ini option of torch_trace (torch_trace.INI_OPTION)
TORCH_TRACE_INI = "cudagraph_capture_torch_trace"
# --cudagraph-summary's and --cudagraph-annotations's values (job_summary, failure_annotations)
SUMMARY_CHOICES = ("auto", "github", "off")
ANNOTATION_CHOICES = ("auto", "github", "off")


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
        help="write the run's JSON report (schema pytest-cudagraph/2) to PATH.",
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
    group.addoption(
        "--cudagraph-summary",
        choices=SUMMARY_CHOICES,
        default="auto",
        help="github: append the run's summary in Markdown to $GITHUB_STEP_SUMMARY (GitHub's job summary); "
        "auto (default): do so where that variable is set and --cudagraph-report is given; off: never.",
    )
    group.addoption(
        "--cudagraph-annotations",
        choices=ANNOTATION_CHOICES,
        default="auto",
        help="auto (default): under GitHub Actions (GITHUB_ACTIONS=true) print each failure of the plugin's checks "
        "as an ::error annotation at the user's line; github: print them anywhere; off: never.",
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
        TORCH_TRACE_INI,
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
    """After option parsing, before other plugins configure: the markers and fixtures; the rest if asked for."""
    from .marker_docs import MARKER_DOCS

    for doc in MARKER_DOCS.values():
        config.addinivalue_line("markers", doc)
    manager = config.pluginmanager
    so_far = config.stash[activation.SO_FAR_KEY] = activation.RunSoFar()
    manager.register(so_far, "cudagraph-run-so-far")
    for name, module in (
        ("cudagraph-activation", activation),
        ("cudagraph-fixtures", fixtures),
        ("cudagraph-state-isolation", state_isolation),
    ):
        manager.register(module, name)
    if activation.wanted_from_start(config):
        activation.activate(config)


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
    workers = activation.xdist_workers(config)
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
    shown = str(root) if root is not None else "fresh per run (made on first use)"
    return header_line(shown)
