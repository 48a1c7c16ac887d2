"""Collection, once the plugin is on: marker arguments checked per test, GPU tests gated, module groups written.

No hook here: ``activation``'s collection hooks call these once the run uses the
plugin, so a run that does not pays nothing per collected test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..records.record import TestRecord
from .items import (
    GATED_FIXTURES,
    GPU_FIXTURES,
    MARKERS_KEY,
    STATE_KEY,
    marked_cudagraph_or_using,
    registered_marks,
    uses_plugin,
)
from .markers import MarkerArgumentError, misspelled_marker_message, parse_item_markers
from .xdist import WORKER_GROUPS


def check_collected_items(collector: pytest.Collector, report: pytest.CollectReport, items: list[pytest.Item]) -> None:
    """When a module or class has been collected: check its tests' marks, so a bad one is a collection error.

    A bad marker argument, or a mark one edit away from one of the plugin's.  Every
    problem of the module (its classes' too) is reported together, as one
    collection error, so that the file's bad marks are all named at once.
    """
    problems = _item_problems(collector.config, items)
    if problems:
        problems += _problems_of_classes(collector.config, report.result)
        report.outcome = "failed"
        report.longrepr = "\n".join(problems)  # a plain string prints alone, without a traceback
        report.result = []


def _item_problems(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """Each test's marker problems as ``"<nodeid>: <sentence>"``; the parsed markers kept on each test."""
    registered = registered_marks(config)
    found: list[str] = []
    for item in items:
        problems = [
            message
            for message in (misspelled_marker_message(mark.name, registered) for mark in item.iter_markers())
            if message is not None
        ]
        try:
            item.stash[MARKERS_KEY] = parse_item_markers(item)
        except MarkerArgumentError as exc:
            problems.append(str(exc))
        for problem in dict.fromkeys(problems):  # a class mark repeats on each method: once per test
            found.append(f"{item.nodeid}: {problem}")
            _record_collection_error(item, problem)
    return found


def _problems_of_classes(config: pytest.Config, children: list) -> list[str]:
    """The marker problems of the test classes among a failing module's children.

    pytest never collects the children of a collector whose report failed, so the
    classes are collected here, for their problems only: every bad mark of the file
    is reported at once.
    """
    problems: list[str] = []
    for child in children:
        if isinstance(child, pytest.Class):
            try:
                collected = child.collect()
            except Exception:  # pytest reports the class's own collection error once the marks are fixed
                continue
            problems += _item_problems(config, [node for node in collected if isinstance(node, pytest.Item)])
    return problems


def _record_collection_error(item: pytest.Item, message: str) -> None:
    """Keep a test refused at collection in the report as an error, so a comparison does not call it vanished."""
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None:
        record = TestRecord(item.nodeid)
        record.outcome = "error"
        record.note("collection_error", message)
        state.records[item.nodeid] = record.to_json()


def gate_collected_items(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """After collection: skip GPU tests without --cudagraph or a GPU; tell the scheduler the module groups."""
    state = config.stash[STATE_KEY]
    gpu_items = [item for item in items if marked_cudagraph_or_using(item, GATED_FIXTURES)]
    worker_input = getattr(config, "workerinput", None) or {}  # set by xdist on a worker only
    groups_dir = worker_input.get(WORKER_GROUPS)
    if groups_dir:
        _write_module_groups(Path(groups_dir), worker_input["workerid"], items)
    if any(uses_plugin(item) for item in items):
        state.uses_plugin = True
    if not gpu_items:
        return
    if not state.options.enabled:
        skip = pytest.mark.skip(reason="needs --cudagraph")
    else:
        from .._compat import cuda_available, no_cuda_skip_reason

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
        if marked_cudagraph_or_using(item, GPU_FIXTURES) and module is not None:
            groups[item.nodeid] = group_name(module.nodeid)
    write_worker_groups(directory, worker_id, groups)
