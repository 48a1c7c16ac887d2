"""The model zoo: real architectures, built from their library's own config class or factory.

Every model is built with random weights and nothing is downloaded.  Each entry
builds its model at real widths (the width and MLP ratio of a published
checkpoint) with one or two layers, or at a tiny width of the same shape for the
CPU check (``tiny=True``), and says how it runs in a CUDA graph: the callable that
is captured and the inputs of one batch size.

Decoders capture one decode step over a static KV cache (transformers'
``StaticCache``, one per batch size, prefilled with a random prompt), the other
models their forward.  The libraries are imported inside the builders, so that this
module imports without them.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence

import torch
from torch import nn

# vLLM's default capture sizes, cut at 64; encoders and vision models run at smaller batches
DECODER_SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]
ENCODER_SIZES = [1, 2, 4, 8, 16, 32]
VISION_SIZES = [1, 2, 4, 8, 16, 32]
AUDIO_SIZES = [1, 2, 4, 8]
TINY_SIZES = [1, 2]
# the batch sizes of the dynamic-batch compile, in call order: after the first, none may recompile
DYNAMIC_BATCHES = (2, 3, 8, 24, 64)

TEXT_LEN = 128  # tokens per sequence for the text encoders
PROMPT_LEN = 16  # tokens prefilled into each decoder's cache before the captured step
CACHE_LEN = 128  # the static KV cache's length

# Replay runs the kernels eager runs, so it is expected to match bit for bit; the
# tolerances leave room for a few ulps where capture takes another path than eager:
# while a stream captures, transformers builds the encoders' attention mask where
# eager lets SDPA run without one (all tokens real), and SDPA then picks another
# kernel.  About 800 ulps of fp32 and, for bf16, 4 ulps of a value in [2, 4)
# (2**-6 each): ViT-L's bf16 hidden state reaches |x| ~ 4, and on the H200 7 of its
# 6.4 million elements moved by 3 such ulps (0.047) between the two kernels.  Far
# below what a stale input, a frozen host value or a wrong buffer gives.
TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (2e-2, 4 * 2**-6)}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class ExpectedFailure:
    """A failure the model's own code causes on the library versions before ``fixed_in``.

    The test is a strict xfail there (it must fail, with ``raises``), and docs/zoo.md
    quotes it.  ``cpu_op`` and ``cpu_function`` are what the CPU check's host-sync
    watch finds behind it, so that the prediction is checked on every machine.
    """

    raises: str  # the name of the pytest_cudagraph exception the test fails with
    reason: str
    source: str  # the model line it comes from, and the release that removed it
    library: str
    fixed_in: tuple[int, ...]
    cpu_op: str
    cpu_function: str

    def applies(self) -> bool:
        """Whether the installed library predates the fix (read from its metadata, nothing imported)."""
        from importlib.metadata import PackageNotFoundError, version

        from packaging.version import Version

        try:
            installed = Version(version(self.library))
        except PackageNotFoundError:
            return False
        return installed.release < self.fixed_in


# Falcon-7B's attention (multi-query) took its key and value heads with a Python list
# index, which makes a host tensor and copies it to the GPU on every call: allowed
# eagerly, a capture error inside a CUDA graph capture.
FALCON_LIST_INDEX = ExpectedFailure(
    raises="CaptureError",
    reason=(
        "FalconAttention._split_heads indexes the fused QKV with Python lists "
        "(fused_qkv[..., [-2], :]), a host-to-GPU copy of the index on every call"
    ),
    source=(
        "transformers/models/falcon/modeling_falcon.py, FalconAttention._split_heads (multi_query): "
        "`return fused_qkv[..., :-2, :], fused_qkv[..., [-2], :], fused_qkv[..., [-1], :]`; "
        "transformers 5.25 splits with `fused_qkv.split([self.num_heads, 1, 1], dim=-2)` instead"
    ),
    library="transformers",
    fixed_in=(5, 25),
    cpu_op="aten::lift_fresh",
    cpu_function="_split_heads",
)


@dataclasses.dataclass(frozen=True)
class ZooModel:
    name: str
    library: str  # the package the model comes from: transformers, timm or torchvision
    kind: str  # decoder, encoder, vision or audio
    widths: str  # the checkpoint whose widths it has, for docs/zoo.md
    build: Callable[[bool], nn.Module]  # build(tiny) -> the model, on the default device, in fp32
    sizes: Sequence[int]
    # the captured callable: step(model, sizes) -> nn.Module (decoders wrap the model in their decode step)
    step: Callable[[nn.Module, Sequence[int]], nn.Module]
    # the inputs of one batch size: make_inputs(model, size, dtype, device, tiny) -> tuple of tensors
    make_inputs: Callable[[nn.Module, int, torch.dtype, str, bool], tuple]
    # the widths a real-width build must show: (hidden, mlp) found as a 2-D weight, or a parameter count
    hidden_mlp: tuple[int, int] | None = None
    params: int | None = None
    expected_failure: ExpectedFailure | None = None


# --- transformers decoders --------------------------------------------------------------


def _llama(tiny: bool) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    widths = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_attention_heads=32)
    widths.update(num_key_value_heads=8, max_position_embeddings=8192)
    if tiny:
        widths = dict(vocab_size=512, hidden_size=128, intermediate_size=448, num_attention_heads=4)
        widths.update(num_key_value_heads=1, max_position_embeddings=256)
    return LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, tie_word_embeddings=False, **widths))


def _qwen2(tiny: bool) -> nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    widths = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_attention_heads=28)
    widths.update(num_key_value_heads=4, max_position_embeddings=32768)
    if tiny:
        widths = dict(vocab_size=512, hidden_size=112, intermediate_size=592, num_attention_heads=4)
        widths.update(num_key_value_heads=2, max_position_embeddings=256)
    return Qwen2ForCausalLM(Qwen2Config(num_hidden_layers=2, tie_word_embeddings=False, **widths))


def _gpt2(tiny: bool) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    # GPT-2's largest checkpoint is 1600 wide; 2048 is GPT-3 XL's width on the same architecture
    widths = dict(vocab_size=50257, n_positions=2048, n_embd=2048, n_head=16)
    if tiny:
        widths = dict(vocab_size=512, n_positions=256, n_embd=128, n_head=4, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, **widths))  # n_inner None: the MLP is 4x wide


def _falcon(tiny: bool) -> nn.Module:
    from transformers import FalconConfig, FalconForCausalLM

    # Falcon-7B: multi-query attention, attention and MLP in parallel, rotary positions, MLP 4x
    widths = dict(vocab_size=65024, hidden_size=4544, num_attention_heads=71)
    if tiny:
        widths = dict(vocab_size=512, hidden_size=128, num_attention_heads=4)
    config = FalconConfig(num_hidden_layers=2, multi_query=True, parallel_attn=True, alibi=False, **widths)
    return FalconForCausalLM(config)


class DecodeStep(nn.Module):
    """One decode step of a Hugging Face causal LM over a static KV cache, one cache per batch size.

    Every tensor the step touches is allocated here, before any capture: one
    ``StaticCache`` per batch size, prefilled with a random prompt, and the cache
    position.  ``forward`` first rewinds the cache's own length counter in place, so
    that the step is repeatable: replaying it, or running it eagerly, always decodes
    the token after the same prompt.  It returns the last position's logits.
    """

    def __init__(self, model: nn.Module, batch_sizes: Sequence[int], prompt_len: int = PROMPT_LEN):
        super().__init__()
        from transformers import StaticCache

        self.model = model
        self.prompt_len = prompt_len
        # transformers 5.25 renamed the forward's `past_key_values` to `cache` (the old name warns)
        self.cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        device = next(model.parameters()).device
        vocab = model.config.vocab_size
        self.caches = {}
        with torch.no_grad():
            for batch in batch_sizes:
                cache = StaticCache(config=model.config, max_cache_len=CACHE_LEN)
                prompt = torch.randint(0, vocab, (batch, prompt_len), device=device)
                model(
                    prompt,
                    cache_position=torch.arange(prompt_len, device=device),
                    use_cache=True,
                    **{self.cache_arg: cache},
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
        out = self.model(input_ids, cache_position=self.cache_position, use_cache=True, **{self.cache_arg: cache})
        return out.logits[:, -1]


def _decode_step(model: nn.Module, sizes: Sequence[int]) -> nn.Module:
    return DecodeStep(model, sizes)


def _next_token(model: nn.Module, size: int, dtype: torch.dtype, device: str, tiny: bool) -> tuple:
    return (torch.randint(0, model.config.vocab_size, (size, 1), device=device),)


# --- transformers encoders --------------------------------------------------------------


class LastHiddenState(nn.Module):
    """The encoder's forward, returning its last hidden state (a tensor, not a ModelOutput).

    The captured inputs are positional; ``names`` says which keyword argument of the
    model each one is.
    """

    def __init__(self, model: nn.Module, names: Sequence[str]):
        super().__init__()
        self.model = model
        self.names = tuple(names)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.names, inputs))).last_hidden_state


def _hidden_state(*names: str) -> Callable[[nn.Module, Sequence[int]], nn.Module]:
    def step(model: nn.Module, sizes: Sequence[int]) -> nn.Module:
        return LastHiddenState(model, names)

    return step


def _bert(tiny: bool) -> nn.Module:
    from transformers import BertConfig, BertModel

    # BERT-large
    widths = dict(vocab_size=30522, hidden_size=1024, intermediate_size=4096, num_attention_heads=16)
    if tiny:
        widths = dict(vocab_size=512, hidden_size=64, intermediate_size=256, num_attention_heads=4)
    return BertModel(BertConfig(num_hidden_layers=2, **widths), add_pooling_layer=False)


def _roberta(tiny: bool) -> nn.Module:
    from transformers import RobertaConfig, RobertaModel

    # RoBERTa-large
    widths = dict(vocab_size=50265, hidden_size=1024, intermediate_size=4096, num_attention_heads=16)
    if tiny:
        widths = dict(vocab_size=512, hidden_size=64, intermediate_size=256, num_attention_heads=4)
    config = RobertaConfig(num_hidden_layers=2, max_position_embeddings=514, pad_token_id=1, **widths)
    return RobertaModel(config, add_pooling_layer=False)


def _t5_encoder(tiny: bool) -> nn.Module:
    from transformers import T5Config, T5EncoderModel

    # T5 v1.1 XXL's encoder (the text encoder of several diffusion models): gated GELU MLP
    widths = dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_heads=64)
    if tiny:
        widths = dict(vocab_size=512, d_model=64, d_kv=16, d_ff=160, num_heads=4)
    return T5EncoderModel(T5Config(num_layers=2, feed_forward_proj="gated-gelu", **widths))


def _token_ids(model: nn.Module, size: int, dtype: torch.dtype, device: str, tiny: bool) -> tuple:
    # the ids and their attention mask, every token real (ids 0 and 1 are pad tokens of some vocabularies)
    ids = torch.randint(2, model.config.vocab_size, (size, 16 if tiny else TEXT_LEN), device=device)
    return (ids, torch.ones_like(ids))


def _vit(tiny: bool) -> nn.Module:
    from transformers import ViTConfig, ViTModel

    # ViT-L/16 at 224x224
    widths = dict(hidden_size=1024, intermediate_size=4096, num_attention_heads=16, image_size=224, patch_size=16)
    if tiny:
        widths = dict(hidden_size=64, intermediate_size=256, num_attention_heads=4, image_size=32, patch_size=8)
    return ViTModel(ViTConfig(num_hidden_layers=2, **widths), add_pooling_layer=False)


def _pixels(model: nn.Module, size: int, dtype: torch.dtype, device: str, tiny: bool) -> tuple:
    side = model.config.image_size
    return (torch.randn(size, 3, side, side, device=device, dtype=dtype),)


def _whisper_encoder(tiny: bool) -> nn.Module:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    # Whisper large-v3's encoder: 128 mel bins, 30 s of audio (3000 frames, 1500 positions)
    widths = dict(d_model=1280, encoder_attention_heads=20, encoder_ffn_dim=5120, num_mel_bins=128)
    widths.update(max_source_positions=1500)
    if tiny:
        widths = dict(d_model=64, encoder_attention_heads=4, encoder_ffn_dim=256, num_mel_bins=16)
        widths.update(max_source_positions=32)
    return WhisperEncoder(WhisperConfig(encoder_layers=2, decoder_layers=2, **widths))


def _mel_frames(model: nn.Module, size: int, dtype: torch.dtype, device: str, tiny: bool) -> tuple:
    config = model.config
    frames = 2 * config.max_source_positions  # the encoder's convolutions halve the frames
    return (torch.randn(size, config.num_mel_bins, frames, device=device, dtype=dtype),)


# --- timm and torchvision -----------------------------------------------------------------


def _timm(name: str, tiny_kwargs: dict) -> Callable[[bool], nn.Module]:
    def build(tiny: bool) -> nn.Module:
        import timm

        return timm.create_model(name, pretrained=False, **(tiny_kwargs if tiny else {}))

    build.__name__ = f"timm_{name}"
    return build


def _mobilenet_v2(tiny: bool) -> nn.Module:
    import torchvision

    return torchvision.models.mobilenet_v2(weights=None, **({"width_mult": 0.25} if tiny else {}))


def _forward(model: nn.Module, sizes: Sequence[int]) -> nn.Module:
    return model


def _images(model: nn.Module, size: int, dtype: torch.dtype, device: str, tiny: bool) -> tuple:
    side = 64 if tiny else 224
    return (torch.randn(size, 3, side, side, device=device, dtype=dtype),)


ZOO: list[ZooModel] = [
    ZooModel(
        "llama",
        "transformers",
        "decoder",
        "Llama-3-8B: hidden 4096, MLP 14336 (3.5x), 32 heads / 8 KV heads, vocab 128256; 2 layers",
        _llama,
        DECODER_SIZES,
        _decode_step,
        _next_token,
        hidden_mlp=(4096, 14336),
    ),
    ZooModel(
        "qwen2",
        "transformers",
        "decoder",
        "Qwen2-7B: hidden 3584, MLP 18944 (5.3x), 28 heads / 4 KV heads, vocab 152064; 2 layers",
        _qwen2,
        DECODER_SIZES,
        _decode_step,
        _next_token,
        hidden_mlp=(3584, 18944),
    ),
    ZooModel(
        "gpt2",
        "transformers",
        "decoder",
        "GPT-2 architecture at GPT-3 XL's width: hidden 2048, MLP 8192 (4x), 16 heads, vocab 50257; 2 layers",
        _gpt2,
        DECODER_SIZES,
        _decode_step,
        _next_token,
        hidden_mlp=(2048, 8192),
    ),
    ZooModel(
        "falcon",
        "transformers",
        "decoder",
        "Falcon-7B: hidden 4544, MLP 18176 (4x), 71 heads / 1 KV head, parallel attention, vocab 65024; 2 layers",
        _falcon,
        DECODER_SIZES,
        _decode_step,
        _next_token,
        hidden_mlp=(4544, 18176),
        expected_failure=FALCON_LIST_INDEX,
    ),
    ZooModel(
        "bert",
        "transformers",
        "encoder",
        f"BERT-large: hidden 1024, MLP 4096 (4x), 16 heads; 2 layers, {TEXT_LEN} tokens",
        _bert,
        ENCODER_SIZES,
        _hidden_state("input_ids", "attention_mask"),
        _token_ids,
        hidden_mlp=(1024, 4096),
    ),
    ZooModel(
        "roberta",
        "transformers",
        "encoder",
        f"RoBERTa-large: hidden 1024, MLP 4096 (4x), 16 heads; 2 layers, {TEXT_LEN} tokens",
        _roberta,
        ENCODER_SIZES,
        _hidden_state("input_ids", "attention_mask"),
        _token_ids,
        hidden_mlp=(1024, 4096),
    ),
    ZooModel(
        "t5-encoder",
        "transformers",
        "encoder",
        f"T5 v1.1 XXL encoder: d_model 4096, gated-GELU MLP 10240 (2.5x), 64 heads; 2 layers, {TEXT_LEN} tokens",
        _t5_encoder,
        ENCODER_SIZES,
        _hidden_state("input_ids", "attention_mask"),
        _token_ids,
        hidden_mlp=(4096, 10240),
    ),
    ZooModel(
        "vit",
        "transformers",
        "vision",
        "ViT-L/16: hidden 1024, MLP 4096 (4x), 16 heads, 224x224; 2 layers",
        _vit,
        VISION_SIZES,
        _hidden_state("pixel_values"),
        _pixels,
        hidden_mlp=(1024, 4096),
    ),
    ZooModel(
        "whisper-encoder",
        "transformers",
        "audio",
        "Whisper large-v3 encoder: d_model 1280, MLP 5120 (4x), 20 heads, 128 mel bins x 3000 frames; 2 layers",
        _whisper_encoder,
        AUDIO_SIZES,
        _hidden_state("input_features"),
        _mel_frames,
        hidden_mlp=(1280, 5120),
    ),
    ZooModel(
        "resnet50",
        "timm",
        "vision",
        "timm resnet50, full depth, 224x224",
        _timm("resnet50", {"layers": (1, 1, 1, 1)}),
        VISION_SIZES,
        _forward,
        _images,
        params=25_557_032,
    ),
    ZooModel(
        "vit-b",
        "timm",
        "vision",
        "timm vit_base_patch16_224: hidden 768, MLP 3072 (4x), 12 heads, full depth (12 blocks), 224x224",
        _timm("vit_base_patch16_224", {"depth": 1, "embed_dim": 64, "num_heads": 4, "img_size": 64}),
        VISION_SIZES,
        _forward,
        _images,
        hidden_mlp=(768, 3072),
        params=86_567_656,
    ),
    ZooModel(
        "regnety-032",
        "timm",
        "vision",
        "timm regnety_032 (RegNetY-3.2GF), full depth, 224x224",
        _timm("regnety_032", {}),
        VISION_SIZES,
        _forward,
        _images,
        params=19_436_338,
    ),
    ZooModel(
        "mobilenet-v2",
        "torchvision",
        "vision",
        "torchvision mobilenet_v2, full depth, 224x224",
        _mobilenet_v2,
        VISION_SIZES,
        _forward,
        _images,
        params=3_504_872,
    ),
]

BY_NAME = {model.name: model for model in ZOO}
HF_DECODERS = [model for model in ZOO if model.kind == "decoder"]


def build(spec: ZooModel, dtype: torch.dtype, device: str, *, tiny: bool = False) -> nn.Module:
    """The model with random weights (seeded), built on ``device`` and cast to ``dtype``, in eval mode."""
    torch.manual_seed(0)
    with torch.device(device):
        model = spec.build(tiny)
    # .to() also moves any buffer a constructor made on the host explicitly
    return model.to(device=device, dtype=dtype).eval()


def generate_kwargs(new_tokens: int) -> dict:
    """transformers' generate() over a static cache, its decode steps compiled with reduce-overhead (on a GPU).

    ``min_new_tokens`` keeps random weights from ending a sequence early, so that
    every one of the ``new_tokens`` decode steps runs.
    """
    from transformers import CompileConfig

    return dict(
        do_sample=False,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        cache_implementation="static",
        compile_config=CompileConfig(mode="reduce-overhead"),
        pad_token_id=0,
    )


def capture_params(models: Sequence[ZooModel], dtypes: Sequence[str] = tuple(DTYPES)) -> list:
    """One pytest.param per model and dtype: the cudagraph marker with the model's sizes and the dtype's tolerances.

    A model's expected failure, where the installed library has it, makes the param
    a strict xfail that must raise the plugin's exception it names.
    """
    import pytest

    import pytest_cudagraph

    params = []
    for spec in models:
        for name in dtypes:
            rtol, atol = TOLERANCES[DTYPES[name]]
            marks = [pytest.mark.cudagraph(capture_sizes=list(spec.sizes), rtol=rtol, atol=atol)]
            expected = spec.expected_failure
            if expected is not None and expected.applies():
                raises = getattr(pytest_cudagraph, expected.raises)
                marks.append(pytest.mark.xfail(raises=raises, strict=True, reason=expected.reason))
            params.append(pytest.param(spec, DTYPES[name], id=f"{spec.name}-{name}", marks=marks))
    return params
