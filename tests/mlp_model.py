"""The residual MLP the GPU tests capture: the model of docs/concepts.md and of ``benchmarks/bench_capture.py``."""

from __future__ import annotations

import torch


class MLP(torch.nn.Module):
    """Residual MLP blocks: d -> 4d -> d with GELU, like a transformer's FFN stack (8 blocks of d=1024 in the benchmark)."""

    def __init__(self, d: int = 1024, blocks: int = 8):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
            for _ in range(blocks)
        )
        self.d = d

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x
