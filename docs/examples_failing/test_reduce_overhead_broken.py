"""Reduce-overhead and compiled-code cases broken on purpose (GPU): each test FAILS with the plugin's message.

Each message names the input by your argument name, the function and the line, not
torch's placeholder (``arg0_1``) or Inductor's generated file.
"""

import pytest
import torch


def accumulate(total, x):
    total.add_(x.sum())  # changes an input in place: cudagraph trees give up on this function
    return x * 2


@pytest.mark.cudagraph(trees="all")
def test_mutated_input_loses_the_graphs():
    """Fails: "... ran 1 compiled region of 1 without a CUDA graph ... mutated inputs (1 instances), argument 'total'"."""
    step = torch.compile(accumulate, mode="reduce-overhead")
    total, x = torch.zeros(1, device="cuda"), torch.randn(64, device="cuda")
    for _ in range(4):
        step(total, x)


def scale_by(x, factors):
    return x * factors.to(x.device)  # factors stays on the CPU


@pytest.mark.cudagraph
def test_cpu_input_skips_the_graphs(cudagraphs):
    """Fails: "cpu device (arg0_1), argument 'factors', in scale_by, at ...`return x * factors.to(x.device)`".

    When the graph comes from Inductor's FX graph cache, torch keeps only the graph input's
    name, and the message names that: "argument 'arg0_1'".
    """
    x, factors = torch.randn(64, device="cuda"), torch.full((64,), 0.5)
    # torch 2.9+ partitions the graph around a CPU input instead of skipping; turned off here
    with torch._inductor.config.patch(graph_partition=False):
        step = torch.compile(scale_by, mode="reduce-overhead")
        with cudagraphs.watch_trees() as trees:
            for _ in range(4):
                step(x, factors)
    trees.assert_fully_cudagraphed()


def to_host(x):
    y = x.sin()
    host = y.cpu()  # a device-to-host copy inside compiled code
    return host * 2


@pytest.mark.cudagraph(capture_sizes=[4, 8])
def test_capture_fails_inside_compiled_code(cudagraphs):
    """Fails: "... the op .cpu() at test_reduce_overhead_broken.py:N `host = y.cpu()`, in the compiled code `...`"."""
    compiled = torch.compile(to_host)
    compiled(torch.randn(8, 16, device="cuda"))
    cudagraphs.capture(compiled, lambda n: torch.randn(n, 16, device="cuda"))
