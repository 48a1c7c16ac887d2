"""Hugging Face generation with a static KV cache compiled in ``reduce-overhead`` mode, its graphs observed (GPU).

``generate()`` with ``cache_implementation="static"`` and a ``CompileConfig``
compiles the decode step itself, and cudagraph trees record its graphs: the
test never touches a graph.  ``observe=True`` records them all the same (the call
site is the line of ``transformers`` that calls the compiled step), checks that
they share the trees' one pool and that no capture failed, and puts each graph's
pool growth, seconds and replays in the report.  A tiny Llama with random
weights: nothing is downloaded.
"""

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the generate example needs transformers (pip install -e '.[examples]')"
)

from example_models import tiny_llama_config  # noqa: E402


@pytest.mark.cudagraph(observe=True)
def test_static_cache_generate_under_reduce_overhead():
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(tiny_llama_config()).cuda().eval()
    prompt = torch.randint(1, 512, (2, 6), device="cuda")
    config = transformers.GenerationConfig(
        max_new_tokens=12,
        do_sample=False,
        pad_token_id=0,
        cache_implementation="static",
        compile_config=transformers.CompileConfig(mode="reduce-overhead"),
    )
    tokens = model.generate(prompt, generation_config=config)
    assert tokens.shape == (2, 18)
    assert torch.equal(tokens[:, :6], prompt)
