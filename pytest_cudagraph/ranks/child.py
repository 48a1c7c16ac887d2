"""One rank's process: its environment, its output, its stack on demand, the process group, the body, the teardown.

``rank_main`` is the target the launcher spawns.  What the rank reports goes to
files in the run's directory, written whole (a temporary file renamed), so the
launcher never reads half a result and never depends on a pipe that a killed
process leaves half-written:

- ``rank<N>.stage``: how far the rank got (results.STAGE_*), rewritten at each step;
- ``rank<N>.stacks``: faulthandler's dump of every thread, written when the launcher
  sends SIGUSR1 (in C, so it works while the rank is blocked inside NCCL or Gloo);
- ``rank<N>.log``: the rank's stdout and stderr;
- ``rank<N>.result``: the pickled RankResult, once the body returned or raised.

A rank whose body raised reports and then waits to be stopped: exiting would
tear its connections down under the other ranks, whose stacks the launcher
wants to read where they were, waiting on it.

The rank never outlives its launcher.  It makes itself the leader of a process
group of its own, which the processes its body starts join unless they leave
it, so the launcher stops the whole group, not only the rank.  And it starts a
keeper in that group: a tiny interpreter that blocks reading a pipe whose only
writer is the launcher.  The read returns end-of-file when the launcher is gone,
however it went (SIGKILL included), and the keeper then SIGKILLs the group.
Being a process of its own, the keeper acts whatever the rank is doing: stuck
in Python, holding the GIL in C, blocked in a collective.  Not
``PR_SET_PDEATHSIG``: it fires when the *thread* that spawned the rank ends
(not the launcher process), kills only the rank (not what its body started),
is set only after the launcher may already have died, and is Linux-only.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import pickle
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import results as R
from .stacks import default_library_dirs, where_raised

ENTRY = "rank_main"
# the harness's own functions, never "the user's frame" of a stack
HARNESS_FUNCTIONS = ("rank_main", "_run", "_run_body")
DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)
# The keeper: ``python -I -S -c KEEPER_SOURCE <fd> <group>``.  It blocks reading the launcher's
# pipe (nobody writes to it), and at end-of-file, when the launcher is gone, SIGKILLs the rank's
# process group, itself included.  A read that fails otherwise ends it without killing anything:
# a healthy run is never stopped for the keeper's own trouble.  It kills only a group it is in.
KEEPER_SOURCE = """# pytest-cudagraph: stops this rank's process group when its launcher is gone
import os, signal, sys
fd, group = int(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    while os.read(fd, 4096):
        pass
except OSError:
    sys.exit(0)
if os.getpgrp() == group:
    os.killpg(group, signal.SIGKILL)
"""


@dataclass(frozen=True)
class RankSpec:
    """Everything a rank needs, sent pickled to the spawned process."""

    rank: int
    world_size: int
    backend: str
    port: int
    timeout_s: float
    directory: str
    body_module: str
    body_qualname: str
    device_index: int | None
    # the launcher's process id, read in the launcher (read in the rank, it could already be init's)
    launcher_pid: int = 0
    env: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    sizes: tuple[int, ...] | None = None
    rtol: float | None = None
    atol: float | None = None
    # the handle's captures align the ranks' collectives before the first replay (ranks/alignment.py)
    align_collectives: bool = True

    def path(self, kind: str) -> Path:
        return Path(self.directory) / f"rank{self.rank}.{kind}"


def write_whole(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


class _Reporter:
    def __init__(self, spec: RankSpec):
        self.spec = spec
        self.stage = R.STAGE_STARTING
        self.started = time.perf_counter()

    def at(self, stage: str) -> None:
        self.stage = stage
        write_whole(self.spec.path("stage"), stage.encode())

    def result(self, outcome: str, **fields: Any) -> None:
        """Write the rank's result: ``(RankResult, the value's pickle or None, what the value is)``.

        The value travels as a pickle of its own, so that a value the launcher cannot
        rebuild (its class is not importable there, its ``__reduce__`` fails there)
        costs the value, with the reason, and never the rank's result.
        """
        value = fields.pop("value", None)
        packed = None
        value_error = None
        if value is not None:
            try:
                packed = pickle.dumps(value)
            except Exception as exc:  # a value that cannot travel: the run still passes, without it
                value_error = (
                    f"rank {self.spec.rank}'s body returned {R.value_kind(value)}, which could not be sent to the "
                    f"launcher ({R.exception_line(exc)})"
                )
        result = R.RankResult(
            rank=self.spec.rank,
            device=_device_name(self.spec),
            outcome=outcome,
            stage=self.stage,
            duration_s=time.perf_counter() - self.started,
            placement=_placement(self.spec),
            pid=os.getpid(),
            value_error=value_error,
            **fields,
        )
        kind = R.value_kind(value) if packed is not None else None
        write_whole(self.spec.path("result"), pickle.dumps((result, packed, kind)))


def _device_name(spec: RankSpec) -> str:
    return "cpu" if spec.device_index is None else f"cuda:{spec.device_index}"


def _placement(spec: RankSpec) -> dict[str, str]:
    placement = {"device": _device_name(spec)}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        placement["cuda_visible_devices"] = visible
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        placement["worker"] = worker
    return placement


def _redirect_output(spec: RankSpec) -> Any:
    """The rank's stdout and stderr into its log (the launcher prints them, per rank, when the run ends)."""
    sys.stdout.flush()
    sys.stderr.flush()
    log = open(spec.path("log"), "ab", buffering=0)  # noqa: SIM115 - open for the process's life
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    return log


def _error_of(exc: BaseException, library_dirs: list[str], stage: str) -> R.RankError:
    """The rank's error; raised outside the body, in the harness or torch, its ``where`` names the harness's stage."""
    where = where_raised(exc, library_dirs, HARNESS_FUNCTIONS)
    if where is None and stage != R.STAGE_BODY:
        where = f"the rank harness while {stage}"
    return R.RankError(
        type=type(exc).__name__,
        message=str(exc).strip(),
        where=where,
        traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


def _wait_to_be_stopped(limit_s: float, spec: RankSpec, launcher: Any) -> None:
    """After reporting an error: wait for the launcher to stop this rank (bounded; gone as soon as the launcher is)."""
    deadline = time.monotonic() + limit_s
    while (left := deadline - time.monotonic()) > 0 and _launcher_alive(spec):
        if launcher is None:
            time.sleep(min(0.1, left))
            continue
        try:
            if launcher.poll(min(0.5, left)):  # readable: end-of-file, the launcher is gone
                break
        except (OSError, EOFError):
            break
    os._exit(1)


def _launcher_alive(spec: RankSpec) -> bool:
    return not spec.launcher_pid or os.getppid() == spec.launcher_pid


def own_process_group() -> int | None:
    """Make this process the leader of a process group of its own; the group's id, or None where that failed."""
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):
        return None
    return os.getpid() if os.getpgrp() == os.getpid() else None


def start_keeper(launcher: Any, group: int | None) -> subprocess.Popen | None:
    """Start the keeper (``KEEPER_SOURCE``) in this rank's process group, watching the launcher's pipe.

    None, with a line in the rank's log, where there is no pipe, no group of the
    rank's own (the keeper would kill the launcher's group), or no process to be had.
    """
    if launcher is None or group is None:
        if launcher is not None:
            print("this rank could not lead a process group of its own: nothing stops it if the launcher dies")
        return None
    try:
        fd = launcher.fileno()
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", KEEPER_SOURCE, str(fd), str(group)],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError) as exc:
        print(f"this rank could not start its keeper ({exc}): nothing stops it if the launcher dies")
        return None


def rank_main(spec: RankSpec, args: tuple, launcher: Any = None) -> None:
    """The spawned process: set up, run ``body(rank_handle, *args)``, report, tear down.

    ``launcher`` is the read end of the launcher's pipe (a multiprocessing Connection).
    """
    # first of all, so that everything this rank starts is in its group
    group = own_process_group()
    # The user's own settings win (the launcher merged them); set before torch reads any.
    os.environ.update(spec.env)
    log = _redirect_output(spec)
    _keeper = start_keeper(launcher, group)  # held for the rank's life
    faulthandler.enable(file=log, all_threads=True)  # a crash (SIGSEGV) leaves its stack in the log
    stacks = open(spec.path("stacks"), "wb", buffering=0)  # noqa: SIM115 - faulthandler writes here on SIGUSR1
    if DUMP_SIGNAL is not None:
        faulthandler.register(DUMP_SIGNAL, file=stacks, all_threads=True)
    reporter = _Reporter(spec)
    reporter.at(R.STAGE_STARTING)
    library_dirs = default_library_dirs()
    try:
        _run(spec, args, reporter)
    except BaseException as exc:
        reporter.result(
            "failed",
            error=_error_of(exc, library_dirs, reporter.stage),
            failed_at=time.time(),
            graph_sets=getattr(exc, "graph_sets", ()),
        )
        sys.stdout.flush()
        sys.stderr.flush()
        _wait_to_be_stopped(spec.timeout_s + 60, spec, launcher)


def _run(spec: RankSpec, args: tuple, reporter: _Reporter) -> None:
    reporter.at(R.STAGE_IMPORTING)
    body = _import_body(spec)
    reporter.at(R.STAGE_INITIALISING)
    import random

    import torch
    import torch.distributed as dist

    from .. import _compat
    from .handle import Rank

    device = None
    if spec.device_index is not None:
        device = torch.device("cuda", spec.device_index)
        torch.cuda.set_device(device)
    store = _compat.rendezvous_store_client(spec.port, spec.timeout_s)
    # the process group's own timeout is later than the launcher's watchdog, so that the
    # watchdog, which can say where every rank was, is the one that ends a stuck run
    _compat.init_rank_process_group(
        spec.backend,
        store=store,
        rank=spec.rank,
        world_size=spec.world_size,
        timeout_s=spec.timeout_s + 30,
        device=device,
    )
    # One eager collective: every rank is there, and NCCL's communicator exists before any
    # capture (creating it inside a capture fails).
    probe = torch.ones(1, device=device if device is not None else "cpu")
    dist.all_reduce(probe)
    random.seed(spec.seed)
    torch.manual_seed(spec.seed)  # every rank alike: make_inputs gives the same tensors on each
    handle = Rank(
        spec.rank,
        spec.world_size,
        spec.backend,
        device if device is not None else torch.device("cpu"),
        sizes=spec.sizes,
        rtol=spec.rtol,
        atol=spec.atol,
        store=store,
        align_collectives=spec.align_collectives,
    )
    reporter.at(R.STAGE_BODY)
    try:
        value = _run_body(body, handle, args)
    except BaseException as exc:
        exc.graph_sets = _graph_results_or_none(handle)  # type: ignore[attr-defined]
        raise
    # Graphs that captured NCCL work must be gone before destroy_process_group, which
    # otherwise hangs (docs/tensor_parallel.md, "Teardown"): reset them all, then report.
    handle.release()
    if device is not None:
        torch.cuda.synchronize(device)
    reporter.result(
        "passed",
        value=value,
        graph_sets=handle.graph_results(),
        agreement_checks=handle.agreement_checks,
        collective_alignment=handle.alignment_result(),
    )
    reporter.at(R.STAGE_TEARDOWN)
    # A barrier over the store, not a collective: a collective here could pair up with one that
    # another rank issued alone in its body and hide that mismatch.
    store.set(f"cudagraph_ranks/finished/{spec.rank}", "1")
    store.wait([f"cudagraph_ranks/finished/{r}" for r in range(spec.world_size)])
    reporter.at(R.STAGE_DESTROYING)
    # a body may end with the tutorials' cleanup() (destroy_process_group()): there is nothing left to destroy
    if _compat.process_group_initialized():
        dist.destroy_process_group()
    reporter.at(R.STAGE_DONE)


def _run_body(body: Any, handle: Any, args: tuple) -> Any:
    return body(handle, *args)


def _graph_results_or_none(handle: Any) -> tuple:
    try:
        return handle.graph_results()
    except Exception:  # a failed capture can leave the device unusable: report without its figures
        return ()


def _import_body(spec: RankSpec) -> Any:
    try:
        target: Any = importlib.import_module(spec.body_module)
        for part in spec.body_qualname.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise ImportError(
            f"rank {spec.rank} could not import the body {spec.body_module}.{spec.body_qualname} "
            f"({type(exc).__name__}: {exc}); define it at module level in a module the rank processes can import "
            f"(they get the parent's sys.path)"
        ) from None
    return target
