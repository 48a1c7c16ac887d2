"""CUDA graph cases broken on purpose (GPU): each test FAILS with the plugin's message."""

import pytest
import torch

SIZES = [1, 4, 16, 64]


class Mlp(torch.nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def inputs(bs):
    return torch.randn(bs, 512, device="cuda")


@pytest.mark.cudagraph(capture_sizes=SIZES)
def test_host_sync_during_capture(cudagraphs):
    def step(x):
        scale = x.abs().max().item()  # a host-device sync: not allowed while capturing
        return x / scale

    cudagraphs.capture(step, inputs)


@pytest.mark.cudagraph(capture_sizes=SIZES)
def test_value_dependent_branch(cudagraphs):
    class Alternating(torch.nn.Module):
        """Python control flow on host-side state: eager alternates, a replay keeps the captured branch."""

        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * 2 if self.calls % 2 else -x

    graphs = cudagraphs.capture(Alternating(), inputs)
    graphs.check_replay(trials=8)


# vLLM's 51 default capture sizes, given smallest first
VLLM_SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))


def deep_mlp():
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU()) for _ in range(8)])


@pytest.mark.cudagraph(capture_sizes=VLLM_SIZES)
def test_smallest_first_with_outputs_kept_grows_the_pool(cudagraphs):
    model = deep_mlp().cuda().eval()
    with torch.no_grad():
        # each smaller graph's output stays alive, so every larger graph needs fresh blocks
        graphs = cudagraphs.capture(
            model, lambda bs: torch.randn(bs, 1024, device="cuda"), order="as_given", keep_outputs=True
        )
    graphs.check_pool()


@pytest.mark.cudagraph(capture_sizes=VLLM_SIZES)
def test_separate_pools_cost_the_sum(cudagraphs):
    model = deep_mlp().cuda().eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, 1024, device="cuda"), pool="separate")
    graphs.check_pool()


class RememberingMlp(torch.nn.Module):
    """Keeps every hidden activation it makes: a tensor held across captures, in the graph pool."""

    def __init__(self):
        super().__init__()
        self.mlp = deep_mlp()
        self.seen = []

    def forward(self, x):
        hidden = self.mlp(x)
        self.seen.append(hidden * 1)  # kept across captures
        return hidden


@pytest.mark.cudagraph(capture_sizes=VLLM_SIZES)
def test_a_tensor_kept_across_captures_holds_pool_memory(cudagraphs):
    model = RememberingMlp().cuda().eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, 1024, device="cuda"))
    graphs.check_pool()


@pytest.mark.cudagraph(capture_sizes=SIZES)
def test_parameter_replaced_after_capture(cudagraphs):
    model = Mlp().cuda().eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, inputs)
        model.up.weight = torch.nn.Parameter(torch.randn_like(model.up.weight))  # replaced, not updated in place
        graphs.replay(4, inputs(4))
