"""Observing the graphs the code under test captures itself: the verdicts on recorded captures, the recorder on
recorded readings, and the lifetime of the gateway's hooks or wrappers (no GPU: tests/gpu/test_observe_gpu.py
captures for real).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph import _compat
from pytest_cudagraph.compile.call_site import CallSite
from pytest_cudagraph.errors import InvariantViolation
from pytest_cudagraph.graphs.observe import GraphObservation, observe_graphs
from pytest_cudagraph.graphs.observe_recorder import Counters, GraphRecorder
from pytest_cudagraph.graphs.observe_verdict import (
    ObservedCapture,
    ObservedGraphs,
    ObserveOptions,
    infer_sizes,
    workspace_candidates,
)
from pytest_cudagraph.graphs.pool_blocks import LiveBlock
from pytest_cudagraph.records.record import TestRecord
from pytest_cudagraph.records.schema import TestRecord as TypedRecord
from pytest_cudagraph.render.plain_text import MIB

ENGINE = CallSite("engine.py", 42, "with torch.cuda.graph(g, pool=self.pool):", "capture")
OTHER = CallSite("engine.py", 90, "with torch.cuda.graph(g):", "capture_prefill")
SHARED = (0, 1)


def capture(index, pool=SHARED, size=None, site=ENGINE, live=(), before=0, after=2 * MIB, **more):
    shapes = ((size, 256),) if size is not None else ()
    return ObservedCapture(
        index=index,
        call_site=site,
        pool=pool,
        pool_bytes_before=before,
        pool_bytes_after=after,
        live_after=tuple(live),
        input_shapes=shapes,
        replays=more.pop("replays", 1),
        **more,
    )


def block(address, size=512 * 1024, requested=None, pool=SHARED, frames=()):
    return LiveBlock(pool, address, size, requested if requested is not None else size, frames)


def largest_first(sizes, pool=SHARED, **more):
    """One graph per size, largest first, into ``pool``: the first takes 20 MiB, the others nothing."""
    ordered = sorted(sizes, reverse=True)
    return [
        capture(i, pool, size, before=0 if i == 0 else 20 * MIB, after=20 * MIB, **more)
        for i, size in enumerate(ordered)
    ]


# ----------------------------------------------------------------------------
# the verdicts, on recorded captures
# ----------------------------------------------------------------------------


def test_graphs_of_one_site_sharing_one_pool_pass():
    result = ObservedGraphs(tuple(largest_first([1, 2, 4, 8])), ObserveOptions(expect_sizes=(1, 2, 4, 8)))
    assert result.passed, result.message()
    assert result.to_json()["pool_bytes"] == 20 * MIB
    assert [g["shared_pool"] for g in result.to_json()["graphs"]] == [False, True, True, True]
    assert result.sizes == [1, 2, 4, 8]


def test_a_pool_per_size_fails_naming_the_site_the_pools_and_what_one_pool_saves():
    captures = [capture(i, (0, i + 1), size, after=(4 - i) * 10 * MIB) for i, size in enumerate([8, 4, 2, 1])]
    result = ObservedGraphs(tuple(captures))
    rule, sentence = result.causes[0]
    assert rule == "separate pools"
    assert "the 4 graphs captured at engine.py:42 `with torch.cuda.graph(g, pool=self.pool):` use 4 pools" in sentence
    assert "holding 100.0 MiB in all" in sentence and "the largest of them, 40.0 MiB (60.0 MiB less)" in sentence
    assert "torch.cuda.graph_pool_handle()" in sentence
    assert ObservedGraphs(tuple(captures), ObserveOptions(one_pool=False)).passed


def test_two_call_sites_with_a_pool_each_are_not_separate_pools():
    captures = [capture(0, (0, 1), 8), capture(1, (0, 2), 8, site=OTHER)]
    assert ObservedGraphs(tuple(captures)).passed


def test_a_block_kept_across_the_next_capture_fails_naming_the_block_and_its_line():
    kept = block(0x1000, 2 * MIB, frames=(("/srv/engine.py", 77, "capture"),))
    captures = [
        capture(0, size=8, live=[kept]),
        capture(1, size=4, live=[kept, block(0x9000)]),
        capture(2, size=2, live=[kept]),
    ]
    result = ObservedGraphs(tuple(captures))
    assert [rule for rule, _ in result.causes] == ["kept alive"]
    sentence = result.causes[0][1]
    assert "after graph 1 (size 8) at engine.py:42 the pool still held 1 block, 2.0 MiB" in sentence
    assert "allocated at /srv/engine.py:77 in capture" in sentence
    assert "still allocated after graph 2 (size 4)" in sentence
    assert ObservedGraphs(tuple(captures), ObserveOptions(pool_check=False)).passed


def test_cudagraph_tree_recordings_on_their_parents_live_outputs_are_not_kept_alive():
    parent = block(0x1000)
    captures = [
        capture(0, size=8, live=[parent], source="cudagraph trees"),
        capture(1, size=8, live=[parent, block(0x2000)], source="cudagraph trees"),
    ]
    assert ObservedGraphs(tuple(captures)).passed


def test_separate_pools_are_judged_at_their_high_water_marks_even_when_freed_by_the_end():
    captures = [capture(i, (0, i + 1), size, after=10 * MIB) for i, size in enumerate([8, 4])]
    freed = ObservedGraphs(tuple(captures), pool_bytes_at_end=(((0, 1), 0), ((0, 2), 0)))
    assert "2 pools holding 20.0 MiB in all" in dict(freed.causes)["separate pools"]
    assert freed.to_json()["pool_bytes"] == 20 * MIB


def test_outputs_released_before_the_next_capture_are_not_kept():
    captures = [capture(0, size=8, live=[block(0x1000)]), capture(1, size=4, live=[block(0x2000)])]
    assert ObservedGraphs(tuple(captures)).passed


def test_one_workspace_sized_block_per_pool_is_set_apart_and_listed_a_second_is_kept():
    workspace = 32 * MIB
    first, second = block(0x1000, workspace), block(0x8000, workspace)
    captures = [capture(0, size=8, live=[first]), capture(1, size=4, live=[first]), capture(2, size=2, live=[first])]
    result = ObservedGraphs(tuple(captures), workspace_sizes=frozenset({workspace}))
    assert result.passed, result.message()
    assert any("possibly cuBLAS's workspace" in line and "32.0 MiB" in line for line in result.listing_lines())
    assert result.to_json()["graphs"][0]["live_blocks"][0]["possibly_cublas_workspace"] is True
    doubled = [capture(0, size=8, live=[first, second]), capture(1, size=4, live=[first, second])]
    kept = ObservedGraphs(tuple(doubled), workspace_sizes=frozenset({workspace}))
    assert [rule for rule, _ in kept.causes] == ["kept alive"]
    # without the workspace's size known, nothing is set apart
    assert not ObservedGraphs(tuple(captures)).passed


def test_a_size_the_config_lists_and_the_engine_never_captured_fails_naming_it():
    result = ObservedGraphs(tuple(largest_first([1, 2, 4, 8, 128])), ObserveOptions(expect_sizes=(1, 2, 256, 512)))
    assert result.missing_sizes == [256, 512]
    rule, sentence = result.causes[0]
    assert rule == "missing sizes"
    assert sentence.startswith("sizes [256, 512] were never captured: the graphs captured sizes [1, 2, 4, 8, 128]")
    assert ObservedGraphs(result.captures, ObserveOptions()).passed


def test_a_missing_size_with_graphs_whose_inputs_were_not_seen_says_so():
    captures = (capture(0, size=8), capture(1, size=None))
    result = ObservedGraphs(captures, ObserveOptions(expect_sizes=(8, 4)))
    sentence = dict(result.causes)["missing sizes"]
    assert "1 graph showed no input shapes" in sentence and "check_sizes=False" in sentence


def test_a_graph_never_replayed_is_listed_and_fails_only_when_replay_is_required():
    captures = (capture(0, size=8, replays=3), capture(1, size=4, replays=0))
    result = ObservedGraphs(captures)
    assert result.passed
    assert any(line.startswith("never replayed: graph 2 (size 4) at engine.py:42") for line in result.listing_lines())
    required = ObservedGraphs(captures, ObserveOptions(require_replay=True))
    assert dict(required.causes)["never replayed"].startswith("1 graph captured and never replayed")


def test_a_failed_capture_the_test_went_past_fails_unless_allowed():
    captures = (capture(0, size=8), capture(1, size=4, failed="RuntimeError: operation not permitted"))
    result = ObservedGraphs(captures)
    sentence = dict(result.causes)["failed captures"]
    assert "graph 2 (size 4) at engine.py:42 failed (RuntimeError: operation not permitted)" in sentence
    assert ObservedGraphs(captures, ObserveOptions(allow_capture_failures=True)).passed


def test_what_the_recorder_could_not_read_fails_the_verdict():
    result = ObservedGraphs(tuple(largest_first([8])), errors=("RuntimeError: snapshot failed",))
    assert dict(result.causes)["not observed"].startswith("the plugin could not read what a capture did")


def test_graphs_alive_at_the_end_are_listed_with_their_pools_bytes():
    captures = (capture(0, size=8, alive_at_end=True), capture(1, (0, 2), size=8, site=OTHER))
    result = ObservedGraphs(captures, pool_bytes_at_end=((SHARED, 24 * MIB), ((0, 2), 0)))
    assert result.passed
    line = next(line for line in result.listing_lines() if line.startswith("alive at the end"))
    assert "graph 1 (size 8) at engine.py:42, in 1 pool holding 24.0 MiB" in line
    assert result.to_json()["alive_pool_bytes"] == 24 * MIB


def test_the_message_leads_with_the_first_cause_and_shows_each_sites_table():
    captures = [capture(i, (0, i + 1), size, after=10 * MIB) for i, size in enumerate([8, 4])]
    result = ObservedGraphs(tuple(captures), ObserveOptions(expect_sizes=(8, 4, 2)))
    message = result.message("@pytest.mark.cudagraph(observe=True)")
    first, second = message.splitlines()[:2]
    assert first.startswith("@pytest.mark.cudagraph(observe=True): observed graphs (separate pools): the 2 graphs")
    assert second.startswith("  also (missing sizes): sizes [2] were never captured")
    assert "2 graphs captured at engine.py:42" in message and "pool after" in message


def test_the_size_of_a_capture_is_the_leading_dimension_that_varies_across_its_call_site():
    def shapes(*batch_dims):
        # the function holds its static input and output buffers (64 rows) and the batch's slice of the input
        return ((64, 256), (64, 256), *((b, 256) for b in batch_dims))

    captures = [ObservedCapture(i, ENGINE, SHARED, input_shapes=shapes(batch)) for i, batch in enumerate([64, 16, 8])]
    assert [c.size for c in infer_sizes(captures)] == [64, 16, 8]
    # a site's only capture: the most common leading dimension, the first seen on a tie
    (alone,) = infer_sizes([ObservedCapture(0, OTHER, SHARED, input_shapes=((16, 1), (16, 1), (1,), (4096, 64)))])
    assert alone.size == 16
    assert infer_sizes([ObservedCapture(0, OTHER, SHARED, input_shapes=((4, 2), (8, 2)))])[0].size == 4
    assert infer_sizes([ObservedCapture(0, OTHER, SHARED, input_shapes=((),))])[0].size is None
    # two captures of one size at one site (captured again after reset()) show no dimension that varies
    again = [ObservedCapture(i, ENGINE, SHARED, input_shapes=shapes(8)) for i in range(2)]
    assert [c.size for c in infer_sizes(again)] == [64, 64]
    assert ObservedGraphs(tuple(captures)).sizes == [8, 16, 64]


@given(
    st.lists(
        st.tuples(st.sampled_from([ENGINE, OTHER, None]), st.integers(1, 3), st.sampled_from([1, 2, 4, 8, 16])),
        max_size=12,
    ),
    st.lists(st.sampled_from([1, 2, 4, 8, 16, 32]), unique=True, max_size=4),
)
def test_separate_pools_and_missing_sizes_follow_the_captures(described, expected):
    captures = tuple(capture(i, (0, pool), size, site=site) for i, (site, pool, size) in enumerate(described))
    result = ObservedGraphs(captures, ObserveOptions(expect_sizes=tuple(expected)))
    rules = [rule for rule, _ in result.causes]
    pools_by_site: dict[Any, set] = {}
    for site, pool, _ in described:
        pools_by_site.setdefault(site, set()).add(pool)
    assert rules.count("separate pools") == sum(len(p) > 1 for p in pools_by_site.values())
    missing = [s for s in expected if s not in {size for _, _, size in described}]
    assert result.missing_sizes == missing and (("missing sizes" in rules) == bool(missing))
    assert len(workspace_candidates(captures, [512 * 1024])) == 0


def test_the_section_validates_against_the_report_types():
    import msgspec

    kept = block(0x1000, 2 * MIB, frames=(("/srv/engine.py", 77, "capture"),))
    captures = (
        capture(0, size=8, live=[kept], behind_allocator_bytes=2 * MIB, capture_s=0.01, alive_at_end=True),
        capture(1, size=4, live=[kept], failed="RuntimeError: boom"),
        capture(2, (0, 2), site=None),
    )
    result = ObservedGraphs(captures, ObserveOptions(expect_sizes=(8, 16)), hooks="wrapper", errors=("x",))
    record = {"outcome": "failed", "observed_graphs": result.to_json()}
    typed = msgspec.convert(record, TypedRecord)
    assert typed.observed_graphs.captured == 3
    assert typed.observed_graphs.graphs[0].live_blocks[0].allocated_at == "/srv/engine.py:77"


# ----------------------------------------------------------------------------
# the recorder, on recorded readings
# ----------------------------------------------------------------------------


@dataclass
class RecordedReadings:
    """Allocator counters and segments as recorded on a GPU, handed out in order (the last one again when used up)."""

    pools: dict[tuple[int, int], list[list[dict]]] = field(default_factory=dict)
    counters_read: list[tuple[int | None, int, int, int]] = field(default_factory=list)
    workspace: frozenset[int] = frozenset()
    per_pool: dict[tuple[int, int], int] = field(default_factory=dict)
    snapshots: int = 0

    def segments(self, pools: Iterable[tuple[int, int]]) -> list[Mapping[str, Any]]:
        self.snapshots += 1
        out: list[Mapping[str, Any]] = []
        for pool in pools:
            readings = self.pools.get(pool) or [[]]
            out += readings.pop(0) if len(readings) > 1 else readings[0]
        return out

    def counters(self, device_free: bool) -> Counters | None:
        if not self.counters_read:
            return None
        free, *allocator = self.counters_read.pop(0)
        return Counters(free if device_free else None, *allocator)

    def workspace_sizes(self) -> frozenset[int]:
        return self.workspace

    def pool_reserved(self, pool: tuple[int, int]) -> int | None:
        # torch before 2.13 has no per-pool figures: the recorder reads the segments
        return self.per_pool.get(pool)


def segment(pool, total, blocks=()):
    return {
        "segment_pool_id": pool,
        "total_size": total,
        "allocated_size": sum(size for _, size in blocks),
        "device": 0,
        "blocks": [{"address": a, "size": s, "requested_size": s, "state": "active_allocated"} for a, s in blocks],
    }


def engine_capture(recorder, key, pool, batch, failing=False):
    """What the wrapper tells the recorder about one capture made from this function (an engine's line).

    The first capture makes ``pool`` (capture_begin is given none, and the pool's id
    is known once the capture ends); later ones are given it, as ``torch.cuda.graph(g,
    pool=first.pool())`` does.  A stand-in for the wrapper's events: tests/gpu covers
    the real ones.
    """
    x = torch.empty(batch, 256, device="meta")  # noqa: F841  # the capturing function's input, seen in its locals
    frame = sys._getframe()
    given = pool if key > 1 else None
    recorder.before_capture(key, frame, given)
    recorder.capture_began(key, given, frame)
    recorder.capture_ended(key, pool)
    recorder.instantiated(key)


def test_the_recorder_turns_events_into_captures_with_site_pool_growth_shapes_and_device_memory():
    readings = RecordedReadings(
        # after the first capture (a 4 MiB output kept), after the second (released)
        pools={SHARED: [[segment(SHARED, 20 * MIB, [(0x1000, 4 * MIB)])], [segment(SHARED, 20 * MIB)]]},
        # (free, reserved, allocated, allocations) before and after each capture: 2 MiB behind the allocator first
        counters_read=[
            (100 * MIB, 0, 0, 0),
            (78 * MIB, 20 * MIB, 4 * MIB, 1),
            (78 * MIB, 20 * MIB, 4 * MIB, 1),
            (78 * MIB, 20 * MIB, 4 * MIB, 1),
        ],
    )
    recorder = GraphRecorder(readings)
    engine_capture(recorder, key=1, pool=SHARED, batch=8)
    engine_capture(recorder, key=2, pool=SHARED, batch=4)
    recorder.replayed(1)
    recorder.replayed(1)
    recorder.replayed(99)  # a graph the recorder never saw captured
    recorder.released(2)
    recorder.finish()
    first, second = recorder.captures
    assert first.call_site is not None and first.call_site.function == "engine_capture"
    assert first.call_site.file.endswith("test_observe.py") and "capture_began" in first.call_site.code
    assert (first.pool_bytes_before, first.pool_bytes_after, first.growth_bytes) == (0, 20 * MIB, 20 * MIB)
    assert [b.size for b in first.live_after] == [4 * MIB]
    assert first.behind_allocator_bytes == 2 * MIB
    assert first.input_shapes == ((8, 256),) and first.size == 8
    assert (first.replays, first.alive_at_end, second.alive_at_end) == (2, True, False)
    # the pool held a block before the second capture: read again, though the counters did not move
    assert second.pool_bytes_before == 20 * MIB and second.growth_bytes == 0 and second.live_after == ()
    assert second.capture_s is not None and second.source == "CUDAGraph.capture_begin"
    assert readings.snapshots == 3  # after each capture, at the end (a pool capture_begin makes is empty)


def test_a_pool_given_to_capture_begin_is_read_before_the_capture_once():
    readings = RecordedReadings(
        pools={SHARED: [[segment(SHARED, 8 * MIB)]]}, counters_read=[(100 * MIB, 8 * MIB, 0, 0)] * 4
    )
    recorder = GraphRecorder(readings)
    for key in (1, 2):
        frame = sys._getframe()
        recorder.before_capture(key, frame, SHARED)
        assert readings.snapshots == 1  # outside the capture, the first time only
        recorder.capture_began(key, SHARED, frame)
        recorder.capture_ended(key, SHARED)
        recorder.instantiated(key)
    assert [c.pool_bytes_before for c in recorder.captures] == [8 * MIB, 8 * MIB]


def test_a_capture_whose_allocations_do_not_outlive_it_is_measured_by_the_counters_alone():
    readings = RecordedReadings(
        counters_read=[
            (100 * MIB, 0, 0, 0),
            (80 * MIB, 20 * MIB, 0, 0),
            (80 * MIB, 20 * MIB, 0, 0),
            (78 * MIB, 22 * MIB, 0, 0),
        ]
    )
    recorder = GraphRecorder(readings)
    engine_capture(recorder, key=1, pool=SHARED, batch=8)
    engine_capture(recorder, key=2, pool=SHARED, batch=4)
    first, second = recorder.captures
    assert (first.pool_bytes_after, second.pool_bytes_before, second.pool_bytes_after) == (20 * MIB, 20 * MIB, 22 * MIB)
    assert first.live_after == second.live_after == ()
    assert readings.snapshots == 0


def test_the_allocators_per_pool_figure_is_taken_over_the_counters_which_other_pools_move_too():
    # the device's reserved bytes grew by 30 MiB across the capture, 10 MiB of them in another pool (another
    # stream's cache, another engine): torch 2.13's per-pool figure says what this pool holds
    readings = RecordedReadings(
        counters_read=[(100 * MIB, 0, 0, 0), (70 * MIB, 30 * MIB, 0, 0)],
        per_pool={SHARED: 20 * MIB},
    )
    recorder = GraphRecorder(readings)
    engine_capture(recorder, key=1, pool=SHARED, batch=8)
    (only,) = recorder.captures
    assert (only.pool_bytes_before, only.pool_bytes_after) == (0, 20 * MIB)
    assert readings.snapshots == 0


def test_a_workspace_sized_block_alone_does_not_make_every_capture_read_the_pool():
    workspace = 32 * MIB
    readings = RecordedReadings(
        pools={SHARED: [[segment(SHARED, 34 * MIB, [(0x1000, workspace)])]]},
        counters_read=[(100 * MIB, 0, 0, 0)] + [(66 * MIB, 34 * MIB, workspace, 1)] * 3,
        workspace=frozenset({workspace}),
    )
    recorder = GraphRecorder(readings)
    engine_capture(recorder, key=1, pool=SHARED, batch=8)
    engine_capture(recorder, key=2, pool=SHARED, batch=4)
    first, second = recorder.captures
    assert [b.size for b in second.live_after] == [workspace]  # still there, as far as the counters tell
    assert readings.snapshots == 1
    assert ObservedGraphs((first, second), workspace_sizes=frozenset({workspace})).passed


def test_a_tensor_held_in_the_pool_is_not_taken_for_an_input():
    from pytest_cudagraph.graphs.observe_recorder import _local_shapes

    x = torch.empty(8, 256, device="meta")
    outputs = [torch.empty(64, 256, device="meta")]  # noqa: F841  # held, but not an input
    frame = sys._getframe()
    assert _local_shapes(frame) == ((8, 256), (64, 256))
    assert _local_shapes(frame, [block(x.data_ptr(), 1)]) == ()  # both lie in the block (meta: address 0)


def test_a_capture_that_began_and_never_ended_is_a_failed_capture():
    recorder = GraphRecorder(RecordedReadings())
    frame = sys._getframe()
    recorder.capture_began(7, SHARED, frame)
    recorder.finish()
    (only,) = recorder.captures
    assert only.failed == "the capture began and never ended: it raised, or the test ended during it"


def test_a_capture_begin_that_raised_is_recorded_with_the_callers_line():
    recorder = GraphRecorder(RecordedReadings())
    frame = sys._getframe()
    recorder.before_capture(3, frame)
    recorder.capture_failed(3, RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore"))
    (only,) = recorder.captures
    assert only.failed == "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    assert only.call_site is not None and only.call_site.function == sys._getframe().f_code.co_name


def test_a_capture_made_from_inside_the_plugin_is_not_recorded():
    from pytest_cudagraph.graphs import observe_recorder as observe

    recorder = GraphRecorder(RecordedReadings())
    plugin_frame = observe._plugin_frame.__code__  # a function of the plugin's, standing in for capture_graphs
    assert plugin_frame.co_filename.startswith(observe._PACKAGE_DIR)

    def from_the_plugin():
        recorder.capture_began(5, SHARED, sys._getframe())

    from_the_plugin.__code__ = from_the_plugin.__code__.replace(co_filename=plugin_frame.co_filename)
    from_the_plugin()
    recorder.finish()
    assert recorder.captures == []


def test_a_capture_under_a_gateway_wrapper_is_the_users():
    """A tree watch wraps the tree manager in the gateway: the recordings it passes on are the user's code's."""
    from pytest_cudagraph._compat import cudagraph_trees

    recorder = GraphRecorder(RecordedReadings())

    def through_the_gateway():
        recorder.capture_began(6, SHARED, sys._getframe())

    through_the_gateway.__code__ = through_the_gateway.__code__.replace(co_filename=cudagraph_trees.__file__)
    through_the_gateway()
    recorder.finish()
    (only,) = recorder.captures
    assert (
        only.call_site is not None and only.call_site.function == "test_a_capture_under_a_gateway_wrapper_is_the_users"
    )


# ----------------------------------------------------------------------------
# the lifetime of the gateway's patching
# ----------------------------------------------------------------------------


def _installed() -> tuple[list[str], int]:
    state = _compat.graph_observer_state()
    return state["patched"], state["hooks"]


def test_nothing_is_patched_outside_an_observation_and_everything_is_put_back_after_it():
    assert _installed() == ([], 0)
    with observe_graphs() as observed:
        patched, hooks = _installed()
        if observed.hooks == "torch hooks":
            assert (patched, hooks) == ([], 4)
        else:
            assert (patched, hooks) == (["capture_begin", "capture_end", "replay", "reset"], 0)
    assert _installed() == ([], 0)


def test_the_hooks_come_off_after_a_failure_in_the_block():
    with pytest.raises(ZeroDivisionError):
        with observe_graphs():
            1 / 0  # noqa: B018
    assert _installed() == ([], 0)


def test_the_hooks_survive_a_dynamo_reset_inside_the_block_and_come_off_after_it():
    with observe_graphs():
        before = _installed()
        torch._dynamo.reset()
        assert _installed() == before
    assert _installed() == ([], 0)


def test_nested_observations_share_one_installation_taken_off_by_the_last():
    with observe_graphs():
        outer = _installed()
        with observe_graphs():
            assert _installed() == outer
        assert _installed() == outer
    assert _installed() == ([], 0)


def test_which_hooks_each_torch_uses():
    expected = "torch hooks" if hasattr(torch.cuda.graphs, "register_graph_capture_start_hook") else "wrapper"
    assert _compat.graph_observer_kind() == expected
    with observe_graphs() as observed:
        assert observed.hooks == expected


@pytest.mark.skipif(_compat.graph_observer_kind() != "wrapper", reason="torch's own hooks: nothing is wrapped")
def test_the_wrapper_records_a_capture_begin_that_raised_and_raises_it_on():
    record = TestRecord("t")
    with observe_graphs(record=record) as observed:
        with pytest.raises((AttributeError, TypeError)):
            torch.cuda.CUDAGraph.capture_begin(object())  # not a graph: torch's own method raises
    (failed,) = observed.captures
    assert failed.failed is not None and failed.failed.startswith(("AttributeError", "TypeError"))
    assert failed.call_site is not None and failed.call_site.file.endswith("test_observe.py")
    assert record.to_json()["observed_graphs"]["causes"] == ["failed captures"]
    assert _installed() == ([], 0)


@pytest.mark.skipif(_compat.graph_observer_kind() != "wrapper", reason="torch's own hooks: nothing is wrapped")
def test_a_wrapper_left_under_another_tools_wrapper_calls_straight_through():
    owner = torch.cuda.CUDAGraph
    original = owner.__dict__["replay"]
    calls = []
    with observe_graphs():
        ours = owner.__dict__["replay"]

        def theirs(self):
            calls.append("theirs")
            return ours(self)

        owner.replay = theirs
    try:
        assert owner.__dict__["replay"] is theirs  # not ours to take off
        with pytest.raises((AttributeError, TypeError)):  # torch's own replay, reached through both
            owner.replay(object())
        assert calls == ["theirs"]
    finally:
        owner.replay = original
    assert _installed() == ([], 0)


@pytest.mark.skipif(_compat.graph_observer_kind() != "torch hooks", reason="torch has no graph hooks before 2.14")
def test_torchs_hooks_reach_the_recorder_and_are_removed_after():
    class StandInGraph:
        """What torch's hooks hand over: a graph with a pool and a destroy callback (no GPU here)."""

        def __init__(self):
            self.callbacks: OrderedDict[int, Any] = OrderedDict()  # torch's handles refer to it weakly

        def pool(self):
            return SHARED

        def register_destroy_callback(self, callback):
            handle = torch.utils.hooks.RemovableHandle(self.callbacks)
            self.callbacks[handle.id] = callback
            return handle

    graphs = torch.cuda.graphs
    graph = StandInGraph()
    with GraphObservation(record=TestRecord("t"), readings=RecordedReadings()) as observed:
        graphs._run_global_hooks(graphs._global_capture_start_hooks, graph)
        graphs._run_global_hooks(graphs._global_capture_end_hooks, graph)
        graphs._run_global_hooks(graphs._global_instantiate_hooks, graph)
        graphs._run_global_hooks(graphs._global_replay_start_hooks, graph)
        graphs._run_global_hooks(graphs._global_replay_start_hooks, graph)
    assert observed.result().errors == ()
    (only,) = observed.captures
    assert (only.pool, only.replays, only.alive_at_end) == (SHARED, 2, True)
    assert graph.callbacks == {}  # the destroy callback's handle was removed with the hooks
    assert _installed() == ([], 0)


def test_the_exception_leaving_a_torch_cuda_graph_block_is_read_from_its_exit():
    from pytest_cudagraph._compat import graph_observer

    class Block:
        """What ``torch.cuda.graph.__exit__`` reads of itself; its capture_end looks at who called it."""

        _enable_annotations = False

        def __init__(self):
            self.cuda_graph, self.seen = self, None

        def capture_end(self):
            self.seen = graph_observer._block_error(sys._getframe(1))
            raise LookupError("stop before the stream")

    block, error = Block(), RuntimeError("unsupported op")
    with pytest.raises(LookupError):
        torch.cuda.graph.__exit__(block, RuntimeError, error, None)
    assert block.seen is error
    with pytest.raises(LookupError):
        torch.cuda.graph.__exit__(block, None, None, None)
    assert block.seen is None


def test_a_block_that_raised_makes_its_capture_failed_yet_its_graph_is_kept_for_replays():
    recorder = GraphRecorder(RecordedReadings())
    frame = sys._getframe()
    recorder.capture_began(4, SHARED, frame)
    recorder.block_raised(4, RuntimeError("unsupported op"))
    recorder.capture_ended(4, SHARED)
    recorder.instantiated(4)
    recorder.replayed(4)
    recorder.finish()
    (only,) = recorder.captures
    assert only.failed == "its torch.cuda.graph block raised RuntimeError: unsupported op"
    assert only.replays == 1 and only.alive_at_end
    result = ObservedGraphs((only,))
    assert (
        "failed (its torch.cuda.graph block raised RuntimeError: unsupported op)"
        in dict(result.causes)["failed captures"]
    )


def test_an_observation_on_the_cpu_records_nothing_and_reports_an_empty_section():
    record = TestRecord("t")
    with observe_graphs(expect_sizes=[1, 2], record=record) as observed:
        pass
    section = record.to_json()["observed_graphs"]
    assert section["captured"] == 0 and section["missing_sizes"] == [1, 2]
    with pytest.raises(InvariantViolation, match=r"sizes \[1, 2\] were never captured: the graphs captured no size"):
        observed.check()


def test_a_listeners_error_goes_back_to_that_listener_and_what_its_handler_raises_stays_in_the_gateway():
    from pytest_cudagraph._compat import graph_observer

    class Listener:
        def __init__(self, handler_raises: bool):
            self.handler_raises, self.told = handler_raises, []

        def replayed(self, key):
            raise KeyError(key)

        def observer_failed(self, error):
            self.told.append(error)
            if self.handler_raises:
                raise RuntimeError("this listener cannot take its own error")

    calm, fragile = Listener(False), Listener(True)
    own = ValueError("the observation's own error")
    with _compat.observing_graphs(calm), _compat.observing_graphs(fragile):
        graph_observer._Observation.publish("replayed", 7)
        graph_observer._Observation.failed(own)
    for listener in (calm, fragile):
        assert [repr(error) for error in listener.told] == ["KeyError(7)", repr(own)]
    assert _installed() == ([], 0)


def test_a_local_the_capturing_function_deletes_is_released_once_the_observation_ends():
    """Before Python 3.13 reading a running frame's locals keeps a snapshot of them on the frame: the observation takes
    it again at its end, so a graph the function deleted after its capture is not kept alive by the plugin."""
    import weakref

    from pytest_cudagraph.graphs.observe_recorder import _local_shapes, refresh_read_frames

    class Graph:
        pass

    graph = Graph()
    released = weakref.ref(graph)
    x = torch.empty(4, 8, device="meta")  # noqa: F841  # a capture's input, read from this frame's locals
    assert _local_shapes(sys._getframe()) == ((4, 8),)
    del graph
    refresh_read_frames(sys._getframe())
    assert released() is None
