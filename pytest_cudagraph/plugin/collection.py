"""Collection: marker arguments checked per test, GPU tests gated, module groups written for the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..records.record import TestRecord
from .items import (
    GATED_FIXTURES,
    GPU_FIXTURES,
    MARKERS_KEY,
    NODEID_KEY,
    STATE_KEY,
    marked_cudagraph_or_using,
    uses_plugin,
)
from .markers import MarkerArgumentError, misspelled_marker_message, parse_item_markers

WORKER_GROUPS = "cudagraph_groups_dir"


# The marker problems of one module's (or class's) functions, reported together once it is collected.
MARKER_PROBLEMS_KEY = pytest.StashKey[list]()


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object):
    """As each test function is collected: check its marks, so a bad one is a collection error.

    A bad marker argument, or a mark one edit away from one of the plugin's.  The
    problems are kept on the collector and reported together when it finishes
    (pytest_make_collect_report): raising here would stop the module at its first.
    """
    result = yield
    items = result if isinstance(result, list) else [result]
    registered = _registered_marks(collector.config)
    for item in items:
        if isinstance(item, pytest.Item):
            item.stash[NODEID_KEY] = item.nodeid
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
                collector.stash.setdefault(MARKER_PROBLEMS_KEY, []).append(f"{item.nodeid}: {problem}")
                _record_collection_error(item, problem)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """When a module or class has been collected: every marker problem of its tests, as one collection error."""
    report = yield
    problems = collector.stash.get(MARKER_PROBLEMS_KEY, None)
    if problems and report.passed:
        problems = problems + _problems_of_classes(report.result)
        report.outcome = "failed"
        report.longrepr = "\n".join(problems)  # a plain string prints alone, without a traceback
        report.result = []
    return report


def _problems_of_classes(children: list) -> list[str]:
    """The marker problems of the test classes among a failing module's children.

    pytest never collects the children of a collector whose report failed, so the
    classes are collected here, for their problems only: every bad mark of the file
    is reported at once.
    """
    problems: list[str] = []
    for child in children:
        if isinstance(child, pytest.Class):
            try:
                child.collect()
            except Exception:  # pytest reports the class's own collection error once the marks are fixed
                continue
            problems += child.stash.get(MARKER_PROBLEMS_KEY, [])
    return problems


# the registered marks' names, and how many ``markers`` lines they were read from
_REGISTERED_KEY = pytest.StashKey[tuple]()


def _registered_marks(config: pytest.Config) -> set[str]:
    """The names of the marks pytest knows: its own, the plugins', and the ini file's ``markers``.

    Read again only when a line was added (a conftest file collected later may register marks), not
    for every collected function.
    """
    lines = config.getini("markers")
    cached = config.stash.get(_REGISTERED_KEY, None)
    if cached is None or cached[0] != len(lines):
        cached = config.stash[_REGISTERED_KEY] = (
            len(lines),
            {line.split(":")[0].split("(")[0].strip() for line in lines},
        )
    return cached[1]


def _record_collection_error(item: pytest.Item, message: str) -> None:
    """Keep a test refused at collection in the report as an error, so a comparison does not call it vanished."""
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None:
        record = TestRecord(item.nodeid)
        record.outcome = "error"
        record.note("collection_error", message)
        state.records[item.nodeid] = record.to_json()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """After collection: skip GPU tests without --cudagraph or a GPU; tell the scheduler the module groups."""
    state = config.stash[STATE_KEY]
    gpu_items = [item for item in items if marked_cudagraph_or_using(item, GATED_FIXTURES)]
    groups_dir = (getattr(config, "workerinput", None) or {}).get(WORKER_GROUPS)
    if groups_dir:
        _write_module_groups(Path(groups_dir), config.workerinput["workerid"], items)
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
