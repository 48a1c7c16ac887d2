"""A capture's collectives: the recorder over real gloo collectives, and the graph read-back's parsing.

The recorder is the dispatch mode the ranks push around each capture; here it runs
over a one-rank gloo process group on the CPU, eagerly and under torch.compile.
The read-back's DOT parsing runs on dumps recorded from captured graphs on an
H200 (torch 2.11, NCCL 2.28.9, one rank): a ``oneRankReduce`` kernel for an
average, a device-to-device memcpy (no kernel) for an out-of-place all-gather.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from pytest_cudagraph import _compat
from pytest_cudagraph.graphs.collectives import Collective, record_collectives

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def one_rank_group():
    if not _compat.backend_available("gloo"):
        pytest.skip("this torch has no gloo backend")
    if dist.is_initialized():
        pytest.skip("a default process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _line_of(text: str) -> int:
    """The line of this file holding ``text`` (a call site the recorder must name)."""
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_records_kind_dtype_count_reduction_and_the_line(one_rank_group):
    x = torch.ones(12)
    wide = torch.ones(3, 5, dtype=torch.float64)
    gathered = torch.empty(12)
    with record_collectives() as record:
        dist.all_reduce(x)  # the all-reduce
        y = x * 2  # not a collective
        dist.all_reduce(wide, op=dist.ReduceOp.MAX)
        dist.all_gather_into_tensor(gathered, y)  # the all-gather
        dist.broadcast(x, src=0)
    kinds = [(c.kind, c.dtype, c.count) for c in record.calls]
    assert kinds == [
        ("all_reduce", "float32", 12),
        ("all_reduce", "float64", 15),
        ("all_gather", "float32", 12),
        ("broadcast", "float32", 12),
    ]
    first, second, gather, _ = record.calls
    # c10d's ReduceOp reaches the dispatcher as a script object, which torch 2.6 gives no way to read
    assert (first.reduce, second.reduce) in {("sum", "max"), (None, None)}
    assert first.group == second.group and first.group is not None
    assert first.where == f"tests/test_collectives.py:{_line_of('# the all-reduce')} in " + (
        "test_records_kind_dtype_count_reduction_and_the_line"
    )
    assert gather.where.startswith(f"tests/test_collectives.py:{_line_of('# the all-gather')} ")


def test_functional_collectives_are_recorded_and_wait_is_not(one_rank_group):
    from torch.distributed import _functional_collectives as funcol

    x = torch.arange(6, dtype=torch.float32)
    with record_collectives() as record:
        out = funcol.all_reduce(x, "sum", one_rank_group)
        out = funcol.wait_tensor(out) if hasattr(funcol, "wait_tensor") else out
        torch.add(out, 1)
    assert [(c.kind, c.dtype, c.count, c.reduce) for c in record.calls] == [("all_reduce", "float32", 6, "sum")]


def _compiled_body(x):
    y = x.sin()
    dist.all_reduce(y)
    return y + 1


def test_a_compiled_function_keeps_compiling_and_its_collective_is_recorded(one_rank_group):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(_compiled_body, backend="eager")
    x = torch.ones(8)
    compiled(x)  # the warm-up compiles, as a capture's warm-up does
    frames_before = dict(counters["frames"])
    with record_collectives() as record:
        out = compiled(x)
    assert dict(counters["frames"]) == frames_before, "the recorder made Dynamo convert a frame again"
    assert torch.equal(out, x.sin() + 1)
    assert [(c.kind, c.dtype, c.count) for c in record.calls] == [("all_reduce", "float32", 8)]
    torch._dynamo.reset()


def test_nothing_is_recorded_outside_the_block(one_rank_group):
    with record_collectives() as record:
        pass
    dist.all_reduce(torch.ones(2))
    assert record.calls == []


@pytest.mark.parametrize(
    ("symbol", "decoded"),
    [
        ("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
         {"kind": "all_reduce", "reduce": "sum", "dtype": "float32"}),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128", {"kind": "reduce_scatter", "reduce": "sum", "dtype": "bfloat16"}),
        ("ncclDevKernel_AllGather_RING_LL", {"kind": "nccl", "reduce": None, "dtype": None}),
        ("ncclDevKernel_Generic_4", {"kind": "nccl", "reduce": None, "dtype": None}),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", {"kind": "nccl", "reduce": None, "dtype": None}),
        ("triton_poi_fused_add_0", None),
        ("ampere_sgemm_128x64_tn", None),
    ],
)  # fmt: skip
def test_nccl_kernel_symbols_name_what_they_can(symbol, decoded):
    assert _compat.nccl_kernel_collective(symbol) == decoded


def test_the_one_rank_reduce_kernel_is_read_from_a_recorded_graph_dump():
    symbols = _compat.kernel_names_in_dot((DATA / "graph_one_rank_reduce.dot").read_text())
    assert len(symbols) == 1 and "oneRankReduce" in symbols[0]
    assert _compat.nccl_kernel_collective(symbols[0]) == {
        "kind": "one_rank_reduce",
        "reduce": "premul_sum",
        "dtype": "float32",
    }


def test_a_graph_of_a_memcpy_alone_holds_no_kernel():
    assert _compat.kernel_names_in_dot((DATA / "graph_memcpy.dot").read_text()) == []


def test_kernels_come_in_topological_order_not_the_order_written():
    dump = (
        'digraph dot {\n"g_node_1"[label="{KERNEL\n| {ID | 1 (topoId: 1) | ncclDevKernel_AllGather_Sum_f16_RING_LL\\<\\<\\<1,1,0\\>\\>\\>}\n}"];\n'
        '"g_node_0"[label="{KERNEL\n| {ID | 0 (topoId: 0) | triton_poi_fused_0\\<\\<\\<1,1,0\\>\\>\\>}\n}"];\n'
        '"g_node_2"[label="{KERNEL\n| {ID | 2 (topoId: 2) | ncclDevKernel_AllReduce_Sum_f16_RING_LL\\<\\<\\<1,1,0\\>\\>\\>}\n}"];\n}'
    )
    reordered = dump.replace("(topoId: 1)", "(topoId: 9)")
    assert _compat.kernel_names_in_dot(dump) == [
        "triton_poi_fused_0",
        "ncclDevKernel_AllGather_Sum_f16_RING_LL",
        "ncclDevKernel_AllReduce_Sum_f16_RING_LL",
    ]
    assert _compat.kernel_names_in_dot(reordered)[-1] == "ncclDevKernel_AllGather_Sum_f16_RING_LL"


def test_a_collective_round_trips_through_json():
    c = Collective("all_reduce", "bfloat16", 4096, "0", "sum", "c10d::allreduce_", "m.py:3 in f")
    assert Collective.from_json(c.to_json()) == c
    assert Collective.from_json(Collective("nccl").to_json()) == Collective("nccl")
