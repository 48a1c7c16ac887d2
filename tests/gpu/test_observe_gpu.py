"""Observed graphs on a real GPU: every capture path, its figures, the verdicts, and the hooks' lifetime.

Run with ``pytest tests/gpu/test_observe_gpu.py --cudagraph``; without a GPU (or the flag) every test skips.
"""

from __future__ import annotations

import inspect
import weakref

import pytest
import torch

from pytest_cudagraph import _compat, load_report
from pytest_cudagraph.errors import InvariantViolation
from pytest_cudagraph.graphs.observe import observe_graphs
from pytest_cudagraph.render.plain_text import format_bytes

pytestmark = pytest.mark.cudagraph

HIDDEN = 512


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, HIDDEN)
    ).cuda()


def warm_up(model, stream, x):
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model(x)
    torch.cuda.current_stream().wait_stream(stream)


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _installed():
    state = _compat.graph_observer_state()
    return state["patched"], state["hooks"], state["listeners"]


@torch.inference_mode()
def test_torch_cuda_graph_blocks_in_one_pool_are_recorded_with_site_pool_growth_shapes_and_replays():
    model, stream = mlp(), torch.cuda.Stream()
    static = torch.zeros(64, HIDDEN, device="cuda")
    out = torch.zeros(64, HIDDEN, device="cuda")
    warm_up(model, stream, static)
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    with observe_graphs(expect_sizes=[8, 16, 64]) as observed:
        for batch in (64, 16, 8):
            x = static[:batch]
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):  # the engine's line
                out[:batch].copy_(model(x))
            graphs[batch] = graph
        for _ in range(3):
            graphs[16].replay()
    result = observed.result()
    assert result.passed, result.message()
    first, second, third = result.captures
    line = _line_of(test_torch_cuda_graph_blocks_in_one_pool_are_recorded_with_site_pool_growth_shapes_and_replays,
                    "# the engine's line")  # fmt: skip
    assert first.call_site is not None and first.call_site.line == line
    assert first.source == "torch.cuda.graph"
    assert first.pool == second.pool == third.pool == tuple(pool)
    assert [c.size for c in result.captures] == [64, 16, 8]
    assert first.growth_bytes > 0 and first.pool_bytes_before == 0
    assert second.growth_bytes <= first.growth_bytes
    assert [c.replays for c in result.captures] == [0, 3, 0]
    assert all(c.capture_s is not None and c.capture_s > 0 for c in result.captures)
    assert all(c.behind_allocator_bytes is not None for c in result.captures)
    assert all(c.alive_at_end for c in result.captures)  # `graphs` still holds them
    assert result.hooks == _compat.graph_observer_kind()
    assert _installed() == ([], 0, 0)


@torch.inference_mode()
def test_raw_capture_begin_and_end_on_a_side_stream_are_recorded():
    model, stream = mlp(), torch.cuda.Stream()
    x = torch.randn(8, HIDDEN, device="cuda")
    warm_up(model, stream, x)
    with observe_graphs() as observed:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            graph.capture_begin()  # a breakable-graph engine's own begin and end
            y = model(x)
            graph.capture_end()
        graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, model(x))
    (only,) = observed.captures
    assert only.source == "CUDAGraph.capture_begin" and only.replays == 1
    assert only.size == 8  # x, from the test's locals
    assert only.live_bytes > 0  # y is alive in the pool


@torch.inference_mode()
def test_a_pool_per_size_fails_naming_the_site_and_the_pools_bytes():
    model, stream = mlp(), torch.cuda.Stream()
    static, out = torch.zeros(64, HIDDEN, device="cuda"), torch.zeros(64, HIDDEN, device="cuda")
    warm_up(model, stream, static)
    keep = []
    with observe_graphs() as observed:
        for batch in (64, 32, 16):
            x = static[:batch]
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                out[:batch].copy_(model(x))
            keep.append(graph)
    result = observed.result()
    assert [rule for rule, _ in result.causes] == ["separate pools"]
    sentence = result.causes[0][1]
    assert "the 3 graphs captured at" in sentence and "use 3 pools holding" in sentence
    assert len(result.pools) == 3 and all(result.pool_bytes(p) > 0 for p in result.pools)


@torch.inference_mode()
def test_outputs_kept_across_captures_into_one_pool_fail_as_kept_alive():
    model, stream = mlp(), torch.cuda.Stream()
    static = torch.zeros(64, HIDDEN, device="cuda")
    warm_up(model, stream, static)
    pool = torch.cuda.graph_pool_handle()
    outputs, graphs = [], []
    with observe_graphs() as observed:
        for batch in (64, 32, 16):
            x = static[:batch]
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                outputs.append(model(x))  # every size's output kept: each pins its block in the pool
            graphs.append(graph)
    result = observed.result()
    assert "kept alive" in [rule for rule, _ in result.causes], result.message()
    assert "after graph 1 (size 64)" in dict(result.causes)["kept alive"]
    # the outputs the loop holds are in the pool: not taken for the next graph's inputs
    assert [c.size for c in result.captures] == [64, 32, 16]


def test_reduce_overhead_recordings_are_observed_with_their_inputs_shapes():
    def step(x, y):
        return torch.relu(x @ y) + 1

    torch._dynamo.reset()
    compiled = torch.compile(step, mode="reduce-overhead")
    y = torch.randn(64, 64, device="cuda")
    try:
        with observe_graphs() as observed:
            for _ in range(4):
                compiled(torch.randn(16, 64, device="cuda"), y)
    finally:
        torch._dynamo.reset()
    trees = [c for c in observed.captures if c.source == "cudagraph trees"]
    assert trees, [c.source for c in observed.captures]
    assert (16, 64) in trees[0].input_shapes  # the recording's inputs that are not static
    assert sum(c.replays for c in trees) >= 1
    assert observed.result().passed, observed.result().message()


@torch.inference_mode()
def test_a_block_that_raised_and_was_caught_is_a_failed_capture():
    model, stream = mlp(), torch.cuda.Stream()
    x = torch.randn(8, HIDDEN, device="cuda")
    warm_up(model, stream, x)
    with observe_graphs() as observed:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=stream):
                model(x)
                raise NotImplementedError("an op the engine cannot capture")
        except NotImplementedError:
            pass  # the engine falls back to eager and says nothing
    (only,) = observed.captures
    assert only.failed == "its torch.cuda.graph block raised NotImplementedError: an op the engine cannot capture"
    assert [rule for rule, _ in observed.result().causes] == ["failed captures"]


def test_the_plugins_own_captures_are_not_observed(cudagraphs):
    model = mlp().eval()
    with torch.inference_mode(), observe_graphs() as observed:
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, HIDDEN, device="cuda"), sizes=[1, 4])
        graphs.check_pool()
    assert observed.captures == ()


@torch.inference_mode()
def test_a_graph_released_in_the_block_is_not_alive_at_the_end():
    model, stream = mlp(), torch.cuda.Stream()
    x = torch.randn(8, HIDDEN, device="cuda")
    warm_up(model, stream, x)
    with observe_graphs() as observed:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            model(x)
        graph.replay()
        del graph
    (only,) = observed.captures
    assert only.replays == 1 and not only.alive_at_end


def test_the_marker_fails_an_engine_test_whose_pool_check_fails_and_passes_the_good_one(pytester):
    pytester.makepyfile(
        """
        import pytest
        import torch

        def capture(sizes, pool):
            model = torch.nn.Linear(256, 256).cuda()
            stream = torch.cuda.Stream()
            static = torch.zeros(max(sizes), 256, device="cuda")
            out = torch.zeros(max(sizes), 256, device="cuda")
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                model(static)
            graphs = []
            for batch in sorted(sizes, reverse=True):
                x = static[:batch]
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool() if callable(pool) else pool, stream=stream):
                    out[:batch].copy_(model(x))
                graphs.append(graph)
            for graph in graphs:
                graph.replay()

        @pytest.mark.cudagraph(capture_sizes=[1, 2, 4], observe=True)
        @torch.inference_mode()
        def test_good():
            capture([1, 2, 4], torch.cuda.graph_pool_handle())

        @pytest.mark.cudagraph(capture_sizes=[1, 2, 4, 8], observe=True, require_replay=True)
        @torch.inference_mode()
        def test_bad():
            capture([1, 2, 4], torch.cuda.graph_pool_handle)
        """
    )
    result = pytester.runpytest_subprocess("--cudagraph", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "@pytest.mark.cudagraph(observe=True): observed graphs (separate pools): the 3 graphs captured at" in out
    assert "also (missing sizes): sizes [8] were never captured: the graphs captured sizes [1, 2, 4]" in out
    assert "Traceback" not in out
    assert "3 obs (1,2,4)" in out


def test_make_graphed_callables_forward_and_backward_graphs_are_observed_and_pass():
    model = mlp()
    x = torch.randn(16, HIDDEN, device="cuda", requires_grad=True)
    with observe_graphs() as observed:
        graphed = torch.cuda.make_graphed_callables(model, (x,))
        y = graphed(torch.randn(16, HIDDEN, device="cuda", requires_grad=True))
        y.sum().backward()
    result = observed.result()
    # the forward's outputs and saved tensors stay in the pool for the backward graph: by design, not kept alive
    assert result.passed, result.message()
    assert [c.source for c in result.captures] == ["make_graphed_callables", "make_graphed_callables"]
    assert [c.replays for c in result.captures] == [1, 1]
    assert len(result.pools) == 1 and result.pool_peak_bytes > 0


def _ladder(model, stream, sizes, keep):
    """An engine's capture, largest first into one pool; ``keep`` says how it holds each size's output."""
    static = torch.zeros(max(sizes), HIDDEN, device="cuda")
    pool = torch.cuda.graph_pool_handle()
    graphs, outputs = {}, []
    for batch in sorted(sizes, reverse=True):
        x = static[:batch]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            out = model(x)
        graphs[batch] = graph
        outputs.append(keep(out))
        del out
    return graphs, outputs


@torch.inference_mode()
def test_strong_references_to_every_sizes_output_fail_with_their_cost_and_weak_references_pass():
    model, stream = mlp(), torch.cuda.Stream()
    warm_up(model, stream, torch.zeros(64, HIDDEN, device="cuda"))
    with observe_graphs() as strong:  # SGLang's output buffers: a strong reference per size
        _ladder(model, stream, (64, 32, 16), keep=lambda out: out)
    sentence = dict(strong.result().causes)["kept alive"]
    assert "the kept outputs of 2 sizes add up to" in sentence and "for the largest graph" in sentence
    with observe_graphs() as weak:  # vLLM's weak_ref_tensors: the pool's block is free for the next capture
        _ladder(model, stream, (64, 32, 16), keep=weakref.ref)
    assert weak.result().passed, weak.result().message()


@torch.inference_mode()
def test_check_estimate_passes_the_measured_peak_and_fails_one_without_the_workspace_saying_so():
    """An estimate summed over sizes failing with its diagnosis is docs/examples_failing's (test_examples.py)."""
    model = mlp()
    warm_up(model, torch.cuda.Stream(), torch.zeros(64, HIDDEN, device="cuda"))
    stream = torch.cuda.Stream()  # never warmed: its first matmul sets up cuBLAS's workspace inside the pool
    with observe_graphs(expect_sizes=(64, 32, 16, 8)) as observed:
        _ladder(model, stream, (64, 32, 16, 8), keep=lambda out: None)
        result = observed.result()
        measured = result.pool_peak_bytes
        assert result.workspace_bytes in _compat.cublas_workspace_sizes(torch.cuda.current_device())
        score = observed.check_estimate(measured)
        assert score.passed and score.ratio == 1.0
        with pytest.raises(InvariantViolation) as without:
            observed.check_estimate(measured - result.workspace_bytes)
    message = str(without.value)
    assert "the estimate is about the peak without cuBLAS's workspace" in message
    assert f"  of which cuBLAS's workspace: {format_bytes(result.workspace_bytes)}" in message.splitlines()
    assert [s["passed"] for s in observed.result().to_json()["estimates"]] == [True, False]


@torch.inference_mode()
def test_check_coverage_names_the_batches_a_short_ladder_leaves_eager():
    model, stream = mlp(), torch.cuda.Stream()
    warm_up(model, stream, torch.zeros(64, HIDDEN, device="cuda"))
    sizes = (1, 2, 4, 8, 16, 32)

    with observe_graphs(expect_sizes=sizes) as observed:
        graphs, _ = _ladder(model, stream, sizes, keep=lambda out: None)

        def serve(x):
            fits = [s for s in sizes if s >= x.shape[0]]
            if not fits:
                return model(x)  # past the ladder: eager, silently
            graphs[min(fits)].replay()

        with pytest.raises(InvariantViolation) as eager:
            observed.check_coverage(serve, range(1, 49), lambda batch: torch.randn(batch, HIDDEN, device="cuda"))
        padded = observed.check_coverage(serve, range(1, 33), lambda batch: torch.randn(batch, HIDDEN, device="cuda"))
    assert str(eager.value).splitlines()[0] == "batch-size coverage: batches 33-48 ran eager: no graph replayed."
    assert padded.passed and padded.calls[16].padding == 15  # batch 17 replays the graph of size 32


def test_the_fixture_scores_an_estimate_and_coverage_under_the_marker(pytester):
    pytester.makepyfile(
        """
        import pytest
        import torch

        SIZES = [8, 4, 2, 1]

        @pytest.mark.cudagraph(capture_sizes=SIZES, observe=True)
        @torch.inference_mode()
        def test_engine(graph_observation):
            model = torch.nn.Linear(256, 256).cuda()
            stream = torch.cuda.Stream()
            static = torch.zeros(max(SIZES), 256, device="cuda")
            out = torch.zeros(max(SIZES), 256, device="cuda")
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                model(static)  # cuBLAS's handle and workspace set up before the capture
            pool = torch.cuda.graph_pool_handle()
            graphs = {}
            for batch in SIZES:
                x = static[:batch]
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool, stream=stream):
                    out[:batch].copy_(model(x))
                graphs[batch] = graph

            def serve(x):
                graphs[min(s for s in SIZES if s >= x.shape[0])].replay()

            graph_observation.check_coverage(serve, range(1, 9), lambda b: torch.zeros(b, 256, device="cuda"))
            graph_observation.check_estimate(graph_observation.result().pool_peak_bytes * len(SIZES))
        """
    )
    result = pytester.runpytest_subprocess("--cudagraph", "-p", "no:cacheprovider", "--cudagraph-report=r.json")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "graph-memory estimate" in out and "sum over sizes" in out
    report = load_report(pytester.path / "r.json")
    (record,) = [r for nodeid, r in report["tests"].items() if nodeid.endswith("test_engine")]
    observed = record["observed_graphs"]
    assert observed["coverage"][0]["replay_ratio"] == 1.0 and observed["estimates"][0]["passed"] is False


@pytest.mark.skipif(
    "reserved_bytes_by_private_pools" not in torch.cuda.memory_stats_as_nested_dict(),
    reason="torch before 2.13 has no per-pool allocator figures",
)
@torch.inference_mode()
def test_the_per_pool_figure_agrees_with_the_pools_snapshot_segments():
    from pytest_cudagraph.graphs.memory import pool_usage_from_segments

    model, stream = mlp(), torch.cuda.Stream()
    warm_up(model, stream, torch.zeros(64, HIDDEN, device="cuda"))
    graphs, _ = _ladder(model, stream, (64, 32, 16), keep=lambda out: None)
    pool = graphs[64].pool()
    per_pool = _compat.private_pool_reserved(torch.cuda.current_device(), pool)
    segments = list(_compat.memory_snapshot_segments(pool))
    assert per_pool is not None and per_pool[0] == pool_usage_from_segments(segments, [pool]).reserved_bytes > 0
