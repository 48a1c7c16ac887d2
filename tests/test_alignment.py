"""The ranks' collectives aligned before the first replay: the comparison, its messages, and the exchange on gloo ranks.

The comparison and the messages run on recorded sequences (hypothesis varies
them); the exchange runs on two real gloo ranks on the CPU, through the
launcher's store, with the sequences a real recorder took of real collectives:
rank 1 issues one all-reduce more, as a rank-dependent branch in a captured
function would.  The bodies are module-level functions: the rank processes
import them from this module by name.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph.graphs.collectives import Collective, record_collectives
from pytest_cudagraph.ranks import RanksFailed, run_ranks
from pytest_cudagraph.ranks.alignment import (
    SizeCollectives,
    collective_text,
    digest,
    first_misalignment,
    from_payload,
    misaligned,
    misalignment_message,
    payload,
)

ALL_REDUCE = Collective("all_reduce", "bfloat16", 4096, "0", "sum", "c10d::allreduce_", "tp.py:40 in forward")
ALL_GATHER = Collective("all_gather", "bfloat16", 1024, "0", None, "c10d::_allgather_base_", "tp.py:44 in forward")

collectives = st.builds(
    Collective,
    kind=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "broadcast"]),
    dtype=st.sampled_from(["float32", "bfloat16", None]),
    count=st.one_of(st.none(), st.integers(1, 1 << 20)),
    group=st.sampled_from(["0", "1", None]),
    reduce=st.sampled_from(["sum", "max", None]),
    where=st.sampled_from([None, "m.py:1 in f", "m.py:2 in g"]),
)
sequences = st.lists(collectives, max_size=8).map(tuple)


def _sizes(calls_per_size, kernels=None):
    return [SizeCollectives(size, tuple(calls), kernels) for size, calls in calls_per_size.items()]


# --------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------


@given(st.dictionaries(st.integers(1, 512), sequences, min_size=1, max_size=4), st.integers(2, 4))
def test_the_same_collectives_on_every_rank_align(per_size, world_size):
    mine = _sizes(per_size)
    # the call sites may differ (another file path on another rank's machine): only what NCCL sees must match
    theirs = [
        SizeCollectives(s.size, tuple(Collective(**{**c.__dict__, "where": None}) for c in s.calls)) for s in mine
    ]
    by_rank = {0: mine, **{r: theirs for r in range(1, world_size)}}
    assert first_misalignment(by_rank) is None
    assert digest(mine) == digest(theirs)


@given(sequences, collectives, st.data())
def test_one_collective_more_on_one_rank_is_found_where_it_is(sequence, extra, data):
    position = data.draw(st.integers(0, len(sequence)))
    longer = sequence[:position] + (extra,) + sequence[position:]
    found = first_misalignment({0: _sizes({8: sequence}), 1: _sizes({8: longer})})
    assert found is not None and found.size == 8 and found.source == "calls"
    # the first difference is at the insertion or later, where the shifted entries first differ
    assert position <= found.index <= len(sequence)
    assert found.sequences[1][found.index] != (sequence + (None,))[found.index]
    assert digest(_sizes({8: sequence})) != digest(_sizes({8: longer}))


@given(sequences.filter(bool), st.integers(1, 1 << 20), st.data())
def test_another_count_is_found_at_its_position(sequence, count, data):
    position = data.draw(st.integers(0, len(sequence) - 1))
    if sequence[position].count == count:
        count += 1
    changed = list(sequence)
    changed[position] = Collective(**{**changed[position].__dict__, "count": count})
    found = first_misalignment({0: _sizes({4: sequence}), 1: _sizes({4: tuple(changed)})})
    assert found is not None and found.index == position


def test_the_first_size_that_differs_is_named_in_capture_order():
    rank0 = _sizes({64: [ALL_REDUCE], 8: [ALL_REDUCE], 1: [ALL_REDUCE]})
    rank1 = _sizes({64: [ALL_REDUCE], 8: [ALL_REDUCE, ALL_REDUCE], 1: []})
    found = first_misalignment({0: rank0, 1: rank1})
    assert found.size == 8 and found.index == 1


def test_kernels_are_compared_only_where_every_rank_read_them():
    nccl = (Collective("all_reduce", "bfloat16", None, None, "sum"),)
    read = {0: _sizes({8: [ALL_REDUCE]}, nccl), 1: _sizes({8: [ALL_REDUCE]}, nccl + nccl)}
    found = first_misalignment(read)
    assert found.source == "kernels" and found.index == 1
    unread = {0: _sizes({8: [ALL_REDUCE]}, nccl), 1: _sizes({8: [ALL_REDUCE]}, None)}
    assert first_misalignment(unread) is None


def test_a_rank_that_could_not_read_its_kernels_aligns_though_its_digest_differs():
    nccl = (Collective("all_reduce", "bfloat16", None, None, "sum"),)
    read, unread = _sizes({8: [ALL_REDUCE]}, nccl), _sizes({8: [ALL_REDUCE]}, None)
    assert digest(read) != digest(unread)
    assert misaligned({0: payload(read), 1: payload(unread)}, 2) is None
    more = _sizes({8: [ALL_REDUCE, ALL_REDUCE]}, None)
    message = misaligned({0: payload(read), 1: payload(more)}, 2)
    assert message is not None and message.startswith("the ranks' CUDA graphs for batch size 8 hold different")


def test_different_captured_sizes_are_named():
    found = first_misalignment({0: _sizes({8: [], 4: []}), 1: _sizes({8: []})})
    message = misalignment_message(found, 2)
    assert message == (
        "the 2 ranks captured different batch sizes (rank 0: [8, 4]; rank 1: [8]); capture the same sizes on every rank"
    )


@given(st.dictionaries(st.integers(1, 512), sequences, min_size=1, max_size=3))
def test_a_payload_round_trips(per_size):
    sizes = _sizes(per_size, (Collective("nccl"),))
    found_digest, back = from_payload(payload(sizes))
    assert found_digest == digest(sizes) and back == sizes


# --------------------------------------------------------------------------
# the message
# --------------------------------------------------------------------------


def test_the_message_names_the_size_both_sequences_the_difference_and_the_line():
    extra = Collective("all_reduce", "bfloat16", 4096, "0", "sum", "c10d::allreduce_", "tp.py:47 in forward")
    found = first_misalignment(
        {0: _sizes({16: [ALL_REDUCE, ALL_GATHER]}), 1: _sizes({16: [ALL_REDUCE, extra, ALL_GATHER]})}
    )
    assert misalignment_message(found, 2) == (
        "the ranks' CUDA graphs for batch size 16 hold different collectives, found before the first "
        "replay: call #2 that the captured function issued differs: rank 0 has all_gather of 1024 bfloat16 (group 0), rank 1 has all_reduce of "
        "4096 bfloat16 (sum, group 0) (rank 0 issued it at tp.py:44 in forward; rank 1 issued it at tp.py:47 in "
        "forward); the calls per rank: rank 0, 2 collectives: #1 all_reduce of 4096 bfloat16 (sum, group 0), #2 all_gather of "
        "1024 bfloat16 (group 0); rank 1, 3 collectives: #1 all_reduce of 4096 bfloat16 (sum, group 0), #2 all_reduce of 4096 "
        "bfloat16 (sum, group 0), #3 all_gather of 1024 bfloat16 (group 0); every rank must issue the same "
        "collectives, with the same sizes and in the same order, inside the captured function (a branch on the "
        "rank that adds or skips one is the usual cause); replaying these graphs would wait forever, so they were "
        "not replayed; to skip this check, give @pytest.mark.cudagraph(align_collectives=False)"
    )


def test_a_long_sequence_is_shown_around_its_difference():
    many = [ALL_REDUCE] * 40
    found = first_misalignment({0: _sizes({2: many}), 1: _sizes({2: many[:30]})})
    message = misalignment_message(found, 2)
    assert (
        "call #31 that the captured function issued differs: rank 0 has all_reduce of 4096 bfloat16 (sum, group 0), rank 1 has nothing"
        in message
    )
    assert (
        "rank 0, 40 collectives: (27 before), #28 " in message
        and "#34 all_reduce of 4096 bfloat16 (sum, group 0), (6 more)" in message
    )
    assert "rank 1, 30 collectives: (27 before), #28 " in message


def test_a_kernel_without_count_reads_plainly():
    assert collective_text(Collective("nccl")) == "nccl"
    assert collective_text(Collective("all_reduce", "float16", None, None, "sum")) == "all_reduce of float16 (sum)"
    assert collective_text(None) == "nothing"


# --------------------------------------------------------------------------
# the exchange, on two gloo ranks (bodies imported by name in the rank processes)
# --------------------------------------------------------------------------


def _layer(x, group, extra):
    dist.all_reduce(x, group=group)
    if extra:  # a rank-dependent branch: one all-reduce more on rank 1
        dist.all_reduce(x, group=group)
    return x


def record_then_align(rank, branch):
    """Record a layer per size with real collectives, then align; ``branch``: rank 1 issues one more.

    Each rank runs its collectives on a one-rank group of its own, so the extra call
    completes eagerly (inside a captured graph it would only be recorded, and hang
    at the first replay); the group's name, which differs per rank here, is left out.
    """
    own = [dist.new_group([r]) for r in range(rank.world_size)][rank.rank]
    per_size = []
    for size in (8, 4):
        with record_collectives() as record:
            _layer(torch.ones(size, 16), own, branch and rank.rank == 1)
        calls = tuple(Collective(**{**c.__dict__, "group": None}) for c in record.calls)
        per_size.append(SizeCollectives(size, calls))
    rank.align_collectives(per_size)
    return rank.alignment_result()


@pytest.mark.slow  # spawns two rank processes
def test_matching_ranks_align_and_report_the_cost():
    result = run_ranks(record_then_align, False, world_size=2, backend="gloo", timeout=60)
    assert result.passed
    assert result.values[0] == {**result.values[0], "exchanges": 1, "sizes": 2, "collectives": 2}
    assert [r.collective_alignment["sizes"] for r in result.per_rank] == [2, 2]
    assert result.to_json()["per_rank"][0]["collective_alignment"]["exchanges"] == 1


@pytest.mark.slow  # spawns two rank processes
def test_one_all_reduce_more_on_rank_one_fails_every_rank_at_once_naming_it():
    with pytest.raises(RanksFailed) as info:
        run_ranks(record_then_align, True, world_size=2, backend="gloo", timeout=60)
    result = info.value.result
    # found by the comparison before any replay, not by the watchdog at the timeout
    assert result.outcome == "failed"
    errors = [r.error for r in result.per_rank if r.error is not None]
    assert errors and all(e.type == "CollectivesMisaligned" for e in errors)
    message = str(info.value)
    assert "the ranks' CUDA graphs for batch size 8 hold different collectives, found before the first" in message
    assert (
        "call #2 that the captured function issued differs: rank 0 has nothing, rank 1 has all_reduce of 128 float32 (sum)"
        in message
    )
    assert "rank 1 issued it at tests/test_alignment.py:" in message and "in _layer" in message
