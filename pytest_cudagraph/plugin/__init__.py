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

- ``options``: the command-line and ini options and the values they accept;
- ``activation``: the hooks every run registers, and the switch to the rest;
- ``run_so_far``: what the run did before the switch, handed to the recorder;
- ``startup``: the plugin switched on: options checked, then acted on (devices,
  cache root), then the feature modules registered;
- ``collection``: marker arguments checked, GPU tests gated, module groups;
- ``recording``: each test's record, the run's progress, the report, the summary;
- ``ran_no_test``: the one rule by which a run of no test body writes nothing;
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
- ``failure_display``: a failure of the plugin's checks in the terminal, its cause
  on pytest's ``-r`` line and its lines in the terminal's width;
- ``torch_trace``: torch's structured-trace records kept out of pytest's log capture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from . import activation, fixtures, options, ran_no_test, state_isolation
from .items import STATE_KEY, xdist_workers
from .run_so_far import RunSoFar

if TYPE_CHECKING:
    from .session import RunState


def pytest_addoption(parser: pytest.Parser) -> None:
    """At start-up: the plugin's command-line and ini options."""
    options.add_options(parser)


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
    so_far = config.stash[activation.SO_FAR_KEY] = RunSoFar()
    manager.register(so_far, "cudagraph-run-so-far")
    for name, module in (
        ("cudagraph-activation", activation),
        ("cudagraph-fixtures", fixtures),
        ("cudagraph-state-isolation", state_isolation),
        ("cudagraph-ran-no-test", ran_no_test),
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
    workers = xdist_workers(config)
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
