"""CUDA graph capture, replay, pool and failed-capture checks on a real GPU.

Run with ``pytest tests/gpu --cudagraph``; without a GPU (or without the flag)
every test here skips with its reason.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from mlp_model import MLP

from pytest_cudagraph import CaptureError, InvariantViolation, StaleGraphError, capture_graphs
from pytest_cudagraph.graphs.memory import graph_pool_segments
from pytest_cudagraph.records.record import current_record
from pytest_cudagraph.render.plain_text import format_bytes
from pytest_cudagraph.strategies import capture_sizes, dtypes

pytestmark = pytest.mark.cudagraph

VLLM_SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
FEW = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def inputs_for(d: int, dtype: torch.dtype = torch.float32):
    def make_inputs(size: int) -> torch.Tensor:
        return torch.randn(size, d, device="cuda", dtype=dtype)

    return make_inputs


@pytest.fixture(scope="module")
def small_models():
    torch.manual_seed(0)
    return {dtype: MLP(128, 2).to(device="cuda", dtype=dtype).eval() for dtype in (torch.float32, torch.bfloat16)}


@pytest.fixture(scope="module")
def big_mlp():
    """The model of docs/concepts.md's pool figures: 8 blocks, d=1024, fp32."""
    torch.manual_seed(0)
    return MLP(1024, 8).cuda().eval()


@pytest.fixture
def pool_baseline():
    """Graph-pool ids alive before the test; the test must leave no new ones."""
    before = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    yield before
    after = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    assert after <= before, f"graph pools left behind: {sorted(after - before)}"


# --------------------------------------------------------------------------
# replay vs eager
# --------------------------------------------------------------------------


@FEW
@given(sizes=capture_sizes(max_size=96, max_count=6), dtype=dtypes(["float32", "bfloat16"]))
def test_hypothesis_capture_sizes_replay_like_eager(small_models, sizes, dtype):
    model = small_models[dtype]
    with capture_graphs(model, inputs_for(128, dtype), sizes) as gs:
        check = gs.check_replay(trials=2)
        assert gs.sizes == tuple(sizes)
        assert check.max_abs_err is not None and math.isfinite(check.max_abs_err)


@pytest.mark.cudagraph(capture_sizes=[1, 2, 4, 8, 16])
def test_fixture_takes_sizes_from_marker_and_records(cudagraphs, small_models):
    gs = cudagraphs.capture(small_models[torch.float32], inputs_for(128))
    assert gs.sizes == (1, 2, 4, 8, 16)
    assert gs.capture_order == (16, 8, 4, 2, 1)
    gs.check_replay(trials=3)
    out = gs.replay(4, torch.ones(4, 128, device="cuda"))
    assert out.shape == (4, 128)
    cudagraphs.close()
    graphs = current_record().to_json()["graphs"]
    assert graphs["sizes"] == [1, 2, 4, 8, 16]
    assert graphs["captured"] == 5
    assert graphs["pool_bytes"] > 0
    assert graphs["max_abs_err"] is not None
    assert graphs["order"] == "largest_first" and graphs["pool"] == "shared"


def test_reference_that_disagrees_is_reported_with_the_worst_element(small_models):
    model = small_models[torch.float32]
    with capture_graphs(model, inputs_for(128), [2, 4]) as gs:
        with pytest.raises(InvariantViolation) as info:
            gs.check_replay(reference=lambda x: model(x) + 1e-2)
    text = str(info.value)
    assert "batch size 4" in text and "trial 1 of 3" in text
    assert "worst element at index (" in text and "the reference" in text


# --------------------------------------------------------------------------
# static control flow and value-dependent branches
# --------------------------------------------------------------------------


class StepBranch(torch.nn.Module):
    """Branches on a host-side step counter: decided at capture, frozen on replay."""

    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x * 2 if self.step <= 4 else x * 3


def test_host_state_branch_is_caught_by_replay_check():
    with capture_graphs(StepBranch(), inputs_for(16), [4], warmup_iters=3) as gs:
        with pytest.raises(InvariantViolation) as info:
            gs.check_replay()
    text = str(info.value)
    assert "batch size 4" in text and "trial 1" in text
    assert "static control flow" in text


def value_branch(x):
    if x.sum() > 0:
        return x * 2
    return -x


def test_value_dependent_branch_fails_capture_with_its_line():
    with pytest.raises(CaptureError) as info:
        capture_graphs(value_branch, inputs_for(16), [4])
    text = str(info.value)
    assert "if x.sum() > 0" in text and "batch size 4" in text
    assert torch.cuda.current_stream() == torch.cuda.default_stream()


# --------------------------------------------------------------------------
# failed captures: the real cause, the op, and a process that keeps working
# --------------------------------------------------------------------------

OTHER_STREAM: dict[str, torch.cuda.Stream] = {}


def sync_item(x):
    return x * float(x.sum().item())


def sync_device(x):
    y = x * 2
    torch.cuda.synchronize()
    return y


def sync_nonzero(x):
    return x[torch.nonzero(x > 0)[:, 0]].sum(0)


def copy_cpu(x):
    return (x * 2).cpu()


def sample_multinomial(x):
    return torch.multinomial(x.softmax(-1), 1)


def alloc_other_stream(x):
    side = OTHER_STREAM["s"]
    side.wait_stream(torch.cuda.current_stream())  # the side stream joins the capture...
    with torch.cuda.stream(side):
        scratch = torch.empty_like(x)  # ...and allocates there
        scratch.copy_(x)
    return x + 1  # but is never joined back


FAILURES = {
    "item": (sync_item, ".item()"),
    "synchronize": (sync_device, "torch.cuda.synchronize()"),
    "nonzero": (sync_nonzero, "nonzero()"),
    "cpu": (copy_cpu, ".cpu()"),
    "multinomial": (sample_multinomial, "torch.multinomial()"),
    "other_stream_alloc": (alloc_other_stream, "not joined back"),
}


@pytest.mark.parametrize("kind", list(FAILURES))
def test_failed_capture_names_cause_and_op_then_session_goes_on(kind, pool_baseline):
    OTHER_STREAM.setdefault("s", torch.cuda.Stream())
    fn, op_text = FAILURES[kind]
    stream_before = torch.cuda.current_stream()
    if kind == "multinomial":
        try:
            capture_graphs(fn, inputs_for(64), [8, 4]).close()
        except CaptureError as exc:
            text = str(exc)
        else:
            pytest.skip(f"torch {torch.__version__} captures torch.multinomial without a host sync")
    else:
        with pytest.raises(CaptureError) as info:
            capture_graphs(fn, inputs_for(64), [8, 4])
        text = str(info.value)
    print(f"\n[{kind}] {text}")
    assert op_text in text, text
    assert "real cause" in text and "batch size 8" in text
    assert "previous error during capture" not in text
    # the process is restored: stream, RNG, and the pool machinery
    assert torch.cuda.current_stream() == stream_before
    assert not torch.cuda.is_current_stream_capturing()
    x = torch.randn(8, 64, device="cuda")
    assert torch.isfinite(x).all()
    with capture_graphs(lambda t: t * 2 + 1, inputs_for(64), [8, 4]) as gs:
        gs.check_replay(trials=1)


def test_cuda_rng_and_capture_work_after_all_failed_captures(small_models, pool_baseline):
    torch.manual_seed(1234)
    a = torch.randn(4, device="cuda")
    torch.manual_seed(1234)
    b = torch.randn(4, device="cuda")
    assert torch.equal(a, b)
    with capture_graphs(small_models[torch.float32], inputs_for(128), [1, 3, 5]) as gs:
        gs.check_replay(trials=2)


# --------------------------------------------------------------------------
# pointer stability and stale parameters
# --------------------------------------------------------------------------


def test_replay_from_a_tensor_not_at_the_captured_address_names_the_input():
    with capture_graphs(lambda a, b: a + b, lambda n: (torch.randn(n, 8, device="cuda"),) * 2, [4]) as gs:
        static = gs.graph(4).static_inputs
        gs.replay(4, *static, copy=False)  # the captured buffers themselves: fine
        with pytest.raises(StaleGraphError, match=r"input 1 passed to the graph for batch size 4"):
            gs.replay(4, static[0], static[1].clone(), copy=False)


def test_replaced_parameter_makes_replay_stale_and_names_it():
    model = MLP(32, 1).cuda().eval()
    with capture_graphs(model, inputs_for(32), [2, 4]) as gs:
        gs.check_replay(trials=1)
        with torch.no_grad():
            model.blocks[0][0].weight.mul_(0.5)  # in place: still the captured memory
        gs.check_replay(trials=1)
        model.blocks[0][0].weight = torch.nn.Parameter(model.blocks[0][0].weight.detach() * 2)
        with pytest.raises(StaleGraphError, match=r"parameter 'blocks\.0\.0\.weight' of MLP was replaced"):
            gs.replay(2, torch.randn(2, 32, device="cuda"))


# --------------------------------------------------------------------------
# the shared pool (the H200 table of docs/concepts.md) and its negative controls
# --------------------------------------------------------------------------

POOL_FIGURES: dict[str, str] = {}


def _figures(gs, label):
    POOL_FIGURES[label] = (
        f"pool {format_bytes(gs.pool_bytes)}, largest alone {format_bytes(gs.largest_graph_bytes)}, "
        f"cuBLAS workspace {format_bytes(gs.cublas_workspace_bytes)}, capture {gs.capture_s:.2f}s"
    )
    print(f"\n{label}: {POOL_FIGURES[label]}")


def test_pool_largest_first_shared_stays_at_the_largest_graph(cudagraphs, big_mlp, pool_baseline):
    gs = cudagraphs.capture(big_mlp, inputs_for(1024), VLLM_SIZES)
    gs.check_replay(trials=1)
    check = gs.check_pool()
    _figures(gs, "largest_first shared")
    print(gs.size_table())
    assert check.largest_size == 512 and check.causes == () and check.live_bytes == 0
    assert gs.pool_bytes < 2 * check.largest_graph_bytes + check.cublas_workspace_bytes
    cudagraphs.close()


def test_pool_separate_pools_fail_with_the_table(cudagraphs, big_mlp, pool_baseline):
    gs = cudagraphs.capture(big_mlp, inputs_for(1024), VLLM_SIZES, pool="separate")
    with pytest.raises(InvariantViolation) as info:
        gs.check_pool()
    _figures(gs, "separate pools")
    text = str(info.value)
    print(text)
    assert text.startswith(f"pool check (separate pools): the graphs use {len(VLLM_SIZES)} pools")
    assert "pool='separate'" in text and "pool after" in text and "alone" in text
    cudagraphs.close()


def test_pool_smallest_first_keeping_outputs_fails_with_the_table(cudagraphs, big_mlp, pool_baseline):
    gs = cudagraphs.capture(big_mlp, inputs_for(1024), VLLM_SIZES, order="as_given", keep_outputs=True)
    assert gs.capture_order[0] == 1
    with pytest.raises(InvariantViolation) as info:
        gs.check_pool()
    _figures(gs, "smallest_first keep_outputs")
    text = str(info.value)
    print(text)
    assert text.startswith("pool check (kept alive): after batch size 1's capture the pool still held")
    assert "keep_outputs=True keeps every size's outputs alive" in text
    assert "order='as_given'" in text and "keep_outputs=True" in text and "pool after" in text
    cudagraphs.close()


def test_per_size_graph_bytes_are_measured_on_request(cudagraphs, big_mlp):
    gs = cudagraphs.capture(big_mlp, inputs_for(1024), [64, 128, 256, 512])
    per_size = gs.graph_bytes
    print("\nper-size graph bytes:", {s: format_bytes(b) for s, b in per_size.items()})
    assert set(per_size) == {64, 128, 256, 512}
    assert per_size[512] >= per_size[64] > 0
    cudagraphs.close()
    graphs = current_record().to_json()["graphs"]
    assert graphs["graph_bytes"]["512"] == per_size[512]
    assert graphs["largest_graph_bytes"] == max(per_size.values())


# --------------------------------------------------------------------------
# many hypothesis examples in one test leave no pool segments behind
# --------------------------------------------------------------------------


def test_many_examples_release_every_pool(small_models, pool_baseline):
    seen_pools = []

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(sizes=capture_sizes(max_size=32, max_count=4))
    def body(sizes):
        gs = capture_graphs(small_models[torch.float32], inputs_for(128), sizes)
        seen_pools.extend(gs.pool_ids)
        gs.check_replay(trials=1)
        gs.close()

    body()
    alive = {tuple(s["segment_pool_id"]) for s in graph_pool_segments()}
    assert seen_pools and not alive.intersection(seen_pools)
    assert len(current_record().graph_sets) >= 1


# --------------------------------------------------------------------------
# torch.compile(mode="reduce-overhead"): recordings and skip reasons
# --------------------------------------------------------------------------


def test_reduce_overhead_recordings_and_skip_reason_are_reported(cudagraphs):
    import torch._dynamo
    from torch._inductor import cudagraph_trees

    def affine(x):
        return x * 2 + 1

    def mutate(x):
        x.add_(1)
        return x * 2

    compiled = torch.compile(affine, mode="reduce-overhead")
    compiled_mutate = torch.compile(mutate, mode="reduce-overhead")
    try:
        with cudagraphs.watch_trees() as trees:
            for n in (64, 32):
                x = torch.randn(3 * n, device="cuda")
                for _ in range(3):
                    torch.compiler.cudagraph_mark_step_begin()
                    out = compiled(x)
                    assert torch.equal(out, x * 2 + 1)
            y = torch.randn(16, device="cuda")
            for _ in range(2):
                compiled_mutate(y)
        print("\nreduce-overhead:", json.dumps(trees.result().to_json()))
        assert trees.recordings == 2
        assert trees.skips >= 1
        assert any("mutated inputs" in reason for reason in trees.skip_reasons), trees.skip_reasons
        section = current_record().to_json()["reduce_overhead"]
        assert section["recordings"] == 2 and section["skips"] >= 1
    finally:
        torch._dynamo.reset()
        cudagraph_trees.reset_cudagraph_trees()


# --------------------------------------------------------------------------
# a failed capture inside code Inductor generated names the user's line
# --------------------------------------------------------------------------


def copies_to_host(x):
    y = x.sin()
    host = y.cpu()  # a device-to-host copy: not capturable
    return host * 2


def test_capture_failure_inside_compiled_code_names_the_users_line():
    compiled = torch.compile(copies_to_host)
    compiled(torch.randn(8, 16, device="cuda"))  # compile outside the capture
    with pytest.raises(CaptureError) as info:
        capture_graphs(compiled, inputs_for(16), [8, 4])
    text = str(info.value)
    print(f"\n{text}")
    # the user's source line of the op, not the generated wrapper's file
    assert "test_capture_gpu.py:" in text and "host = y.cpu()" in text and "the op .cpu()" in text
    assert "in the compiled code" in text
    assert "torchinductor" not in text
