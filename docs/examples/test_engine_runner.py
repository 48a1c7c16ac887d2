"""An engine's own CUDA graphs, checked from its test: add ``observe=True`` and nothing else.

``DecodeRunner`` is how serving engines run a decode step (vLLM's
``CUDAGraphWrapper``, SGLang's ``CudaGraphRunner``): it captures the step once
per batch size into one shared pool, largest first, on its own stream, and at
run time replays the graph of the smallest captured size that holds the batch.
The test is the engine's test as it would be written anyway; the marker records
every graph the runner captures and checks that every size of the config was
captured, that the graphs share one pool, and that no block stays allocated in
the pool across captures.  The second test asks the same observation
(``graph_observation``) two more questions: is the engine's graph-memory estimate
right, and does every batch it serves, 1 to ``MAX_NUM_SEQS``, replay a graph?
``docs/examples_failing/test_engine_runner_broken.py`` shows what fails.
"""

import pytest
import torch
from example_models import DecodeStep

# the engine's config: its capture sizes
SIZES = [1, 2, 4, 8, 16, 32, 64]
MAX_NUM_SEQS = 64
HIDDEN = 256


class DecodeRunner:
    """Captures ``model`` per batch size into one pool and replays the graph that holds the batch."""

    def __init__(self, model, sizes, hidden=HIDDEN):
        self.model = model
        self.sizes = sorted(sizes, reverse=True)  # largest first: smaller graphs reuse its blocks
        self.stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        # inputs and outputs live outside the pool, allocated once before any capture
        self.static_in = torch.zeros(max(sizes), hidden, device="cuda")
        self.static_out = torch.zeros(max(sizes), hidden, device="cuda")
        self.graphs = {}

    def capture(self):
        self.warm_up()
        self.capture_sizes()

    def warm_up(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):  # warm up where the graphs are captured (cuBLAS's workspace too)
            for _ in range(2):
                self.model(self.static_in)

    def capture_sizes(self):
        for batch in self.sizes:
            self.graphs[batch] = self._capture_one(batch)
        torch.cuda.current_stream().wait_stream(self.stream)

    def _capture_one(self, batch):
        x = self.static_in[:batch]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
            self.static_out[:batch].copy_(self.model(x))
        return graph

    def __call__(self, x):
        batch = x.shape[0]
        padded = min(size for size in self.sizes if size >= batch)
        self.static_in[:batch].copy_(x)
        self.graphs[padded].replay()
        return self.static_out[:batch].clone()


@pytest.mark.cudagraph(capture_sizes=SIZES, observe=True)
def test_decode_runner_serves_every_batch_like_eager():
    model = DecodeStep(d=HIDDEN, max_batch=max(SIZES)).cuda().eval()
    with torch.inference_mode():
        runner = DecodeRunner(model, SIZES)
        runner.capture()
        for batch in (1, 3, 8, 20, 64):
            x = torch.randn(batch, HIDDEN, device="cuda")
            torch.testing.assert_close(runner(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.cudagraph(capture_sizes=SIZES, observe=True)
def test_decode_runner_budgets_its_graphs_and_serves_every_batch_from_one(graph_observation):
    model = DecodeStep(d=HIDDEN, max_batch=max(SIZES)).cuda().eval()
    with torch.inference_mode():
        runner = DecodeRunner(model, SIZES)
        runner.warm_up()
        # the engine's graph-memory budget, as its profiling run measures it: what capturing every size reserves
        torch.cuda.empty_cache()  # as torch.cuda.graph does on entering: the warm-up's cached blocks go first
        before = torch.cuda.memory_reserved()
        runner.capture_sizes()
        graph_observation.check_estimate(torch.cuda.memory_reserved() - before)
        graph_observation.check_coverage(
            runner, range(1, MAX_NUM_SEQS + 1), lambda batch: torch.randn(batch, HIDDEN, device="cuda"), max_padding=32
        )
