"""The ``cudagraph_ranks`` fixture's handle: a test body run on ``world_size`` ranks, one process per GPU, never hanging.

A thin handle on ``ranks.run_ranks``: it takes ``world_size`` and ``timeout`` from
the test's ``@pytest.mark.cudagraph(world_size=N, timeout=S)``, the capture sizes
and tolerances from the marker and the ini options, skips where the GPUs are
missing, and records every run in the test's report (section ``ranks``).

Scheduling: NCCL ranks need ``world_size`` GPUs that this process can see.  Under
``--cudagraph-devices`` every process (each xdist worker, or the run itself) is
pinned to one GPU, so a multi-rank test there skips, saying so; run the
multi-rank tests in a pytest run without ``--cudagraph-devices``.  Without it,
xdist workers see every GPU and a multi-rank test uses GPUs ``0..N-1``, which
other workers may be using too (its pool figures then include nothing of theirs:
pools are measured per process, but memory can run short).

Importing this module imports no torch.  The fixture itself is ``fixtures``', which
imports this module when a test asks for it and builds the handle from the test's
marker and the run's options: pytest registers the fixtures in every run, and this
module's dataclass is built only for a test that uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from .markers import DEFAULT_RANK_TIMEOUT_S

if TYPE_CHECKING:
    from ..ranks import RankSections, RanksResult
    from ..records.record import TestRecord


@dataclass(eq=False)
class RanksFixture:
    """The ``cudagraph_ranks`` fixture: ``.run(body, *args)`` runs ``body(rank, *args)`` on every rank.

    ``world_size`` and ``timeout`` default to the test's ``cudagraph`` marker
    (``world_size=1`` and 120 s without one); ``backend="gloo"`` runs CPU ranks,
    which need neither ``--cudagraph`` nor a GPU.  A failing rank fails the test
    with its own message (``ranks.RanksFailed``); every run goes to the report.
    """

    record: TestRecord | None = None
    world_size: int | None = None
    timeout: float | None = None
    sizes: Sequence[int] | None = None
    rtol: float | None = None
    atol: float | None = None
    enabled: bool = False
    # the marker's align_collectives: the ranks compare their captured collectives before the first replay
    align_collectives: bool = True
    pinned_device: str | None = None
    results: list[RanksResult] = field(default_factory=list)
    _sections: RankSections | None = field(default=None, repr=False)

    def run(
        self,
        body: Callable[..., Any],
        *args: Any,
        world_size: int | None = None,
        backend: str = "nccl",
        timeout: float | None = None,
        devices: Sequence[int] | None = None,
        seed: int = 0,
    ) -> RanksResult:
        """``run_ranks(body, *args, ...)`` with the test's defaults; skips where NCCL ranks cannot run.

        ``body`` must be a module-level function (the rank processes import it by
        name) taking the rank handle first: ``.rank``, ``.world_size``, ``.group``,
        ``.device``, ``.capture(fn, make_inputs, sizes=None, ...)``,
        ``.assert_ranks_agree(tensor)``.
        """
        __tracebackhide__ = True
        size = world_size if world_size is not None else (self.world_size or 1)
        if backend == "nccl":
            self._require_gpus(size)
        from ..ranks import RanksFailed, run_ranks

        try:
            result = run_ranks(
                body,
                *args,
                world_size=size,
                timeout=timeout if timeout is not None else (self.timeout or DEFAULT_RANK_TIMEOUT_S),
                backend=backend,
                devices=devices,
                sizes=self.sizes,
                rtol=self.rtol,
                atol=self.atol,
                seed=seed,
                align_collectives=self.align_collectives,
            )
        except RanksFailed as exc:
            self._add(exc.result)
            raise
        self._add(result)
        return result

    def _require_gpus(self, world_size: Any) -> None:
        """Skip, with the reason, where NCCL ranks cannot run: no --cudagraph, no CUDA, too few GPUs seen."""
        __tracebackhide__ = True
        if not self.enabled:
            pytest.skip("needs --cudagraph")
        from .. import _compat  # not at import: pytest loads the plugin in every run

        if not _compat.cuda_available():
            pytest.skip(_compat.no_cuda_skip_reason())
        if isinstance(world_size, int) and not isinstance(world_size, bool):
            from ..ranks import gpu_shortfall

            reason = gpu_shortfall(world_size, _compat.cuda_device_count(), self.pinned_device)
            if reason is not None:
                pytest.skip(reason)

    def _add(self, result: RanksResult) -> None:
        self.results.append(result)
        if self.record is None:
            return
        if self._sections is None:
            from ..ranks import RankSections

            self._sections = RankSections()
        self._sections.add(result)
        self.record.set("ranks", self._sections)
