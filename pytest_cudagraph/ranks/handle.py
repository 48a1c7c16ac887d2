"""The handle a rank's body gets: who it is, its device and group, capture with collectives, agreement checks.

Used inside the rank processes only (``ranks/child.py`` builds it after the process
group is up).  Every collective of a body must be issued by every rank in the same
order; the handle's own collectives (``assert_ranks_agree``) are too, so call it
on every rank.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from ..errors import InvariantViolation, MisuseError
from ..graphs.capture import GraphSet, capture_graphs
from ..graphs.numerics import compare_tensors
from .alignment import CollectivesMisaligned, SizeCollectives, misaligned
from .alignment import payload as alignment_payload


class Rank:
    """One rank of a multi-rank body: ``.rank``, ``.world_size``, ``.group``, ``.device``, ``.backend``.

    ``capture(fn, make_inputs, sizes=None, ...)`` is ``capture_graphs`` on this
    rank's GPU (largest size first, one shared pool), with the test's default sizes
    and tolerances; the harness resets every graph it captured before the process
    group is destroyed (NCCL's teardown hangs while a graph holding NCCL work is
    alive).  ``assert_ranks_agree(tensor)`` checks that every rank holds the same
    tensor.  Every rank starts from the same seed, so ``make_inputs`` gives the same
    tensors on every rank as long as the ranks call it in the same order.

    .. warning::
        **Same collectives, same order, on every rank.** A collective that one rank
        issues and another does not (a branch on ``rank``, a failed capture, an
        exception) waits forever; the harness's watchdog then stops the run and
        names where each rank was.
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        backend: str,
        device: torch.device,
        *,
        sizes: Sequence[int] | None = None,
        rtol: float | None = None,
        atol: float | None = None,
        store: Any = None,
        align_collectives: bool = True,
    ):
        self.rank = rank
        self.world_size = world_size
        self.backend = backend
        self.device = device
        self.group = dist.group.WORLD
        self._sizes = tuple(sizes) if sizes else None
        self._rtol = rtol
        self._atol = atol
        self.graph_sets: list[GraphSet] = []
        self.agreement_checks = 0
        # the launcher's store, through which the ranks align their captured collectives (ranks/alignment.py)
        self._store = store
        self.align_collectives_by_default = align_collectives
        self.alignments = 0
        self.aligned_sizes = 0
        self.aligned_collectives = 0
        self.alignment_s = 0.0

    def __repr__(self) -> str:
        return f"<Rank {self.rank} of {self.world_size} on {self.device} ({self.backend})>"

    # -- capture --------------------------------------------------------------
    def capture(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[int], Any],
        sizes: Sequence[int] | None = None,
        *,
        align_collectives: bool | None = None,
        **options: Any,
    ) -> GraphSet:
        """``capture_graphs(fn, make_inputs, sizes, ...)`` on this rank's GPU; see ``capture_graphs``.

        ``fn`` may issue collectives (``dist.all_reduce``, ``all_gather_into_tensor``,
        ``reduce_scatter_tensor``) on ``self.group``: they are warmed up eagerly, then
        captured into each size's graph, and run again on every replay.  Every rank
        must capture the same sizes in the same order, and call ``check_replay`` and
        ``check_pool`` alike (both run ``fn`` eagerly, collectives included).

        With NCCL the capture defaults to ``capture_error_mode="thread_local"``: NCCL's
        watchdog thread polls CUDA events of earlier eager collectives, which the
        default "global" mode would count as an unsafe call and invalidate the
        capture.  A host sync in ``fn`` itself (``.item()``) still fails the capture.

        **Collectives aligned before the first replay.**  By default (the marker's
        ``align_collectives=True``; ``align_collectives=`` here overrides it for
        one capture) each size's capture records the collectives ``fn`` issued and
        reads the graph's NCCL kernels back, and the ranks compare them before
        ``capture`` returns: graphs that would hang at their first replay raise
        CollectivesMisaligned on every rank at once (see ``align_collectives``).
        """
        __tracebackhide__ = True
        if self.device.type != "cuda":
            raise MisuseError(
                f"rank {self.rank} runs backend={self.backend!r} on the CPU, and CUDA graphs need a GPU; "
                f"run the body with backend='nccl' on a GPU machine"
            )
        chosen = sizes if sizes is not None else self._sizes
        if chosen is None:
            raise MisuseError(
                "no capture sizes: give sizes=[...] to capture(), or capture_sizes= to @pytest.mark.cudagraph, "
                "or set the cudagraph_capture_sizes ini option"
            )
        options.setdefault("rtol", self._rtol)
        options.setdefault("atol", self._atol)
        if self.backend == "nccl":
            options.setdefault("capture_error_mode", "thread_local")
        align = self.align_collectives_by_default if align_collectives is None else bool(align_collectives)
        if align:
            options["record_collectives"] = True
        with torch.cuda.device(self.device):
            graph_set = capture_graphs(fn, make_inputs, chosen, **options)
        self.graph_sets.append(graph_set)
        if align:
            self.align_collectives(_captured_collectives(graph_set))
        return graph_set

    def align_collectives(self, sizes: Sequence[SizeCollectives]) -> None:
        """Check that every rank holds the same collectives per size; raises CollectivesMisaligned on every rank.

        ``capture`` calls it after capturing, before any replay.  Each rank
        publishes a digest of its sequences through the launcher's store (outside the
        graphs and the process group, bounded by the watchdog); every rank reads
        all of them and runs the same comparison, so all fail together, with the
        same message: the size, each rank's sequence, the first collective that
        differs and the user's line that issued it.  Call it on every rank alike
        (it waits for every rank's sequences).
        """
        __tracebackhide__ = True
        if self._store is None:
            raise MisuseError("align_collectives needs the launcher's store; call it inside a cudagraph_ranks body")
        start = time.perf_counter()
        index = self.alignments
        self.alignments += 1
        prefix = f"cudagraph_ranks/collectives/{index}"
        self._store.set(f"{prefix}/{self.rank}", alignment_payload(sizes))
        keys = [f"{prefix}/{r}" for r in range(self.world_size)]
        self._store.wait(keys)
        message = misaligned({r: bytes(self._store.get(key)) for r, key in enumerate(keys)}, self.world_size)
        self.alignment_s += time.perf_counter() - start
        self.aligned_sizes += len(sizes)
        self.aligned_collectives += sum(len(s.calls) for s in sizes)
        if message is not None:
            raise CollectivesMisaligned(message)

    # -- agreement --------------------------------------------------------------
    def assert_ranks_agree(
        self, tensor: torch.Tensor, rtol: float = 0.0, atol: float = 0.0, name: str = "tensor"
    ) -> float:
        """Check that every rank holds the same ``tensor`` (bitwise by default); returns the largest difference.

        Gathers every rank's tensor (``all_gather``, a collective: call it on every
        rank) and compares each with rank 0's.  Where the math makes ranks equal,
        after an all-reduce or an all-gather, they must be; a difference means the
        ranks fed different inputs or issued different collectives.

        Failure (InvariantViolation, raised on every rank alike): the rank, the
        worst element, both values and the error.
        """
        __tracebackhide__ = True
        if not isinstance(tensor, torch.Tensor):
            raise MisuseError(f"assert_ranks_agree({name!r}) takes a tensor, not a {type(tensor).__name__}")
        local = tensor.detach().contiguous().to(self.device)
        shapes = self._gather_shapes(local)
        if any(shape != shapes[0] for shape in shapes):
            listed = ", ".join(f"rank {r}: {shape[0]} {shape[1]}" for r, shape in enumerate(shapes))
            raise InvariantViolation(
                f"the ranks' {name} differ in shape or dtype ({listed}); give every rank a tensor of the same "
                f"shape to compare"
            )
        gathered = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(gathered, local, group=self.group)
        self.agreement_checks += 1
        worst = 0.0
        for other in range(1, self.world_size):
            comparison = compare_tensors(gathered[other], gathered[0], rtol, atol, path=name)
            worst = max(worst, comparison.max_abs_err)
            if not comparison.passed:
                raise InvariantViolation(
                    f"rank {other}'s {name} differs from rank 0's: "
                    f"{comparison.describe(f'rank {other}', 'rank 0')}; after an all-reduce or all-gather every "
                    f"rank must hold the same tensor: check that every rank fed the same inputs (every rank starts "
                    f"from the same seed, so call make_inputs in the same order on each) and issued the same "
                    f"collectives in the same order"
                )
        return worst

    def _gather_shapes(self, local: torch.Tensor) -> list[tuple[tuple[int, ...], str]]:
        """Every rank's ``(shape, dtype name)``, through a tensor all_gather.

        Not ``all_gather_object``: it pickles through numpy on some torch versions,
        and the harness must not need numpy.
        """
        dims, name_bytes = 16, 32
        name = str(local.dtype).encode()[:name_bytes]
        meta = torch.zeros(2 + dims + name_bytes, dtype=torch.int64, device=local.device)
        meta[0] = local.dim()
        meta[1] = local.numel()
        shape = list(local.shape)[:dims]
        if shape:
            meta[2 : 2 + len(shape)] = torch.tensor(shape, dtype=torch.int64)
        meta[2 + dims : 2 + dims + len(name)] = torch.tensor(list(name), dtype=torch.int64)
        gathered = [torch.empty_like(meta) for _ in range(self.world_size)]
        dist.all_gather(gathered, meta, group=self.group)
        out = []
        for item in gathered:
            values = item.cpu().tolist()
            ndim = values[0]
            shape_of = tuple(values[2 : 2 + min(ndim, dims)]) + ((f"... {values[1]} elements",) if ndim > dims else ())
            dtype = bytes(v for v in values[2 + dims :] if v).decode(errors="replace")
            out.append((shape_of, dtype))
        return out

    def alignment_result(self) -> dict[str, Any] | None:
        """The report's ``collective_alignment`` of this rank: exchanges, sizes, collectives, seconds; None if none ran."""
        if not self.alignments:
            return None
        return {
            "exchanges": self.alignments,
            "sizes": self.aligned_sizes,
            "collectives": self.aligned_collectives,
            "seconds": round(self.alignment_s, 6),
        }

    # -- the harness's side -------------------------------------------------------
    def graph_results(self) -> tuple[dict[str, Any], ...]:
        """The report entries of every GraphSet captured so far (nothing new is measured)."""
        return tuple(graph_set.result().to_json() for graph_set in self.graph_sets)

    def release(self) -> None:
        """Reset every graph the handle captured, so that the process group can be destroyed."""
        errors = []
        for graph_set in self.graph_sets:
            try:
                graph_set.close()
            except Exception as exc:  # release the others before reporting
                errors.append(exc)
        if errors:
            raise errors[0]


def _captured_collectives(graph_set: GraphSet) -> list[SizeCollectives]:
    """Each size's recorded collectives, in capture order."""
    out = []
    for size in graph_set.capture_order:
        recorded = graph_set.graph(size).collectives
        if recorded is None:  # recording was not on for this set
            continue
        out.append(SizeCollectives(size=size, calls=recorded.calls, kernels=recorded.kernels))
    return out
