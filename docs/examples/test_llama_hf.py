"""A real third-party model: a Hugging Face Llama built from a tiny config with random weights.

Nothing is downloaded.  On the GPU its decode step over a static KV cache is
captured per batch size; on any device its compiled forward must not recompile
across batch sizes, and a warm start must load it from the compile caches.
"""

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the Llama example needs transformers (pip install -e '.[examples]')"
)

from example_models import LlamaDecodeStep, tiny_llama_config  # noqa: E402

SIZES = [1, 2, 4, 8, 16]


def build_llama(device="cpu", dtype=torch.float32):
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(tiny_llama_config()).to(device=device, dtype=dtype).eval()


@pytest.mark.cudagraph(capture_sizes=SIZES, rtol=1e-3, atol=1e-3)
def test_llama_decode_step_graphs(cudagraphs):
    step = LlamaDecodeStep(build_llama("cuda"), SIZES)
    with torch.inference_mode():
        graphs = cudagraphs.capture(step, lambda bs: torch.randint(0, 512, (bs, 1), device="cuda"))
        graphs.check_replay(trials=2)
    graphs.check_pool()


@pytest.mark.max_recompiles(0)
def test_llama_forward_compiles_once_for_every_batch_size():
    model = build_llama()
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        for batch in (2, 3, 5, 8):
            ids = torch.randint(0, 512, (batch, 6))
            torch._dynamo.mark_dynamic(ids, 0)
            compiled(ids, use_cache=False)


@pytest.mark.compile_cache
def test_llama_forward_warm_start_hits_the_caches(compile_cache):
    model = build_llama()
    compiled = torch.compile(model)
    with torch.no_grad():
        logits = compiled(torch.randint(0, 512, (2, 6)), use_cache=False).logits
    compile_cache.record("logits", logits)
