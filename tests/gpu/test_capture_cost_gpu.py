"""Capture cost on a GPU: seconds per size and phase, and device memory outside the pool.

A plain model takes little memory behind PyTorch's allocator (the instantiated
graphs, kernels loaded on first use); a function that allocates its own device
buffer with the CUDA driver, as a library does, shows up at the size whose warm-up
allocated it, and ``check_pool(outside=...)`` fails with the per-size table.
"""

from __future__ import annotations

import ctypes

import pytest
import torch
from mlp_model import MLP

from pytest_cudagraph import InvariantViolation, capture_graphs
from pytest_cudagraph.capture_cost import shared_device
from pytest_cudagraph.memory import format_bytes
from pytest_cudagraph.record import current_record

pytestmark = pytest.mark.cudagraph

VLLM_SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
MIB = 2**20
LIBRARY_BUFFER = 256 * MIB


def make_inputs(size: int) -> torch.Tensor:
    return torch.randn(size, 1024, device="cuda")


@pytest.fixture
def gpu_of_its_own():
    """The device-wide figures are this process's only when no other worker uses the GPU."""
    if shared_device():
        pytest.skip(f"memory outside the pool needs a GPU of its own: {shared_device()}")


def test_vllm_sizes_of_the_mlp_record_both_phases_per_size_and_little_behind_the_allocator(cudagraphs, gpu_of_its_own):
    torch.manual_seed(0)
    model = MLP().cuda().eval()
    gs = cudagraphs.capture(model, make_inputs, VLLM_SIZES)
    gs.check_replay(trials=1)
    cost = gs.cost
    print(f"\ncapture of {len(VLLM_SIZES)} sizes: {gs.capture_s:.3f}s, of which warm-up {cost.warmup_s:.3f}s")
    print(cost.table(limit_rows=60))
    assert [row.size for row in cost.sizes] == sorted(VLLM_SIZES, reverse=True)
    assert all(row.warmup_s > 0 and row.capture_s > 0 for row in cost.sizes)
    assert cost.warmup_s + cost.graph_capture_s <= gs.capture_s
    # the rows divide the run: their pool growth adds up to the pool
    assert sum(row.pool_bytes for row in cost.sizes) == cost.pool_bytes == gs.pool_bytes
    assert cost.unreliable is None
    # a plain model: the graphs themselves and kernels loaded on first use, no library buffer
    assert cost.behind_allocator_bytes < 128 * MIB, cost.table()
    gs.check_pool(outside=128 * MIB)
    cudagraphs.close()
    record = current_record().to_json()["graphs"]
    assert len(record["per_size"]) == len(VLLM_SIZES)
    assert record["behind_allocator_bytes"] == cost.behind_allocator_bytes


class LibraryBuffer:
    """A device buffer allocated with the CUDA driver on first use, as a library allocates its workspace."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.pointer = ctypes.c_uint64(0)
        self.driver = ctypes.CDLL("libcuda.so.1")

    def ensure(self) -> None:
        if not self.pointer.value:
            status = self.driver.cuMemAlloc_v2(ctypes.byref(self.pointer), ctypes.c_size_t(self.nbytes))
            assert status == 0, f"cuMemAlloc_v2 returned {status}"

    def free(self) -> None:
        if self.pointer.value:
            self.driver.cuMemFree_v2(self.pointer)
            self.pointer = ctypes.c_uint64(0)


def test_a_buffer_allocated_behind_the_allocator_is_found_at_its_size_and_bounded(gpu_of_its_own):
    torch.manual_seed(0)
    weight = torch.randn(256, 256, device="cuda")
    buffer = LibraryBuffer(LIBRARY_BUFFER)

    def layer(x):
        buffer.ensure()  # the first call, in the first size's warm-up
        return torch.relu(x @ weight)

    try:
        with capture_graphs(layer, lambda n: torch.randn(n, 256, device="cuda"), [8, 4, 2, 1]) as gs:
            gs.check_replay(trials=1)
            cost = gs.cost
            print("\n" + cost.table())
            first = cost.sizes[0]
            assert first.size == 8 and first.behind_allocator_bytes >= LIBRARY_BUFFER
            assert all(abs(row.behind_allocator_bytes) < LIBRARY_BUFFER // 4 for row in cost.sizes[1:])
            assert cost.behind_allocator_bytes >= LIBRARY_BUFFER
            gs.check_pool(outside=2 * LIBRARY_BUFFER)
            with pytest.raises(InvariantViolation) as failure:
                gs.check_pool(outside=64 * MIB)
            message = str(failure.value)
            print(message)
            assert message.startswith(
                f"the capture took {format_bytes(cost.behind_allocator_bytes)} of device memory behind "
                f"PyTorch's allocator, more than outside=64.0 MiB allows"
            )
            assert "the graph pool holds" not in message  # the pool itself is fine
            size_row = next(line for line in message.splitlines() if line.split()[:2] == ["1", "8"])
            assert size_row.split()[-1].startswith("+2") and size_row.endswith("M")  # +256.0M, give or take a page
    finally:
        buffer.free()


def test_piecewise_records_both_phases_per_size(piecewise, gpu_of_its_own):
    from toy_attention import ATTENTION_OP, ToyModel, make_inputs_for

    model = ToyModel(layers=2).cuda()
    compiled = piecewise(model, [ATTENTION_OP], backend="eager", capture_sizes=[1, 2, 4, 8])
    compiled.check_replay(make_inputs_for(model, device="cuda"), sizes=[1, 3, 8])
    cost = compiled.result().cost
    print("\n" + cost.table())
    assert [row.size for row in cost.sizes] == [8, 4, 2, 1]
    assert all(row.warmup_s > 0 and row.capture_s > 0 for row in cost.sizes)
    assert sum(row.pool_bytes for row in cost.sizes) == compiled.pool_bytes
    fields = compiled.result().to_json()
    assert len(fields["per_size"]) == 4 and fields["warmup_s"] > 0
    compiled.check_pool(outside=128 * MIB)
