"""pytest-split's shard of the run: which group of how many, and what it selected and deselected.

pytest-split (``--splits N --group I``) collects the whole suite in every shard and
deselects the other groups' tests through ``pytest_deselected``, so a shard is a
complete run of what it selected, and its report says which shard it is: the
``pytest-cudagraph merge`` of the shard reports then refuses a missing or repeated
shard instead of passing a run that skipped a third of its tests.

The tests a shard deselected are counted where collection happens (this process,
or each xdist worker, which sends the count back at its end): every deselection
after ``ShardCounter.pytest_collection_modifyitems`` is pytest-split's, because
that hook runs right before pytest-split's own (both ``trylast``; pluggy calls
the earlier registered of two such hooks first, and the plugin registers this one
in its ``tryfirst`` ``pytest_configure``, before pytest-split registers its own).
Deselection by ``-k``/``-m`` happens before it, and is the run's, not the shard's.

The same hook takes the digest of the suite pytest-split is about to split: its
node ids, sorted (pytest-randomly's order is no other suite), and the arguments
that selected them (the paths and node ids given, relative to the root directory,
and ``-k``/``-m``).  ``merge`` refuses shards whose digests differ: shards of
``pytest a --splits 2 --group 1`` and ``pytest b --splits 2 --group 2`` split two
suites, and together ran half of each.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ..records.progress import RunProgress
from .items import is_worker

WORKER_SHARD_DESELECTED = "cudagraph_shard_deselected"
WORKER_SHARD_NODEIDS = "cudagraph_shard_nodeids_digest"


def shard_of(config: pytest.Config) -> dict[str, Any] | None:
    """The shard this run is, from pytest-split's options; None when pytest-split does not split it.

    ``{"group": 2, "splits": 3, "algorithm": "duration_based_chunks", "durations_path": ".test_durations"}``;
    pytest-split itself has refused a group outside 1..splits before this runs.
    """
    splits, group = _option(config, "splits"), _option(config, "group")
    if not splits or not group:
        return None
    shard: dict[str, Any] = {"group": int(group), "splits": int(splits)}
    algorithm = _option(config, "splitting_algorithm")
    if algorithm:
        shard["algorithm"] = str(algorithm)
    durations_path = _option(config, "durations_path")
    # pytest-split reads the file only where it exists; without it every test gets the same estimate
    if durations_path and Path(durations_path).is_file():
        shard["durations_path"] = _shown_path(Path(durations_path), config.rootpath)
    return shard


def _option(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:  # pytest-split is not installed
        return None


def _shown_path(path: Path, rootdir: Path) -> str:
    """The durations file relative to the root directory where it lies inside it (pytest-split makes it absolute)."""
    try:
        return os.path.relpath(path, rootdir) if path.resolve().is_relative_to(rootdir.resolve()) else str(path)
    except (OSError, ValueError):
        return str(path)


def selecting_args(config: pytest.Config) -> dict[str, Any]:
    """What chose the tests pytest-split splits: the paths and node ids given, and ``-k``/``-m``.

    Paths are made relative to the root directory (``tests/`` and ``/ci/checkout/tests`` on
    another runner read the same) and sorted: the order of the arguments orders the suite,
    which is no other suite (the merge finds a test run twice, or one run by no shard).
    """
    rootdir = config.rootpath
    invoked_in = config.invocation_params.dir
    paths = []
    for arg in config.args:
        path, sep, rest = str(arg).partition("::")
        try:
            path = os.path.relpath(os.path.join(invoked_in, path), rootdir)
        except ValueError:  # another drive (Windows)
            pass
        paths.append(Path(path).as_posix() + sep + rest)
    return {
        "args": sorted(paths),
        "-k": str(_option(config, "keyword") or ""),
        "-m": str(_option(config, "markexpr") or ""),
    }


def nodeids_digest(nodeids: list[str]) -> str:
    """sha256 of the node ids, sorted: the tests one shard collected, whatever order it ran them in."""
    import hashlib  # here, not at import: only a run pytest-split splits takes digests

    digest = hashlib.sha256()
    for nodeid in sorted(nodeids):
        digest.update(nodeid.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()


def suite_digest(nodeids_hex: str, args: dict[str, Any]) -> str:
    """The report's ``summary.shard.suite_digest``: the collected node ids' digest and the selecting arguments."""
    import hashlib
    import json

    text = json.dumps({"nodeids": nodeids_hex, **args}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class ShardCounter:
    """Where tests are collected (the pytest process, or an xdist worker): the tests pytest-split deselected.

    Also the digest of the node ids pytest-split splits, taken in the same hook.
    """

    def __init__(self, progress: RunProgress | None, args: dict[str, Any] | None = None):
        # the run's progress in the process that writes the report; None on an xdist worker
        self.progress = progress
        self.args = args or {}
        self.deselected: int | None = None
        self.nodeids_hex: str | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """After -k/-m, right before pytest-split picks its group: from here on, deselection is the shard's."""
        self.deselected = 0
        self.nodeids_hex = nodeids_digest([item.nodeid for item in items])
        if self.progress is not None and self.progress.shard is not None:
            self.progress.shard["suite_digest"] = suite_digest(self.nodeids_hex, self.args)
        self._tell()

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """When pytest-split deselects the other groups' tests (earlier calls are -k/-m's, not counted)."""
        if self.deselected is not None:
            self.deselected += len(items)
            self._tell()

    def _tell(self) -> None:
        if self.progress is not None:
            self.progress.shard_deselected = self.deselected

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """At an xdist worker's end: its count travels to the controller (there is no test report to ride on)."""
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self.deselected is not None:
            workeroutput[WORKER_SHARD_DESELECTED] = self.deselected
        if workeroutput is not None and self.nodeids_hex is not None:
            workeroutput[WORKER_SHARD_NODEIDS] = self.nodeids_hex


class ShardController:
    """On the xdist controller, which collects nothing: the shard's deselected count, from the workers."""

    def __init__(self, progress: RunProgress, args: dict[str, Any]):
        self.progress = progress
        self.args = args

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """When a worker ends: its count and digest (every worker collects and splits the same tests; the first is kept)."""
        output = getattr(node, "workeroutput", None) or {}
        count = output.get(WORKER_SHARD_DESELECTED)
        if isinstance(count, int) and self.progress.shard_deselected is None:
            self.progress.shard_deselected = count
        nodeids_hex = output.get(WORKER_SHARD_NODEIDS)
        shard = self.progress.shard
        if isinstance(nodeids_hex, str) and shard is not None and "suite_digest" not in shard:
            shard["suite_digest"] = suite_digest(nodeids_hex, self.args)


def register(config: pytest.Config, progress: RunProgress | None) -> None:
    """Wire the shard's counting where pytest-split splits this run (on xdist workers too)."""
    if shard_of(config) is None:
        return
    if is_worker(config):
        config.pluginmanager.register(ShardCounter(None), "cudagraph-shard-counter")
        return
    if progress is None:
        return
    progress.shard = shard_of(config)
    args = selecting_args(config)
    config.pluginmanager.register(ShardCounter(progress, args), "cudagraph-shard-counter")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(ShardController(progress, args), "cudagraph-shard-controller")
