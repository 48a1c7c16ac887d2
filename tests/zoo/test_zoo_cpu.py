"""The zoo's models checked on the CPU, where the GPU tests cannot run.

Each model is built from its config at its real widths on the meta device (no memory,
no time), to check the widths docs/zoo.md states, and at a tiny width of the same
architecture on the CPU, where the exact callable the GPU test captures runs once
while a dispatch watch looks for any op that would break the capture.  The ops found
must be the model's expected failure, on the library versions that have it, and
nothing else: so each GPU verdict the zoo expects is checked on every machine.
"""

from __future__ import annotations

import pytest
import torch
from host_syncs import watch_host_syncs
from zoo_models import BY_NAME, DYNAMIC_BATCHES, HF_DECODERS, PROMPT_LEN, TINY_SIZES, ZOO, build, generate_kwargs

IDS = [spec.name for spec in ZOO]


def _list_index(x):
    return x[..., [-2], :]


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x.sum().item(), "aten::_local_scalar_dense"),
        (lambda x: int(x[0, 0, 0]), "aten::_local_scalar_dense"),
        (lambda x: bool(x.any()), "aten::_local_scalar_dense"),
        (lambda x: x.nonzero(), "aten::nonzero"),
        (lambda x: x + torch.tensor([1.0]), "aten::lift_fresh"),
        (_list_index, "aten::lift_fresh"),
        (lambda x: (x @ x.transpose(-1, -2)).softmax(-1), None),
    ],
    ids=["item", "int", "bool", "nonzero", "tensor-from-data", "list-index", "none"],
)
def test_the_watch_finds_what_breaks_a_capture(fn, op):
    capturing = torch.cuda.is_current_stream_capturing
    with watch_host_syncs() as found:
        assert torch.cuda.is_current_stream_capturing()
        fn(torch.randn(2, 4, 3))
    assert torch.cuda.is_current_stream_capturing is capturing
    assert [sync.op for sync in found] == ([op] if op else [])
    if op:
        assert "test_zoo_cpu.py" in found[0].where


@pytest.mark.parametrize("spec", ZOO, ids=IDS)
def test_real_widths(spec):
    # on the meta device, without memory; timm's RegNet computes its stage widths with
    # torch.unique, which has no meta kernel, so the whole vision models build on the CPU
    with torch.device("cpu" if spec.library in ("timm", "torchvision") else "meta"):
        model = spec.build(False)
    if spec.hidden_mlp is not None:
        hidden, mlp = spec.hidden_mlp
        shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
        assert (mlp, hidden) in shapes or (hidden, mlp) in shapes, f"no {hidden} x {mlp} MLP weight in {spec.name}"
    if spec.params is not None:
        assert sum(p.numel() for p in model.parameters()) == spec.params
    if spec.kind == "decoder":
        assert spec.hidden_mlp[0] >= 2048


@pytest.mark.parametrize("spec", ZOO, ids=IDS)
def test_captured_step_runs_at_tiny_width_without_a_host_sync(spec):
    model = build(spec, torch.float32, "cpu", tiny=True)
    step = spec.step(model, TINY_SIZES)
    with torch.no_grad():
        for size in reversed(TINY_SIZES):  # eager warm-up, as before a capture
            step(*spec.make_inputs(model, size, torch.float32, "cpu", True))
        with watch_host_syncs() as found:
            out = step(*spec.make_inputs(model, TINY_SIZES[-1], torch.float32, "cpu", True))
    assert out.shape[0] == TINY_SIZES[-1]
    assert torch.isfinite(out).all()
    expected = spec.expected_failure
    if expected is not None and expected.applies():
        assert found, f"{spec.name}: expected {expected.cpu_op} in {expected.cpu_function}, the watch found nothing"
        assert all(sync.op == expected.cpu_op and f"in {expected.cpu_function}" in sync.where for sync in found), [
            str(sync) for sync in found
        ]
    else:
        assert not found, [str(sync) for sync in found]


@pytest.mark.parametrize("spec", HF_DECODERS, ids=[spec.name for spec in HF_DECODERS])
def test_generate_with_a_static_cache_at_tiny_width(spec):
    """The GPU test's generate() call; on the CPU transformers runs it without compiling."""
    model = build(spec, torch.float32, "cpu", tiny=True)
    ids = torch.randint(2, model.config.vocab_size, (2, PROMPT_LEN))
    out = model.generate(ids, attention_mask=torch.ones_like(ids), **generate_kwargs(3))
    assert out.shape == (2, PROMPT_LEN + 3)


@pytest.mark.slow  # a Dynamo trace of the whole model: seconds on two busy cores
@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("spec", [BY_NAME["llama"]], ids=["llama"])
def test_dynamic_batch_compiles_once_at_tiny_width(spec):
    """The GPU compile test's calls, traced by Dynamo alone: a recompile here would be the model's."""
    model = build(spec, torch.float32, "cpu", tiny=True)
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        for batch in DYNAMIC_BATCHES:
            ids = torch.randint(0, model.config.vocab_size, (batch, PROMPT_LEN))
            torch._dynamo.mark_dynamic(ids, 0)
            compiled(ids, use_cache=False)
