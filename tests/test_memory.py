"""Pool accounting without a GPU: the allocator's rounding, the pool readings, the table, the meter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph.graphs.memory import PoolMeter, pool_usage_from_segments, round_request, segment_size_for
from pytest_cudagraph.graphs.pool_blocks import LARGE_BUFFER, SMALL_BUFFER
from pytest_cudagraph.graphs.pool_check import SizeMemory, format_size_table
from pytest_cudagraph.render.plain_text import MIB, format_bytes


@pytest.mark.parametrize(
    "request_bytes, segment",
    [
        (1, SMALL_BUFFER),
        (MIB, SMALL_BUFFER),  # up to 1 MiB: small segments
        (MIB + 1, LARGE_BUFFER),  # 1-10 MiB: 20 MiB segments
        (10 * MIB - 512, LARGE_BUFFER),
        (10 * MIB, 10 * MIB),  # from 10 MiB: its own segment, 2 MiB rounding
        (32 * MIB, 32 * MIB),
        (33 * MIB, 34 * MIB),
    ],
)
def test_segment_size_follows_the_allocator_rules(request_bytes, segment):
    assert segment_size_for(request_bytes) == segment


@given(st.integers(min_value=1, max_value=2**36))
def test_segments_always_hold_their_request(nbytes):
    assert round_request(nbytes) % 512 == 0 and round_request(nbytes) >= nbytes
    assert segment_size_for(nbytes) >= round_request(nbytes)
    assert segment_size_for(nbytes) - round_request(nbytes) < LARGE_BUFFER


def test_pool_usage_sums_only_the_pools_asked_for():
    segments = [
        {"segment_pool_id": (0, 1), "total_size": 20 * MIB, "allocated_size": 8 * MIB, "device": 0},
        {"segment_pool_id": [0, 1], "total_size": 2 * MIB, "allocated_size": 512, "device": 0},
        {"segment_pool_id": (0, 2), "total_size": 20 * MIB, "allocated_size": 0, "device": 0},
        {"segment_pool_id": (0, 0), "total_size": 200 * MIB, "allocated_size": 0, "device": 0},
        {"segment_pool_id": (0, 1), "total_size": 20 * MIB, "allocated_size": 0, "device": 1},
    ]
    usage = pool_usage_from_segments(segments, [(0, 1)], device=0)
    assert usage.reserved_bytes == 22 * MIB and usage.allocated_bytes == 8 * MIB + 512
    assert usage.segment_sizes == (20 * MIB, 2 * MIB) and usage.segments == 2
    both = pool_usage_from_segments(segments, [(0, 1), (0, 2)])
    assert both.reserved_bytes == 62 * MIB


def test_format_bytes_keeps_small_figures_readable():
    assert format_bytes(60 * MIB) == "60.0 MiB"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(12) == "12 B"
    assert format_bytes(None) == "-"


def test_size_table_shows_growth_in_capture_order():
    rows = [
        SizeMemory(size=512, order=0, pool_bytes_after=42 * MIB, graph_bytes=42 * MIB),
        SizeMemory(size=256, order=1, pool_bytes_after=42 * MIB),
        SizeMemory(size=1, order=2, pool_bytes_after=44 * MIB),
    ]
    lines = format_size_table(list(reversed(rows))).splitlines()
    assert lines[0].split() == ["#", "size", "pool", "after", "growth", "live", "alone"]
    assert lines[1].split()[:2] == ["1", "512"] and "+42.0 MiB" in lines[1]
    assert lines[2].split()[-3:] == ["0", "-", "-"]
    assert "+2.0 MiB" in lines[3]


def test_long_tables_elide_sizes_that_did_not_grow_the_pool():
    rows = [SizeMemory(size=600 - i, order=i, pool_bytes_after=40 * MIB + (MIB if i == 70 else 0)) for i in range(80)]
    rows[70:] = [SizeMemory(r.size, r.order, 41 * MIB) for r in rows[70:]]
    text = format_size_table(rows, limit_rows=10)
    assert "(78 sizes where the pool did not grow and nothing was live are not shown)" in text
    assert " 530 " in text  # the row where the pool grew


def test_pool_meter_builds_the_check_from_its_rows_and_the_workspace():
    # No pool metered yet, so nothing reads the allocator: the figures are the meter's own.
    meter = PoolMeter(device=0)
    meter.rows = {8: SizeMemory(8, 0, 52 * MIB), 1: SizeMemory(1, 1, 54 * MIB)}
    meter.segments_after = {8: (LARGE_BUFFER, LARGE_BUFFER, SMALL_BUFFER)}
    meter.cublas_workspace_bytes = 32 * MIB
    check = meter.check(largest_size=8, largest_graph_bytes=20 * MIB, slack=None, capture_order=[8, 4, 1])
    assert check.pool_bytes == 0 and check.cublas_workspace_bytes == 32 * MIB
    assert check.limit is None  # no byte budget unless the user gives one
    assert [row.size for row in check.rows] == [8, 1]  # capture order, sizes without a row left out
    assert meter.pool_bytes_after() == {8: 52 * MIB, 1: 54 * MIB}
    given = meter.check(largest_size=8, largest_graph_bytes=20 * MIB, slack=3 * MIB, capture_order=[8])
    assert given.limit == (20 + 32 + 3) * MIB


def test_pool_meter_names_the_larger_size_on_a_tie_of_own_marks():
    meter = PoolMeter()
    meter.graph_bytes = {1: 2 * MIB, 4: 2 * MIB, 2: MIB}
    assert meter.largest_measured_size() == 4
