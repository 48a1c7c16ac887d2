"""pytest-xdist: one cache root and the devices for every worker, crashes and what workers send back.

Test records do not travel here: they ride on each test's teardown report
(recording.py).  The controller hands workers the shared cache root, the devices
and the scheduling-group directory; a worker sends back, at its end, what has no
test report to ride on (tests refused at collection, the deselected count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..records.progress import RunProgress
from .items import is_worker
from .session import RunState

# what the controller hands each worker in its workerinput: the GPUs to pin workers to (round-robin),
# the run's shared cache root, and where a worker writes its module groups (--cudagraph-group=module)
WORKER_DEVICES = "cudagraph_devices"
WORKER_ROOT = "cudagraph_cache_root"
WORKER_GROUPS = "cudagraph_groups_dir"
# what a worker sends back in its workeroutput: the records of tests refused at collection, the deselected count
WORKER_RECORDS = "cudagraph_records"
WORKER_DESELECTED = "cudagraph_deselected"


class XdistController:
    """On the xdist controller: give workers the shared cache root and devices; note crashes."""

    def __init__(self, state: RunState, progress: RunProgress):
        self.state = state
        self.progress = progress
        self.groups_dir: Path | None = None

    def pytest_configure_node(self, node: Any) -> None:
        """As each worker is configured: one root for every worker, created here once so that all agree."""
        node.workerinput[WORKER_ROOT] = str(self.state.cache_root().path)
        node.workerinput[WORKER_DEVICES] = list(self.state.devices)
        if self.state.group_scheduling:
            node.workerinput[WORKER_GROUPS] = str(self._groups_dir())

    def _groups_dir(self) -> Path:
        # one directory per run, so that a persistent root never mixes two runs' groups
        if self.groups_dir is None:
            import uuid

            from ..caches.cache_root import ensure_private_dir

            parent = ensure_private_dir(self.state.cache_root().path / "groups", "scheduling group directory")
            self.groups_dir = ensure_private_dir(parent / uuid.uuid4().hex, "scheduling group directory")
        return self.groups_dir

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """When xdist picks its scheduler: with --cudagraph-group=module, the plugin's module grouping."""
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
        from ..records.report import merge_worker_records

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


class XdistWorker:
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
        from ..records.report import encode_worker_records

        # xdist sets workeroutput on a worker's config; pytest's Config declares no such attribute
        worker_output: dict[str, Any] = session.config.workeroutput  # type: ignore[attr-defined]
        worker_output[WORKER_RECORDS] = encode_worker_records(self.state.records)
        worker_output[WORKER_DESELECTED] = self.deselected


def register(config: pytest.Config, state: RunState, progress: RunProgress | None) -> None:
    """Wire the controller's or the worker's side, where xdist is in use."""
    if is_worker(config):
        config.pluginmanager.register(XdistWorker(state), "cudagraph-xdist-worker")
    elif progress is not None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistController(state, progress), "cudagraph-xdist-controller")
