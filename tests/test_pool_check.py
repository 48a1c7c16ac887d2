"""The pool check's verdict on recorded figures: what a user gets wrong fails, the allocator's caching does not.

The figures are the ones measured on an H200 (torch 2.11) for models at real widths,
captured largest first into one shared pool with outputs released: each pool exceeded
"largest graph + cuBLAS workspace + one segment of each kind", and each held no
allocated block at all.  The snapshot dicts have the shape of
``torch.cuda.memory_snapshot()``'s segments.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph.graphs.pool_blocks import LiveBlock, describe_live_blocks, live_blocks_from_segments
from pytest_cudagraph.graphs.pool_check import (
    PoolCheck,
    live_after_capture,
    segment_growth,
    with_block_frames,
)
from pytest_cudagraph.render.plain_text import MIB

POOL = (0, 1)


def _check(pool_mib, largest_mib, workspace_mib=33, **kwargs) -> PoolCheck:
    options = {
        "pool_mode": "shared",
        "order": "largest_first",
        "keep_outputs": False,
        "capture_order": (256, 128, 64, 16, 8, 4, 2, 1),
        "pools": ((POOL, int(pool_mib * MIB)),),
    } | kwargs
    return PoolCheck(
        pool_bytes=int(pool_mib * MIB),
        largest_size=options["capture_order"][0] if options["capture_order"] else 1,
        largest_graph_bytes=int(largest_mib * MIB),
        cublas_workspace_bytes=int(workspace_mib * MIB),
        **options,
    )


@pytest.mark.parametrize(
    "model, pool_mib, largest_mib, workspace_mib, grown_mib",
    [
        ("MLP 2 blocks d=4096/11008 (Llama-7B's MLP), fp32", 60, 24, 33, 2),
        ("MLP 2 blocks d=5120/13824, fp32", 64, 28, 33, 2),
        ("MLP 4 blocks d=2560/10240, fp32", 56, 20, 33, 2),
        ("a Hugging Face decoder, hidden 2560, 2 layers, fp32", 230, 178, 0, 52),
        ("a timm mobile CNN at 128x128, fp32", 210, 176, 33, 6),
    ],
)
def test_the_allocators_caching_alone_passes_and_is_reported_as_a_figure(
    model, pool_mib, largest_mib, workspace_mib, grown_mib
):
    check = _check(pool_mib, largest_mib, workspace_mib, growth=(("small", 1, grown_mib * MIB),))
    assert check.passed, model
    assert check.causes == ()
    assert check.caching_bytes == (pool_mib - largest_mib - workspace_mib) * MIB
    assert "in free blocks (after the first size: 1 small segment" in check.caching_sentence()


def test_separate_pools_fail_naming_the_pools_and_what_one_shared_pool_costs():
    pools = tuple(((0, n), 20 * MIB) for n in range(1, 9))
    check = _check(160, 20, pools=pools, pool_mode="separate")
    assert not check.passed
    rule, sentence = check.causes[0]
    assert rule == "separate pools"
    assert "the graphs use 8 pools holding 160.0 MiB in all" in sentence
    assert check.message().startswith("pool check (separate pools): the graphs use 8 pools")


def _block(size, address, frames=()):
    return LiveBlock(POOL, address, size, size, frames)


def test_a_tensor_kept_alive_fails_naming_its_size_and_the_line_that_allocated_it():
    kept = _block(4 * MIB, 0x1000, (("/work/project/model.py", 12, "forward"),))
    live = ((256, (kept,)), (128, (kept, _block(2 * MIB, 0x2000))))
    check = _check(62, 24, live=live)
    assert not check.passed and check.causes[0][0] == "kept alive"
    text = check.message()
    assert text.startswith(
        "pool check (kept alive): after batch size 256's capture the pool still held 1 block, 4.0 MiB"
    )
    assert "allocated at " in text and "model.py:12 in forward" in text
    assert "after the last, batch size 128, it held 2 blocks, 6.0 MiB" in text
    assert check.live_bytes == 6 * MIB


def test_outputs_kept_fail_with_the_keep_outputs_fix():
    check = _check(86, 40, live=((1, (_block(MIB, 0x10),)),), keep_outputs=True)
    assert "keep_outputs=True keeps every size's outputs alive in the pool" in check.causes[0][1]


def test_a_capture_order_other_than_largest_first_is_judged_against_the_same_sizes_largest_first():
    ascending = (1, 2, 4, 8, 16)
    worse = _check(120, 40, capture_order=ascending, order="as_given", largest_first_bytes=62 * MIB)
    assert [rule for rule, _ in worse.causes] == ["capture order"]
    assert "the same sizes captured largest first into one pool hold 62.0 MiB" in worse.causes[0][1]
    as_good = _check(95, 40, capture_order=ascending, order="as_given", largest_first_bytes=62 * MIB)
    assert as_good.passed  # 95 - 33 of workspace = 62: the order cost nothing
    descending = _check(120, 40, capture_order=(16, 8, 1), order="as_given")
    assert descending.largest_first and descending.passed


def test_a_byte_budget_given_as_slack_is_the_users_own_bound():
    check = _check(60, 24, slack_bytes=0)
    assert check.limit == 57 * MIB
    assert [rule for rule, _ in check.causes] == ["pool budget"]
    assert _check(60, 24, slack_bytes=3 * MIB).passed


def test_several_causes_lead_with_the_first_and_list_the_others():
    check = _check(
        200, 20, pools=((POOL, 100 * MIB), ((0, 2), 100 * MIB)), live=((8, (_block(MIB, 0x10),)),), slack_bytes=0
    )
    lines = check.message().splitlines()
    assert lines[0].startswith("pool check (separate pools):")
    assert lines[1].startswith("  also (kept alive):") and lines[2].startswith("  also (pool budget):")
    assert check.to_json()["causes"] == ["separate pools", "kept alive", "pool budget"]


@given(
    pool_mib=st.integers(min_value=1, max_value=4096),
    largest_mib=st.integers(min_value=0, max_value=4096),
    live=st.lists(st.integers(min_value=512, max_value=64 * MIB), max_size=4),
)
def test_with_one_pool_and_largest_first_only_live_blocks_fail(pool_mib, largest_mib, live):
    blocks = tuple(_block(size, i) for i, size in enumerate(live))
    check = _check(pool_mib, largest_mib, live=((256, blocks),))
    assert check.passed is (not live)


def test_live_blocks_are_read_from_the_pools_asked_for_and_only_if_allocated():
    segments = [
        {
            "segment_pool_id": (0, 1),
            "device": 0,
            "total_size": 20 * MIB,
            "blocks": [
                {
                    "address": 0x100,
                    "size": 4 * MIB,
                    "requested_size": 4 * MIB - 100,
                    "state": "active_allocated",
                    "frames": [
                        {
                            "filename": os.path.join(os.path.dirname(torch.__file__), "nn", "functional.py"),
                            "line": 1,
                            "name": "f",
                        },
                        {"filename": "/home/u/model.py", "line": 7, "name": "forward"},
                    ],
                },
                {"address": 0x500, "size": 8 * MIB, "requested_size": 8 * MIB, "state": "inactive"},
                {"address": 0x900, "size": 2 * MIB, "requested_size": 2 * MIB, "state": "active_pending_free"},
            ],
        },
        {
            "segment_pool_id": (0, 2),
            "device": 0,
            "total_size": 2 * MIB,
            "blocks": [{"address": 0x7, "size": 512, "requested_size": 4, "state": "active_allocated"}],
        },
    ]
    (block,) = live_blocks_from_segments(segments, [(0, 1)], device=0)
    assert (block.address, block.size) == (0x100, 4 * MIB)
    assert block.user_frame() == ("/home/u/model.py", 7, "forward")
    assert describe_live_blocks([block]).startswith("1 block, 4.0 MiB: 4.0 MiB (requested 4.0 MiB) allocated at ")
    assert len(live_blocks_from_segments(segments, [(0, 1), (0, 2)])) == 2
    assert live_blocks_from_segments(segments, [(0, 1)], device=1) == ()


def test_the_workspace_blocks_are_set_apart_and_stacks_are_matched_by_size():
    workspace = _block(32 * MIB, 0x1)
    kept = _block(4 * MIB, 0x2)
    live = live_after_capture([(512, (workspace, kept)), (256, (workspace,))], frozenset({0x1}))
    assert live == ((512, (kept,)), (256, ()))
    check = _check(80, 40, live=live)
    traced = [_block(4 * MIB, 0x99, (("/home/u/cache.py", 3, "append"),))]
    named = with_block_frames(check, traced)
    assert named.live[0][1][0].frames == (("/home/u/cache.py", 3, "append"),)
    assert named.live[0][1][0].address == 0x2  # the block found, with the traced block's stack


def test_segment_growth_counts_the_segments_added_by_kind():
    before = (20 * MIB, 20 * MIB, 2 * MIB)
    after = (20 * MIB, 20 * MIB, 20 * MIB, 2 * MIB, 2 * MIB, 34 * MIB)
    assert segment_growth(before, after) == (("small", 1, 2 * MIB), ("large", 1, 20 * MIB), ("own", 1, 34 * MIB))
    assert segment_growth(after, before) == ()
