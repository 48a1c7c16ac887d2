"""One GPU per xdist worker: ``--cudagraph-devices=auto|LIST`` and ``--cudagraph-group=module``.

A CUDA graph test measures the memory of the device it runs on, so two workers
sharing a GPU see each other's allocations in their pool figures, and a test
that fills the GPU makes the other worker's test fail.  With
``--cudagraph-devices`` every xdist worker is pinned to one GPU, round-robin:
worker ``gwN`` gets ``devices[N % len(devices)]``.

Pinning sets ``CUDA_VISIBLE_DEVICES`` in the worker before its first CUDA call,
so inside a test the worker's GPU is ``cuda:0``, whatever index it has on the
machine, and code that names ``cuda:0`` cannot reach another worker's GPU.  The
indices of LIST are those of the devices the run sees (``cuda:0``, ``cuda:1``,
...), mapped through ``CUDA_VISIBLE_DEVICES`` when the run itself was started
with one.

``--cudagraph-group=module`` sends all GPU tests of a module to one worker, so
that they share the module's GPU, its compiled artefacts and its module-scoped
fixtures, while the other tests are spread as usual.  xdist's own way to group
(``xdist_group`` marks under ``--dist loadgroup``) appends the group to each
node id on the worker, which pytest 9.2 no longer lets a plugin do; so the
workers write which test belongs to which group into a file under the run's
cache root as they collect, and the controller's scheduler (xdist's scope
scheduling with its scope rule replaced, ``_compat.xdist_scope_scheduling``)
reads it before handing out the first test.

Nothing here imports torch at import time.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageProblem

AUTO = "auto"
VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"
# the prefix of the xdist_group names the plugin gives to GPU tests
GROUP_PREFIX = "cudagraph:"

_WORKER_ID = re.compile(r"gw(\d+)$")


def parse_device_spec(raw: str) -> str | tuple[int, ...]:
    """``"auto"``, or the indices of a comma-separated list such as ``"0,1"``.

    Raises UsageProblem with one sentence for anything else: an empty list, a
    part that is not a non-negative integer, an index given twice.

        >>> parse_device_spec("1, 0")
        (1, 0)
    """
    text = raw.strip()
    if text.lower() == AUTO:
        return AUTO
    parts = [part.strip() for part in text.split(",")]
    if not text or any(not part for part in parts):
        raise UsageProblem(f"--cudagraph-devices={raw!r} has an empty entry; give 'auto' or device indices such as 0,1")
    indices: list[int] = []
    for part in parts:
        if not part.isdigit():
            raise UsageProblem(
                f"--cudagraph-devices={raw!r}: {part!r} is not a device index; give 'auto' or "
                f"non-negative integers separated by commas, such as 0,1"
            )
        index = int(part)
        if index in indices:
            raise UsageProblem(
                f"--cudagraph-devices={raw!r} names device {index} twice; list each device once "
                f"(workers beyond the list's length already share devices round-robin)"
            )
        indices.append(index)
    return tuple(indices)


def visible_device_ids(count: int, environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` entries naming the ``count`` devices this process sees.

    Without ``CUDA_VISIBLE_DEVICES`` they are ``"0" .. str(count - 1)``; with it, its
    first ``count`` entries (physical indices, ``GPU-<uuid>`` or ``MIG-<uuid>``), so
    that a worker pinned to "the run's device 1" gets the right physical GPU.
    """
    listed = (os.environ if environ is None else environ).get(VISIBLE_DEVICES_ENV)
    if listed is None:
        return [str(index) for index in range(count)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:count]


def resolve_devices(spec: str | tuple[int, ...], visible: Sequence[str], raw: str) -> list[str]:
    """The device ids the workers are pinned to, round-robin; ``[]`` where no CUDA device is seen.

    An index beyond the visible devices is a usage error; on a machine with no
    CUDA device at all there is nothing to pin, and GPU tests skip (or
    ``--cudagraph-require-gpu`` stops the run) as without the option.
    """
    if isinstance(spec, str) or not visible:  # the one string spec is AUTO (parse_devices)
        return list(visible)
    for index in spec:
        if index >= len(visible):
            raise UsageProblem(
                f"--cudagraph-devices={raw}: device {index} does not exist, this run sees "
                f"{len(visible)} CUDA device(s) (0..{len(visible) - 1}); give indices below {len(visible)} or 'auto'"
            )
    return [visible[index] for index in spec]


def worker_index(worker_id: str) -> int:
    """``3`` for xdist's worker id ``"gw3"``; 0 for the main process."""
    match = _WORKER_ID.match(worker_id or "")
    return int(match.group(1)) if match else 0


def device_for_worker(devices: Sequence[str], worker_id: str) -> str:
    """The device of worker ``worker_id``: round-robin over ``devices``.

    >>> device_for_worker(["0", "1"], "gw3")
    '1'
    """
    return devices[worker_index(worker_id) % len(devices)]


def gpu_sharing_note(devices: Sequence[str], worker_id: str, worker_count: int) -> str | None:
    """Why worker ``worker_id``'s GPU is not its alone (one sentence), or None when it is.

    >>> gpu_sharing_note(["0", "1"], "gw1", 2) is None
    True
    >>> gpu_sharing_note(["0", "1"], "gw1", 4)
    'GPU 1 is shared with 1 other pytest-xdist worker (4 workers on 2 GPUs)'
    """
    if worker_count <= 1:
        return None
    if not devices:
        return f"{worker_count} pytest-xdist workers share the GPUs (no --cudagraph-devices)"
    mine = device_for_worker(devices, worker_id)
    others = sum(1 for index in range(worker_count) if devices[index % len(devices)] == mine) - 1
    if others <= 0:
        return None
    return (
        f"GPU {mine} is shared with {others} other pytest-xdist worker{'s' if others > 1 else ''} "
        f"({worker_count} workers on {len(devices)} GPUs)"
    )


def pin_process(device_id: str, who: str) -> None:
    """Make ``device_id`` the only GPU this process can see (it becomes ``cuda:0``).

    Must run before the process's first CUDA call: CUDA reads
    ``CUDA_VISIBLE_DEVICES`` once, when it initialises.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise UsageProblem(
            f"--cudagraph-devices: CUDA was already initialised in {who} before it could be pinned to "
            f"device {device_id} (a conftest or plugin used the GPU at import time); move that GPU work "
            f"into a fixture"
        )
    os.environ[VISIBLE_DEVICES_ENV] = device_id


def group_name(module_nodeid: str) -> str:
    """The scheduling group of the GPU tests of one module."""
    return f"{GROUP_PREFIX}{module_nodeid}"


def write_worker_groups(directory: Path, worker_id: str, groups: Mapping[str, str]) -> None:
    """One worker's ``{node id: group}``, written whole, so the scheduler never reads half of it."""
    from ..records.report import write_text_atomically

    write_text_atomically(Path(directory) / f"{worker_id}.json", json.dumps(dict(groups)))


def read_groups(directory: Path) -> dict[str, str]:
    """Every worker's groups merged; workers collect the same tests, so they agree."""
    groups: dict[str, str] = {}
    for path in sorted(Path(directory).glob("*.json")):
        groups.update(json.loads(path.read_text(encoding="utf-8")))
    return groups


def module_group_scheduler(config: Any, log: Any, directory: Path) -> Any:
    """xdist's scope scheduling with the GPU tests of a module as one scope, every other test its own.

    Built only on the xdist controller, after every worker has collected (and so
    written its groups, read here when the first test is scheduled); a scope is
    handed to one worker whole.
    """
    groups: dict[str, str] = {}
    read = False

    def scope_of(nodeid: str) -> str:
        nonlocal read
        if not read:
            groups.update(read_groups(directory))
            read = True
        return groups.get(nodeid, nodeid)

    from .. import _compat  # here, not at import: the plugin loads this module in every run

    return _compat.xdist_scope_scheduling(config, log, scope_of)
