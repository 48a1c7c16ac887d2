"""Reports with recorded cache lookups (``cache_keys``, ``cache_components``), written by hand.

The pair is the torch upgrade a user asks about: torch 2.13.0 with a persistent
cache that every lookup hit, then 2.14.1 on the same cache, where every lookup
missed.  The component names and values follow what torch puts into the keys
(``.scratch/cache-key-facts.md``): the graph's code, its inputs' metadata, fx
kwargs, one entry per Inductor config, the torch version and system info;
AOTAutograd's own ``aot_config`` and an opaque ``autograd_config``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

from sample_reports import ENV_2_13, graph_record, recompile_record

from pytest_cudagraph.records.report import build_report

DECODE = "tests/test_model.py::test_decode_graphs"
WARM = "tests/test_model.py::test_warm_start"
DYNAMIC = "tests/test_model.py::test_dynamic_batch"
PLAIN = "tests/test_model.py::test_prefill_no_recompile"

GM_DECODE = (
    "def forward(self, L_x_ : torch.Tensor):\n    l_x_ = L_x_\n    mul = l_x_ * 2;  l_x_ = None\n    return (mul,)"
)
GM_WARM = "def forward(self, L_x_ : torch.Tensor):\n    l_x_ = L_x_\n    relu = torch.relu(l_x_)\n    return (relu,)"
GM_DYNAMIC = "def forward(self, s0 : torch.SymInt, L_x_ : torch.Tensor):\n    add = L_x_ + 1\n    return (add,)"
GM_DYNAMIC_2 = "def forward(self, L_x_ : torch.Tensor):\n    add = L_x_ + 1\n    return (add,)"


def digest(value: Any) -> str:
    """A component's hash as the report holds it: 12 base32 characters of a sha256."""
    return base64.b32encode(hashlib.sha256(repr(value).encode()).digest()).decode().lower()[:12]


def component(value: Any) -> list[Any]:
    """``[hash12, value]`` as the report holds it: the value clipped to 160 characters, the graph's code left out."""
    shown = None if "\n" in value else value if len(value) <= 160 else value[:159] + "…"
    return [digest(value), shown]


def tensor(shape: tuple[int, ...], requires_grad: bool = False) -> str:
    stride = tuple(1 if i == len(shape) - 1 else shape[i + 1] for i in range(len(shape)))
    return (
        f"TensorMetadata(dtype=torch.float32, shape=torch.Size({list(shape)}), stride={stride}, "
        "device=device(type='cuda', index=0), layout=torch.strided, memory_format=torch.contiguous_format, "
        f"storage_offset=0, storage_bytes=None, requires_grad={requires_grad}, is_quantized=False, is_conj=False, "
        "is_neg=False, is_inference=False, is_sparse=False, is_coalesced=None, dense_dim=None, sparse_dim=None)"
    )


def shared_tables(torch_version: str) -> dict[str, dict[str, list[Any]]]:
    """What every lookup of a layer shares in a run of ``torch_version`` on an H200."""
    newer = torch_version.startswith("2.14")
    fx = {
        "cache_key_tag": component(""),
        "fx_kwargs[cudagraphs]": component("BoxedBool(value=False)"),
        "fx_kwargs[is_inference]": component("False"),
        "deterministic_algorithms_settings": component("(False, False, True)"),
        "cuda_matmul_settings": component("('none', True, True)"),
        "torch_version": component(torch_version),
        "system_info[device]": component("{'name': 'NVIDIA H200'}"),
        "system_info[version]": component(
            "{'triton': '3.5.0', 'cuda': '12.8'}" if not newer else "{'triton': '3.6.0', 'cuda': '12.8'}"
        ),
        "system_info[hash]": component("2f1e0c6b" if not newer else "7ab39d20"),
        "inductor_config[max_autotune]": component("False"),
        "inductor_config[epilogue_fusion]": component("True"),
        "inductor_config[triton.cudagraphs]": component("False"),
        "inductor_config[size_asserts]": component("True"),
    }
    if newer:
        fx["inductor_config[compile_on_one_rank]"] = component("False")
        fx["nested_inductor_config_patches"] = component("{}")
        fx["provenance_tracking_to_timeline"] = component("False")
    aot = {
        "grad_enabled": component("True"),
        "deterministic_algorithms": component("False"),
        "autograd_config": [digest(("functorch", torch_version)), "\x80\x04\x95\ufffd\ufffdfunctorch config"],
        "torch_version": component(torch_version),
        "system_info[device]": component("{'name': 'NVIDIA H200'}"),
        "inductor_config[max_autotune]": component("False"),
    }
    return {"fxgraph": fx, "aot_autograd": aot}


def key(*parts: Any) -> str:
    return "f" + base64.b32encode(hashlib.sha256(repr(parts).encode()).digest()).decode().lower()[:51]


def lookup(
    layer: str,
    outcome: str,
    graph: int,
    own: dict[str, Any] | None,
    *,
    pass_name: str | None = None,
    torch_version: str = "2.13.0+cu128",
    **more: Any,
) -> dict[str, Any]:
    """One lookup as the plugin records it, with its whole set of components (build_report factors them).

    ``own``: the components of this graph (None: torch recorded none); the run's
    shared ones (``shared_tables``) are added.  Its key follows from them.
    """
    whole = None if own is None else {**shared_tables(torch_version)[layer], **own}
    entry: dict[str, Any] = {
        "layer": layer,
        "outcome": outcome,
        "key": None if outcome == "bypass" else key(layer, sorted((whole or {}).items())),
        "pass": pass_name,
        "graph": graph,
        "components": whole,
    }
    if layer == "aot_autograd" and entry["key"]:
        entry["key"] = "a" + entry["key"][1:]
    entry.update(more)
    return entry


def own_components(gm: str, *inputs: str, **extra: str) -> dict[str, list[Any]]:
    out = {"gm": component(gm)}
    out.update({f"example_inputs[{i}]": component(value) for i, value in enumerate(inputs)})
    out.update({name: component(value) for name, value in extra.items()})
    return out


def _caches(fx: dict[str, int], aot: dict[str, int]) -> dict[str, Any]:
    return {"fxgraph": fx, "aot_autograd": aot, "triton": {"compiled": 0, "loaded": 2}}


def key_report(torch_version: str) -> dict[str, Any]:
    """The run under ``torch_version``: 2.13 hit every lookup, 2.14.1 missed them (see the module docstring)."""
    new = torch_version.startswith("2.14")
    outcome = "miss" if new else "hit"
    counts = {"hit": 0 if new else 1, "miss": 1 if new else 0, "bypass": 0}
    tv = {"torch_version": torch_version}

    decode = graph_record(caches=_caches(dict(counts), dict(counts, saved=0)))
    decode["cache_keys"] = {
        "lookups": [
            lookup("fxgraph", outcome, 1, own_components(GM_DECODE, tensor((8, 64))), **tv),
            lookup("aot_autograd", outcome, 1, own_components(GM_DECODE, tensor((8, 64))), **tv),
        ]
    }

    # a compile_cache test: the cold pass misses, the warm pass hits; under 2.14.1 the test body flips
    # max_autotune between the passes, so its warm pass misses too and the plugin says why
    cold_fx = own_components(GM_WARM, tensor((16, 16)))
    warm_fx = dict(cold_fx)
    explained: dict[str, Any] = {}
    if new:
        warm_fx["inductor_config[max_autotune]"] = component("True")
        explained = {"explained": ["inductor_config[max_autotune]: False -> True"], "compared_with": "the cold pass"}
    warm_record = recompile_record(
        0,
        caches=_caches(
            {"hit": 0 if new else 1, "miss": 2 if new else 1, "bypass": 0, "saved": 2 if new else 1},
            {"hit": 0 if new else 1, "miss": 2 if new else 1, "bypass": 0, "saved": 2 if new else 1},
        ),
    )
    warm_record["cache_keys"] = {
        "lookups": [
            lookup("fxgraph", "miss", 1, cold_fx, pass_name="cold", **tv),
            lookup("aot_autograd", "miss", 1, None if new else cold_fx, pass_name="cold", **tv),
            lookup("fxgraph", "miss" if new else "hit", 1, warm_fx, pass_name="warm", **tv, **explained),
            lookup("aot_autograd", "miss" if new else "hit", 1, None if new else cold_fx, pass_name="warm", **tv),
        ],
        **({"note": "torch 2.14.1 records no AOTAutograd components without DEBUG logging"} if new else {}),
    }

    # automatic dynamic shapes: 2.14.1 compiles a second graph for batch 1
    dynamic = recompile_record(1 if new else 0, caches=_caches(dict(counts), dict(counts)))
    shape = (8, 64) if new else (4, 64)
    lookups = [lookup("fxgraph", outcome, 1, own_components(GM_DYNAMIC, tensor(shape)), **tv)]
    if new:
        lookups.append(lookup("fxgraph", "miss", 2, own_components(GM_DYNAMIC_2, tensor((1, 64))), **tv))
        dynamic["caches"]["fxgraph"] = {"hit": 0, "miss": 2, "bypass": 0}
    dynamic["cache_keys"] = {"lookups": lookups}

    tests = {DECODE: decode, WARM: warm_record, DYNAMIC: dynamic, PLAIN: recompile_record(0)}
    env = dict(ENV_2_13, torch=torch_version)
    return build_report(env, tests, exitstatus=0, created="2025-06-02T09:14:03+00:00", run=_complete())


def _complete() -> dict[str, Any]:
    return {"complete": True, "incomplete_reasons": [], "not_run": [], "not_run_count": 0, "deselected": 0}


def key_report_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """(torch 2.13.0 run, torch 2.14.1 run) on one persistent cache."""
    return key_report("2.13.0+cu128"), key_report("2.14.1+cu128")


def without_cache_keys(report: dict[str, Any]) -> dict[str, Any]:
    """The same report as a plugin that records no cache keys writes it."""
    out = copy.deepcopy(report)
    out.pop("cache_components", None)
    for record in out["tests"].values():
        record.pop("cache_keys", None)
    return out
