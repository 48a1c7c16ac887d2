"""The zoo under torch.compile on the GPU: recompiles over batch sizes, a warm start, and generate().

Each Inductor compile costs tens of seconds cold, so this subset is small: one
decoder compiled with a dynamic batch under ``max_recompiles(0)``, one compiled
cold then warm under ``compile_cache``, and transformers' own ``generate()`` with a
static cache and ``CompileConfig(mode="reduce-overhead")`` for every Hugging Face
decoder, under ``trees="all"`` (every decode step after the warm-up ran as a CUDA
graph).  All in bf16, the dtype these models serve in.
"""

from __future__ import annotations

import pytest
import torch
from zoo_models import BY_NAME, DYNAMIC_BATCHES, HF_DECODERS, PROMPT_LEN, build, generate_kwargs

pytestmark = pytest.mark.cudagraph

NEW_TOKENS = 8  # decode steps of generate(): one compiles and warms up, one records, the rest replay


@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("spec", [BY_NAME["llama"]], ids=["llama"])
def test_decoder_compiles_once_for_every_batch_size(spec):
    model = build(spec, torch.bfloat16, "cuda")
    compiled = torch.compile(model)
    with torch.no_grad():
        for batch in DYNAMIC_BATCHES:
            ids = torch.randint(0, model.config.vocab_size, (batch, PROMPT_LEN), device="cuda")
            torch._dynamo.mark_dynamic(ids, 0)
            logits = compiled(ids, use_cache=False).logits
            assert logits.shape[:2] == (batch, PROMPT_LEN)


@pytest.mark.compile_cache
@pytest.mark.parametrize("spec", [BY_NAME["qwen2"]], ids=["qwen2"])
def test_decoder_warm_start_hits_the_caches(spec, compile_cache):
    # both passes build the same weights and inputs: the plugin seeds every RNG before each
    model = build(spec, torch.bfloat16, "cuda")
    compiled = torch.compile(model)
    ids = torch.randint(0, model.config.vocab_size, (4, PROMPT_LEN), device="cuda")
    with torch.no_grad():
        logits = compiled(ids, use_cache=False).logits
    compile_cache.record("logits", logits)


@pytest.mark.cudagraph(trees="all")
@pytest.mark.parametrize("spec", HF_DECODERS, ids=[spec.name for spec in HF_DECODERS])
def test_generate_with_a_static_cache_runs_as_cuda_graphs(spec):
    model = build(spec, torch.bfloat16, "cuda")
    ids = torch.randint(2, model.config.vocab_size, (2, PROMPT_LEN), device="cuda")
    out = model.generate(ids, attention_mask=torch.ones_like(ids), **generate_kwargs(NEW_TOKENS))
    assert out.shape == (2, PROMPT_LEN + NEW_TOKENS)
