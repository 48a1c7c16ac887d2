"""A toy transformer whose attention is a registered custom op (vLLM's "silly attention").

The piecewise tests and the docs examples import it.  The attention op is
registered with ``torch.library.custom_op`` under the ``cudagraph_toy`` namespace,
has a fake implementation (so Dynamo and Inductor can trace it) and counts its
eager calls in a module-level counter, so a test can check *independently of the
plugin* how often the op really ran:

- ``cudagraph_toy::attention`` mutates its ``out`` argument, as vLLM's attention
  does (this is why the split must keep the original node order);
- ``cudagraph_toy::attention_functional`` returns a new tensor instead.

Attention is computed within each token, across its heads, so rows never mix: a
batch padded with zero rows gives the same answer for the real rows, which is what
piecewise padding relies on.

With ``L`` layers the split graph has the known shape vLLM's tests check:
``2L + 1`` pieces, ``L + 1`` of them capturable, ``L`` attention calls per forward.

Example::

    from toy_attention import ToyModel, attention_calls   # tests/ on sys.path

    model = ToyModel(layers=2)
    before = attention_calls()
    model(torch.randn(4, model.hidden))
    assert attention_calls() - before == 2
"""

from __future__ import annotations

import torch
from torch import nn

NAMESPACE = "cudagraph_toy"
ATTENTION_OP = f"{NAMESPACE}::attention"
FUNCTIONAL_ATTENTION_OP = f"{NAMESPACE}::attention_functional"

_calls = {"attention": 0, "attention_functional": 0}


def attention_calls(name: str | None = None) -> int:
    """Eager calls of the toy attention ops so far (both ops when ``name`` is None)."""
    return sum(_calls.values()) if name is None else _calls[name]


def _head_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    # one token = one row; its heads attend to each other, rows never mix
    shape = (q.shape[0], heads, q.shape[-1] // heads)
    q, k, v = (t.reshape(shape) for t in (q, k, v))
    scores = torch.softmax(q @ k.transpose(-1, -2) / shape[-1] ** 0.5, dim=-1)
    return (scores @ v).reshape(q.shape[0], -1)


@torch.library.custom_op(ATTENTION_OP, mutates_args=["out"])
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, heads: int) -> None:
    _calls["attention"] += 1
    out.copy_(_head_attention(q, k, v, heads))


@attention.register_fake
def _attention_fake(q, k, v, out, heads):
    return None


@torch.library.custom_op(FUNCTIONAL_ATTENTION_OP, mutates_args=())
def attention_functional(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    _calls["attention_functional"] += 1
    return _head_attention(q, k, v, heads).contiguous()


@attention_functional.register_fake
def _attention_functional_fake(q, k, v, heads):
    return q.new_empty(q.shape)


class ToyLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, mutating: bool):
        super().__init__()
        self.heads = heads
        self.mutating = mutating
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.mlp_up = nn.Linear(hidden, 2 * hidden)
        self.mlp_down = nn.Linear(2 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.mutating:
            out = torch.empty_like(q)
            torch.ops.cudagraph_toy.attention(q, k, v, out, self.heads)
        else:
            out = torch.ops.cudagraph_toy.attention_functional(q, k, v, self.heads)
        x = x + self.proj(out)
        return x + self.mlp_down(torch.nn.functional.gelu(self.mlp_up(x)))


class ToyModel(nn.Module):
    """``layers`` attention layers; weights are a deterministic function of ``seed``."""

    def __init__(self, layers: int = 2, hidden: int = 32, heads: int = 4, mutating: bool = True, seed: int = 0):
        super().__init__()
        self.hidden = hidden
        self.splitting_op = ATTENTION_OP if mutating else FUNCTIONAL_ATTENTION_OP
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.layers = nn.ModuleList(ToyLayer(hidden, heads, mutating) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(x)


def make_inputs_for(model: ToyModel, device: str = "cpu", seed: int = 0):
    """``make_inputs(size)`` for ``check_replay``: a fresh ``(size, hidden)`` batch per call."""
    generator = torch.Generator().manual_seed(seed)

    def make_inputs(size: int) -> torch.Tensor:
        return torch.randn(size, model.hidden, generator=generator).to(device)

    return make_inputs
