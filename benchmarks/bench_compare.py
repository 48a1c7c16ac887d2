"""Cost of ``pytest-cudagraph compare`` on two 10,000-test reports, against reading the JSON alone.

Builds two synthetic reports of schema ``pytest-cudagraph/2`` with the package's
own ``report.build_report`` and ``record.merge_graph_sets``, written by
``report.write_report`` as ``--cudagraph-report`` writes them.  Their records
are shaped like those in docs/reports/: recompile watches with guard-failure
reasons, compile-cache counters of the three layers (some with the
``compile_cache`` marker's cold and warm passes), CUDA graph sets (one or
several per test, with per-size high-water marks), piecewise graphs, skips.  The
second report is the same run under a newer torch: every timing jitters, a few
hundred records change (more recompiles, cache misses, a grown pool, a larger
replay error, failures, harmless counter moves), some tests vanish, some are new.

Three figures, each the median of ``--runs`` runs, in one process:

(a) ``load_report`` of both files (read, parse, validate) vs ``json.loads`` of both;
(b) ``compare_reports`` + ``format_text()`` on the loaded reports, vs (a)'s plain load;
(c) the whole CLI, ``pytest-cudagraph compare A B`` as a subprocess, vs a
    subprocess that only runs ``json.load`` on both files (the floor).

Byte-code of the subprocesses is cached in a private directory
(PYTHONPYCACHEPREFIX), as on a machine that writes ``.pyc`` files;
``--no-pyc-cache`` keeps the environment's own setting.

    python benchmarks/bench_compare.py [--runs 5] [--tests 10000] [--no-pyc-cache]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the start-up benchmark's environment: this checkout first on the path, the byte-code cache
from bench_startup import subprocess_env

from pytest_cudagraph.records.record import merge_graph_sets
from pytest_cudagraph.records.report import build_report, load_report, write_report
from pytest_cudagraph.tools.compare import compare_reports

MiB = 2**20
CHANGED = 300  # records of the new report that differ in something compare shows

ENV_BASE = {
    "torch": "2.13.0+cu128",
    "triton": "3.5.0",
    "cuda": "12.8",
    "gpu": "NVIDIA H200",
    "python": "3.11.9",
    "platform": "Linux-6.8.0-x86_64-with-glibc2.39",
    "plugin": "0.1.0",
    "git_commit": "8f1d9ba28ffe9a45c0ffee0123456789abcdef01",
}
ENV_NEW = {**ENV_BASE, "torch": "2.14.1+cu128", "triton": "3.6.0"}
CAPTURE_SIZES = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))


# ----------------------------------------------------------------------------
# synthetic records, shaped like docs/reports/*.json
# ----------------------------------------------------------------------------


def recompiles_section(rng: random.Random, count: int) -> dict[str, Any]:
    reasons = [
        f"tensor 'L['x']' size mismatch at index 0. expected {2**i}, actual {2 ** (i + 1)}" for i in range(count)
    ]
    where = f"forward (models/block_{rng.randrange(40)}.py:{rng.randrange(10, 400)})"
    return {
        "count": count,
        "reasons": reasons,
        "limit_hits": [],
        "by_function": {where: {"count": count, "reasons": reasons, "limit_hits": []}} if count else {},
        "graph_breaks": {"count": 0, "reasons": []},
    }


def caches_section(rng: random.Random, warm: bool) -> dict[str, Any]:
    graphs = rng.randrange(1, 5)
    kernels = rng.randrange(2, 40)
    return {
        "fxgraph": {"hit": graphs if warm else 0, "miss": 0 if warm else graphs, "bypass": 0, "saved": 0},
        "aot_autograd": {
            "hit": graphs if warm else 0,
            "miss": 0 if warm else graphs,
            "bypass": 0,
            "saved": 0 if warm else graphs,
            "guard_miss": 0,
        },
        "triton": {
            "compiled": 0 if warm else kernels,
            "loaded": kernels if warm else 0,
            "new_kernel_dirs": 0 if warm else kernels,
            "listener_compiled": 0,
            "listener_loaded": 0,
            "bundler_saved_files": 0 if warm else 8 * kernels,
            "bundler_loaded_files": 8 * kernels if warm else 0,
            "static_autotuners_saved": 0,
            "static_autotuners_loaded": 0,
        },
    }


def compile_cache_extra(rng: random.Random, name: str) -> dict[str, Any]:
    def one_pass(warm: bool, seconds: float, process: str) -> dict[str, Any]:
        return {
            "stats": caches_section(rng, warm),
            "recorded": {"out": {"shape": [16, 16], "dtype": "float32"}},
            "duration_s": seconds,
            "process": process,
            "cache_dir": f"/tmp/pytest-of-ci/pytest-7/cudagraph-cache/probes/{name}-main-1100-2/marked-1",
        }

    return {
        "compile_cache": {
            "mode": "subprocess",
            "cold": one_pass(False, round(rng.uniform(0.5, 9.0), 4), "this interpreter"),
            "warm": one_pass(
                True, round(rng.uniform(1.0, 10.0), 4), f"a fresh interpreter (pid {rng.randrange(99999)})"
            ),
        }
    }


def graph_set(rng: random.Random, sizes: list[int]) -> dict[str, Any]:
    per_size = {str(s): 2 * MiB * (1 + s // 16) for s in sizes}
    largest = max(per_size.values())
    return {
        "sizes": sizes,
        "captured": len(sizes),
        "pool_bytes": largest + 2 * MiB * rng.randrange(0, 4) + 33 * MiB,
        "largest_graph_bytes": largest,
        "max_abs_err": rng.uniform(0.0, 1e-6),
        "capture_s": round(rng.uniform(0.01, 2.0), 6),
        "order": "largest_first",
        "pool": "shared",
        "keep_outputs": False,
        "cublas_workspace_bytes": 34603008,
        "replay_checks": 1,
        "graph_bytes": per_size,
        "pool_check_passed": True,
    }


def piecewise_section(rng: random.Random) -> dict[str, Any]:
    pieces = rng.randrange(3, 9)
    return {
        "strategy": "fx_split",
        "backend": "inductor",
        "sizes": [1, 2, 4, 8, 16],
        "pieces": pieces,
        "capturable_pieces": pieces // 2 + 1,
        "graphs_captured": 5 * (pieces // 2 + 1),
        "backend_compilations": pieces // 2 + 1,
        "splitting_op_calls": {"examples::attention": pieces // 2},
        "splitting_op_calls_total": pieces // 2,
        "pool_bytes": 35651584,
        "capture_s": round(rng.uniform(0.01, 0.1), 6),
        "max_abs_err": rng.uniform(0.0, 1e-6),
    }


def make_record(rng: random.Random, index: int, name: str) -> dict[str, Any]:
    """One test's record; the mix follows a model suite: mostly recompile and graph checks."""
    kind = index % 20
    record: dict[str, Any] = {"outcome": "passed", "duration_s": round(rng.uniform(0.05, 12.0), 4)}
    if kind < 6:
        record["recompiles"] = recompiles_section(rng, 1 if kind == 5 else 0)
    elif kind < 10:
        record["graphs"] = graph_set(rng, sorted(rng.sample(CAPTURE_SIZES, rng.randrange(2, 12))))
    elif kind < 12:  # several GraphSets in one test: merged as the plugin merges them
        sets = [graph_set(rng, sorted(rng.sample(CAPTURE_SIZES, rng.randrange(1, 6)))) for _ in range(4)]
        record["graphs"] = merge_graph_sets(sets)
    elif kind < 14:
        record["caches"] = caches_section(rng, warm=True)
        record["recompiles"] = recompiles_section(rng, 0)
    elif kind == 14:
        record["caches"] = caches_section(rng, warm=False)
        record["extra"] = compile_cache_extra(rng, name)
    elif kind == 15:
        record["piecewise"] = piecewise_section(rng)
        record["caches"] = caches_section(rng, warm=True)
    elif kind == 16:
        record = {"outcome": "skipped", "duration_s": 0.0005}
    elif kind == 17:
        record["outcome"] = "xfailed"
    # 18, 19: a passing test that uses no plugin feature
    return record


def nodeid(index: int) -> str:
    module, test = divmod(index, 50)
    return f"tests/models/test_model_{module:03d}.py::test_case_{test:02d}[bs{1 << (test % 10)}]"


# ----------------------------------------------------------------------------
# the second run: same suite, newer torch
# ----------------------------------------------------------------------------


def change_record(rng: random.Random, record: dict[str, Any], which: int) -> None:
    """Change ``record`` in one of the ways a torch upgrade does; ``which`` picks the way."""
    if "recompiles" in record and which % 6 == 0:
        record["recompiles"] = recompiles_section(rng, record["recompiles"]["count"] + 2)
    elif "caches" in record and which % 6 == 1:
        fx = record["caches"]["fxgraph"]
        fx["miss"], fx["hit"] = fx["hit"], 0
    elif "graphs" in record and which % 6 == 2:
        record["graphs"]["pool_bytes"] += 16 * MiB
    elif "graphs" in record and which % 6 == 3:
        record["graphs"]["max_abs_err"] = record["graphs"]["max_abs_err"] * 10 + 1e-5
    elif which % 6 == 4 and record["outcome"] == "passed":
        record["outcome"] = "failed"
    elif "caches" in record:  # moves no default rule flags, shown in the table only
        record["caches"]["triton"]["loaded"] += 3
    elif "recompiles" in record:
        record["recompiles"]["graph_breaks"] = {"count": 1, "reasons": ["call_function print"]}
    else:
        record["extra"] = {"note": f"seen in run {which}"}


def make_reports(tests: int, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any], int]:
    rng = random.Random(seed)
    base = {nodeid(i): make_record(rng, i, nodeid(i)) for i in range(tests)}
    new = copy.deepcopy(base)
    for record in new.values():  # every run takes its own time
        record["duration_s"] = round(record["duration_s"] * rng.uniform(0.9, 1.1), 4)
        if "graphs" in record:
            record["graphs"]["capture_s"] = round(record["graphs"]["capture_s"] * rng.uniform(0.9, 1.1), 6)
    names = list(new)
    for which, name in enumerate(rng.sample(names, CHANGED)):
        change_record(rng, new[name], which)
    for name in rng.sample(names, tests // 500):
        del new[name]
    for extra in range(tests // 500):
        new[nodeid(tests + extra)] = make_record(rng, extra, nodeid(tests + extra))
    created = "2025-01-31T12:00:00+00:00"
    return (
        build_report(ENV_BASE, base, exitstatus=0, created=created),
        build_report(ENV_NEW, new, exitstatus=1, created=created),
        len(base.keys() & new.keys()),
    )


# ----------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------


def cli_command() -> list[str]:
    """The console script next to this interpreter (not a shim in front of it), else ``-m``."""
    script = Path(sys.executable).parent / "pytest-cudagraph"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "pytest_cudagraph"]


def timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn()`` takes, freeing its result included; the cyclic GC is off meanwhile, as in ``timeit``.

    A full collection lands on whichever call happens to cross the threshold while
    two parsed reports are alive, which would make the in-process medians noise.
    """
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def run_process(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument(
        "--no-pyc-cache", action="store_true", help="keep the environment's byte-code setting (PYTHONDONTWRITEBYTECODE)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "base.json", Path(tmp) / "new.json"
        base, new, in_both = make_reports(args.tests)
        write_report(a, base)
        write_report(b, new)
        del base, new

        def plain_load() -> tuple[Any, Any]:
            return json.loads(a.read_text(encoding="utf-8")), json.loads(b.read_text(encoding="utf-8"))

        def validated_load() -> tuple[Any, Any]:
            return load_report(a), load_report(b)

        loaded = validated_load()
        comparison = compare_reports(*loaded, labels=(a.name, b.name))
        text = comparison.format_text()
        compare_cmd = [*cli_command(), "compare", str(a), str(b)]
        floor_cmd = [sys.executable, "-c", f"import json; json.load(open({str(a)!r})); json.load(open({str(b)!r}))"]
        env = subprocess_env(None if args.no_pyc_cache else Path(tmp) / "pycache")
        run_process(compare_cmd, env, ok=(0, 1))  # warm the page cache and the byte-code cache
        run_process(floor_cmd, env)

        times: dict[str, list[float]] = {"json": [], "load": [], "compare": [], "cli": [], "floor": []}
        for _ in range(args.runs):
            times["json"].append(timed(plain_load))
            times["load"].append(timed(validated_load))
            times["compare"].append(timed(lambda: compare_reports(*loaded, labels=(a.name, b.name)).format_text()))
            times["cli"].append(timed(lambda: run_process(compare_cmd, env, ok=(0, 1))))
            times["floor"].append(timed(lambda: run_process(floor_cmd, env)))
        sizes = a.stat().st_size, b.stat().st_size
    med = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"two reports: {args.tests} tests ({sizes[0] / MiB:.1f} MiB, {sizes[0]} bytes) and {len(loaded[1]['tests'])} "
        f"tests ({sizes[1] / MiB:.1f} MiB, {sizes[1]} bytes); {in_both} in both, {CHANGED} changed on purpose; "
        f"{args.runs} runs each"
    )
    print(f"compare found: {comparison.summary_line()} ({len(text.splitlines())} lines of text)")
    print(f"(a) load_report x2 (read+parse+validate)  median {med['load'] * 1000:8.1f} ms")
    print(f"    json.loads x2 (plain read+parse)      median {med['json'] * 1000:8.1f} ms")
    print(f"    ratio load_report / json.loads {med['load'] / med['json']:.3f}")
    print(f"(b) compare_reports + format_text         median {med['compare'] * 1000:8.1f} ms")
    print(f"    ratio (load + compare) / json.loads {(med['load'] + med['compare']) / med['json']:.3f}")
    bytecode = "as the environment has it" if args.no_pyc_cache else "cached in a private PYTHONPYCACHEPREFIX"
    print(f"(c) {Path(compare_cmd[0]).name} compare A B (subprocess) median {med['cli'] * 1000:8.1f} ms")
    print(f"    python -c 'json.load x2' (subprocess)   median {med['floor'] * 1000:8.1f} ms")
    print(f"    ratio CLI / floor {med['cli'] / med['floor']:.3f} (byte-code {bytecode})")


if __name__ == "__main__":
    main()
