"""The engine scores of observed graphs: the graph-memory estimate and batch-size coverage, from recorded figures.

These stand in for the GPU: the captures are recorded figures, and the engine's
replays are the recorder's replay events, published here as the gateway's wrapper
publishes them.  ``tests/gpu/test_observe_gpu.py`` runs both scores on real
captures of real engines.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.errors import InvariantViolation, MisuseError
from pytest_cudagraph.graphs.observe import GraphObservation
from pytest_cudagraph.graphs.observe_scores import batch_ranges, measure_coverage, sum_over_sizes
from pytest_cudagraph.graphs.observe_verdict import ObservedCapture, ObservedGraphs
from pytest_cudagraph.graphs.pool_blocks import LiveBlock

MIB = 2**20
POOL = (1, 7)
WORKSPACE = 32 * MIB


def capture(index, size, before, after, live=()):
    return ObservedCapture(
        index=index,
        call_site=None,
        pool=POOL,
        pool_bytes_before=before,
        pool_bytes_after=after,
        live_after=tuple(live),
        size=size,
    )


def workspace_block():
    return LiveBlock(pool_id=POOL, address=0x9000, size=WORKSPACE, requested_size=WORKSPACE)


def engine_graphs(sizes=(64, 32, 16, 8), largest=40 * MIB):
    """An engine's graphs, largest first into one pool: the first grows it (its graph and cuBLAS's workspace)."""
    captures = [capture(0, sizes[0], 0, largest + WORKSPACE, [workspace_block()])]
    for index, size in enumerate(sizes[1:], start=1):
        captures.append(capture(index, size, largest + WORKSPACE, largest + WORKSPACE, [workspace_block()]))
    return ObservedGraphs(captures=tuple(captures), workspace_sizes=frozenset({WORKSPACE}))


def test_the_pool_peak_includes_the_workspace_and_the_largest_graph_leaves_it_out():
    graphs = engine_graphs()
    assert graphs.pool_peak_bytes == 72 * MIB
    assert graphs.workspace_bytes == WORKSPACE
    assert graphs.largest_graph_bytes == 40 * MIB
    # 64 rows cost 40 MiB; budgeted on their own, 32, 16 and 8 rows cost 20, 10 and 5 MiB
    assert sum_over_sizes(graphs.own_bytes()) == 75 * MIB


def test_the_measured_peak_passes_and_a_summed_estimate_fails_naming_the_mistake():
    graphs = engine_graphs()
    assert graphs.score_estimate(72 * MIB).passed
    assert graphs.score_estimate(int(72 * MIB * 1.09)).passed
    summed = graphs.score_estimate(75 * MIB + WORKSPACE)
    assert not summed.passed
    message = summed.message()
    head = message.splitlines()[0]
    assert "is over what the graphs hold, 72.0 MiB, by more than 10%" in head
    assert "the estimate is about the sum over sizes: the 4 graphs share 1 pool" in head
    assert "  of which cuBLAS's workspace: 32.0 MiB" in message.splitlines()
    assert "  largest single graph: 40.0 MiB" in message.splitlines()
    assert "  sum over sizes: 107.0 MiB (every graph budgeted on its own, the workspace once)" in message.splitlines()
    assert "ratio 1.49x, +49%" in message


def test_an_estimate_without_the_workspace_fails_saying_so():
    score = engine_graphs().score_estimate(40 * MIB)
    assert not score.passed
    assert "the estimate is about the peak without cuBLAS's workspace" in score.message()
    assert "is under what the graphs hold" in score.message()


@given(
    largest=st.integers(1, 4096).map(lambda m: m * MIB),
    factor=st.floats(0.0, 3.0, allow_nan=False),
    within=st.floats(0.01, 0.5),
)
def test_an_estimate_passes_exactly_when_it_is_within_the_tolerance(largest, factor, within):
    graphs = engine_graphs(largest=largest)
    estimate = int((largest + WORKSPACE) * factor)
    score = graphs.score_estimate(estimate, within)
    assert score.passed == (abs(estimate / (largest + WORKSPACE) - 1.0) <= within + 1e-9)
    assert score.to_json()["passed"] == score.passed


@given(st.lists(st.integers(1, 300), min_size=1, max_size=60))
def test_batch_ranges_name_every_batch_once_in_order(batches):
    text = batch_ranges(batches)
    named = []
    for part in text.split(", "):
        first, _, last = part.partition("-")
        named.extend(range(int(first), int(last or first) + 1))
    assert named == sorted(set(batches))


class Ladder:
    """An engine's replay ladder: the smallest captured size that holds the batch, else eager.

    Its replays are published to the recorder the way the gateway's wrapper
    publishes ``CUDAGraph.replay``: a stand-in for real graphs.
    """

    def __init__(self, recorder, sizes, keys):
        self.recorder, self.sizes, self.keys = recorder, sorted(sizes), keys

    def __call__(self, batch):
        fits = [s for s in self.sizes if s >= batch]
        if fits:
            self.recorder.replayed(self.keys[min(fits)])


def observed_ladder(sizes):
    """An observation whose recorder saw ``sizes`` captured (a graph per size, key = size)."""
    observation = GraphObservation(readings=_NoReadings())
    recorder = observation.recorder
    for index, size in enumerate(sorted(sizes, reverse=True)):
        recorder._records[index] = capture(index, size, 0, 0)  # a recorded capture, as the recorder keeps it
        recorder._live[size] = index
    observation.active = True
    return observation, Ladder(recorder, sizes, {s: s for s in sizes})


class _NoReadings:
    def counters(self, device_free):
        return None

    def segments(self, pools):
        return []

    def workspace_sizes(self):
        return frozenset()


def test_coverage_names_the_batches_a_short_ladder_leaves_eager_as_ranges():
    observation, engine = observed_ladder([1, 2, 4, 8, 16, 32])
    with pytest.raises(InvariantViolation) as failed:
        observation.check_coverage(engine, range(1, 49), lambda batch: batch)
    message = str(failed.value)
    assert message.splitlines()[0] == "batch-size coverage: batches 33-48 ran eager: no graph replayed."
    assert "32 of 48 batches replayed a graph (67%); padding 0 to 15 rows" in message
    (recorded,) = observation.result().coverage
    assert recorded.eager == list(range(33, 49)) and recorded.calls[20].padding == 11


def test_coverage_fails_a_batch_padded_beyond_max_padding_and_passes_a_dense_ladder():
    observation, engine = observed_ladder([8, 64])
    with pytest.raises(InvariantViolation, match=r"batch 9 replayed the graph of size 64 \(padding 55\)"):
        observation.check_coverage(engine, range(1, 65), lambda batch: batch, max_padding=8)
    dense, engine = observed_ladder(range(8, 65, 8))
    coverage = dense.check_coverage(engine, range(1, 65), lambda batch: batch, max_padding=7)
    assert coverage.passed and coverage.replay_ratio == 1.0
    assert dense.result().to_json()["coverage"][0]["eager_batches"] == []


@settings(max_examples=40, deadline=None)
@given(
    max_num_seqs=st.integers(1, 256),
    ladder=st.lists(st.integers(1, 256), min_size=1, max_size=12, unique=True),
)
def test_a_ladder_covers_its_max_num_seqs_exactly_when_its_largest_size_reaches_it(max_num_seqs, ladder):
    observation, engine = observed_ladder(ladder)
    covered = max(ladder) >= max_num_seqs
    coverage = measure_coverage(
        engine,
        list(range(1, max_num_seqs + 1)),
        lambda batch: batch,
        observation.recorder.replay_counts,
        lambda: {c.index: c.size for c in observation.recorder.captures},
        None,
    )
    assert coverage.passed == covered
    assert coverage.eager == list(range(max(ladder) + 1, max_num_seqs + 1))


def test_replays_of_graphs_captured_before_the_observation_count_with_their_padding_unknown():
    observation, _ = observed_ladder([8])
    recorder = observation.recorder
    coverage = observation.check_coverage(lambda batch: recorder.replayed(12345), [1, 2], lambda batch: batch)
    assert coverage.passed and [c.unknown for c in coverage.calls] == [1, 1]
    assert "padding not judged" in coverage.summary()


def test_the_scores_refuse_arguments_that_cannot_work_in_one_sentence():
    observation, engine = observed_ladder([8])
    for call, text in [
        (lambda: observation.check_estimate(-1), "check_estimate(estimate_bytes=-1): give the engine's estimate"),
        (lambda: observation.check_estimate("1 GiB"), "as a number of bytes"),
        (lambda: observation.check_estimate(10, within=True), "check_estimate(within=True): give a fraction"),
        (lambda: observation.check_coverage(engine, [0, 1], int), "check_coverage(batches=[0, 1])"),
        (lambda: observation.check_coverage(engine, [1], int, max_padding=-2), "max_padding=-2"),
    ]:
        with pytest.raises(MisuseError) as refused:
            call()
        assert str(refused.value).startswith(text) or text in str(refused.value)
        assert "\n" not in str(refused.value)
    idle = GraphObservation(readings=_NoReadings())
    with pytest.raises(MisuseError, match="the observation is not running"):
        idle.check_coverage(engine, [1], int)
    empty = GraphObservation(readings=_NoReadings())
    empty.active = True
    with pytest.raises(MisuseError, match="no CUDA graph was captured while observed"):
        empty.check_estimate(10)
