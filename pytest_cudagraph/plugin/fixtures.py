"""The plugin's fixtures: thin handles on the plain API, with the test's defaults and record.

The handles of ``cudagraphs`` and ``piecewise`` are in ``handles``, that of
``cudagraph_ranks`` in ``rank_fixture``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .items import MARKERS_KEY, RECOMPILE_WATCH_KEY, STATE_KEY, record_of

if TYPE_CHECKING:  # the handles are imported when a test asks for them: pytest registers this module in every run
    from ..graphs.observe import GraphObservation
    from .handles import CudagraphsFixture, PiecewiseFixture
    from .rank_fixture import RanksFixture
    from .session import RunState


def run_state(request: pytest.FixtureRequest) -> RunState:
    """The run's state, the plugin switched on first where nothing did before the test asked for a fixture.

    A test may ask for a fixture by name (``request.getfixturevalue("compile_cache")``)
    in a run with no plugin option, from a module that imported no torch at
    collection: nothing switched the plugin on before that call.
    """
    config = request.config
    if STATE_KEY not in config.stash:
        from .activation import activate

        activate(config, request.session, collected=True)
    return config.stash[STATE_KEY]


def _capture_defaults(request: pytest.FixtureRequest) -> dict[str, Any]:
    state = run_state(request)
    marker = request.node.stash.get(MARKERS_KEY, {}).get("cudagraph")
    sizes = (marker.capture_sizes if marker else None) or state.options.capture_sizes
    rtol = marker.rtol if marker and marker.rtol is not None else state.options.rtol
    atol = marker.atol if marker and marker.atol is not None else state.options.atol
    return {"sizes": sizes, "rtol": rtol, "atol": atol}


def _break_at_default(request: pytest.FixtureRequest) -> Any:
    """The test's ``@pytest.mark.cudagraph(break_at=...)``, the default of ``cudagraphs.capture`` and ``.agree``."""
    marker = request.node.stash.get(MARKERS_KEY, {}).get("cudagraph")
    return marker.break_at if marker else None


@pytest.fixture
def cudagraphs(request: pytest.FixtureRequest) -> Iterator[CudagraphsFixture]:
    """Capture a function per batch size in one shared pool and check replay, pointers and pool size.

    ``cudagraphs.capture(fn, make_inputs, sizes=None, ...)`` returns a GraphSet;
    defaults come from the test's ``cudagraph`` marker and the ini options (with the
    marker's ``break_at``, a breakable one).  ``cudagraphs.agree(fn, make_inputs)``
    checks that full, breakable and piecewise graphs give eager's answer.
    ``cudagraphs.watch_trees()`` counts reduce-overhead recordings and skips.
    Skips when no CUDA device is visible.
    """
    from .handles import CudagraphsFixture

    handle = CudagraphsFixture(
        record=record_of(request.node), break_at=_break_at_default(request), **_capture_defaults(request)
    )
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def recompiles(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Watch Dynamo for the whole test: ``.count``, ``.reasons``, ``.by_function``, ``.assert_at_most(n)``.

    The test starts from an empty Dynamo cache (so do tests marked ``max_recompiles``):
    entries compiled by earlier tests would otherwise show up in this test's reasons.
    The watch reports into the test's record when it ends.
    """
    from ..compile.recompiles import start_from_empty_dynamo_cache, watch_recompiles

    run_state(request)  # the watch reports into the test's record: the plugin must be on
    start_from_empty_dynamo_cache()
    with watch_recompiles() as watch:
        request.node.stash[RECOMPILE_WATCH_KEY] = watch
        try:
            yield watch
        finally:
            del request.node.stash[RECOMPILE_WATCH_KEY]


RECORD_WITHOUT_MARKER = (
    "compile_cache.record() compares the cold and warm passes of @pytest.mark.compile_cache; this test has no "
    "such marker, so nothing would be compared: add the marker, or use compile_cache.cold_warm(fn, ...)"
)


@pytest.fixture
def compile_cache(request: pytest.FixtureRequest) -> Iterator[Any]:
    """An isolated compile-cache directory: counters, ``.record()``, ``.cold_warm()``, ``.portable()``, ``.sweep()``.

    ``compile_cache.record(name, tensor)`` keeps a tensor of the running pass: under
    ``@pytest.mark.compile_cache`` the warm pass must record the same tensors as the
    cold one; in a test without the marker, outside ``cold_warm()``'s passes, it is a
    MisuseError (nothing would compare it).  ``compile_cache.cold_warm(fn, *args)`` runs ``fn`` against an empty
    cache, then warm, and returns the pair (``.check()`` it); ``.stats()`` gives the
    hits, misses, saves and bypasses of each layer so far.  ``compile_cache.sweep(fn,
    *args, factors=...)`` asks whether the cache keys on each factor (a false hit
    fails its ``.check()``); ``.relocate(fn, *args)`` runs warm after everything moved.
    """
    from ..caches.probe import cache_probe

    state = run_state(request)
    with cache_probe(root=state.cache_root(), name=request.node.name) as probe:
        if request.node.stash.get(MARKERS_KEY, {}).get("compile_cache") is None:
            # without the marker no pass runs the body: what record() keeps outside cold_warm() and the other
            # passes would be compared with nothing, and the test would pass having checked nothing
            probe.record_outside_pass = RECORD_WITHOUT_MARKER
        yield probe
    record = record_of(request.node)
    # the compile_cache marker's figures, when the test has one, are the more precise
    if record.get("caches") is None:
        record.set("caches", probe.result())
    if probe.pairs:
        # the passes of each pair, so that the report shows the warm pass, not cold + warm added up
        record.note("cold_warm", [pair.to_json() for pair in probe.pairs])
    if probe.sweeps:
        from ..caches.sweep import SweepsSection

        record.set("cache_sweeps", SweepsSection(probe.sweeps))  # records.schema.CacheSweep each
    if probe.bundle_cycles or probe.precompiled_checks:
        from ..records.record import JsonList

        if probe.bundle_cycles:
            record.set("bundle_cycle", JsonList(probe.bundle_cycles))  # records.schema.BundleCycle each
        if probe.precompiled_checks:
            record.set("precompiled", JsonList(probe.precompiled_checks))  # records.schema.Precompiled each


@pytest.fixture
def piecewise(request: pytest.FixtureRequest) -> Iterator[PiecewiseFixture]:
    """``piecewise(module, splitting_ops, capture_sizes=None, ...)``: split at splitting ops, capture the rest."""
    from .handles import PiecewiseFixture

    handle = PiecewiseFixture(record=record_of(request.node), **_capture_defaults(request))
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def cudagraph_ranks(request: pytest.FixtureRequest) -> Iterator[RanksFixture]:
    """Run a body on ``world_size`` ranks (one process per GPU, NCCL) with its graphs captured and checked.

    ``cudagraph_ranks.run(body, *args)`` runs ``body(rank, *args)`` on every rank;
    ``world_size`` and ``timeout`` come from ``@pytest.mark.cudagraph(world_size=N,
    timeout=S)``.  Skips with "needs N GPUs, sees M" where too few GPUs are
    visible; ``run(..., backend="gloo")`` runs CPU ranks anywhere.  A rank that
    fails, or hangs, fails the test within the timeout with its own message and
    where the other ranks were; the report gets a ``ranks`` section.
    """
    from .rank_fixture import RanksFixture

    state = run_state(request)
    marker = request.node.stash.get(MARKERS_KEY, {}).get("cudagraph")
    yield RanksFixture(
        record=record_of(request.node),
        world_size=marker.world_size if marker else None,
        timeout=marker.timeout if marker else None,
        align_collectives=marker.align_collectives if marker else True,
        enabled=state.options.enabled,
        pinned_device=state.pinned_device,
        **_capture_defaults(request),
    )


@pytest.fixture
def graph_observation(request: pytest.FixtureRequest) -> GraphObservation:
    """The ``GraphObservation`` that ``@pytest.mark.cudagraph(observe=True)`` runs around the test body.

    It observes while the body runs: ``graph_observation.check_estimate(bytes)``
    scores the engine's graph-memory estimate, ``graph_observation.check_coverage(
    call, batches, make_input)`` checks that every batch replays a graph, and
    ``graph_observation.result()`` gives the verdict so far.
    """
    marker = request.node.stash.get(MARKERS_KEY, {}).get("cudagraph")
    if marker is None or not marker.observe:
        from ..errors import MisuseError

        raise MisuseError(
            "the graph_observation fixture observes the graphs of an observe=True test: add "
            "@pytest.mark.cudagraph(observe=True) to the test, or use `with observe_graphs() as observed:`"
        )
    from .observe import observation_of

    run_state(request)
    return observation_of(request.node)
