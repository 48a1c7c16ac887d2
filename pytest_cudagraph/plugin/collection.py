"""Collection: marker arguments checked per test, GPU tests gated, module groups written for the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..markers import MarkerArgumentError, parse_item_markers
from ..record import TestRecord
from .items import (
    GATED_FIXTURES,
    GPU_FIXTURES,
    MARKERS_KEY,
    NODEID_KEY,
    STATE_KEY,
    marked_cudagraph_or_using,
    uses_plugin,
)

WORKER_GROUPS = "cudagraph_groups_dir"


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object):
    """As each test function is collected: check its marker arguments, so a bad one is a collection error."""
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
    from ..devices import group_name, write_worker_groups

    groups = {}
    for item in items:
        module = item.getparent(pytest.Module)
        if marked_cudagraph_or_using(item, GPU_FIXTURES) and module is not None:
            groups[item.nodeid] = group_name(module.nodeid)
    write_worker_groups(directory, worker_id, groups)
