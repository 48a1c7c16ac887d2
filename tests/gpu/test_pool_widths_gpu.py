"""The pool check on models at the widths people run: correct code passes, a kept tensor fails.

Each model is a plain eval forward under ``torch.no_grad()``, captured largest first into
one shared pool with its outputs released: the usage the docs recommend.  At these
widths in fp32 a shared pool holds a little more than the largest graph (a 2 MiB small
segment that a smaller size needs, a hole a split block leaves): free blocks, the
allocator's caching, which the check reports as a figure and does not fail.
"""

from __future__ import annotations

import pytest
import torch

from pytest_cudagraph import InvariantViolation
from pytest_cudagraph.render.plain_text import format_bytes

pytestmark = pytest.mark.cudagraph

# 1, 2, 4, 8..256 step 8
MLP_SIZES = [1, 2, 4, *range(8, 257, 8)]
DECODER_SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]


class GatedMlp(torch.nn.Module):
    """Llama's MLP: down(silu(gate(x)) * up(x))."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.gate = torch.nn.Linear(d, hidden, bias=False)
        self.up = torch.nn.Linear(d, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def _report(graphs, check, label):
    print(f"\n{label}: {check.caching_sentence()}; causes {[rule for rule, _ in check.causes]}")
    print(graphs.size_table())


@pytest.mark.parametrize(
    "d, hidden, blocks",
    [(4096, 11008, 2), (5120, 13824, 2), (2560, 10240, 4)],
    ids=["llama7b-mlp", "d5120-mlp", "d2560-mlp"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_mlps_at_llama_widths_pass_the_pool_check(cudagraphs, d, hidden, blocks, dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[GatedMlp(d, hidden) for _ in range(blocks)]).to("cuda", dtype).eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, d, device="cuda", dtype=dtype), MLP_SIZES)
        check = graphs.check_pool()
    _report(graphs, check, f"MLP d={d}/{hidden} x{blocks} {dtype}")
    assert check.live_bytes == 0 and len(check.pools) == 1


def test_a_hugging_face_decoder_2560_wide_passes_the_pool_check(cudagraphs):
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    config = transformers.LlamaConfig(
        hidden_size=2560,
        intermediate_size=10240,
        num_hidden_layers=2,
        num_attention_heads=20,
        num_key_value_heads=20,
        vocab_size=32000,
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).to("cuda", torch.float32).eval()

    def forward(ids):
        return model(input_ids=ids, use_cache=False).last_hidden_state

    with torch.no_grad():
        graphs = cudagraphs.capture(
            forward, lambda bs: torch.randint(0, config.vocab_size, (bs, 16), device="cuda"), DECODER_SIZES
        )
        graphs.check_replay(trials=1)
        check = graphs.check_pool()
    _report(graphs, check, "LlamaModel hidden 2560, 2 layers, fp32, seq 16")
    assert check.live_bytes == 0


def test_a_timm_mobile_cnn_passes_the_pool_check(cudagraphs):
    timm = pytest.importorskip("timm", reason="needs timm")
    torch.manual_seed(0)
    model = timm.create_model("mobilenetv3_large_100", pretrained=False).cuda().eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, 3, 128, 128, device="cuda"), DECODER_SIZES)
        check = graphs.check_pool()
    _report(graphs, check, "timm mobilenetv3_large_100 128x128 fp32")
    assert check.live_bytes == 0


class Remembering(torch.nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.mlp = GatedMlp(d, hidden)
        self.kept = []

    def forward(self, x):
        out = self.mlp(x)
        self.kept.append(out + 0)  # held across captures, in the pool
        return out


def test_a_tensor_kept_across_captures_fails_naming_its_size_and_line(cudagraphs):
    torch.manual_seed(0)
    model = Remembering(4096, 11008).cuda().eval()
    with torch.no_grad():
        graphs = cudagraphs.capture(model, lambda bs: torch.randn(bs, 4096, device="cuda"), [64, 32, 16, 8])
        with pytest.raises(InvariantViolation) as info:
            graphs.check_pool()
    text = str(info.value)
    print(text)
    kept = 64 * 4096 * 4
    assert text.startswith(
        f"pool check (kept alive): after batch size 64's capture the pool still held 1 block, {format_bytes(kept)}"
    )
    assert "test_pool_widths_gpu.py:" in text and "in forward" in text
