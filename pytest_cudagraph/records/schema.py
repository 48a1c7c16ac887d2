"""The report's one definition: typed sections, from which validation and the published JSON Schema derive.

Every section of a report (``pytest-cudagraph/3``) is a ``msgspec.Struct`` here.
``validate.py`` checks a loaded report against these types, and
``pytest-cudagraph schema`` prints the JSON Schema generated from them, so a CI
dashboard validates reports with any standard validator.

How the types read a report:

- every field is optional (``UNSET`` when absent): a record holds the sections
  its test produced, and a field an older plugin did not write is simply absent;
- a field this module does not name is allowed and kept (a newer plugin's
  section, ``extra``): ``additionalProperties`` stays open in the schema;
- a figure is a ``Measure``: a number, ``"nan"``, ``"inf"`` or ``"-inf"`` (how
  ``json_safe`` writes what is not finite), or ``null`` when it was not measured;
- a field an older plugin wrote in another shape is a union of both shapes
  (``limit_hits``: a list of strings, or a count).

Each alias carries the words a validation error uses (``description``), which is
also the field's description in the schema.  msgspec is imported here only:
loading and validating a report imports it, writing one does not.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .bundle_schema import BundleCycle, Precompiled
from .engine_score_schema import CoverageSection, EstimateScoreSection
from .fields import (
    Components,
    Count,
    Counts,
    Flag,
    Measure,
    Measures,
    Null,
    Scalars,
    Seconds,
    Section,
    Sizes,
    Text,
    TextOrNull,
    Texts,
)

# ----------------------------------------------------------------------------
# recompiles (compile/recompiles.py)
# ----------------------------------------------------------------------------


class FunctionRecompiles(Section):
    count: Count | UnsetType = UNSET
    reasons: Texts | UnsetType = UNSET
    limit_hits: Texts | Count | UnsetType = UNSET


class GraphBreaks(Section):
    count: Count | UnsetType = UNSET
    reasons: Texts | UnsetType = UNSET
    sites: list[Any] | UnsetType = UNSET


class CallSite(Section):
    file: Text | UnsetType = UNSET
    line: Count | UnsetType = UNSET
    code: Text | UnsetType = UNSET
    function: Text | UnsetType = UNSET


class FailedGuard(Section):
    entry: TextOrNull | UnsetType = UNSET
    source: TextOrNull | UnsetType = UNSET
    expected: TextOrNull | UnsetType = UNSET
    actual: TextOrNull | UnsetType = UNSET
    origin: TextOrNull | UnsetType = UNSET
    kind: Text | UnsetType = UNSET
    guard: Text | UnsetType = UNSET
    reported_by_torch: Flag | UnsetType = UNSET


class RecompileEvent(Section):
    """One recompile or limit hit: its call site, the guards that failed, torch's own text."""

    function: Text | UnsetType = UNSET
    call_site: CallSite | Null | UnsetType = UNSET
    reasons: Texts | UnsetType = UNSET
    verbatim: Texts | UnsetType = UNSET
    guards: list[FailedGuard] | UnsetType = UNSET
    limit_hit: TextOrNull | UnsetType = UNSET


class Recompiles(Section):
    count: Count | UnsetType = UNSET
    reasons: Texts | UnsetType = UNSET
    limit_hits: Texts | Count | UnsetType = UNSET
    # per function; older records held the reasons list
    by_function: dict[str, Texts | FunctionRecompiles] | UnsetType = UNSET
    graph_breaks: GraphBreaks | UnsetType = UNSET
    events: list[RecompileEvent] | UnsetType = UNSET
    # what the watch could not count after a line of the test (its log taken away); absent where it saw all
    lost_sight: Text | UnsetType = UNSET


# ----------------------------------------------------------------------------
# caches (caches/probe.py) and cache keys (caches/keys.py)
# ----------------------------------------------------------------------------


class CacheLayer(Section):
    """The counters compare and the summary read; a layer may hold more."""

    hit: Count | UnsetType = UNSET
    miss: Count | UnsetType = UNSET
    bypass: Count | UnsetType = UNSET
    saved: Count | UnsetType = UNSET
    compiled: Count | UnsetType = UNSET
    loaded: Count | UnsetType = UNSET
    bundler_saved_files: Count | UnsetType = UNSET
    bundler_loaded_files: Count | UnsetType = UNSET


class Caches(Section):
    fxgraph: CacheLayer | UnsetType = UNSET
    aot_autograd: CacheLayer | UnsetType = UNSET
    triton: CacheLayer | UnsetType = UNSET
    bypass_reasons: dict[str, Texts] | UnsetType = UNSET
    # how the caches started: "empty" (the compile_cache passes, in directories the plugin made empty) or
    # "shared" (the caches the run shares, holding what earlier runs and tests left); absent in older reports
    start: Text | UnsetType = UNSET


class CachePasses(Section):
    """Cold and warm passes counted apart (``caches`` adds them up): per layer, each pass's counters added up."""

    tests: Count | UnsetType = UNSET
    cold: dict[str, Counts] | UnsetType = UNSET
    warm: dict[str, Counts] | UnsetType = UNSET


class CacheLookup(Section):
    """One lookup of a cache layer; its components are null where torch gave none."""

    layer: Text | UnsetType = UNSET
    outcome: Text | UnsetType = UNSET
    key: TextOrNull | UnsetType = UNSET
    # "pass" is a Python keyword: the field is named in the report as "pass"
    pass_: TextOrNull | UnsetType = msgspec.field(default=UNSET, name="pass")
    graph: Count | UnsetType = UNSET
    components: Components | Null | UnsetType = UNSET
    detail: Text | UnsetType = UNSET
    bypass_reason: Text | UnsetType = UNSET
    explained: Texts | UnsetType = UNSET
    compared_with: Text | UnsetType = UNSET


class CacheKeys(Section):
    lookups: list[CacheLookup] | UnsetType = UNSET
    note: Text | UnsetType = UNSET


class SweepFactor(Section):
    """One factor of a cache sweep (caches/sweep.py) and its verdict: "miss", "hit", "false-hit" or "bypass"."""

    name: Text | UnsetType = UNSET
    verdict: Text | UnsetType = UNSET
    # a miss: the key components that changed, "<layer>: <component>: <old> -> <new>"
    changed: Texts | UnsetType = UNSET
    # the layers that hit the base compile's entries
    layers: Texts | UnsetType = UNSET
    # a false hit: the components that could hold the factor and stayed equal, "<layer>: <component> = <value>"
    stayed_equal: Texts | UnsetType = UNSET
    # a false hit: how the outputs from the cache differ from the reference compile's
    differences: Texts | UnsetType = UNSET
    # whether a reference compile (cold, under the factor) ran
    reference: Flag | UnsetType = UNSET
    note: Text | UnsetType = UNSET


class CacheSweep(Section):
    """``compile_cache.sweep(fn, ...)``: whether the cache keys on each factor the compiled code depends on."""

    function: Text | UnsetType = UNSET
    factors: list[SweepFactor] | UnsetType = UNSET
    duration_s: Measure | UnsetType = UNSET


# ----------------------------------------------------------------------------
# graphs (graphs/capture.py, graphs/capture_cost.py) and piecewise graphs
# ----------------------------------------------------------------------------


class SizeCost(Section):
    """One size's warm-up and capture, and the device memory they took."""

    size: Count | UnsetType = UNSET
    order: Count | UnsetType = UNSET
    warmup_s: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET
    allocator_outside_pool_bytes: Measure | UnsetType = UNSET
    first_use_bytes: Measure | UnsetType = UNSET
    behind_allocator_bytes: Measure | UnsetType = UNSET


class Release(Section):
    """What the device got back when a set's graphs were released."""

    device_bytes: Measure | UnsetType = UNSET
    allocator_bytes: Measure | UnsetType = UNSET
    behind_allocator_bytes: Measure | UnsetType = UNSET


class CaptureCost(Section):
    """Each size's warm-up and capture, and the memory outside the pool by where it went."""

    warmup_s: Measure | UnsetType = UNSET
    per_size: list[SizeCost] | UnsetType = UNSET
    outside_pool_bytes: Measure | UnsetType = UNSET
    allocator_outside_pool_bytes: Measure | UnsetType = UNSET
    first_use_bytes: Measure | UnsetType = UNSET
    behind_allocator_bytes: Measure | UnsetType = UNSET
    held_behind_allocator_bytes: Measure | UnsetType = UNSET
    release: Release | UnsetType = UNSET
    # set where the GPU was shared: no reader vouches for the device figures then
    outside_unreliable: Text | UnsetType = UNSET


class GraphChain(Section):
    """One size of a breakable set (graphs/breakable.py): its graphs, the eager op calls of a replay, the pool after it."""

    size: Count | UnsetType = UNSET
    segments: Count | UnsetType = UNSET
    eager_calls: Counts | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET


class GraphSet(CaptureCost, kw_only=True):
    """One ``capture_graphs`` set: its sizes, pool, figures and checks."""

    sizes: Sizes | UnsetType = UNSET
    captured: Count | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET
    largest_graph_bytes: Measure | UnsetType = UNSET
    cublas_workspace_bytes: Measure | UnsetType = UNSET
    static_input_bytes: Measure | UnsetType = UNSET
    graph_bytes: Measures | UnsetType = UNSET
    max_abs_err: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET
    order: Text | UnsetType = UNSET
    pool: Text | UnsetType = UNSET
    keep_outputs: Flag | UnsetType = UNSET
    pool_check_passed: Flag | UnsetType = UNSET
    # the pool check's figures: bytes left allocated across captures, and free bytes the allocator's caching added
    pool_live_bytes: Measure | UnsetType = UNSET
    pool_caching_bytes: Measure | UnsetType = UNSET
    replay_checks: Count | UnsetType = UNSET
    # a breakable set: the ops its graphs end at, its graphs over all sizes, and each size's chain
    break_at: Texts | UnsetType = UNSET
    segments: Count | UnsetType = UNSET
    chains: list[GraphChain] | UnsetType = UNSET


class Graphs(GraphSet, kw_only=True):
    """A test's graphs: the sets merged, and each set under ``sets``."""

    sets: list[GraphSet] | UnsetType = UNSET


class UncapturedPiece(Section):
    piece: Text | UnsetType = UNSET
    reason: Text | UnsetType = UNSET


class PiecewiseSet(CaptureCost, kw_only=True):
    pieces: Count | UnsetType = UNSET
    capturable_pieces: Count | UnsetType = UNSET
    graphs_captured: Count | UnsetType = UNSET
    backend_compilations: Count | UnsetType = UNSET
    splitting_op_calls_total: Count | UnsetType = UNSET
    splitting_op_calls: Counts | UnsetType = UNSET
    sizes: Sizes | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET
    max_abs_err: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET
    strategy: Text | UnsetType = UNSET
    backend: Text | UnsetType = UNSET
    # every piece that runs without a graph, and why; calls that replayed none, by reason
    uncaptured: list[UncapturedPiece] | UnsetType = UNSET
    uncaptured_calls: Counts | UnsetType = UNSET


class Piecewise(PiecewiseSet, kw_only=True):
    sets: list[PiecewiseSet] | UnsetType = UNSET


class CudagraphSkip(Section):
    function: TextOrNull | UnsetType = UNSET
    location: TextOrNull | UnsetType = UNSET
    reason: Text | UnsetType = UNSET
    code: Text | UnsetType = UNSET
    arguments: Texts | UnsetType = UNSET
    named_by: Text | UnsetType = UNSET


class FunctionRerecords(Section):
    """One function's recordings under reduce-overhead (graphs/rerecords.py): the shapes in the order recorded."""

    recordings: Count | UnsetType = UNSET
    rerecords: Count | UnsetType = UNSET
    shapes: Texts | UnsetType = UNSET
    per_shape: Counts | UnsetType = UNSET


class ReduceOverhead(Section):
    """``mode="reduce-overhead"`` graphs (graphs/reduce_overhead.py): recordings, skips, regions."""

    recordings: Count | UnsetType = UNSET
    skips: Count | UnsetType = UNSET
    recorded_non_static_inputs: Count | UnsetType = UNSET
    partitions: Count | UnsetType = UNSET
    tree_nodes: Count | UnsetType = UNSET
    skip_reasons: Texts | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET
    skipped: list[CudagraphSkip] | UnsetType = UNSET
    # per region, its calls by what they did
    regions: dict[str, Counts] | UnsetType = UNSET
    regions_total: Count | UnsetType = UNSET
    regions_cudagraphed: Count | UnsetType = UNSET
    calls: Counts | UnsetType = UNSET
    fraction_of_calls: Measure | UnsetType = UNSET
    # per function: its recordings, re-recordings at new shapes, and the shapes in order
    rerecords: dict[str, FunctionRerecords] | UnsetType = UNSET
    # what the watch could not count after a line of the test (a reset it could not answer); absent where it saw all
    lost_sight: Text | UnsetType = UNSET


# ----------------------------------------------------------------------------
# observed graphs (graphs/observe.py): the graphs the code under test captured itself
# ----------------------------------------------------------------------------


class ObservedBlock(Section):
    """A block still allocated in the pool after a capture."""

    size: Count | UnsetType = UNSET
    requested_size: Count | UnsetType = UNSET
    allocated_at: Text | UnsetType = UNSET
    possibly_cublas_workspace: Flag | UnsetType = UNSET


class ObservedGraph(Section):
    """One graph the code under test captured: its call site, pool, cost, inputs and replays."""

    index: Count | UnsetType = UNSET
    call_site: CallSite | Null | UnsetType = UNSET
    source: Text | UnsetType = UNSET
    pool: Sizes | UnsetType = UNSET
    # whether an earlier observed graph used the same pool
    shared_pool: Flag | UnsetType = UNSET
    size: Count | Null | UnsetType = UNSET
    input_shapes: list[Sizes] | UnsetType = UNSET
    pool_bytes_before: Measure | UnsetType = UNSET
    pool_bytes_after: Measure | UnsetType = UNSET
    growth_bytes: Measure | UnsetType = UNSET
    live_bytes: Measure | UnsetType = UNSET
    live_blocks: list[ObservedBlock] | UnsetType = UNSET
    behind_allocator_bytes: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET
    replays: Count | UnsetType = UNSET
    alive_at_end: Flag | UnsetType = UNSET
    failed: Text | UnsetType = UNSET


class ObservedSite(Section):
    """The graphs of one call site."""

    site: Text | UnsetType = UNSET
    call_site: CallSite | Null | UnsetType = UNSET
    graphs: Count | UnsetType = UNSET
    pools: Count | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET
    sizes: Sizes | UnsetType = UNSET
    replays: Count | UnsetType = UNSET
    behind_allocator_bytes: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET


class ObservedGraphs(Section):
    """``cudagraph(observe=True)`` / ``observe_graphs()``: every graph captured in the test body, and the verdict."""

    hooks: Text | UnsetType = UNSET
    captured: Count | UnsetType = UNSET
    failed: Count | UnsetType = UNSET
    replays: Count | UnsetType = UNSET
    never_replayed: Count | UnsetType = UNSET
    pools: Count | UnsetType = UNSET
    pool_bytes: Measure | UnsetType = UNSET
    kept_alive_bytes: Measure | UnsetType = UNSET
    behind_allocator_bytes: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET
    alive_at_end: Count | UnsetType = UNSET
    alive_pool_bytes: Measure | UnsetType = UNSET
    sizes: Sizes | UnsetType = UNSET
    expected_sizes: Sizes | UnsetType = UNSET
    missing_sizes: Sizes | UnsetType = UNSET
    causes: Texts | UnsetType = UNSET
    passed: Flag | UnsetType = UNSET
    errors: Texts | UnsetType = UNSET
    # set where the GPU was shared: no reader vouches for the device figures then
    outside_unreliable: Text | UnsetType = UNSET
    sites: list[ObservedSite] | UnsetType = UNSET
    graphs: list[ObservedGraph] | UnsetType = UNSET
    # what the graphs hold: the peak of their pools, cuBLAS's workspace in them, the largest graph's own bytes
    pool_peak_bytes: Measure | Null | UnsetType = UNSET
    workspace_bytes: Measure | UnsetType = UNSET
    largest_graph_bytes: Measure | Null | UnsetType = UNSET
    estimates: list[EstimateScoreSection] | UnsetType = UNSET
    coverage: list[CoverageSection] | UnsetType = UNSET


# ----------------------------------------------------------------------------
# compile time (compile/compile_time.py)
# ----------------------------------------------------------------------------


class CompiledFrame(Section):
    compile_id: Text | UnsetType = UNSET
    function: Text | UnsetType = UNSET
    total_s: Measure | UnsetType = UNSET
    phases: Measures | UnsetType = UNSET
    failed: Text | UnsetType = UNSET


class PassTime(Section):
    label: Text | UnsetType = UNSET
    cold_s: Measure | UnsetType = UNSET
    warm_s: Measure | UnsetType = UNSET
    warm_cold_ratio: Measure | UnsetType = UNSET


class CompileTime(Section):
    """Per phase, per compiled frame; a phase this torch does not record is absent."""

    total_s: Measure | UnsetType = UNSET
    phases: Measures | UnsetType = UNSET
    frames: list[CompiledFrame] | UnsetType = UNSET
    unavailable: Texts | UnsetType = UNSET
    note: Text | UnsetType = UNSET
    passes: list[PassTime] | UnsetType = UNSET


# ----------------------------------------------------------------------------
# ranks (ranks/results.py): the run, then each rank with its own graph sets
# ----------------------------------------------------------------------------


class RankError(Section):
    type: Text | UnsetType = UNSET
    message: Text | UnsetType = UNSET
    where: TextOrNull | UnsetType = UNSET


class CollectiveAlignment(Section):
    """A rank's captured collectives compared with the other ranks' before the first replay (ranks/alignment.py)."""

    exchanges: Count | UnsetType = UNSET
    sizes: Count | UnsetType = UNSET
    collectives: Count | UnsetType = UNSET
    seconds: Measure | UnsetType = UNSET


class Rank(Section):
    rank: Count | UnsetType = UNSET
    device: Text | UnsetType = UNSET
    outcome: Text | UnsetType = UNSET
    stage: TextOrNull | UnsetType = UNSET
    error: RankError | Null | UnsetType = UNSET
    waiting_at: TextOrNull | UnsetType = UNSET
    agreement_checks: Count | UnsetType = UNSET
    placement: Scalars | UnsetType = UNSET
    duration_s: Measure | UnsetType = UNSET
    exitcode: Count | Null | UnsetType = UNSET
    collective_alignment: CollectiveAlignment | UnsetType = UNSET
    graphs: Graphs | UnsetType = UNSET


class RanksRun(Section):
    world_size: Count | UnsetType = UNSET
    backend: Text | UnsetType = UNSET
    timeout_s: Measure | UnsetType = UNSET
    outcome: Text | UnsetType = UNSET
    duration_s: Measure | UnsetType = UNSET
    first_failure: Count | Null | UnsetType = UNSET
    message: TextOrNull | UnsetType = UNSET
    per_rank: list[Rank] | UnsetType = UNSET


class Ranks(RanksRun, kw_only=True):
    """A multi-rank run; a test that ran several bodies keeps each run under ``runs``."""

    runs: list[RanksRun] | UnsetType = UNSET


# ----------------------------------------------------------------------------
# pytest-cudagraph startup (tools/startup_cost.py): per kind of run, each figure's statistics
# ----------------------------------------------------------------------------


class StartupStats(Section):
    median: Measure | UnsetType = UNSET
    min: Measure | UnsetType = UNSET
    max: Measure | UnsetType = UNSET
    spread: Measure | UnsetType = UNSET
    trimmed_spread: Measure | UnsetType = UNSET
    # the median absolute deviation: what compare reads as the runs' noise
    mad: Measure | UnsetType = UNSET
    n: Count | UnsetType = UNSET


class StartupSample(Section):
    pass_: Text | UnsetType = msgspec.field(default=UNSET, name="pass")
    index: Count | UnsetType = UNSET
    exitcode: Count | Null | UnsetType = UNSET
    outcome: TextOrNull | UnsetType = UNSET
    wall_s: Measure | UnsetType = UNSET
    duration_s: Measure | UnsetType = UNSET
    compile_s: Measure | UnsetType = UNSET
    capture_s: Measure | UnsetType = UNSET
    phases: Measures | UnsetType = UNSET
    error: TextOrNull | UnsetType = UNSET
    # instructions torch.compile executed in the run (callgrind, startup --instructions)
    compile_instructions: Count | UnsetType = UNSET


class StartupPass(Section):
    runs: Count | UnsetType = UNSET
    wall_s: StartupStats | UnsetType = UNSET
    duration_s: StartupStats | UnsetType = UNSET
    compile_s: StartupStats | UnsetType = UNSET
    capture_s: StartupStats | UnsetType = UNSET
    compile_instructions: StartupStats | UnsetType = UNSET
    phases: dict[str, StartupStats] | UnsetType = UNSET
    samples: list[StartupSample] | UnsetType = UNSET


class Startup(Section):
    runs: Count | UnsetType = UNSET
    complete: Flag | UnsetType = UNSET
    statistic: Text | UnsetType = UNSET
    spread: Text | UnsetType = UNSET
    trimmed_spread: Text | UnsetType = UNSET
    mad: Text | UnsetType = UNSET
    order: Text | UnsetType = UNSET
    command: Texts | UnsetType = UNSET
    cold: StartupPass | UnsetType = UNSET
    warm: StartupPass | UnsetType = UNSET
    warm_over_cold: Measures | UnsetType = UNSET
    errors: Texts | UnsetType = UNSET
    notes: Texts | UnsetType = UNSET


# ----------------------------------------------------------------------------
# a test's record, the run's summary, the report
# ----------------------------------------------------------------------------


class Failure(Section):
    """A test's first failed phase; a failure of one of the plugin's checks names the check and the user's line."""

    when: Text | UnsetType = UNSET
    message: Text | UnsetType = UNSET
    # the check that failed (plugin/failure_site.py's RULES): "max_recompiles", "capture", ...
    rule: Text | UnsetType = UNSET
    # the user's line it points at: relative to the working directory when inside it
    file: Text | UnsetType = UNSET
    line: Count | UnsetType = UNSET


class TestRecord(Section):
    """One test's record: its outcome, and the sections its test produced."""

    # not collected by pytest, whose default collects classes named Test*
    __test__ = False

    outcome: Text
    duration_s: Measure | UnsetType = UNSET
    recompiles: Recompiles | UnsetType = UNSET
    caches: Caches | UnsetType = UNSET
    cache_passes: CachePasses | UnsetType = UNSET
    cache_keys: CacheKeys | UnsetType = UNSET
    cache_sweeps: list[CacheSweep] | UnsetType = UNSET
    bundle_cycle: list[BundleCycle] | UnsetType = UNSET
    precompiled: list[Precompiled] | UnsetType = UNSET
    graphs: Graphs | UnsetType = UNSET
    piecewise: Piecewise | UnsetType = UNSET
    reduce_overhead: ReduceOverhead | UnsetType = UNSET
    observed_graphs: ObservedGraphs | UnsetType = UNSET
    compile_time: CompileTime | UnsetType = UNSET
    ranks: Ranks | UnsetType = UNSET
    placement: Scalars | UnsetType = UNSET
    failure: Failure | UnsetType = UNSET
    skip_reason: Text | UnsetType = UNSET
    startup: Startup | UnsetType = UNSET
    # the earlier attempts of a test a rerun plugin (pytest-rerunfailures) ran again, each its own record;
    # the record's own fields are the last attempt's
    reruns: list[TestRecord] | UnsetType = UNSET
    # anything a test or a newer plugin adds: any JSON
    extra: Any = UNSET


class ShardSource(Section):
    group: Count | UnsetType = UNSET
    exitstatus: Count | UnsetType = UNSET
    selected: Count | UnsetType = UNSET
    deselected: Count | UnsetType = UNSET
    tests: Count | UnsetType = UNSET
    file: Text | UnsetType = UNSET
    created: Text | UnsetType = UNSET
    complete: Flag | UnsetType = UNSET
    durations_path: Text | UnsetType = UNSET
    env: Scalars | UnsetType = UNSET


class Shard(Section):
    """pytest-split's shard of a run; a merged report names the shards it was made from instead of a group."""

    group: Count | UnsetType = UNSET
    splits: Count | UnsetType = UNSET
    selected: Count | UnsetType = UNSET
    deselected: Count | UnsetType = UNSET
    algorithm: Text | UnsetType = UNSET
    durations_path: Text | UnsetType = UNSET
    # sha256 of the node ids pytest-split split and the arguments that selected them
    suite_digest: Text | UnsetType = UNSET
    merged: Sizes | UnsetType = UNSET
    sources: list[ShardSource] | UnsetType = UNSET


class RunFacts(Section):
    """How far the run got (records/progress.py)."""

    complete: Flag | UnsetType = UNSET
    incomplete_reasons: Texts | UnsetType = UNSET
    not_run: Texts | UnsetType = UNSET
    not_run_count: Count | UnsetType = UNSET
    deselected: Count | UnsetType = UNSET
    selection: dict[str, Text] | UnsetType = UNSET
    shard: Shard | UnsetType = UNSET


class Summary(RunFacts, kw_only=True):
    tests: Count | UnsetType = UNSET
    recompiles: Count | UnsetType = UNSET
    recompile_limit_hits: Count | UnsetType = UNSET
    graph_breaks: Count | UnsetType = UNSET
    graphs_captured: Count | UnsetType = UNSET
    outcomes: Counts | UnsetType = UNSET
    caches: dict[str, Counts] | UnsetType = UNSET
    cache_passes: CachePasses | UnsetType = UNSET
    exitstatus: Count | UnsetType = UNSET


class FixtureSetup(Section):
    """What a fixture wider than a function compiled while it was set up, apart from the test it was set up for."""

    fixture: Text | UnsetType = UNSET
    scope: Text | UnsetType = UNSET
    set_up_for: Text | UnsetType = UNSET
    worker: Text | UnsetType = UNSET
    caches: Caches | UnsetType = UNSET
    lookups: list[CacheLookup] | UnsetType = UNSET


class Report(Section):
    """A pytest-cudagraph report (``--cudagraph-report``)."""

    # a pytest-cudagraph/1 or /2 file (an older plugin's) is read as /3 (older_schemas.report_as_current)
    schema: Literal["pytest-cudagraph/3"]
    tests: dict[str, TestRecord]
    created: Text | UnsetType = UNSET
    env: Scalars | UnsetType = UNSET
    # the run's table: the cache-key components every lookup of the run shares (cache_components.py); a
    # lookup's own components lack them, and its whole set is this table with its own over it
    cache_components: Components | UnsetType = UNSET
    summary: Summary | UnsetType = UNSET
    # seconds per node id of every test that finished, for pytest-split
    durations: dict[str, Seconds] | UnsetType = UNSET
    # what wider-scoped fixtures compiled, kept out of the tests they were set up for
    fixture_setups: list[FixtureSetup] | UnsetType = UNSET
