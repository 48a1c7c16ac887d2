"""Capture cost: per-size seconds, memory outside the pool by where it went, the outside bound, and its readers.

The device readings need a GPU (tests/gpu/test_capture_cost_gpu.py); the arithmetic,
the table, the bound's verdicts and messages, the report fields, the summary cell, the
merge of several sets and compare's graph-memory rule are plain data and run here.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_cudagraph.errors import InvariantViolation, MisuseError
from pytest_cudagraph.graphs import capture_cost
from pytest_cudagraph.graphs.capture_cost import (
    PAGE_BYTES,
    CaptureCost,
    CaptureCostMeter,
    SizeCost,
    cost_json,
    outside_limit,
    set_shared_device,
)
from pytest_cudagraph.graphs.pool_check import PoolCheck
from pytest_cudagraph.plugin.devices import gpu_sharing_note
from pytest_cudagraph.records.record import merge_graph_sets
from pytest_cudagraph.records.report import SCHEMA, validate_report
from pytest_cudagraph.render.summary import pool_figures, pool_text
from pytest_cudagraph.tools.compare import compare_reports

MIB = 2**20
VLLM_SIZES = [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]


@pytest.fixture(autouse=True)
def _alone_on_the_gpu():
    set_shared_device(None)
    yield
    set_shared_device(None)


def _cost(rows, *, device=None, allocator=None, pool=None, shared=None) -> CaptureCost:
    return CaptureCost(tuple(rows), device, allocator, pool, shared)


def _row(
    size, order, *, device=0, allocator=0, pool=0, warmup=0.01, capture=0.002, warm_device=0, warm_allocator=0
) -> SizeCost:
    return SizeCost(size, order, warmup, capture, device, allocator, pool, warm_device, warm_allocator)


def test_memory_taken_splits_into_pool_allocator_cache_and_behind_the_allocator():
    row = _row(512, 0, device=130 * MIB, allocator=104 * MIB, pool=64 * MIB)
    assert row.allocator_outside_pool_bytes == 40 * MIB  # warm-up blocks cached in the ordinary pool
    assert row.behind_allocator_bytes == 26 * MIB  # cudaMalloc by a library, the graph, loaded kernels
    cost = _cost([row], device=130 * MIB, allocator=104 * MIB, pool=64 * MIB)
    assert cost.outside_pool_bytes == 66 * MIB
    assert cost.unreliable is None


def test_a_meter_without_a_device_keeps_the_seconds_and_reads_no_memory():
    meter = CaptureCostMeter(None)
    meter.start(pool_bytes=0)
    meter.after_capture(8, 0, pool_bytes=4 * MIB, warmup_s=0.5, capture_s=0.25)
    meter.after_capture(4, 1, pool_bytes=4 * MIB, warmup_s=0.125, capture_s=0.125)
    cost = meter.finish(pool_bytes=4 * MIB)
    assert cost.warmup_s == 0.625 and cost.graph_capture_s == 0.375
    assert [row.size for row in cost.sizes] == [8, 4]
    assert cost.behind_allocator_bytes is None and cost.outside_pool_bytes is None
    fields = cost_json(cost)
    assert fields["per_size"][0] == {
        "size": 8,
        "order": 0,
        "warmup_s": 0.5,
        "capture_s": 0.25,
        "pool_bytes": None,
        "allocator_outside_pool_bytes": None,
        "first_use_bytes": None,
        "behind_allocator_bytes": None,
    }
    assert fields["behind_allocator_bytes"] is None and "outside_unreliable" not in fields


def test_a_shared_gpu_or_memory_given_back_by_someone_else_makes_the_figures_unreliable():
    alone = _cost([_row(8, 0, device=4 * MIB, allocator=2 * MIB)], device=4 * MIB, allocator=2 * MIB, pool=2 * MIB)
    assert alone.unreliable is None
    shared = _cost(alone.sizes, device=4 * MIB, allocator=2 * MIB, pool=2 * MIB, shared="GPU 0 is shared")
    assert shared.unreliable == "GPU 0 is shared"
    # the device gained 10 MiB more than the allocator gave back: another process freed it
    freed = _row(4, 1, device=-12 * MIB, allocator=-2 * MIB)
    gained = _cost([alone.sizes[0], freed], device=-8 * MIB, allocator=0, pool=2 * MIB)
    assert "device memory was freed behind the allocator during the capture" in gained.unreliable
    assert "at batch size 4" in gained.unreliable
    # the fix offered depends on whether the plugin knows the GPU is shared
    assert "run it again with no other process on the GPU" in gained.check(0).message()
    assert "--cudagraph-devices=auto" not in gained.check(0).message()
    # within one driver page of zero is rounding, not another process
    rounding = _cost([_row(4, 0, device=0, allocator=PAGE_BYTES)], device=0, allocator=PAGE_BYTES, pool=0)
    assert rounding.unreliable is None


def test_the_outside_bound_passes_fails_or_gives_no_verdict():
    rows = [_row(16, 0, device=60 * MIB, allocator=20 * MIB, pool=20 * MIB), _row(8, 1)]
    cost = _cost(rows, device=60 * MIB, allocator=20 * MIB, pool=20 * MIB)
    assert cost.check(40 * MIB).passed is True
    over = cost.check(8 * MIB)
    assert over.passed is False
    message = over.message()
    assert message.splitlines()[0] == (
        "the capture took 40.0 MiB of device memory behind PyTorch's allocator, more than outside=8.0 MiB allows; "
        "that is memory the instantiated graphs hold, or a library's own cudaMalloc while capturing (not the "
        "warm-ups' first use: see the 'first use' column); the table shows at which size it went:"
    )
    table = message.splitlines()[1:]
    assert table[0].split() == [
        "#", "size", "warm-up", "capture", "pool", "allocator", "first", "use", "behind", "allocator"
    ]  # fmt: skip
    assert table[1].split()[:2] == ["1", "16"] and table[1].split()[-1] == "+40.0M"
    assert table[-1].split()[0] == "all"
    no_verdict = _cost(rows, device=60 * MIB, allocator=20 * MIB, pool=20 * MIB, shared="GPU 0 is shared").check(0)
    assert no_verdict.passed is None
    assert "gives no verdict: GPU 0 is shared" in no_verdict.message()
    assert "--cudagraph-devices=auto" in no_verdict.message()
    assert _cost(rows).check(0).passed is None  # nothing read: no verdict either


def test_what_the_warmups_took_behind_the_allocator_is_first_use_not_the_graphs():
    # a process's first size: the warm-up loads kernels (156 MiB behind the allocator on an
    # H200) and caches 40 MiB of blocks; the capture adds 64 MiB of pool and one 2 MiB page
    first = _row(
        512, 0, device=262 * MIB, allocator=104 * MIB, pool=64 * MIB, warm_device=196 * MIB, warm_allocator=40 * MIB
    )
    assert first.first_use_bytes == 156 * MIB
    assert first.behind_allocator_bytes == 2 * MIB  # the captures' own, first use apart
    # a later size: a library sets up a 384 MiB buffer on its first call, in the warm-up
    library = _row(16, 1, device=384 * MIB, allocator=0, warm_device=384 * MIB, warm_allocator=0)
    cost = _cost([first, library], device=646 * MIB, allocator=104 * MIB, pool=64 * MIB)
    assert cost.first_use_bytes == 540 * MIB and cost.behind_allocator_bytes == 2 * MIB
    assert cost.check(8 * MIB).passed is True  # the graphs hold little behind the allocator
    bound = cost.check_first_use(256 * MIB)
    assert bound.passed is False
    message = bound.message()
    assert message.splitlines()[0] == (
        "the warm-ups took 540.0 MiB of device memory behind PyTorch's allocator, more than first_use=256.0 MiB "
        "allows; that is kernels loaded on first use, library handles, and buffers a library allocated itself on its "
        "first call (cudaMalloc: NCCL, a workspace set up outside PyTorch); the 'first use' column shows at which "
        "size it went:"
    )
    rows = {line.split()[1]: line.split() for line in message.splitlines()[2:] if line.split()[:1] in (["1"], ["2"])}
    assert rows["16"][-2] == "+384.0M" and rows["16"][-1] == "0"  # found at its size, in the first-use column
    assert cost_json(cost)["first_use_bytes"] == 540 * MIB
    assert cost_json(cost)["per_size"][1]["first_use_bytes"] == 384 * MIB


def test_the_release_says_what_the_graphs_held_behind_the_allocator():
    rows = [_row(8, 0, device=70 * MIB, allocator=60 * MIB, pool=60 * MIB, warm_device=0, warm_allocator=0)]
    cost = _cost(rows, device=70 * MIB, allocator=60 * MIB, pool=60 * MIB)
    assert cost.behind_allocator_bytes == 10 * MIB and cost.held_behind_allocator_bytes is None
    fields = cost_json(cost)
    assert "release" not in fields and "held_behind_allocator_bytes" not in fields
    # the release gives back the pool and 4 of the 10 MiB: the driver keeps the rest for later graphs
    released = cost.released(capture_cost.release_reading(0, (100 * MIB, 60 * MIB), (164 * MIB, 0)))
    assert released.release.behind_allocator_bytes == 4 * MIB
    assert released.held_behind_allocator_bytes == 4 * MIB
    fields = cost_json(released)
    assert fields["release"] == {
        "device_bytes": 64 * MIB,
        "allocator_bytes": 60 * MIB,
        "behind_allocator_bytes": 4 * MIB,
    }
    assert fields["held_behind_allocator_bytes"] == 4 * MIB
    # first-use memory a release frees too (a library's buffer dropped with the model) is not the graphs'
    more = cost.released(capture_cost.release_reading(0, (100 * MIB, 60 * MIB), (300 * MIB, 0)))
    assert more.held_behind_allocator_bytes == 10 * MIB
    assert cost.released(capture_cost.release_reading(None, None, None)).held_behind_allocator_bytes is None


def test_the_meter_splits_each_size_at_its_warmup():
    readings = iter([(1000 * MIB, 0), (800 * MIB, 40 * MIB), (700 * MIB, 104 * MIB), (700 * MIB, 104 * MIB)])
    meter = CaptureCostMeter(0)
    meter.read = lambda pool_bytes: capture_cost.MemoryReading(*next(readings), pool_bytes)  # the device, on paper
    meter.start(pool_bytes=0)
    meter.after_warmup()
    meter.after_capture(512, 0, 64 * MIB, 0.1, 0.01)
    cost = meter.finish(64 * MIB)
    row = cost.sizes[0]
    assert row.first_use_bytes == 160 * MIB  # 200 MiB taken in the warm-up, 40 MiB of it reserved
    assert row.behind_allocator_bytes == 36 * MIB  # 100 MiB in the capture, 64 MiB of it reserved
    assert cost.first_use_bytes == 160 * MIB and cost.behind_allocator_bytes == 36 * MIB


@pytest.mark.parametrize("bad", [-1, 1.5, "64M", True, None])
def test_outside_must_be_bytes(bad):
    with pytest.raises(MisuseError, match=r"outside=.*: give the bytes allowed behind the allocator as an int >= 0"):
        outside_limit(bad)
    assert outside_limit(64 * MIB) == 64 * MIB


def _pool_check(pool_bytes, outside=None) -> PoolCheck:
    return PoolCheck(
        pool_bytes=pool_bytes,
        largest_size=16,
        largest_graph_bytes=20 * MIB,
        cublas_workspace_bytes=0,
        pool_mode="shared",
        order="largest_first",
        keep_outputs=False,
        capture_order=(16,),
        slack_bytes=2 * MIB,
        outside=outside,
    )


def test_an_outside_bound_without_a_verdict_leaves_the_pool_verdict_alone():
    shared = _cost(
        [_row(16, 0, device=60 * MIB, allocator=20 * MIB, pool=20 * MIB)],
        device=60 * MIB,
        allocator=20 * MIB,
        pool=20 * MIB,
        shared="GPU 0 is shared",
    )
    check = _pool_check(20 * MIB, shared.check(MIB))
    # the pool is within its bound and nothing was decided about the rest: not a failed pool check
    assert check.passed is True and check.to_json()["passed"] is True
    assert check.to_json()["outside"]["passed"] is None
    with pytest.raises(MisuseError, match="gives no verdict: GPU 0 is shared"):
        check.raise_if_failed()
    # a pool over its bound still fails as such, with the no-verdict sentence after it
    with pytest.raises(
        InvariantViolation, match="(?s)pool check \\(pool budget\\): the pool holds 90.0 MiB.*gives no verdict"
    ):
        _pool_check(90 * MIB, shared.check(MIB)).raise_if_failed()


def test_pool_check_with_outside_raises_the_right_error_for_each_case():
    cost = _cost(
        [_row(16, 0, device=60 * MIB, allocator=20 * MIB, pool=20 * MIB)],
        device=60 * MIB,
        allocator=20 * MIB,
        pool=20 * MIB,
    )
    _pool_check(20 * MIB, cost.check(64 * MIB)).raise_if_failed()  # both within bounds
    with pytest.raises(InvariantViolation, match="behind PyTorch's allocator") as outside_only:
        _pool_check(20 * MIB, cost.check(MIB)).raise_if_failed()
    assert "pool check" not in str(outside_only.value)
    with pytest.raises(InvariantViolation) as both:
        _pool_check(90 * MIB, cost.check(MIB)).raise_if_failed("piecewise graphs: ")
    text = str(both.value)
    assert text.startswith("piecewise graphs: pool check (pool budget): the pool holds 90.0 MiB")
    assert "behind PyTorch's allocator" in text
    shared = CaptureCost(cost.sizes, cost.device_bytes, cost.allocator_bytes, cost.pool_bytes, "GPU 0 is shared")
    with pytest.raises(MisuseError, match="gives no verdict"):
        _pool_check(20 * MIB, shared.check(64 * MIB)).raise_if_failed()
    assert _pool_check(20 * MIB, cost.check(MIB)).to_json()["outside"] == {
        "limit_bytes": MIB,
        "behind_allocator_bytes": 40 * MIB,
        "passed": False,
    }


@settings(max_examples=60, deadline=None)
@given(
    behind=st.lists(st.integers(0, 64), min_size=1, max_size=len(VLLM_SIZES)),
    limit=st.integers(4, 40),
)
def test_a_long_table_keeps_every_size_where_memory_went_behind_the_allocator(behind, limit):
    rows = [
        _row(size, order, device=mib * MIB, allocator=0, warmup=0.001 * (order % 7))
        for order, (size, mib) in enumerate(zip(sorted(VLLM_SIZES, reverse=True), behind))
    ]
    table = _cost(rows, device=sum(behind) * MIB, allocator=0, pool=0).table(limit_rows=limit)
    lines = table.splitlines()
    shown = {int(line.split()[1]) for line in lines[1:] if line.split()[0].isdigit()}
    went_outside = [row.size for row in rows if row.behind_allocator_bytes >= PAGE_BYTES]
    if len(rows) <= limit:
        assert shown == {row.size for row in rows}
    else:
        assert len(shown) <= limit
        assert set(went_outside[: limit - 4]) <= shown  # the first size and three slowest may come first
        hidden_outside = sum(1 for row in rows if row.size not in shown and row.behind_allocator_bytes >= PAGE_BYTES)
        more = (
            f", {hidden_outside} of them with memory outside the pool"
            if hidden_outside
            else " with nothing outside the pool"
        )
        assert f"({len(rows) - len(shown)} more sizes not shown{more})" in lines
    assert rows[0].size in shown


def test_report_fields_validate_and_the_summary_shows_what_went_behind_the_allocator():
    cost = _cost(
        [_row(16, 0, device=30 * MIB, allocator=24 * MIB, pool=20 * MIB), _row(8, 1)],
        device=30 * MIB,
        allocator=24 * MIB,
        pool=20 * MIB,
    )
    graphs = {
        "sizes": [8, 16],
        "captured": 2,
        "pool_bytes": 52 * MIB,
        "largest_graph_bytes": 20 * MIB,
        "cublas_workspace_bytes": 32 * MIB,
        **cost_json(cost),
    }
    # raises ReportError on a field of the wrong kind
    validate_report({"schema": SCHEMA, "tests": {"t.py::test_mlp": {"outcome": "passed", "graphs": graphs}}})
    assert graphs["outside_pool_bytes"] == 10 * MIB and graphs["allocator_outside_pool_bytes"] == 4 * MIB
    assert pool_text(pool_figures(graphs)) == "52.0M / 20.0M (+32.0M cuBLAS)  1.00x, 6.0M outside"
    shared = {**graphs, "outside_unreliable": "GPU 0 is shared"}
    assert pool_text(pool_figures(shared)).endswith(", ? outside")


def test_several_sets_merge_warm_up_seconds_and_keep_the_largest_outside_figure():
    first = {
        "sizes": [8],
        "captured": 1,
        "capture_s": 1.0,
        "warmup_s": 0.75,
        "behind_allocator_bytes": 4 * MIB,
        "outside_pool_bytes": 6 * MIB,
        "allocator_outside_pool_bytes": 2 * MIB,
    }
    second = {
        "sizes": [4],
        "captured": 1,
        "capture_s": 0.5,
        "warmup_s": 0.25,
        "behind_allocator_bytes": 10 * MIB,
        "outside_pool_bytes": 10 * MIB,
        "allocator_outside_pool_bytes": 0,
        "outside_unreliable": "GPU 0 is shared",
    }
    merged = merge_graph_sets([first, second])
    assert merged["warmup_s"] == 1.0 and merged["capture_s"] == 1.5
    assert merged["behind_allocator_bytes"] == 10 * MIB and merged["allocator_outside_pool_bytes"] == 2 * MIB
    assert merged["outside_unreliable"] == "GPU 0 is shared"
    assert "warmup_s" not in merge_graph_sets([{"sizes": [8], "captured": 1}, {"sizes": [4], "captured": 1}])


def _report(graphs):
    return {"schema": SCHEMA, "tests": {"t.py::test_mlp": {"outcome": "passed", "graphs": graphs}}, "env": {}}


def test_graph_memory_flags_growth_behind_the_allocator_and_skips_a_shared_gpu_with_a_note():
    base = _report({"captured": 2, "behind_allocator_bytes": 4 * MIB, "outside_pool_bytes": 6 * MIB})
    grown = _report({"captured": 2, "behind_allocator_bytes": 40 * MIB, "outside_pool_bytes": 42 * MIB})
    result = compare_reports(base, grown, rules=["graph-memory"])
    assert {r.rule for r in result.regressions} == {"graph-memory"}
    assert any("graphs.behind_allocator_bytes 4.0 MiB -> 40.0 MiB" in r.message for r in result.regressions)
    shared = _report(
        {
            "captured": 2,
            "behind_allocator_bytes": 40 * MIB,
            "outside_pool_bytes": 42 * MIB,
            "outside_unreliable": "GPU 0 is shared with 1 other pytest-xdist worker",
        }
    )
    skipped = compare_reports(base, shared, rules=["graph-memory"])
    assert not skipped.regressions
    assert any(
        note.startswith("graph-memory: memory outside the pool not checked for 1 test") for note in skipped.notes()
    )
    # memory given back (a figure below zero) grows from nothing: no "+-x%"
    gave_back = _report({"captured": 2, "behind_allocator_bytes": -4 * MIB})
    regressed = compare_reports(gave_back, grown, rules=["graph-memory"])
    message = next(r.message for r in regressed.regressions if "behind_allocator_bytes" in r.message)
    assert message.startswith("graphs.behind_allocator_bytes -4.0 MiB -> 40.0 MiB (threshold") and "+-" not in message


@settings(max_examples=80, deadline=None)
@given(workers=st.integers(1, 9), gpus=st.integers(1, 4), data=st.data())
def test_a_worker_is_told_its_gpu_is_shared_exactly_when_another_worker_is_pinned_to_it(workers, gpus, data):
    devices = [str(i) for i in range(gpus)]
    worker = data.draw(st.integers(0, workers - 1))
    note = gpu_sharing_note(devices, f"gw{worker}", workers)
    others = [w for w in range(workers) if w != worker and w % gpus == worker % gpus]
    assert (note is None) == (not others)
    if note:
        assert note.startswith(f"GPU {worker % gpus} is shared with {len(others)} other pytest-xdist worker")
    unpinned = gpu_sharing_note([], f"gw{worker}", workers)
    assert (unpinned is None) == (workers == 1)


def test_the_shared_device_note_reaches_every_cost_finished_after_it_is_set():
    set_shared_device("2 pytest-xdist workers share the GPUs (no --cudagraph-devices)")
    meter = CaptureCostMeter(None)
    meter.start()
    assert meter.finish(pool_bytes=0).unreliable == capture_cost.shared_device()


def _report_with_cost(**extra):
    rows = [
        _row(16, 0, device=30 * MIB, allocator=24 * MIB, pool=20 * MIB, warmup=0.25, capture=0.0125),
        _row(8, 1, device=66 * MIB, allocator=0, warmup=0.002, capture=0.003),
    ]
    cost = _cost(rows, device=96 * MIB, allocator=24 * MIB, pool=20 * MIB)
    graphs = {"sizes": [8, 16], "captured": 2, "pool_bytes": 20 * MIB, "capture_s": 0.5, **cost_json(cost), **extra}
    return {"schema": SCHEMA, "tests": {"t.py::test_mlp": {"outcome": "passed", "graphs": graphs}}, "env": {}}


def test_show_names_the_capture_run_and_each_size_that_took_memory_behind_the_allocator():
    from pytest_cudagraph.render.record_text import detail_lines

    lines = detail_lines(_report_with_cost())
    assert lines[lines.index("t.py::test_mlp") + 1 :] == [
        "  graphs: 2 sizes captured in 0.500 s (warm-up 0.252 s); outside the pool: 72.0 MiB behind the allocator, "
        "4.0 MiB in",
        "    the allocator",
        "    - batch size 16: 6.0 MiB behind the allocator",
        "    - batch size 8: 66.0 MiB behind the allocator",
    ]
    shared = detail_lines(_report_with_cost(outside_unreliable="GPU 0 is shared"))
    assert any("memory outside the pool not vouched for: GPU 0 is shared" in line for line in shared)
    assert not any("behind the allocator" in line for line in shared)


def test_the_report_page_folds_the_per_size_cost_table_under_the_head_line():
    from pytest_cudagraph.render.show import render_html

    page = render_html(_report_with_cost())
    assert "2 sizes captured in 0.500 s (warm-up 0.252 s)" in page
    assert "<summary>capture cost per size (2)</summary>" in page
    cells = re.findall(r'<td class="num">([^<]*)</td>', page.split("capture cost per size")[1].split("</table>")[0])
    assert cells[:8] == ["1", "16", "250.0ms", "12.5ms", "+20.0M", "+4.0M", "0", "+6.0M"]
    assert cells[8:] == ["2", "8", "2.0ms", "3.0ms", "0", "0", "0", "+66.0M"]


def test_collection_is_paused_in_the_block_and_left_as_it_was_after():
    import gc

    from pytest_cudagraph.graphs.capture_cost import collection_paused

    assert gc.isenabled()
    with pytest.raises(KeyError), collection_paused():
        assert not gc.isenabled()
        raise KeyError("a failed capture")
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller had it off: it stays off
    finally:
        gc.enable()
