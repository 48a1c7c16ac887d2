"""An engine's own graphs broken on purpose (GPU): each test FAILS with the plugin's message under ``observe=True``.

The runner is ``docs/examples/test_engine_runner.py``'s, with one mistake each:

- ``PoolPerSizeRunner`` captures each size into a pool of its own (``torch.cuda.graph``
  without ``pool=``): every pool holds its own high-water mark, so the graphs
  cost the sum of them instead of about the largest;
- ``CappedRunner`` never captures its two largest sizes (a cap on the batch it
  captures, as an engine's memory estimate may set one): a batch that needs them
  runs a smaller graph or none, and nothing says so;
- a runner whose ladder stops at 32 while the engine serves up to 48 sequences:
  ``check_coverage`` names the batches that run eager;
- a graph-memory estimate made per size and summed (the largest graph's cost times
  the number of sizes), though every size shares one pool: ``check_estimate``
  names the mistake.
"""

import pytest
import torch

SIZES = [1, 2, 4, 8, 16, 32, 64]
HIDDEN = 256


class Mlp(torch.nn.Module):
    def __init__(self, d=HIDDEN):
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


class DecodeRunner:
    """Captures ``model`` per batch size into one pool and replays the graph that holds the batch."""

    def __init__(self, model, sizes, hidden=HIDDEN):
        self.model = model
        self.sizes = sorted(sizes, reverse=True)
        self.stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.static_in = torch.zeros(max(sizes), hidden, device="cuda")
        self.static_out = torch.zeros(max(sizes), hidden, device="cuda")
        self.graphs = {}

    def sizes_to_capture(self):
        return self.sizes

    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(2):
                self.model(self.static_in)
        for batch in self.sizes_to_capture():
            self.graphs[batch] = self._capture_one(batch)
        torch.cuda.current_stream().wait_stream(self.stream)

    def capture_with_estimate(self):
        """Capture every size, estimating graph memory per size: the largest graph's cost times the sizes."""
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(2):
                self.model(self.static_in)
        largest, *rest = self.sizes_to_capture()
        torch.cuda.empty_cache()  # as torch.cuda.graph does on entering: the warm-up's cached blocks go first
        before = torch.cuda.memory_reserved()
        self.graphs[largest] = self._capture_one(largest)
        per_graph = torch.cuda.memory_reserved() - before
        for batch in rest:
            self.graphs[batch] = self._capture_one(batch)
        torch.cuda.current_stream().wait_stream(self.stream)
        return per_graph * len(self.sizes)

    def _capture_one(self, batch):
        x = self.static_in[:batch]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
            self.static_out[:batch].copy_(self.model(x))
        return graph

    def __call__(self, x):
        batch = x.shape[0]
        captured = [size for size in self.graphs if size >= batch]
        if not captured:  # no graph holds the batch: run it eagerly, silently
            return self.model(x)
        self.static_in[:batch].copy_(x)
        self.graphs[min(captured)].replay()
        return self.static_out[:batch].clone()


class PoolPerSizeRunner(DecodeRunner):
    def _capture_one(self, batch):
        x = self.static_in[:batch]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):  # no pool=: a private pool per graph
            self.static_out[:batch].copy_(self.model(x))
        return graph


class CappedRunner(DecodeRunner):
    def sizes_to_capture(self):
        return self.sizes[2:]  # the two largest sizes are never captured


def serve(runner, batches=(1, 3, 8, 20)):
    model = runner.model
    for batch in batches:
        x = torch.randn(batch, HIDDEN, device="cuda")
        torch.testing.assert_close(runner(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.cudagraph(capture_sizes=SIZES, observe=True)
def test_runner_with_a_pool_per_size():
    with torch.inference_mode():
        runner = PoolPerSizeRunner(Mlp().cuda().eval(), SIZES)
        runner.capture()
        serve(runner)


@pytest.mark.cudagraph(capture_sizes=SIZES, observe=True)
def test_runner_that_skips_its_two_largest_sizes():
    with torch.inference_mode():
        runner = CappedRunner(Mlp().cuda().eval(), SIZES)
        runner.capture()
        serve(runner, batches=(1, 3, 8, 20, 48))


@pytest.mark.cudagraph(capture_sizes=[1, 2, 4, 8, 16, 32], observe=True)
def test_runner_whose_ladder_stops_below_max_num_seqs(graph_observation):
    max_num_seqs = 48
    with torch.inference_mode():
        runner = DecodeRunner(Mlp().cuda().eval(), [1, 2, 4, 8, 16, 32])
        runner.capture()
        graph_observation.check_coverage(
            runner, range(1, max_num_seqs + 1), lambda batch: torch.randn(batch, HIDDEN, device="cuda")
        )


@pytest.mark.cudagraph(capture_sizes=SIZES, observe=True)
def test_runner_that_sums_its_graphs_memory_over_sizes(graph_observation):
    with torch.inference_mode():
        runner = DecodeRunner(Mlp().cuda().eval(), SIZES)
        estimate = runner.capture_with_estimate()
        graph_observation.check_estimate(estimate)
