"""The verdict on the CUDA graphs the code under test captured itself, from plain records of its captures.

Each capture is an :class:`ObservedCapture`: its call site (the engine's line),
the pool it used, the pool's bytes before and after it, the blocks still
allocated in the pool after it, the device memory behind the allocator, its
seconds, the shapes of the inputs it read where they could be seen, its replays,
and whether the graph was alive when the observation ended.  The recorder
(``graphs/observe_recorder.py``) fills them in on the GPU; everything here is pure, so the
verdicts are tested on recorded captures without one.

What fails, each on by default and each with its switch (``ObserveOptions``):

1. **separate pools** (``one_pool``): graphs captured at one call site that use
   more than one pool.  Each pool holds its own high-water mark, so they cost the
   sum; one shared pool holds about the largest of them.
2. **kept alive** (``pool_check``): a block allocated in a shared pool by one
   capture and still allocated after a later capture into the same pool, which
   had to work around it (cudagraph trees apart: a tree records a child graph on
   top of its parent's live outputs by design).  A block of exactly the cuBLAS or cuBLASLt workspace's
   size, one per pool and size, is set apart as possibly the workspace (see
   ``workspace_candidates``): the engine owns its graphs, so the plugin does not
   clear cuBLAS's workspaces to find out.
3. **missing sizes** (``expect_sizes``): a size the engine's config lists that no
   graph was captured at.  A capture's size is the leading dimension of the inputs
   it read that varies across its call site's captures (``infer_sizes``); a
   capture whose inputs could not be seen has none, and the message says so.
4. **failed captures** (``allow_capture_failures``): a capture that raised, or
   began and never ended, while the test went on.
5. **never replayed** (``require_replay``, off by default): a graph captured and
   never replayed; listed either way.
6. **not observed**: the recorder could not read a capture: the verdict does not
   vouch for what it did not see.

Graphs still alive when the observation ended are listed with their pools' bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..compile.call_site import CallSite
from ..render.plain_text import count_noun, format_bytes, format_table, short_seconds, signed_bytes
from .observe_scores import Coverage, EstimateScore, sum_over_sizes
from .pool_blocks import LiveBlock, describe_live_blocks

__all__ = [
    "ObserveOptions",
    "ObservedCapture",
    "ObservedGraphs",
    "ObservedSite",
    "infer_sizes",
    "workspace_candidates",
]

PoolKey = tuple[int, int]
UNKNOWN_SITE = "an unknown line"
# the columns of a call site's table (the message's, and show's)
# capture paths that keep outputs alive in the pool by design: not judged by the kept-alive rule
KEEPS_OUTPUTS_BY_DESIGN = frozenset({"cudagraph trees", "cudagraph trees pool", "make_graphed_callables"})
GRAPH_TABLE_HEADER = ("#", "size", "pool", "pool after", "growth", "live", "behind allocator", "capture", "replays")


@dataclass(frozen=True)
class ObserveOptions:
    """Which verdicts apply: each on by default but ``require_replay``; ``expect_sizes=None`` checks no size."""

    one_pool: bool = True
    pool_check: bool = True
    expect_sizes: tuple[int, ...] | None = None
    require_replay: bool = False
    allow_capture_failures: bool = False


@dataclass(frozen=True)
class ObservedCapture:
    """One graph the code under test captured: where, into which pool, what it cost, and what became of it.

    ``pool_bytes_before``/``after`` are the pool's reserved bytes (whole
    segments); ``live_after`` the blocks allocated in the pool right after the
    capture (the captured region's outputs among them); ``behind_allocator_bytes``
    the device memory the capture took that no PyTorch allocator reserved (None
    where not read); ``input_shapes`` the shapes of the tensors it read, where they
    could be seen; ``failed`` why it did not end, or None.
    """

    index: int
    call_site: CallSite | None
    pool: PoolKey
    source: str = "torch.cuda.graph"
    pool_bytes_before: int | None = None
    pool_bytes_after: int | None = None
    live_after: tuple[LiveBlock, ...] = ()
    behind_allocator_bytes: int | None = None
    capture_s: float | None = None
    input_shapes: tuple[tuple[int, ...], ...] = ()
    replays: int = 0
    alive_at_end: bool = False
    failed: str | None = None
    # the batch size: set by ``infer_sizes`` from the inputs' shapes where not given
    size: int | None = None

    @property
    def site(self) -> str:
        """``engine.py:42``: the call site's label."""
        return self.call_site.label if self.call_site is not None else UNKNOWN_SITE

    @property
    def growth_bytes(self) -> int | None:
        if self.pool_bytes_before is None or self.pool_bytes_after is None:
            return None
        return self.pool_bytes_after - self.pool_bytes_before

    @property
    def live_bytes(self) -> int:
        return sum(b.size for b in self.live_after)

    def name(self) -> str:
        """``graph 3 (size 64)``: how a message names it."""
        size = self.size
        return f"graph {self.index + 1}" + (f" (size {size})" if size is not None else "")

    def to_json(self, workspace: frozenset[int] = frozenset(), shared_pool: bool = False) -> dict[str, Any]:
        """Its report entry; ``workspace``: the possible cuBLAS workspace blocks, ``shared_pool``: whether an earlier
        graph used its pool."""
        out: dict[str, Any] = {
            "index": self.index,
            "call_site": self.call_site.to_json() if self.call_site is not None else None,
            "source": self.source,
            "pool": list(self.pool),
            "shared_pool": shared_pool,
            "size": self.size,
            "input_shapes": [list(s) for s in self.input_shapes],
            "pool_bytes_before": self.pool_bytes_before,
            "pool_bytes_after": self.pool_bytes_after,
            "growth_bytes": self.growth_bytes,
            "live_bytes": self.live_bytes,
            "live_blocks": [
                {**b.to_json(), **({"possibly_cublas_workspace": True} if b.address in workspace else {})}
                for b in self.live_after
            ],
            "behind_allocator_bytes": self.behind_allocator_bytes,
            "capture_s": None if self.capture_s is None else round(self.capture_s, 6),
            "replays": self.replays,
            "alive_at_end": self.alive_at_end,
        }
        if self.failed is not None:
            out["failed"] = self.failed
        return out


def _most_common(dims: Counter[int], order: Sequence[int]) -> int:
    """The most common of ``dims``, the first in ``order`` on a tie."""
    return max(dims, key=lambda d: (dims[d], -order.index(d)))


def infer_sizes(captures: Sequence[ObservedCapture]) -> tuple[ObservedCapture, ...]:
    """Each capture with its batch size: the leading dimension of its inputs that varies across its call site.

    An engine's capturing function holds its static buffers (the largest batch,
    or a cache) at every capture and the batch's slice of them at one: the
    leading dimensions every capture of the site shows alike, as often, are set
    apart, and the most common of the rest is the size.  Where none is left (a
    site's only capture, or captures of one size only) it is the most common of
    all, which may be a static buffer's.  A size already given is kept.
    """
    out = list(captures)
    by_site: dict[str, list[int]] = {}
    for position, capture in enumerate(captures):
        by_site.setdefault(capture.site, []).append(position)
    for positions in by_site.values():
        dims = {p: Counter(shape[0] for shape in captures[p].input_shapes if shape) for p in positions}
        shown = [d for d in dims.values() if d]
        static: Counter[int] = Counter()
        if len(shown) > 1:
            static = shown[0]
            for other in shown[1:]:
                static = static & other
        for position, counts in dims.items():
            if captures[position].size is not None or not counts:
                continue
            varying = (counts - static) or counts
            order = [shape[0] for shape in captures[position].input_shapes if shape]
            out[position] = replace(captures[position], size=_most_common(varying, order))
    return tuple(out)


def workspace_candidates(captures: Sequence[ObservedCapture], workspace_sizes: Iterable[int]) -> frozenset[int]:
    """The addresses of the blocks that may be cuBLAS's or cuBLASLt's workspace: one per pool and workspace size.

    A workspace is one allocation of exactly its size, made by a stream's first
    matmul; made during a capture it sits in that capture's pool until the
    workspaces are cleared.  The first live block of each pool whose requested
    size is a workspace size is taken as it, no more: a second one is the user's.
    """
    sizes = frozenset(workspace_sizes)
    taken: dict[tuple[PoolKey, int], int] = {}
    for capture in captures:
        for block in capture.live_after:
            if block.requested_size in sizes:
                taken.setdefault((capture.pool, block.requested_size), block.address)
    return frozenset(taken.values())


@dataclass(frozen=True)
class ObservedSite:
    """The graphs of one call site, in capture order."""

    label: str
    call_site: CallSite | None
    captures: tuple[ObservedCapture, ...]

    @property
    def pools(self) -> tuple[PoolKey, ...]:
        return tuple(dict.fromkeys(c.pool for c in self.captures))

    @property
    def sizes(self) -> list[int]:
        return sorted({s for s in (c.size for c in self.captures) if s is not None})

    def table(self, pool_names: dict[PoolKey, str]) -> str:
        """Its graphs in capture order: size, pool, the pool after it and its growth, live bytes, memory, time, replays."""
        rows = [
            (
                str(c.index + 1),
                "-" if c.size is None else str(c.size),
                pool_names.get(c.pool, "?"),
                format_bytes(c.pool_bytes_after),
                signed_bytes(c.growth_bytes),
                format_bytes(c.live_bytes),
                signed_bytes(c.behind_allocator_bytes),
                "failed" if c.failed else short_seconds(c.capture_s),
                str(c.replays),
            )
            for c in self.captures
        ]
        return "\n".join(format_table([GRAPH_TABLE_HEADER, *rows], align=">>>>>>>>>"))


@dataclass(frozen=True)
class ObservedGraphs:
    """Every graph the code under test captured while observed, and the verdict on them.

    ``pool_bytes_at_end`` is each pool's reserved bytes when the observation ended
    (no garbage collection is run for it); a pool's figure in the verdict and the report is
    its high-water mark, the most it held right after a capture into it; ``hooks`` how this torch was hooked
    (``"torch hooks"`` or ``"wrapper"``); ``errors`` what the recorder could not
    read; ``workspace_sizes`` cuBLAS's and cuBLASLt's workspace sizes;
    ``shared_device`` why the device figures are not this process's alone.
    """

    captures: tuple[ObservedCapture, ...] = ()
    options: ObserveOptions = field(default_factory=ObserveOptions)
    hooks: str = ""
    pool_bytes_at_end: tuple[tuple[PoolKey, int], ...] = ()
    workspace_sizes: frozenset[int] = frozenset()
    errors: tuple[str, ...] = ()
    shared_device: str | None = None
    # the scores the test asked for while observing, in call order: check_estimate() and check_coverage() raise
    # their own failures, so they are recorded here, not among the causes
    estimates: tuple[EstimateScore, ...] = ()
    coverage: tuple[Coverage, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "captures", infer_sizes(self.captures))

    # -- grouping ------------------------------------------------------------
    def sites(self) -> list[ObservedSite]:
        """The captures grouped by call site, each site in the order of its first capture."""
        groups: dict[str, list[ObservedCapture]] = {}
        for capture in self.captures:
            groups.setdefault(capture.site, []).append(capture)
        return [ObservedSite(label, group[0].call_site, tuple(group)) for label, group in groups.items()]

    @property
    def workspace(self) -> frozenset[int]:
        return workspace_candidates(self.captures, self.workspace_sizes)

    def pool_bytes(self, pool: PoolKey) -> int | None:
        """The most the pool held right after a capture into it: its high-water mark while the graphs were captured.

        Not its bytes at the end: the engine's graphs may be gone by then, and their pool with them.
        """
        after = [c.pool_bytes_after for c in self.captures if c.pool == pool and c.pool_bytes_after is not None]
        return max(after) if after else None

    def pool_bytes_now(self, pool: PoolKey) -> int | None:
        """The pool's bytes when the observation ended, where read (else its high-water mark)."""
        at_end = dict(self.pool_bytes_at_end)
        return at_end[pool] if pool in at_end else self.pool_bytes(pool)

    @property
    def pools(self) -> tuple[PoolKey, ...]:
        return tuple(dict.fromkeys(c.pool for c in self.captures))

    @property
    def total_pool_bytes(self) -> int | None:
        figures = [self.pool_bytes(p) for p in self.pools]
        return None if not figures or None in figures else sum(f for f in figures if f is not None)

    @property
    def pool_peak_bytes(self) -> int | None:
        """What the graphs hold: the peak of every pool they were captured into, summed, cuBLAS's workspace included.

        Each pool's figure is its high-water mark (``pool_bytes``); graphs that
        share a pool count once.  None where a pool's bytes were not read.
        """
        return self.total_pool_bytes

    @property
    def workspace_bytes(self) -> int:
        """The bytes of the possible cuBLAS workspace blocks inside the pools (part of ``pool_peak_bytes``)."""
        workspace = self.workspace
        blocks = {b.address: b.size for c in self.captures for b in c.live_after if b.address in workspace}
        return sum(blocks.values())

    def own_bytes(self) -> list[tuple[int | None, int | None]]:
        """Each capture's ``(size, bytes it grew its pool by)``, the workspace blocks it allocated set apart."""
        return own_bytes_of(self)

    @property
    def largest_graph_bytes(self) -> int | None:
        """The most one capture grew its pool by, the workspace it allocated apart: the largest graph's own cost."""
        known = [own for _, own in self.own_bytes() if own is not None]
        return max(known) if known else None

    def score_estimate(self, estimate_bytes: int, within: float = 0.10) -> EstimateScore:
        """The engine's graph-memory estimate against ``pool_peak_bytes`` (see ``observe_scores``)."""
        return estimate_score(self, estimate_bytes, within)

    @property
    def sizes(self) -> list[int]:
        return sorted({s for s in (c.size for c in self.captures) if s is not None})

    @property
    def missing_sizes(self) -> list[int]:
        expected = self.options.expect_sizes
        if not expected:
            return []
        seen = set(self.sizes)
        return [s for s in expected if s not in seen]

    @property
    def never_replayed(self) -> list[ObservedCapture]:
        return [c for c in self.captures if c.failed is None and c.replays == 0]

    @property
    def alive_at_end(self) -> list[ObservedCapture]:
        return [c for c in self.captures if c.alive_at_end]

    @property
    def failed(self) -> list[ObservedCapture]:
        return [c for c in self.captures if c.failed is not None]

    def kept_alive(self) -> list[tuple[ObservedCapture, ObservedCapture, tuple[LiveBlock, ...]]]:
        """``(capture, the next capture into its pool, the blocks of the first still allocated after the second)``.

        The workspace candidates apart; only blocks the first capture's reading is
        the first to show (a block kept since an earlier capture is named there).
        Each capture path is judged by its own design: cudagraph trees are not
        judged (a tree records a child graph on top of its parent's live outputs,
        and manages their liveness itself), nor are ``make_graphed_callables``'
        graphs (the forward's outputs and saved tensors stay in the pool for the
        backward graph by design).  An engine's own graphs are: an output it keeps
        with a strong reference pins its block for every later capture.
        """
        workspace = self.workspace
        found = []
        seen_before: set[int] = set()
        by_pool: dict[PoolKey, list[ObservedCapture]] = {}
        for capture in self.captures:
            if capture.failed is None and capture.source not in KEEPS_OUTPUTS_BY_DESIGN:
                by_pool.setdefault(capture.pool, []).append(capture)
        for captures in by_pool.values():
            seen_before.clear()
            for capture, following in zip(captures, captures[1:]):
                after_next = {(b.address, b.size) for b in following.live_after}
                kept = tuple(
                    b
                    for b in capture.live_after
                    if (b.address, b.size) in after_next and b.address not in workspace and b.address not in seen_before
                )
                seen_before.update(b.address for b in capture.live_after)
                if kept:
                    found.append((capture, following, kept))
        return found

    # -- the verdict ---------------------------------------------------------
    @property
    def causes(self) -> tuple[tuple[str, str], ...]:
        """What failed, as ``(rule, sentence)``, in the order a user should fix them."""
        found: list[tuple[str, str]] = []
        if self.errors:
            found.append(("not observed", self._errors_sentence()))
        if not self.options.allow_capture_failures and self.failed:
            found.append(("failed captures", self._failed_sentence()))
        if self.options.one_pool:
            found.extend(("separate pools", self._pools_sentence(site)) for site in self.sites() if len(site.pools) > 1)
        if self.options.pool_check:
            kept = self.kept_alive()
            if kept:
                found.append(("kept alive", self._kept_sentence(kept)))
        if self.missing_sizes:
            found.append(("missing sizes", self._sizes_sentence()))
        if self.options.require_replay and self.never_replayed:
            found.append(("never replayed", self._replay_sentence()))
        return tuple(found)

    @property
    def passed(self) -> bool:
        return not self.causes

    def message(self, context: str = "") -> str:
        """The failure: the first cause leads, the others follow, then the listings and each call site's table."""
        causes = self.causes
        if not causes:
            return ""
        rule, lead = causes[0]
        prefix = f"{context}: " if context else ""
        lines = [f"{prefix}observed graphs ({rule}): {lead}."]
        lines.extend(f"  also ({other}): {sentence}." for other, sentence in causes[1:])
        lines.extend(f"  {line}" for line in self.listing_lines())
        names = self.pool_names()
        for site in self.sites():
            lines.append(f"  {count_noun(len(site.captures), 'graph')} captured at {_site_text(site)}:")
            lines.extend("    " + row for row in site.table(names).splitlines())
        return "\n".join(lines)

    def pool_names(self) -> dict[PoolKey, str]:
        """``p1``, ``p2``, ...: each pool by its first capture's order."""
        return {pool: f"p{number}" for number, pool in enumerate(self.pools, start=1)}

    def listing_lines(self) -> list[str]:
        """What is listed without failing: graphs never replayed, graphs alive at the end, possible workspaces."""
        lines = []
        never = self.never_replayed
        if never and not self.options.require_replay:
            lines.append(f"never replayed: {_graph_list(never)}")
        alive = self.alive_at_end
        if alive:
            pools = dict.fromkeys(c.pool for c in alive)
            held = [self.pool_bytes_now(p) for p in pools]
            total = sum(h for h in held if h is not None)
            lines.append(
                f"alive at the end of the test: {_graph_list(alive)}, in {count_noun(len(pools), 'pool')} "
                f"holding {format_bytes(total)}"
            )
        workspace = self.workspace
        if workspace:
            blocks = [b for c in self.captures for b in c.live_after if b.address in workspace]
            unique = {b.address: b for b in blocks}
            sizes = ", ".join(format_bytes(b.size) for b in unique.values())
            lines.append(
                f"possibly cuBLAS's workspace, set apart: {count_noun(len(unique), 'block')} of the workspace's "
                f"size ({sizes}) left allocated in the pool by a capture's first matmul on its stream"
            )
        return lines

    # -- the sentences -------------------------------------------------------
    def _errors_sentence(self) -> str:
        more = f" (and {len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
        return (
            f"the plugin could not read what a capture did ({self.errors[0]}{more}), so the checks below do not "
            f"vouch for it"
        )

    def _failed_sentence(self) -> str:
        first = self.failed[0]
        more = f"; {count_noun(len(self.failed) - 1, 'more capture')} failed too" if len(self.failed) > 1 else ""
        return (
            f"the capture of {first.name()} at {first.site} failed ({first.failed}) and the test went on{more}: "
            f"the engine hid the failure; let it raise, or give allow_capture_failures=True if falling back is meant"
        )

    def _pools_sentence(self, site: ObservedSite) -> str:
        pools = [(p, self.pool_bytes(p)) for p in site.pools]
        known = [b for _, b in pools if b is not None]
        total, largest = sum(known), max(known, default=0)
        return (
            f"the {count_noun(len(site.captures), 'graph')} captured at {_site_text(site)} use "
            f"{len(pools)} pools holding {format_bytes(total)} in all, each its own high-water mark; one shared "
            f"pool holds about the largest of them, {format_bytes(largest)} ({format_bytes(total - largest)} less): "
            f"capture every size into one pool (torch.cuda.graph(g, pool=handle) with one "
            f"torch.cuda.graph_pool_handle(), or the first graph's g.pool())"
        )

    def _kept_sentence(self, kept: list[tuple[ObservedCapture, ObservedCapture, tuple[LiveBlock, ...]]]) -> str:
        capture, following, blocks = kept[0]
        total = sum(b.size for _, _, held in kept for b in held)
        more = f"; {count_noun(len(kept) - 1, 'more capture')} left blocks too" if len(kept) > 1 else ""
        largest = self.largest_graph_bytes
        cost = (
            f"; the kept outputs of {count_noun(len(kept), 'size')} add up to {format_bytes(total)}, against "
            f"{format_bytes(largest)} for the largest graph"
            if largest
            else ""
        )
        return (
            f"after {capture.name()} at {capture.site} the pool still held {describe_live_blocks(blocks)}, and they "
            f"were still allocated after {following.name()}, which had to work around them ({format_bytes(total)} "
            f"kept across captures in all{more}{cost}): keep outputs in buffers allocated before the capture "
            f"(out.copy_(...) inside it), or hold them as non-owning views (weak references), so the next capture "
            f"reuses the blocks"
        )

    def _sizes_sentence(self) -> str:
        missing = self.missing_sizes
        captured = self.sizes
        unseen = [c for c in self.captures if c.size is None]
        sites = ", ".join(dict.fromkeys(c.site for c in self.captures)) or "nowhere"
        sentence = (
            f"sizes {missing} were never captured: the graphs captured "
            + (f"sizes {_sizes_list(captured)}" if captured else "no size that could be seen")
            + f" ({count_noun(len(self.captures), 'graph')}, at {sites})"
        )
        if unseen:
            sentence += (
                f"; {count_noun(len(unseen), 'graph')} showed no input shapes (the capturing function held its "
                f"inputs in no local variable), so a missing size may be among them: name the inputs in a local "
                f"variable of the function that captures, or give check_sizes=False"
            )
        return sentence

    def _replay_sentence(self) -> str:
        never = self.never_replayed
        return (
            f"{count_noun(len(never), 'graph')} captured and never replayed before the test ended: "
            f"{_graph_list(never)}; the engine captured sizes it never ran (require_replay=True)"
        )

    # -- the report ----------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return observed_graphs_json(self)


def own_bytes_of(result: ObservedGraphs) -> list[tuple[int | None, int | None]]:
    """Each capture's ``(size, bytes it grew its pool by)``, the workspace blocks it allocated set apart."""
    workspace = result.workspace
    seen: set[int] = set()
    out = []
    for capture in result.captures:
        if capture.failed is not None:
            continue
        fresh = sum(b.size for b in capture.live_after if b.address in workspace and b.address not in seen)
        seen.update(b.address for b in capture.live_after if b.address in workspace)
        growth = capture.growth_bytes
        out.append((capture.size, None if growth is None else max(growth - fresh, 0)))
    return out


def estimate_score(result: ObservedGraphs, estimate_bytes: int, within: float) -> EstimateScore:
    """``estimate_bytes`` against what ``result``'s graphs hold; ValueError where a pool's bytes were not read."""
    measured = result.pool_peak_bytes
    if measured is None:
        raise ValueError("the pools' bytes were not read")
    summed = sum_over_sizes(result.own_bytes())  # the workspace counted once, as in the measured peak
    return EstimateScore(
        estimate_bytes=int(estimate_bytes),
        measured_bytes=measured,
        workspace_bytes=result.workspace_bytes,
        largest_graph_bytes=result.largest_graph_bytes,
        sum_over_sizes_bytes=None if summed is None else summed + result.workspace_bytes,
        graphs=len([c for c in result.captures if c.failed is None]),
        pools=len(result.pools),
        within=float(within),
    )


def observed_graphs_json(result: ObservedGraphs) -> dict[str, Any]:
    """The report's ``observed_graphs`` section."""
    workspace = result.workspace
    behind = [c.behind_allocator_bytes for c in result.captures]
    seconds = [c.capture_s for c in result.captures if c.capture_s is not None]
    kept = result.kept_alive()
    alive_pools = dict.fromkeys(c.pool for c in result.alive_at_end)
    out: dict[str, Any] = {
        "hooks": result.hooks,
        "captured": len(result.captures),
        "failed": len(result.failed),
        "replays": sum(c.replays for c in result.captures),
        "never_replayed": len(result.never_replayed),
        "pools": len(result.pools),
        "pool_bytes": result.total_pool_bytes,
        "kept_alive_bytes": sum(b.size for _, _, blocks in kept for b in blocks),
        "behind_allocator_bytes": None if not behind or None in behind else sum(b for b in behind if b is not None),
        "capture_s": round(sum(seconds), 6),
        "alive_at_end": len(result.alive_at_end),
        "alive_pool_bytes": sum(result.pool_bytes_now(p) or 0 for p in alive_pools),
        "sizes": result.sizes,
        "causes": [rule for rule, _ in result.causes],
        "passed": result.passed,
        "sites": [_site_json(result, site) for site in result.sites()],
        "graphs": _graphs_json(result.captures, workspace),
    }
    if result.options.expect_sizes is not None:
        out["expected_sizes"] = list(result.options.expect_sizes)
        out["missing_sizes"] = result.missing_sizes
    out["pool_peak_bytes"] = result.pool_peak_bytes
    out["workspace_bytes"] = result.workspace_bytes
    out["largest_graph_bytes"] = result.largest_graph_bytes
    if result.estimates:
        out["estimates"] = [score.to_json() for score in result.estimates]
    if result.coverage:
        out["coverage"] = [cover.to_json() for cover in result.coverage]
    if result.errors:
        out["errors"] = list(result.errors)
    if result.shared_device:
        out["outside_unreliable"] = result.shared_device
    return out


def _site_json(result: ObservedGraphs, site: ObservedSite) -> dict[str, Any]:
    behind = [c.behind_allocator_bytes for c in site.captures]
    pool_bytes = [result.pool_bytes(p) for p in site.pools]
    return {
        "site": site.label,
        "call_site": site.call_site.to_json() if site.call_site is not None else None,
        "graphs": len(site.captures),
        "pools": len(site.pools),
        "pool_bytes": None if None in pool_bytes else sum(b for b in pool_bytes if b is not None),
        "sizes": site.sizes,
        "replays": sum(c.replays for c in site.captures),
        "behind_allocator_bytes": None if None in behind else sum(b for b in behind if b is not None),
        "capture_s": round(sum(c.capture_s or 0.0 for c in site.captures), 6),
    }


def _graphs_json(captures: Sequence[ObservedCapture], workspace: frozenset[int]) -> list[dict[str, Any]]:
    """Each graph's entry, in capture order, with whether an earlier graph used its pool."""
    out, seen = [], set()
    for capture in captures:
        out.append(capture.to_json(workspace, shared_pool=capture.pool in seen))
        seen.add(capture.pool)
    return out


def _site_text(site: ObservedSite) -> str:
    return site.call_site.describe() if site.call_site is not None else UNKNOWN_SITE


def _graph_list(captures: Sequence[ObservedCapture], limit: int = 6) -> str:
    shown = ", ".join(f"{c.name()} at {c.site}" for c in captures[:limit])
    return shown + (f", and {len(captures) - limit} more" if len(captures) > limit else "")


def _sizes_list(sizes: Sequence[int], limit: int = 12) -> str:
    if len(sizes) <= limit:
        return str(list(sizes))
    return "[" + ", ".join(map(str, sizes[: limit - 2])) + f", ..., {sizes[-1]}]"
