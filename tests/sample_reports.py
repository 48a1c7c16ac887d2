"""Realistic reports written by hand, shared by the report, compare, CLI and HTML tests.

The figures follow the H200 measurements of docs/concepts.md (a largest-first shared pool of
60 MiB for graphs whose largest alone needs 42 MiB); the guard-failure text is
Dynamo's own wording.
"""

from __future__ import annotations

import copy
from typing import Any

MiB = 2**20

ENV_2_13 = {
    "torch": "2.13.0+cu128",
    "triton": "3.5.0",
    "cuda": "12.8",
    "gpu": "NVIDIA H200",
    "python": "3.11.9",
    "platform": "Linux-6.8.0-x86_64-with-glibc2.39",
    "plugin": "0.1.0",
    "git_commit": "8f1d9ba28ffe9a45c0ffee0123456789abcdef01",
}


def graph_record(**overrides: Any) -> dict[str, Any]:
    """A passing test that captured four sizes in one pool and compiled warm."""
    record = {
        "outcome": "passed",
        "duration_s": 3.21,
        "recompiles": {
            "count": 0,
            "reasons": [],
            "limit_hits": [],
            "by_function": {},
            "graph_breaks": {"count": 0, "reasons": []},
        },
        "caches": {
            "fxgraph": {"hit": 1, "miss": 0, "bypass": 0},
            "aot_autograd": {"hit": 1, "miss": 0, "bypass": 0, "saved": 0},
            "triton": {"compiled": 0, "loaded": 3},
        },
        "graphs": {
            "sizes": [1, 2, 4, 8],
            "captured": 4,
            "pool_bytes": 60 * MiB,
            "largest_graph_bytes": 42 * MiB,
            "max_abs_err": 2.4e-7,
            "capture_s": 1.93,
            "graph_bytes": {"1": 34 * MiB, "2": 36 * MiB, "4": 38 * MiB, "8": 42 * MiB},
        },
    }
    record.update(overrides)
    return record


def recompile_record(count: int = 0, **overrides: Any) -> dict[str, Any]:
    """A CPU test watched by the ``recompiles`` fixture."""
    reasons = [f"tensor 'x' size mismatch at index 0. expected {2**i}, actual {2 ** (i + 1)}" for i in range(count)]
    record = {
        "outcome": "passed",
        "duration_s": 0.41,
        "recompiles": {
            "count": count,
            "reasons": reasons,
            "limit_hits": [],
            "by_function": (
                {"forward (model.py:12)": {"count": count, "reasons": reasons, "limit_hits": []}} if count else {}
            ),
            "graph_breaks": {"count": 0, "reasons": []},
        },
    }
    record.update(overrides)
    return record


def graph_set_record(
    sizes: list[int], graph_bytes: list[int], pool_bytes: int, cublas_workspace_bytes: int, **overrides: Any
) -> dict[str, Any]:
    """One GraphSet's record, with the fields of capture.GraphSetResult.to_json (a set that passed its pool check)."""
    record = {
        "sizes": sorted(sizes, reverse=True),
        "captured": len(sizes),
        "pool_bytes": pool_bytes,
        "largest_graph_bytes": max(graph_bytes),
        "max_abs_err": 1.2e-7,
        "capture_s": 0.41,
        "order": "largest_first",
        "pool": "shared",
        "keep_outputs": False,
        "cublas_workspace_bytes": cublas_workspace_bytes,
        "replay_checks": 3 * len(sizes),
        "graph_bytes": {str(size): n for size, n in sorted(zip(sizes, graph_bytes))},
        "pool_check_passed": True,
    }
    record.update(overrides)
    return record


def piecewise_record() -> dict[str, Any]:
    return {
        "outcome": "passed",
        "duration_s": 5.0,
        "piecewise": {
            "pieces": 5,
            "capturable_pieces": 3,
            "graphs_captured": 12,
            "backend_compilations": 3,
            "splitting_op_calls": {"toy::attention": 2},
            "max_abs_err": 3e-7,
        },
    }


# what the plugin passes to build_report(run=...) for a run that ran to its end
COMPLETE_RUN = {"complete": True, "incomplete_reasons": [], "not_run": [], "not_run_count": 0, "deselected": 0}


def sample_report(env: dict[str, Any] | None = None, run: dict[str, Any] | None = None) -> dict[str, Any]:
    """A whole report as ``--cudagraph-report`` writes it (schema pytest-cudagraph/3)."""
    from pytest_cudagraph.records.report import build_report

    tests = {
        "tests/test_model.py::test_decode_graphs": graph_record(),
        "tests/test_model.py::test_prefill_no_recompile": recompile_record(0),
        "tests/test_model.py::test_dynamic_batch": recompile_record(1),
        "tests/test_model.py::test_attention_split": piecewise_record(),
        "tests/test_model.py::test_gpu_only": {"outcome": "skipped", "duration_s": 0.0},
    }
    return build_report(
        env or dict(ENV_2_13), tests, exitstatus=0, created="2025-01-31T12:00:00+00:00", run=run or COMPLETE_RUN
    )


def modified(report: dict[str, Any], nodeid: str, path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``report`` with ``tests[nodeid]`` at dotted ``path`` set to ``value``."""
    out = copy.deepcopy(report)
    target = out["tests"][nodeid]
    *parents, last = path.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    target[last] = value
    return out


def _pass(fx: dict[str, int], aot: dict[str, int], triton: dict[str, int], seconds: float, process: str) -> dict:
    return {
        "stats": {"fxgraph": fx, "aot_autograd": aot, "triton": triton},
        "recorded": {"out": {"shape": [16, 16], "dtype": "float32"}},
        "duration_s": seconds,
        "process": process,
        "cache_dir": "/tmp/cache/probes/main-1-a/marked-1",
    }


def warm_start_record(mode: str = "subprocess") -> dict[str, Any]:
    """A passing ``@pytest.mark.compile_cache`` test: the cold pass missed and saved, the warm pass only hit.

    Its ``caches`` adds both passes up (1 hit, 1 miss, 1 save), as the probe counts them.
    """
    cold = _pass(
        {"hit": 0, "miss": 1, "bypass": 0, "saved": 1},
        {"hit": 0, "miss": 1, "bypass": 0, "saved": 1, "guard_miss": 0},
        {"compiled": 2, "loaded": 0},
        0.96,
        "this interpreter",
    )
    warm = _pass(
        {"hit": 1, "miss": 0, "bypass": 0, "saved": 0},
        {"hit": 1, "miss": 0, "bypass": 0, "saved": 0, "guard_miss": 0},
        {"compiled": 0, "loaded": 2},
        10.2,
        "a fresh interpreter (pid 2634)",
    )
    return {
        "outcome": "passed",
        "duration_s": 15.55,
        "caches": {
            "fxgraph": {"hit": 1, "miss": 1, "bypass": 0, "saved": 1},
            "aot_autograd": {"hit": 1, "miss": 1, "bypass": 0, "saved": 1, "guard_miss": 0},
            "triton": {"compiled": 2, "loaded": 2},
        },
        "extra": {"compile_cache": {"mode": mode, "cold": cold, "warm": warm}},
    }


# ----------------------------------------------------------------------------
# cache keys: the "cache_keys" section and the report's shared "cache_components"
# ----------------------------------------------------------------------------


def fake_hash(text: str) -> str:
    """A component hash as a report stores it: 12 lowercase base32 characters (torch's are 51 long)."""
    import base64
    import hashlib

    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode().lower()[:12]


def fake_key(prefix: str, text: str) -> str:
    """A cache key in torch's format: ``f``/``a`` followed by 51 lowercase base32 characters."""
    import base64
    import hashlib

    return prefix + base64.b32encode(hashlib.sha256(text.encode()).digest()).decode().lower()[:51]


def components(**values: Any) -> dict[str, list[Any]]:
    """``{name: [hash12, value]}`` for a lookup; ``gm`` (graph code) keeps only its hash (value None)."""
    out = {}
    for name, value in values.items():
        out[name] = [fake_hash(f"{name}={value}"), None if name == "gm" else value]
    return out


def fx_components(max_autotune: str = "False", torch_version: str = "2.13.0+cu128", **changes: Any) -> dict:
    """The (few, realistic) components of an FX-graph key; torch writes some 640 of them."""
    values = {
        "gm": "graph 1",
        "example_inputs[0]": (
            "TensorMetadata(dtype=torch.float32, shape=torch.Size([16, 16]), stride=(16, 1), "
            "device=device(type='cuda', index=0), layout=torch.strided, memory_format=torch.contiguous_format, ..."
        ),
        "fx_kwargs[cudagraphs]": "BoxedBool(value=False)",
        "fx_kwargs[static_input_idxs]": "[]",
        "torch_version": torch_version,
        "system_info[hash]": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "inductor_config[max_autotune]": max_autotune,
        "inductor_config[fallback_random]": "False",
        "inductor_config[epilogue_fusion]": "True",
        "inductor_config[triton.cudagraphs]": "False",
    }
    values.update(changes)
    return components(**values)


def aot_components(**changes: Any) -> dict:
    values = {
        "gm": "graph 1",
        "example_inputs[0]": "TensorMetadata(dtype=torch.float32, shape=torch.Size([16, 16]), requires_grad=False, ...)",
        "aot_config": "(0, True, False, False, False, [], [], True, False)",
        "autograd_config": "<bytes>",
        "torch_version": "2.13.0+cu128",
        "inductor_config[max_autotune]": "False",
        "inductor_config[fallback_random]": "False",
    }
    values.update(changes)
    return components(**values)


def lookup(
    layer: str,
    outcome: str,
    parts: dict[str, list[Any]] | None,
    *,
    pass_name: str | None = None,
    graph: int = 1,
    key: str | None = "",
    **extra: Any,
) -> dict[str, Any]:
    """One lookup of a ``cache_keys`` section, with its whole set of components (build_report factors them)."""
    if key == "":
        prefix = "f" if layer == "fxgraph" else "a"
        key = fake_key(prefix, repr(sorted((parts or {}).items())))
    record = {"layer": layer, "outcome": outcome, "key": key, "pass": pass_name, "graph": graph, "components": parts}
    record.update(extra)
    return record


def cache_keys_record() -> dict[str, Any]:
    """A failing ``@pytest.mark.compile_cache`` test: the warm pass missed, explained by the cold pass's key.

    The cold pass missed and saved (graph 1 of each layer); the warm pass's FX lookup
    missed because ``fallback_random`` changed, so the AOTAutograd lookup missed too
    (its key holds the Inductor config as well).
    """
    cold_fx = fx_components()
    warm_fx = fx_components(**{"inductor_config[fallback_random]": "True"})
    cold_aot = aot_components()
    warm_aot = aot_components(**{"inductor_config[fallback_random]": "True"})
    explained = ["inductor_config[fallback_random]: False -> True"]
    return {
        "outcome": "failed",
        "duration_s": 4.2,
        "caches": {
            "fxgraph": {"hit": 0, "miss": 2, "bypass": 0, "saved": 2},
            "aot_autograd": {"hit": 0, "miss": 2, "bypass": 0, "saved": 2, "guard_miss": 0},
        },
        "cache_keys": {
            "lookups": [
                lookup("aot_autograd", "miss", cold_aot, pass_name="cold", detail="full_miss"),
                lookup("fxgraph", "miss", cold_fx, pass_name="cold", detail="full_miss"),
                lookup(
                    "aot_autograd",
                    "miss",
                    warm_aot,
                    pass_name="warm",
                    detail="full_miss",
                    explained=explained,
                    compared_with="the cold pass",
                ),
                lookup(
                    "fxgraph",
                    "miss",
                    warm_fx,
                    pass_name="warm",
                    detail="full_miss",
                    explained=explained,
                    compared_with="the cold pass",
                ),
            ]
        },
        "failure": {
            "when": "call",
            "message": (
                "the warm pass missed the cache: fxgraph miss for graph 1 of the warm pass: "
                "inductor_config[fallback_random]: False -> True"
            ),
        },
    }


def cache_key_report_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """(base report, new report), both built with build_report, for comparing cache keys across runs.

    ``tests/test_model.py::test_decode_graphs`` hit the FX-graph cache in the base
    run; in the new run (torch 2.14.1, ``max_autotune`` on) its FX lookup missed:
    the key's ``inductor_config[max_autotune]`` and ``torch_version`` components
    differ, while its AOTAutograd lookup was bypassed (no key, no components) and a
    second test shows a record with a ``note``.  Both reports also hold
    ``test_warm_start`` (cache_keys_record), so their ``cache_components`` tables
    are factored over more than one test.
    """
    from pytest_cudagraph.records.report import build_report

    base_fx = fx_components()
    new_fx = fx_components(max_autotune="True", torch_version="2.14.1+cu130")
    base_tests = {
        "tests/test_model.py::test_decode_graphs": graph_record(
            cache_keys={
                "lookups": [
                    lookup("fxgraph", "hit", base_fx, detail="hit"),
                    lookup("aot_autograd", "hit", aot_components(), detail="hit"),
                ]
            }
        ),
        "tests/test_model.py::test_warm_start": cache_keys_record(),
    }
    new_tests = {
        "tests/test_model.py::test_decode_graphs": graph_record(
            caches={
                "fxgraph": {"hit": 0, "miss": 1, "bypass": 0},
                "aot_autograd": {"hit": 0, "miss": 0, "bypass": 1, "saved": 0},
                "triton": {"compiled": 3, "loaded": 0},
            },
            cache_keys={
                "lookups": [
                    lookup("fxgraph", "miss", new_fx, detail="full_miss"),
                    lookup(
                        "aot_autograd",
                        "bypass",
                        None,
                        key=None,
                        bypass_reason="Unsupported call_function target flex_attention",
                    ),
                ],
                "note": "a bypassed lookup has no key and no components",
            },
        ),
        "tests/test_model.py::test_warm_start": cache_keys_record(),
    }
    env_new = {**ENV_2_13, "torch": "2.14.1+cu130", "cuda": "13.0"}
    base = build_report(dict(ENV_2_13), base_tests, exitstatus=0, created="2025-01-31T12:00:00+00:00", run=COMPLETE_RUN)
    new = build_report(env_new, new_tests, exitstatus=0, created="2025-02-07T12:00:00+00:00", run=COMPLETE_RUN)
    return base, new


# ----------------------------------------------------------------------------
# where and why: recompile events, graph-break sites, reduce-overhead regions and skips,
# pieces without a graph, ranks
# ----------------------------------------------------------------------------

FORWARD = "forward (tests/model.py:12)"


def call_site(line: int = 10, code: str = "out = model(x)") -> dict[str, Any]:
    """A ``CallSite.to_json()``: the user's line that called the compiled function."""
    return {"file": "tests/test_x.py", "line": line, "code": code, "function": "test_dynamic_batch"}


def failed_guard(entry: str, kind: str, guard: str, expected: str, actual: str, printed: bool = True) -> dict:
    """A ``FailedGuard.to_json()``."""
    return {
        "entry": entry,
        "source": "x",
        "kind": kind,
        "guard": guard,
        "expected": expected,
        "actual": actual,
        "origin": "tests/model.py:14",
        "reported_by_torch": printed,
    }


def recompile_events_record() -> dict[str, Any]:
    """A failed test whose function recompiled twice (a size, then a dtype torch did not print) and hit the limit."""
    size_0 = failed_guard("0/0", "size", "tensor 'x' size mismatch at index 0", "2", "4")
    size_1 = failed_guard("0/1", "size", "tensor 'x' size mismatch at index 0", "4", "8")
    dtype_1 = failed_guard(
        "0/1", "dtype", "check_tensor(L['x'], Tensor, DispatchKeySet(CPU), torch.float32)", "float32", "bfloat16", False
    )
    reasons = ["0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4"]
    limit = f"{FORWARD}: hit config.recompile_limit (8); ran it eagerly"
    events = [
        {
            "function": FORWARD,
            "call_site": call_site(),
            "reasons": reasons,
            "guards": [size_0],
            "verbatim": reasons,
            "limit_hit": None,
        },
        {
            "function": FORWARD,
            "call_site": call_site(11, "out = model(y)"),
            "reasons": ["0/1: tensor 'x' size mismatch at index 0. expected 4, actual 8"],
            "guards": [size_1, dtype_1],
            "verbatim": ["0/1: tensor 'x' size mismatch at index 0. expected 4, actual 8"],
            "limit_hit": None,
        },
        {"function": FORWARD, "call_site": None, "reasons": [], "guards": [], "verbatim": [], "limit_hit": limit},
    ]
    site = {
        "reason": "Unsupported: call to builtin print",
        "location": "tests/model.py:30",
        "code": "print(x.shape)",
        "call_site": call_site(),
        "count": 2,
    }
    return recompile_record(
        2,
        outcome="failed",
        recompiles={
            "count": 2,
            "reasons": ["tensor 'x' size mismatch at index 0. expected 2, actual 4"] * 2,
            "limit_hits": [limit],
            "by_function": {FORWARD: {"count": 2, "reasons": ["old flat reason"], "limit_hits": [limit]}},
            "graph_breaks": {"count": 2, "reasons": ["Unsupported: call to builtin print"], "sites": [site]},
            "events": events,
        },
    )


def reduce_overhead_record() -> dict[str, Any]:
    """A reduce-overhead test: two of three regions ran as graphs; one skipped for a mutated input."""
    return {
        "outcome": "failed",
        "duration_s": 2.5,
        "reduce_overhead": {
            "recordings": 2,
            "skips": 1,
            "skip_reasons": ["skipping cudagraphs due to mutated inputs (1 instances). Found from : ..."],
            "recorded_non_static_inputs": 0,
            "partitions": 0,
            "tree_nodes": 2,
            "pool_bytes": 8 * MiB,
            "skipped": [
                {
                    "reason": "mutated inputs (1 instances)",
                    "function": "step",
                    "location": "tests/model.py:40",
                    "code": "cache.add_(x)",
                    "arguments": ["cache"],
                    "named_by": "identity",
                }
            ],
            "regions": {
                "forward": {"replayed": 8, "recorded": 1, "warmup": 1, "without_graph": 0},
                "head": {"replayed": 8, "recorded": 1, "warmup": 1, "without_graph": 0},
                "step": {"replayed": 0, "recorded": 0, "warmup": 0, "without_graph": 10},
            },
            "regions_total": 3,
            "regions_cudagraphed": 2,
            "calls": {"replayed": 16, "recorded": 2, "warmup": 2, "without_graph": 10},
            "fraction_of_calls": 18 / 28,
        },
    }


def piecewise_uncaptured_record() -> dict[str, Any]:
    """A piecewise test whose attention piece runs eagerly, and calls above the largest size replayed nothing."""
    record = piecewise_record()
    record["piecewise"].update(
        uncaptured=[{"piece": "submod_1", "reason": "splitting op toy::attention: runs eagerly between graphs"}],
        uncaptured_calls={"batch size above the largest captured size 8: ran without graphs": 3},
    )
    return record


def rank_json(rank: int, outcome: str = "passed", **changes: Any) -> dict[str, Any]:
    """A ``RankResult.to_json()`` of a rank that captured two sizes."""
    out = {
        "rank": rank,
        "device": f"cuda:{rank}",
        "outcome": outcome,
        "stage": "done" if outcome == "passed" else "running the body",
        "error": None,
        "waiting_at": None,
        "agreement_checks": 2,
        "placement": {},
        "duration_s": 4.2,
        "exitcode": 0,
        "graphs": {
            "sizes": [8, 1],
            "captured": 2,
            "pool_bytes": 24 * MiB,
            "largest_graph_bytes": 20 * MiB,
            "max_abs_err": 1.5e-6,
        },
    }
    out.update(changes)
    return out


def ranks_record() -> dict[str, Any]:
    """A two-rank test: rank 1 raised, rank 0 was stopped while it waited in an all_reduce."""
    return {
        "outcome": "failed",
        "duration_s": 9.1,
        "ranks": {
            "world_size": 2,
            "backend": "nccl",
            "timeout_s": 300.0,
            "outcome": "failed",
            "duration_s": 8.7,
            "first_failure": 1,
            "message": "rank 1 of 2 failed: CaptureError: a sync inside capture",
            "per_rank": [
                rank_json(0, "aborted", waiting_at="in all_reduce (tests/test_tp.py:22 `dist.all_reduce(x)`)"),
                rank_json(
                    1,
                    "failed",
                    exitcode=1,
                    error={
                        "type": "CaptureError",
                        "message": "a sync inside capture",
                        "where": "tests/test_tp.py:30 in body `x.item()`",
                    },
                ),
            ],
        },
    }


def where_and_why_report() -> dict[str, Any]:
    """A report whose records hold every where-and-why section."""
    from pytest_cudagraph.records.report import build_report

    tests = {
        "tests/test_x.py::test_dynamic_batch": recompile_events_record(),
        "tests/test_x.py::test_reduce_overhead": reduce_overhead_record(),
        "tests/test_x.py::test_pieces": piecewise_uncaptured_record(),
        "tests/test_x.py::test_tp": ranks_record(),
    }
    return build_report(dict(ENV_2_13), tests, exitstatus=1, created="2025-01-31T12:00:00+00:00", run=COMPLETE_RUN)
