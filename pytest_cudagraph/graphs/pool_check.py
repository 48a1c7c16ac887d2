"""The pool check's verdict: what a user can get wrong, told apart from what the allocator does by itself.

Graphs captured largest first into one shared pool, their outputs released, cost
about the largest graph: each smaller size reuses the blocks the larger ones freed.
About, not exactly: the caching allocator keeps every segment the pool reserved,
and a smaller size can need a segment the largest never did (a request of at most
1 MiB lives in a 2 MiB small segment, apart from the large ones; a block split for
one size leaves a hole the next request does not fit; cuBLAS can take a workspace
at one size only).  Measured at real widths (fp32 Llama-7B MLP: +2 MiB at size 16;
a 2560-wide decoder: +52 MiB at size 48), that growth holds only *free* blocks.

What a user can get wrong leaves a trace the allocator's snapshot shows:

1. **separate pools**: more than one pool for one set of graphs; each holds its
   own high-water mark, so they cost the sum;
2. **something kept alive**: outputs kept, or a tensor the captured function keeps
   across captures, is an *allocated* block in the pool after the capture, which
   every later capture must work around;
3. **smallest first**: a capture order that is not largest first leaves the large
   requests no freed blocks to reuse; the same sizes captured largest first into a
   fresh pool are measured, and the pool must not hold more than they do;
4. ``check_pool(slack=BYTES)``: the user's own byte budget over the largest graph.

The check fails on those and only those; growth with nothing live is reported as
a figure (``caching_bytes``, the segments added after the first size by kind).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..render.plain_text import format_bytes, format_table
from .pool_blocks import LARGE_BUFFER, SMALL_BUFFER, LiveBlock, describe_live_blocks

__all__ = ["PoolCheck", "SizeMemory", "format_size_table", "segment_growth"]

PoolKey = tuple[int, int]


def segment_kind(total_size: int) -> str:
    """``'small'`` (2 MiB), ``'large'`` (20 MiB) or ``'own'`` (one big request's segment)."""
    if total_size == SMALL_BUFFER:
        return "small"
    if total_size == LARGE_BUFFER:
        return "large"
    return "own"


def segment_growth(before: Sequence[int], after: Sequence[int]) -> tuple[tuple[str, int, int], ...]:
    """The segments in ``after`` and not in ``before`` (by size), as ``(kind, count, bytes)`` per kind.

    >>> segment_growth([20 * 2**20], [20 * 2**20, 2 * 2**20, 2 * 2**20])
    (('small', 2, 4194304),)
    """
    added = Counter(after)
    added.subtract(Counter(before))
    by_kind: dict[str, list[int]] = {}
    for size, count in added.items():
        if count > 0:
            entry = by_kind.setdefault(segment_kind(size), [0, 0])
            entry[0] += count
            entry[1] += count * size
    order = ("small", "large", "own")
    return tuple((kind, by_kind[kind][0], by_kind[kind][1]) for kind in order if kind in by_kind)


def describe_growth(growth: Sequence[tuple[str, int, int]]) -> str:
    """``1 small segment (2.0 MiB) + 2 large segments (40.0 MiB)``."""
    parts = [
        f"{count} {kind} segment{'s' if count != 1 else ''} ({format_bytes(nbytes)})" for kind, count, nbytes in growth
    ]
    return " + ".join(parts) if parts else "no new segment"


@dataclass(frozen=True)
class SizeMemory:
    """One row of the per-size table: a capture size and what its capture cost."""

    size: int
    order: int  # position in capture order, 0 = captured first
    pool_bytes_after: int | None  # all pools of the set, right after this size was captured
    graph_bytes: int | None = None  # this size alone in a fresh pool (measured on request)
    live_bytes: int | None = None  # allocated in the pools after this size's capture (the cuBLAS workspace apart)

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "order": self.order,
            "pool_bytes_after": self.pool_bytes_after,
            "graph_bytes": self.graph_bytes,
            "live_bytes": self.live_bytes,
        }


def format_size_table(rows: Sequence[SizeMemory], limit_rows: int = 24) -> str:
    """The per-size table in capture order: growth of the pool, what is live after it, each size's own mark.

    Rows where the pool did not grow and nothing is live are elided in long tables,
    so the table shows where memory went.
    """
    header = ("#", "size", "pool after", "growth", "live", "alone")
    body: list[tuple[str, ...]] = []
    previous = 0
    ordered = sorted(rows, key=lambda r: r.order)
    growth_rows = []
    for row in ordered:
        growth = None if row.pool_bytes_after is None else row.pool_bytes_after - previous
        if row.pool_bytes_after is not None:
            previous = row.pool_bytes_after
        growth_rows.append((row, growth))
    shown = growth_rows
    elided = 0
    if len(growth_rows) > limit_rows:
        shown = [
            (r, g) for r, g in growth_rows if g != 0 or r.order == 0 or r.graph_bytes is not None or (r.live_bytes or 0)
        ]
        shown = shown[:limit_rows]
        elided = len(growth_rows) - len(shown)
    for row, growth in shown:
        body.append(
            (
                str(row.order + 1),
                str(row.size),
                format_bytes(row.pool_bytes_after),
                "-" if growth is None else ("+" + format_bytes(growth) if growth > 0 else "0"),
                "-" if row.live_bytes is None else (format_bytes(row.live_bytes) if row.live_bytes else "0"),
                format_bytes(row.graph_bytes),
            )
        )
    lines = format_table([header, *body], align=">>>>>>")
    if elided:
        lines.append(f"({elided} sizes where the pool did not grow and nothing was live are not shown)")
    return "\n".join(lines)


@dataclass(frozen=True)
class PoolCheck:
    """The outcome of ``check_pool``: the verdict's evidence, the figures and the per-size rows.

    ``causes`` lists what failed, each ``(rule, sentence)``, in the order a user
    should fix them; ``passed`` is True when there is none (and the device bounds
    asked for hold).  ``caching_bytes`` is the figure for what the allocator's
    caching added beyond the largest graph and the workspace, ``growth`` the
    segments it added after the first size, by kind.
    """

    pool_bytes: int
    largest_size: int
    largest_graph_bytes: int
    cublas_workspace_bytes: int
    pool_mode: str
    order: str
    keep_outputs: bool
    rows: tuple[SizeMemory, ...] = field(default_factory=tuple)
    # each pool the set captured into and the bytes it holds
    pools: tuple[tuple[PoolKey, int], ...] = ()
    # per size, in capture order: the blocks still allocated after its capture (the cuBLAS workspace apart)
    live: tuple[tuple[int, tuple[LiveBlock, ...]], ...] = ()
    # the sizes in the order they were captured
    capture_order: tuple[int, ...] = ()
    # the same sizes captured largest first into one fresh pool (measured only when the order was otherwise)
    largest_first_bytes: int | None = None
    # segments added to the pool after the first size, by kind: (kind, count, bytes)
    growth: tuple[tuple[str, int, int], ...] = ()
    # check_pool(slack=BYTES): the user's own bound over the largest graph and the workspace
    slack_bytes: int | None = None
    # check_pool(outside=BYTES) and check_pool(first_use=BYTES): bounds on memory behind the allocator
    outside: Any = None
    first_use: Any = None

    @property
    def limit(self) -> int | None:
        """The user's byte bound (``slack=`` given), or None: the verdict is derived, not a budget."""
        if self.slack_bytes is None:
            return None
        return self.largest_graph_bytes + self.cublas_workspace_bytes + self.slack_bytes

    @property
    def caching_bytes(self) -> int:
        """What the pool holds beyond the largest graph and the workspace (free blocks when nothing is live)."""
        return max(0, self.pool_bytes - self.largest_graph_bytes - self.cublas_workspace_bytes)

    @property
    def live_bytes(self) -> int:
        """The most bytes allocated in the pools after any one capture (the cuBLAS workspace apart)."""
        return max((sum(b.size for b in blocks) for _, blocks in self.live), default=0)

    @property
    def largest_first(self) -> bool:
        """Whether the sizes were captured largest first (a given order that is descending counts)."""
        order = self.capture_order
        return all(a >= b for a, b in zip(order, order[1:]))

    @property
    def causes(self) -> tuple[tuple[str, str], ...]:
        """What failed, as ``(rule, sentence)``: separate pools, something kept alive, the order, the byte budget."""
        found: list[tuple[str, str]] = []
        if len(self.pools) > 1:
            found.append(("separate pools", self._pools_sentence()))
        if self.live_bytes:
            found.append(("kept alive", self._live_sentence()))
        if (
            not self.largest_first
            and self.largest_first_bytes is not None
            and self.pool_bytes - self.cublas_workspace_bytes > self.largest_first_bytes
        ):
            found.append(("capture order", self._order_sentence()))
        limit = self.limit
        if limit is not None and self.pool_bytes > limit:
            found.append(("pool budget", self._budget_sentence(limit)))
        return tuple(found)

    @property
    def pool_passed(self) -> bool:
        return not self.causes

    @property
    def device_checks(self) -> tuple[Any, ...]:
        """The bounds on memory behind the allocator that were asked for (outside, first use)."""
        return tuple(check for check in (self.outside, self.first_use) if check is not None)

    @property
    def passed(self) -> bool:
        """Nothing failed: no cause in the pool, and memory behind the allocator within ``outside``/``first_use``.

        A bound that could give no verdict does not fail the pool check
        (``raise_if_failed`` raises MisuseError for it); its ``passed`` is None.
        """
        return self.pool_passed and all(check.passed is not False for check in self.device_checks)

    def message(self) -> str:
        """What failed: the pool's cause first with its table, then the device bounds'."""
        parts = [] if self.pool_passed else [self.pool_message()]
        parts.extend(check.message() for check in self.device_checks if check.passed is not True)
        return "\n".join(parts)

    def raise_if_failed(self, prefix: str = "") -> None:
        """InvariantViolation with ``message()`` when the check failed; MisuseError when the only
        trouble is that a device bound could give no verdict (the GPU is not this process's alone)."""
        __tracebackhide__ = True
        from ..errors import InvariantViolation, MisuseError

        if not self.passed:
            raise InvariantViolation(prefix + self.message())
        no_verdict = [check for check in self.device_checks if check.passed is None]
        if no_verdict:
            raise MisuseError(prefix + no_verdict[0].message())

    # -- the sentences ------------------------------------------------------
    def _pools_sentence(self) -> str:
        total = sum(nbytes for _, nbytes in self.pools)
        largest = max(nbytes for _, nbytes in self.pools)
        return (
            f"the graphs use {len(self.pools)} pools holding {format_bytes(total)} in all, each its own high-water "
            f"mark (the largest {format_bytes(largest)}); one shared pool holds about the largest graph's "
            f"{format_bytes(self.largest_graph_bytes)} + cuBLAS workspace {format_bytes(self.cublas_workspace_bytes)}: "
            f"capture every size into one pool (pool='shared', or torch.cuda.graph(g, pool=handle) with one "
            f"torch.cuda.graph_pool_handle())"
        )

    def _live_sentence(self) -> str:
        first_size, first_blocks = next((size, blocks) for size, blocks in self.live if blocks)
        last_size, last_blocks = self.live[-1]
        where = f"after batch size {first_size}'s capture the pool still held {describe_live_blocks(first_blocks)}"
        if last_size != first_size and last_blocks:
            where += f"; after the last, batch size {last_size}, it held {describe_live_blocks(last_blocks)}"
        fix = (
            "keep_outputs=True keeps every size's outputs alive in the pool: drop it, or copy the outputs out"
            if self.keep_outputs
            else "something the captured function or the test keeps (a cache, a list of outputs, an attribute) "
            "holds pool memory across captures, so each later capture works around it: release it, or copy it "
            "out of the pool (.clone() outside the capture)"
        )
        return f"{where}; {fix}"

    def _order_sentence(self) -> str:
        shown = ", ".join(str(s) for s in self.capture_order[:8]) + (", ..." if len(self.capture_order) > 8 else "")
        return (
            f"captured in the order {shown}, the pool holds {format_bytes(self.pool_bytes)}; the same sizes "
            f"captured largest first into one pool hold {format_bytes(self.largest_first_bytes)} "
            f"(+ workspace {format_bytes(self.cublas_workspace_bytes)}): capture the largest size first "
            f"(order='largest_first'), so smaller sizes reuse the blocks the larger ones freed"
        )

    def _budget_sentence(self, limit: int) -> str:
        return (
            f"the pool holds {format_bytes(self.pool_bytes)}, more than the budget check_pool(slack=) gives: the "
            f"largest graph's {format_bytes(self.largest_graph_bytes)} (batch size {self.largest_size}) + cuBLAS "
            f"workspace {format_bytes(self.cublas_workspace_bytes)} + slack {format_bytes(self.slack_bytes)} = "
            f"{format_bytes(limit)}"
        )

    def caching_sentence(self) -> str:
        """The figure a passing check reports: what the allocator's caching added, in which segments."""
        return (
            f"pool {format_bytes(self.pool_bytes)} = largest graph {format_bytes(self.largest_graph_bytes)} "
            f"(batch size {self.largest_size}) + cuBLAS workspace {format_bytes(self.cublas_workspace_bytes)} "
            f"+ allocator caching {format_bytes(self.caching_bytes)} in free blocks "
            f"(after the first size: {describe_growth(self.growth)})"
        )

    def pool_message(self) -> str:
        """The first cause leads; the others follow as lines of their own, then the figures and the table."""
        causes = self.causes
        rule, lead = causes[0]
        lines = [f"pool check ({rule}): {lead}."]
        lines.extend(f"  also ({other}): {sentence}." for other, sentence in causes[1:])
        lines.append(
            f"  figures: {self.caching_sentence()}; pool={self.pool_mode!r}, order={self.order!r}, "
            f"keep_outputs={self.keep_outputs}"
        )
        return "\n".join(lines) + "\n" + format_size_table(self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "pool_bytes": self.pool_bytes,
            "limit_bytes": self.limit,
            "largest_size": self.largest_size,
            "largest_graph_bytes": self.largest_graph_bytes,
            "cublas_workspace_bytes": self.cublas_workspace_bytes,
            "caching_bytes": self.caching_bytes,
            "live_bytes": self.live_bytes,
            "pools": len(self.pools),
            "causes": [rule for rule, _ in self.causes],
            "passed": self.passed,
            **({"outside": self.outside.to_json()} if self.outside is not None else {}),
            **({"first_use": self.first_use.to_json()} if self.first_use is not None else {}),
        }


def live_after_capture(
    live_by_size: Sequence[tuple[int, tuple[LiveBlock, ...]]], workspace_addresses: frozenset[int]
) -> tuple[tuple[int, tuple[LiveBlock, ...]], ...]:
    """Each size's live blocks less the cuBLAS workspace's (the blocks a clear of cuBLAS's workspaces freed)."""
    return tuple(
        (size, tuple(b for b in blocks if b.address not in workspace_addresses)) for size, blocks in live_by_size
    )


def with_block_frames(check: PoolCheck, traced: Sequence[LiveBlock]) -> PoolCheck:
    """``check`` with each live block that has no stack given the stack of a traced block of the same size.

    ``traced`` are the live blocks of the same capture made again with allocation
    stacks recorded; each is used once, matched by (size, requested size).
    """
    pending = [b for b in traced if b.frames]
    live = []
    for size, blocks in check.live:
        named = []
        for block in blocks:
            match = next((t for t in pending if (t.size, t.requested_size) == (block.size, block.requested_size)), None)
            if match is not None and not block.frames:
                pending.remove(match)
                block = replace(block, frames=match.frames)
            named.append(block)
        live.append((size, tuple(named)))
    return replace(check, live=tuple(live))
