"""Run a body on ``world_size`` ranks, one process each, and never wait forever for them.

The launcher (this process) holds the rendezvous store, spawns the ranks with
torch.multiprocessing's spawn context, and watches them:

- a rank whose body raises reports its error (``ranks/child.py``) and waits; the
  launcher then reads where every other rank was (SIGUSR1: a faulthandler dump),
  stops them all (SIGTERM, then SIGKILL after a grace period) and fails with the
  first failing rank's own error;
- a rank that dies without reporting (a segfault, ``os._exit``) is a failure too;
- when ``timeout`` seconds have passed since the start, whatever is still running
  is dumped and stopped, and the message says where each rank was waiting.

Stopping a rank stops its process group (each rank leads one: ``ranks/child.py``),
so what its body started goes too, and once every rank is gone the groups get
SIGKILL.  The launcher also holds the only write end of a pipe each rank's
keeper reads: when the launcher dies, SIGKILL included, the pipe reads
end-of-file and the keepers SIGKILL their groups, so no rank outlives it.

Why spawn and not fork: a forked child inherits the parent's CUDA context and
threads (NCCL, Inductor's compile workers), which CUDA does not support; spawn
starts a fresh interpreter that imports the body by name, so the body must be a
module-level function of an importable module (the children get the parent's
``sys.path``).  Why files and not a queue: a rank killed while writing to a pipe
leaves it half-written and can block the reader; a file renamed into place is
either there whole or not at all.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import numbers
import os
import pickle
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import MisuseError
from . import results as R
from .child import ENTRY, HARNESS_FUNCTIONS, RankSpec, rank_main
from .stacks import default_library_dirs, describe_waiting, main_thread_frames

BACKENDS = ("nccl", "gloo")
DEFAULT_TIMEOUT_S = 120.0
# Set in every rank's environment unless the user set them: NVLink multicast (NVLS) and
# symmetric-memory multicast stay off (the H200 machines this was proven on need that),
# NCCL tears a rank down on its own errors instead of leaving it blocked (3 = SkipCleanUp,
# torch's default since 2.2, made explicit), and one OpenMP thread per rank, as torchrun sets,
# so that N ranks do not oversubscribe the CPU.
RANK_ENV_DEFAULTS: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    "OMP_NUM_THREADS": "1",
}
POLL_S = 0.05
# how long a stopped rank gets to write its stack dump, then to exit on SIGTERM, before SIGKILL
DUMP_WAIT_S = 2.0
TERMINATE_GRACE_S = 3.0
OUTPUT_TAIL_CHARS = 8000
SETTLE_S = 0.5
_STARTED = (R.STAGE_BODY, R.STAGE_TEARDOWN, R.STAGE_DESTROYING, R.STAGE_DONE)


# ----------------------------------------------------------------------------
# arguments
# ----------------------------------------------------------------------------


# seconds the ranks may take to start (spawn, import torch and the test module, join the process group)
STARTUP_TIMEOUT_S = 120.0


def body_reference(body: Callable[..., Any]) -> tuple[str, str]:
    """``(module, qualname)`` of a body the rank processes can import; MisuseError otherwise."""
    __tracebackhide__ = True
    if not callable(body):
        raise MisuseError(f"the body must be a function taking the rank handle first, not a {type(body).__name__}")
    module = getattr(body, "__module__", None)
    qualname = getattr(body, "__qualname__", None)
    shown = getattr(body, "__name__", repr(body))
    if not module or not qualname or "<lambda>" in qualname or "<locals>" in qualname:
        raise MisuseError(
            f"the body {shown!r} is a lambda or a function defined inside another function, which the rank "
            f"processes cannot import; define it with def at module level (the rank processes import it by name)"
        )
    try:
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception:
        target = None
    if target is not body:
        raise MisuseError(
            f"the body {module}.{qualname} cannot be imported under that name, so the rank processes cannot find "
            f"it; define it at module level in an importable module (a test module or a helper module on sys.path)"
        )
    return module, qualname


def _check_arguments(world_size: Any, timeout: Any, backend: Any) -> None:
    __tracebackhide__ = True
    if isinstance(world_size, bool) or not isinstance(world_size, numbers.Integral) or world_size < 1:
        raise MisuseError(f"world_size={world_size!r} is not a positive integer; give the number of ranks, such as 2")
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not 0 < float(timeout) < math.inf:
        raise MisuseError(
            f"timeout={timeout!r} is not a positive number of seconds; give how long the ranks may run, such as 60"
        )
    if backend not in BACKENDS:
        raise MisuseError(
            f"backend={backend!r} is not supported; use backend='nccl' (GPUs) or backend='gloo' (CPU processes)"
        )


def _check_picklable(args: tuple) -> None:
    __tracebackhide__ = True
    from multiprocessing.reduction import ForkingPickler

    try:
        ForkingPickler.dumps(args)
    except Exception as exc:
        raise MisuseError(
            f"the body's arguments cannot be sent to the rank processes ({type(exc).__name__}: {exc}); pass "
            f"tensors, plain values or module-level objects, and build anything else inside the body"
        ) from None


def gpu_shortfall(world_size: int, visible: int, pinned_device: str | None = None) -> str | None:
    """Why ``world_size`` NCCL ranks cannot run here (the skip reason), or None when there are enough GPUs."""
    if visible >= world_size:
        return None
    if pinned_device is not None:
        return (
            f"needs {world_size} GPUs, sees {visible}: --cudagraph-devices pinned this process to GPU "
            f"{pinned_device}; run the multi-rank tests in a pytest run without --cudagraph-devices "
            f"(and without -n), such as pytest -m 'not slow' -k ranks --cudagraph"
        )
    return f"needs {world_size} GPUs, sees {visible}"


def _devices(backend: str, world_size: int, devices: Sequence[int] | None) -> list[int | None]:
    __tracebackhide__ = True
    if backend == "gloo":
        if devices is not None:
            raise MisuseError("devices= places NCCL ranks on GPUs; leave it out with backend='gloo' (CPU ranks)")
        return [None] * world_size
    from .. import _compat

    if not _compat.backend_available("nccl") or not _compat.cuda_available():
        raise MisuseError(
            "backend='nccl' needs CUDA devices and a torch built with NCCL, and this one has neither; "
            "use backend='gloo' for CPU ranks, or run on a GPU machine"
        )
    visible = _compat.cuda_device_count()
    chosen: list[int | None] = list(range(world_size)) if devices is None else list(devices)
    if len(chosen) != world_size or len(set(chosen)) != world_size:
        raise MisuseError(f"devices={devices!r} must name {world_size} different GPUs, one per rank")
    if any(not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < visible for d in chosen):
        shortfall = gpu_shortfall(world_size, visible)
        raise MisuseError(
            shortfall + "; run on a machine with enough GPUs"
            if shortfall
            else f"devices={devices!r} names a GPU this process does not see; give indices below {visible}"
        )
    return chosen


def rank_environment(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the launcher adds to every rank's environment: RANK_ENV_DEFAULTS the user left unset, then ``overrides``."""
    env = {key: value for key, value in RANK_ENV_DEFAULTS.items() if key not in os.environ}
    env.update(overrides or {})
    return env


# ----------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------


def run_ranks(
    body: Callable[..., Any],
    *args: Any,
    world_size: int,
    timeout: float = DEFAULT_TIMEOUT_S,
    backend: str = "nccl",
    devices: Sequence[int] | None = None,
    sizes: Sequence[int] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    env: Mapping[str, str] | None = None,
    align_collectives: bool = True,
) -> R.RanksResult:
    """Run ``body(rank, *args)`` on ``world_size`` processes with torch.distributed initialised (plain API).

    Rank ``r`` runs on GPU ``devices[r]`` (default ``r``) with NCCL, its process group
    bound to that GPU, or on the CPU with ``backend="gloo"``.  ``rank`` is a
    ``ranks.handle.Rank``: ``.rank``, ``.world_size``, ``.group``, ``.device``,
    ``.capture(fn, make_inputs, sizes=None, ...)`` (``sizes``/``rtol``/``atol`` here
    are its defaults) and ``.assert_ranks_agree(tensor)``.  Every rank starts from
    ``seed``.  Returns the RanksResult (``.values``: what each rank's body returned).

    Invariant: the call returns, or raises, within ``max(timeout, STARTUP_TIMEOUT_S)``
    for the start-up (spawn, imports, the process group: importing torch alone takes
    tens of seconds on a loaded machine) plus ``timeout`` from the moment every rank
    reached its body (the bodies and the teardown), plus a few seconds to stop them.

    Failure (``RanksFailed``, an InvariantViolation): the first failing rank's own
    exception type and message (a CaptureError names the op and the line, as on
    one GPU), then where each other rank was when the harness stopped it; or,
    when time ran out, where each rank was waiting.  ``.result`` holds every rank's
    result.  Bad arguments (a lambda as body, world_size=0, a backend without
    devices) raise MisuseError before anything is spawned.

    .. warning::
        **The body is imported by name.** The ranks are fresh interpreters (spawn),
        so ``body`` must be a module-level function of an importable module, and
        ``args`` must pickle (tensors, plain values, module-level objects).

    Example::

        def body(rank, n):
            t = torch.full((n,), float(rank.rank + 1), device=rank.device)
            dist.all_reduce(t)
            rank.assert_ranks_agree(t)

        run_ranks(body, 4, world_size=2, backend="gloo", timeout=30)
    """
    __tracebackhide__ = True
    _check_arguments(world_size, timeout, backend)
    module, qualname = body_reference(body)
    _check_picklable(args)
    placed = _placed(backend, int(world_size), devices)
    # every rank's spec but the two parts known only once the run starts: the store's port and the directory
    specs_for = functools.partial(
        _rank_specs, placed, backend, timeout_s=float(timeout), module=module, qualname=qualname, env=env,
        seed=seed, sizes=sizes, rtol=rtol, atol=atol, align_collectives=align_collectives,
    )  # fmt: skip
    result = _spawn_and_watch(args, specs_for, float(timeout))
    if not result.passed:
        raise R.RanksFailed(result)
    return result


def _spawn_and_watch(
    args: tuple[Any, ...], specs_for: Callable[..., list[RankSpec]], timeout_s: float
) -> R.RanksResult:
    """Spawn one process per rank (``specs_for(port=, directory=)``) and watch them to the end: the result, passed or not."""
    __tracebackhide__ = True
    import torch.multiprocessing as torch_mp

    from .. import _compat

    context = torch_mp.get_context("spawn")
    store, port = _compat.rendezvous_store_server()
    watched, watching = _keeper_pipe(context)
    with tempfile.TemporaryDirectory(prefix="cudagraph-ranks-") as directory:
        specs = specs_for(port=port, directory=directory)
        watch = _Watch(specs, timeout_s)
        try:
            _spawn(context, watch, args, watched)
            watched.close()
            result = watch.run()
        finally:
            try:
                watch.stop_all()
            finally:
                watched.close()
                watching.close()  # a keeper still there (none should be) now stops its group
                del store
        watch.echo_output()
    return result


def _placed(backend: str, world_size: int, devices: Sequence[int] | None) -> list[int | None]:
    """The device of each rank (None for gloo), once the backend is known to be there."""
    __tracebackhide__ = True
    from .. import _compat

    if backend == "gloo" and not _compat.backend_available(backend):
        raise MisuseError(
            f"this torch has no torch.distributed {backend} backend; use a build with it "
            f"(the Linux wheels have gloo, and NCCL with CUDA)"
        )
    return _devices(backend, world_size, devices)


def _rank_specs(
    placed: list[int | None],
    backend: str,
    port: int,
    timeout_s: float,
    directory: str,
    module: str,
    qualname: str,
    env: Mapping[str, str] | None,
    seed: int,
    sizes: Sequence[int] | None,
    rtol: float | None,
    atol: float | None,
    align_collectives: bool = True,
) -> list[RankSpec]:
    """One RankSpec per rank, rank ``r`` on ``placed[r]``."""
    return [
        RankSpec(
            rank=rank,
            world_size=len(placed),
            backend=backend,
            port=port,
            timeout_s=timeout_s,
            directory=directory,
            body_module=module,
            body_qualname=qualname,
            device_index=placed[rank],
            launcher_pid=os.getpid(),
            env=rank_environment(env),
            seed=seed,
            sizes=tuple(sizes) if sizes else None,
            rtol=rtol,
            atol=atol,
            align_collectives=align_collectives,
        )
        for rank in range(len(placed))
    ]


def _keeper_pipe(context: Any) -> tuple[Any, Any]:
    """``(watched, watching)``: the read end every rank's keeper gets, and the write end only this process holds.

    The keepers read end-of-file when this process is gone, however it went (the ranks
    never get the write end: spawn passes a child only the descriptors it names).
    """
    return context.Pipe(duplex=False)


def _spawn(context: Any, watch: _Watch, args: tuple[Any, ...], watched: Any) -> None:
    """Start one process per spec of ``watch``, each added to ``watch.processes`` once started."""
    for spec in watch.specs:
        process = context.Process(target=rank_main, args=(spec, args, watched), name=f"cudagraph-rank-{spec.rank}")
        process.start()
        watch.processes.append(process)


class _Watch:
    """The launcher's watchdog over one run's processes."""

    def __init__(self, specs: list[RankSpec], timeout_s: float):
        self.specs = specs
        self.timeout_s = timeout_s
        self.processes: list[Any] = []
        self.start = time.monotonic()
        # start-up has its own bound: ``timeout`` is how long ranks may wait on each other
        self.startup_s = max(timeout_s, STARTUP_TIMEOUT_S)
        self.deadline = self.start + self.startup_s
        self.reported: dict[int, R.RankResult] = {}
        self.crashed: dict[int, float] = {}
        self.waiting_at: dict[int, str | None] = {}
        self.alive_at_end: set[int] = set()
        self.bodies_started = False
        self.stopped = False
        self.library_dirs = default_library_dirs()

    # -- reading what the ranks wrote ---------------------------------------------
    def _read_result(self, rank: int) -> R.RankResult | None:
        if rank in self.reported:
            return self.reported[rank]
        path = self.specs[rank].path("result")
        if not path.exists():
            return None
        try:
            # renamed into place, so whole; plain data the harness defined, so it loads here
            result, packed, kind = pickle.loads(path.read_bytes())
        except Exception:
            return None
        if packed is not None:
            result = self._rebuild_value(result, packed, kind)
        self.reported[rank] = result
        return result

    @staticmethod
    def _rebuild_value(result: R.RankResult, packed: bytes, kind: str | None) -> R.RankResult:
        """The rank's result with the value its body returned, or with why that value cannot be rebuilt here."""
        try:
            value = pickle.loads(packed)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the user's own __reduce__ runs here: whatever it raises, the rank passed
            return R.with_outcome(
                result,
                value_error=(
                    f"rank {result.rank}'s body returned {kind or 'a value'}, which the rank pickled but the "
                    f"launcher could not rebuild ({R.exception_line(exc)})"
                ),
            )
        return R.with_outcome(result, value=value)

    def _stage(self, rank: int) -> str | None:
        try:
            return self.specs[rank].path("stage").read_text() or None
        except OSError:
            return None

    def _output(self, rank: int) -> str:
        try:
            text = self.specs[rank].path("log").read_text(errors="replace")
        except OSError:
            return ""
        return text[-OUTPUT_TAIL_CHARS:]

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> R.RanksResult:
        """Poll until every rank passed and exited, a rank failed, or the deadline passed; then build the result."""
        while True:
            failed = False
            for rank, process in enumerate(self.processes):
                result = self._read_result(rank)
                if result is not None and result.outcome == "failed":
                    failed = True
                elif not process.is_alive() and rank not in self.crashed:
                    # read again: the result may have been written just before the process exited
                    if self._read_result(rank) is None or process.exitcode != 0:
                        self.crashed[rank] = time.time()
                        failed = True
            if failed:
                # A rank that dies takes its connections down, and its peers fail within
                # milliseconds with "connection reset": give a death the moment to show, so that
                # the rank that died, not its echo, is named first.
                time.sleep(SETTLE_S)
                self._note_deaths()
                return self._finish(timed_out=False)
            self._extend_deadline_once_started()
            if all(not process.is_alive() for process in self.processes):
                return self._finish(timed_out=False)
            if time.monotonic() >= self.deadline:
                return self._finish(timed_out=True)
            time.sleep(POLL_S)

    def _note_deaths(self) -> None:
        first_error = min(
            (r.failed_at or math.inf for r in self.reported.values() if r.outcome == "failed"), default=None
        )
        for rank, process in enumerate(self.processes):
            if rank in self.crashed or process.is_alive():
                continue
            if self._read_result(rank) is None or process.exitcode != 0:
                # died about when the first error was reported: the death is the cause, the error its echo
                self.crashed[rank] = min(time.time(), (first_error or math.inf) - 1e-3)

    def _extend_deadline_once_started(self) -> None:
        """The body's time starts when every rank has reached its body: start-up is bounded on its own."""
        if self.bodies_started:
            return
        stages = [self._stage(rank) for rank in range(len(self.specs))]
        if all(stage in _STARTED for stage in stages):
            self.bodies_started = True
            self.deadline = time.monotonic() + self.timeout_s

    def _finish(self, timed_out: bool) -> R.RanksResult:
        self._dump_stacks()
        self.alive_at_end = {rank for rank, process in enumerate(self.processes) if process.is_alive()}
        self.stop_all()
        per_rank = [self._rank_result(rank, timed_out) for rank in range(len(self.specs))]
        failures = [rank for rank in per_rank if rank.outcome in ("failed", "crashed")]
        first = min(failures, key=lambda r: r.failed_at or math.inf).rank if failures else None
        if first is not None:
            outcome = "failed"
        elif any(rank.outcome != "passed" for rank in per_rank):
            outcome = "timeout" if timed_out else "failed"
        else:
            outcome = "passed"
        message = None
        if outcome != "passed":
            bound = self.timeout_s if self.bodies_started else self.startup_s
            message = R.failure_message(per_rank, len(self.specs), bound, first, timed_out)
        return R.RanksResult(
            world_size=len(self.specs),
            backend=self.specs[0].backend,
            timeout_s=self.timeout_s,
            outcome=outcome,
            per_rank=tuple(per_rank),
            duration_s=time.monotonic() - self.start,
            first_failure=first,
            message=message,
        )

    def _rank_result(self, rank: int, timed_out: bool) -> R.RankResult:
        """The rank's result, with the process id the harness started it as (to check it is gone)."""
        result = self._rank_outcome(rank, timed_out)
        process = self.processes[rank] if rank < len(self.processes) else None
        pid = getattr(process, "pid", None)
        return R.with_outcome(result, pid=pid) if pid is not None and result.pid is None else result

    def _rank_outcome(self, rank: int, timed_out: bool) -> R.RankResult:
        spec = self.specs[rank]
        process = self.processes[rank] if rank < len(self.processes) else None
        exitcode = process.exitcode if process is not None else None
        stage = self._stage(rank)
        output = self._output(rank)
        reported = self._read_result(rank)
        device = "cpu" if spec.device_index is None else f"cuda:{spec.device_index}"
        if reported is not None and reported.outcome == "failed":
            return R.with_outcome(reported, exitcode=exitcode, output=output)
        if rank not in self.alive_at_end:
            if reported is not None and exitcode == 0:
                return R.with_outcome(reported, stage=stage, exitcode=exitcode, output=output)
            # died without reporting, or reported and then failed (or was killed) in its teardown
            return R.RankResult(
                rank=rank,
                device=device,
                outcome="crashed",
                stage=stage,
                exitcode=exitcode,
                failed_at=self.crashed.get(rank, time.time()),
                output=output,
                graph_sets=reported.graph_sets if reported is not None else (),
                placement=reported.placement if reported is not None else {},
            )
        # still running when the run ended: the deadline passed, or another rank failed
        outcome = "timeout" if timed_out else "aborted"
        base = reported or R.RankResult(rank=rank, device=device, outcome=outcome)
        return R.with_outcome(
            base, outcome=outcome, stage=stage, waiting_at=self.waiting_at.get(rank), exitcode=exitcode, output=output
        )

    # -- stopping ----------------------------------------------------------------------
    def _dump_stacks(self) -> None:
        """Ask every live rank that has not reported an error for its stack; read the dumps."""
        if not hasattr(signal, "SIGUSR1"):
            return
        asked = []
        for rank, process in enumerate(self.processes):
            reported = self.reported.get(rank)
            if not process.is_alive() or (reported is not None and reported.outcome == "failed"):
                continue
            if self._stage(rank) is None:
                continue  # its faulthandler is not registered yet: SIGUSR1 would simply kill it
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGUSR1)
                asked.append(rank)
        until = time.monotonic() + DUMP_WAIT_S
        pending = set(asked)
        while pending and time.monotonic() < until:
            for rank in list(pending):
                path = self.specs[rank].path("stacks")
                if path.exists() and path.stat().st_size > 0:
                    time.sleep(POLL_S)  # faulthandler writes the dump in a few writes: let it finish
                    pending.discard(rank)
            time.sleep(POLL_S)
        for rank in asked:
            text = self.specs[rank].path("stacks").read_text(errors="replace")
            frames = main_thread_frames(text, ENTRY)
            self.waiting_at[rank] = describe_waiting(frames, self.library_dirs, HARNESS_FUNCTIONS)

    def stop_all(self) -> None:
        """Stop every rank's process group: SIGTERM, then SIGKILL after the grace period; never waits unbounded.

        The group is the rank, what its body started (unless it left the group) and
        its keeper, so the groups of ranks that already exited are signalled too.
        The grace period ends early once no rank and no member of their groups is
        running (zombies aside).
        """
        if not self.processes or self.stopped:
            return  # stopped once already: signalling the groups again could reach a reused process id
        for process in self.processes:
            _signal_rank(process, signal.SIGTERM)
        until = time.monotonic() + TERMINATE_GRACE_S
        groups = {process.pid for process in self.processes if process.pid is not None}
        while time.monotonic() < until:
            if not any(process.is_alive() for process in self.processes) and not running_in_groups(groups):
                break
            time.sleep(POLL_S)
        for process in self.processes:
            _signal_rank(process, getattr(signal, "SIGKILL", signal.SIGTERM))
        for process in self.processes:
            if process.is_alive():
                process.join(5.0)
        self.stopped = True

    def echo_output(self) -> None:
        """Each rank's stdout and stderr, prefixed with its rank, on this process's stderr (pytest captures it).

        Then, per rank, why the value its body returned is missing, where it is.
        """
        for rank in range(len(self.specs)):
            text = self._output(rank)
            reported = self.reported.get(rank)
            if reported is not None and reported.value_error:
                text += ("" if not text or text.endswith("\n") else "\n") + reported.value_error + "\n"
            if text.strip():
                prefix = f"[rank {rank}] "
                sys.stderr.write("".join(prefix + line for line in text.splitlines(keepends=True)))
                if not text.endswith("\n"):
                    sys.stderr.write("\n")


def _signal_rank(process: Any, signum: int) -> None:
    """Send ``signum`` to the rank's process group; to the rank alone where it leads none (not yet, or it failed)."""
    pid = process.pid
    if pid is None:
        return
    if hasattr(os, "killpg") and pid != os.getpgrp():
        # While the rank's keeper lives the group id stays taken, so it cannot name another group.
        try:
            os.killpg(pid, signum)
            return
        except OSError:
            pass  # no such group: the rank has not made it yet, or every member is gone
    if process.exitcode is None:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def running_in_groups(groups: set[int]) -> set[int]:
    """The processes of these process groups that are still running (not zombies), from /proc; empty without it."""
    found: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) in groups:
            found.add(int(name))
    return found
