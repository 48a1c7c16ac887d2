"""Models used by the example suite.

``DecodeStep`` is the canonical case: one decode step of a small transformer whose
attention reads a static KV cache, so every buffer the step touches lives at a
fixed address, as CUDA graph replay requires.  ``AttentionSplitModel`` calls a
registered attention op that piecewise capture cuts out of the graph.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class DecodeStep(nn.Module):
    """x [batch, d] -> [batch, d]: attention over a static KV cache, then an MLP, per layer."""

    def __init__(self, d: int = 256, heads: int = 4, layers: int = 2, max_batch: int = 64, cache_len: int = 32):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(layers)
        )
        self.norm = nn.ModuleList(nn.LayerNorm(d) for _ in range(2 * layers))
        # Filled once, before capture; the graph reads it at its captured address.
        self.register_buffer("k_cache", torch.randn(layers, max_batch, heads, cache_len, self.head_dim) * 0.5)
        self.register_buffer("v_cache", torch.randn(layers, max_batch, heads, cache_len, self.head_dim) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        for i, (qkv, out, mlp) in enumerate(zip(self.qkv, self.out, self.mlp)):
            h = self.norm[2 * i](x)
            q, k, v = qkv(h).view(batch, 3, self.heads, 1, self.head_dim).unbind(1)
            keys = torch.cat([self.k_cache[i, :batch], k], dim=2)
            values = torch.cat([self.v_cache[i, :batch], v], dim=2)
            scores = (q @ keys.transpose(-1, -2)) / math.sqrt(self.head_dim)
            attn = (scores.softmax(-1) @ values).reshape(batch, -1)
            x = x + out(attn)
            x = x + mlp(self.norm[2 * i + 1](x))
        return x


@torch.library.custom_op("examples::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention among each token's 8 sub-vectors; rows stay independent, so padding is harmless."""
    batch, d = q.shape
    q, k, v = (t.reshape(batch, 8, d // 8) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // 8)
    return (scores.softmax(-1) @ v).reshape(batch, d)


@attention.register_fake
def _(q, k, v):
    return torch.empty_like(q)


class AttentionSplitModel(nn.Module):
    """L layers of projection -> registered attention -> MLP; the attention op is the split point."""

    def __init__(self, d: int = 64, layers: int = 3):
        super().__init__()
        self.layers = layers
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d)) for _ in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for qkv, mlp in zip(self.qkv, self.mlp):
            q, k, v = qkv(x).chunk(3, dim=-1)
            x = x + torch.ops.examples.attention(q, k, v)
            x = x + mlp(x)
        return x


def tiny_llama_config():
    """A Llama configuration small enough to build with random weights in a second (no download)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        use_cache=True,
    )


class LlamaDecodeStep(nn.Module):
    """One decode step of a Hugging Face Llama over a static KV cache, one cache per batch size.

    Every tensor the step touches is allocated here, before any capture: the
    model's weights, one ``StaticCache`` per batch size (prefilled with a random
    prompt) and the cache position.  ``forward`` first rewinds the cache's own
    length counter in place, so that the step is repeatable: replaying it, or
    running it eagerly, always decodes the token after the same prompt.
    """

    def __init__(self, model: nn.Module, batch_sizes, prompt_len: int = 8, max_cache_len: int = 32):
        super().__init__()
        from transformers import StaticCache

        self.model = model
        self.prompt_len = prompt_len
        device = next(model.parameters()).device
        vocab = model.config.vocab_size
        self.caches = {}
        with torch.no_grad():
            for batch in batch_sizes:
                cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
                prompt = torch.randint(0, vocab, (batch, prompt_len), device=device)
                model(
                    prompt,
                    past_key_values=cache,
                    cache_position=torch.arange(prompt_len, device=device),
                    use_cache=True,
                )
                self.caches[batch] = cache
        self.register_buffer("cache_position", torch.tensor([prompt_len], device=device))

    def _rewind(self, cache) -> None:
        for layer in getattr(cache, "layers", ()):
            length = getattr(layer, "cumulative_length", None)
            if isinstance(length, torch.Tensor):
                length.fill_(self.prompt_len)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        cache = self.caches[input_ids.shape[0]]
        self._rewind(cache)
        out = self.model(input_ids, past_key_values=cache, cache_position=self.cache_position, use_cache=True)
        return out.logits[:, -1]
