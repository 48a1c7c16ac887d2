"""Why a cache missed, seen from outside: real Inductor compiles on the CPU, in fresh pytest subprocesses.

Each run does several things at once (cold compiles take seconds): the failure
messages of warm passes that missed for different reasons, the report's
``cache_keys`` records and their shared ``cache_components`` table, and what a
persistent ``--cudagraph-cache-dir`` remembers of an earlier run.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_cudagraph.records.cache_components import full_components

# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal")


WARM_MISSES = """
import os
import shutil

import pytest
import torch

PASSES = {"flip": 0, "stride": 0, "deleted": 0}


def compile_and_run(x):
    with torch.no_grad():
        return torch.compile(lambda a: torch.sin(a) * 2)(x)


@pytest.mark.compile_cache
def test_flip():
    PASSES["flip"] += 1
    torch._inductor.config.fallback_random = PASSES["flip"] == 2
    compile_and_run(torch.randn(4, 8))


@pytest.mark.compile_cache
def test_stride():
    PASSES["stride"] += 1
    x = torch.randn(4, 8) if PASSES["stride"] == 1 else torch.randn(8, 4).t()
    compile_and_run(x)


@pytest.mark.compile_cache
def test_deleted():
    PASSES["deleted"] += 1
    if PASSES["deleted"] == 2:
        shutil.rmtree(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "fxgraph"))
    compile_and_run(torch.randn(4, 8))


@pytest.mark.compile_cache(mode="subprocess")
def test_flip_in_the_child():
    # the warm pass runs in a child pytest, which the plugin tells apart by this variable
    torch._inductor.config.fallback_random = bool(os.environ.get("PYTEST_CUDAGRAPH_CACHE_PASS"))
    compile_and_run(torch.randn(4, 8))


def test_hits(compile_cache):
    compile_and_run(torch.randn(4, 8))
"""


def _lookups(report: dict, nodeid: str) -> list[dict]:
    return report["tests"][nodeid]["cache_keys"]["lookups"]


def _failure(output: str, test: str) -> str:
    """The failure section of one test in pytest's output."""
    start = output.index(f"___ {test} ___")
    end = output.find("\n___", start + 1)
    return output[start : end if end != -1 else None]


@pytest.mark.slow
def test_warm_misses_name_what_changed_and_the_report_keeps_every_lookup(pytester: pytest.Pytester):
    pytester.makepyfile(test_misses=WARM_MISSES)
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(f"--cudagraph-report={report_path}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=4, passed=1)
    output = result.stdout.str()

    # (a) a config flipped between the passes: named with both values
    flip = _failure(output, "test_flip")
    assert "fxgraph miss for graph 1 of the warm pass: inductor_config[fallback_random]: False -> True" in flip
    # (b) an input of other strides: the input's metadata, cut to the field that differs
    stride = _failure(output, "test_stride")
    assert "fxgraph miss for graph 1 of the warm pass: example_inputs[0]: TensorMetadata(stride=(8, 1), " in stride
    assert " -> TensorMetadata(stride=(1, 4), " in stride
    # (d) the FX-graph entries deleted between the passes: the same key, so no component is to blame
    deleted = _failure(output, "test_deleted")
    assert "same key as the cold pass's graph 1, yet it missed: the entry was evicted or deleted" in deleted
    assert "inductor_config[" not in deleted and "example_inputs[" not in deleted
    # the warm pass in a child interpreter sent its lookups back
    child = _failure(output, "test_flip_in_the_child")
    assert "fxgraph miss for graph 1 of the warm pass: inductor_config[fallback_random]: False -> True" in child

    # (e) every lookup in the report, explained where it missed, the shared components once per run
    report = json.loads(report_path.read_text())
    flip_lookups = _lookups(report, "test_misses.py::test_flip")
    warm_fx = next(x for x in flip_lookups if x["pass"] == "warm" and x["layer"] == "fxgraph")
    assert warm_fx["outcome"] == "miss" and warm_fx["graph"] == 1 and warm_fx["key"].startswith("f")
    assert warm_fx["explained"] == ["inductor_config[fallback_random]: False -> True"]
    assert warm_fx["compared_with"] == "the cold pass"
    assert warm_fx["components"]["inductor_config[fallback_random]"][1] == "True"
    child_warm = [x for x in _lookups(report, "test_misses.py::test_flip_in_the_child") if x["pass"] == "warm"]
    assert child_warm and all(x["explained"] for x in child_warm if x["outcome"] == "miss")
    hits = _lookups(report, "test_misses.py::test_hits")
    assert [(x["layer"], x["outcome"], x["pass"]) for x in hits if x["layer"] == "fxgraph"] == [
        ("fxgraph", "miss", None)
    ]
    shared = report["cache_components"]
    assert len(shared) > 200 and "inductor_config[max_autotune]" in shared
    whole = own = 0
    for record in report["tests"].values():
        for item in record["cache_keys"]["lookups"]:
            if item["components"] is not None:
                own += len(item["components"])
                whole += len(full_components(report, item))
                assert len(item["components"]) < 40
    assert own * 10 < whole
    assert len(report_path.read_text()) < 400_000


TWO_RUNS = """
import os

import pytest
import torch

SECOND_RUN = os.environ.get("SECOND_RUN") == "1"
# the whole second run compiles with another config
torch._inductor.config.fallback_random = SECOND_RUN
PASSES = [0]


def compile_and_run(x):
    with torch.no_grad():
        return torch.compile(lambda a: torch.cos(a) + 1)(x)


def test_plain(recompiles):
    compile_and_run(torch.randn(4, 8))


@pytest.mark.compile_cache
def test_marked():
    PASSES[0] += 1
    if SECOND_RUN and PASSES[0] == 2:
        torch._inductor.config.epilogue_fusion = not torch._inductor.config.epilogue_fusion
    compile_and_run(torch.randn(4, 8))
"""


@pytest.mark.slow
def test_a_persistent_cache_dir_explains_a_miss_by_what_changed_since_an_earlier_run(
    pytester: pytest.Pytester, monkeypatch
):
    pytester.makepyfile(test_runs=TWO_RUNS)
    root = pytester.path / "cache-root"
    report_path = pytester.path / "report.json"
    args = (f"--cudagraph-cache-dir={root}", f"--cudagraph-report={report_path}", "-p", "no:cacheprovider")
    monkeypatch.delenv("SECOND_RUN", raising=False)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)
    first = json.loads(report_path.read_text())
    assert not any("explained" in x for x in _lookups(first, "test_runs.py::test_plain"))
    index = root / "cache-keys"
    files = sorted(index.rglob("*.json"))
    # (the warm pass's FX hits come from an AOTAutograd hit: torch 2.6-2.7 give them no components to keep)
    assert {path.name for path in files} >= {"fxgraph-test-1.json", "fxgraph-cold-1.json", "aot_autograd-cold-1.json"}
    assert {stat.S_IMODE(os.stat(path).st_mode) for path in files} == {0o600}
    assert stat.S_IMODE(os.stat(index).st_mode) == 0o700

    monkeypatch.setenv("SECOND_RUN", "1")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, failed=1)
    second = json.loads(report_path.read_text())
    torch_version = first["env"]["torch"]
    # the plain test looked in the run's persistent cache: its miss is explained by the earlier run
    [plain] = [x for x in _lookups(second, "test_runs.py::test_plain") if x["layer"] == "fxgraph"]
    assert plain["outcome"] == "miss" and plain["pass"] is None
    assert plain["explained"] == ["inductor_config[fallback_random]: False -> True"]
    assert plain["compared_with"].startswith("an earlier run (") and f"torch {torch_version})" in plain["compared_with"]
    # the marked test's cold pass (a fresh directory: expected to miss) says what changed since then
    marked = _lookups(second, "test_runs.py::test_marked")
    cold = next(x for x in marked if x["pass"] == "cold" and x["layer"] == "fxgraph")
    assert cold["explained"] == ["inductor_config[fallback_random]: False -> True"]
    assert cold["compared_with"] == plain["compared_with"]
    warm = next(x for x in marked if x["pass"] == "warm" and x["layer"] == "fxgraph")
    assert warm["compared_with"] == "the cold pass" and warm["explained"][0].startswith(
        "inductor_config[epilogue_fusion]"
    )
    # and the failed check says both
    failure = _failure(result.stdout.str(), "test_marked")
    assert "fxgraph miss for graph 1 of the warm pass: inductor_config[epilogue_fusion]: " in failure
    assert (
        "compared with an earlier run (" in failure
        and "fxgraph miss for graph 1 of the cold pass: inductor_config[fallback_random]: False -> True" in failure
    )
    assert Path(root / "inductor").is_dir()


HOSTILE_INDEX = """
import torch


def compile_and_run():
    with torch.no_grad():  # a transpose: no kernel to build, so the compile takes no C++ compiler
        torch.compile(lambda a: a.t())(torch.randn(4, 8))


def test_fifo(recompiles):
    compile_and_run()


def test_dev_zero(recompiles):
    compile_and_run()


def test_deep(recompiles):
    compile_and_run()


def test_foreign(recompiles):
    compile_and_run()
"""


@pytest.mark.slow
def test_a_hostile_key_index_costs_no_record_and_no_hang(pytester: pytest.Pytester):
    """A FIFO, a link to /dev/zero, 200,000-deep JSON and a directory of another uid in the index: notes, not ends."""
    from pytest_cudagraph.caches.keys import index_directory_name

    pytester.makepyfile(test_index=HOSTILE_INDEX)
    root = pytester.path / "cache-root"
    directories = {}
    for name in ("test_fifo", "test_dev_zero", "test_deep", "test_foreign"):
        directories[name] = root / "cache-keys" / index_directory_name(f"test_index.py::{name}")
        directories[name].mkdir(mode=0o700, parents=True)
    root.chmod(0o700)
    (root / "cache-keys").chmod(0o700)
    os.mkfifo(directories["test_fifo"] / "fxgraph-test-1.json")
    os.symlink("/dev/zero", directories["test_dev_zero"] / "fxgraph-test-1.json")
    (directories["test_deep"] / "fxgraph-test-1.json").write_text("[" * 200_000 + "]" * 200_000)
    foreign = os.getuid() == 0  # only root can give a directory to another uid
    if foreign:
        os.chown(directories["test_foreign"], 12345, 12345)
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        f"--cudagraph-cache-dir={root}",
        f"--cudagraph-report={report_path}",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        timeout=300,
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=4)
    assert result.ret == 0
    tests = json.loads(report_path.read_text())["tests"]
    notes = {name: tests[f"test_index.py::{name}"]["cache_keys"].get("note", "") for name in directories}
    ignored = "that no run of this plugin wrote (fxgraph-test-1.json: "
    assert f"{ignored}a FIFO (named pipe), not a regular file)" in notes["test_fifo"]
    assert f"{ignored}a character device, not a regular file)" in notes["test_dev_zero"]
    assert f"{ignored}not JSON: nested too deeply)" in notes["test_deep"]
    # the bad entry was replaced by this run's key; the FIFO's name now holds a regular file
    assert (directories["test_fifo"] / "fxgraph-test-1.json").is_file()
    if foreign:
        assert notes["test_foreign"] == (
            "the key index was not used (nothing read, nothing kept for the next run): cache-key index directory "
            f"{directories['test_foreign']} is owned by uid 12345, not by you (uid 0); compile caches hold code "
            "that is executed on load, so use a directory you own"
        )
        assert not any(directories["test_foreign"].glob("*.json"))
