"""Realistic reports written by hand, shared by the report, compare, CLI and HTML tests.

The figures follow DESIGN.md's H200 measurements (a largest-first shared pool of
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
    """A whole report as ``--cudagraph-report`` writes it (schema pytest-cudagraph/1)."""
    from pytest_cudagraph.report import build_report

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
