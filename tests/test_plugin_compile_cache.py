"""The compile_cache marker and fixture, and cache counters across pytest runs, seen from outside.

The runs that compile with Inductor are fresh pytest subprocesses
(``runpytest_subprocess``): the point is what a cache holds across interpreters.
Compiles are real and slow on the CPU, so each run does several things at once
where that stays honest (one ``-n 2`` run shows both marker modes and the xdist
sharing).  The one quick run, a usage error of the fixture that compiles nothing
with Inductor, runs in this process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# the runs' failure lines whole: the plugin fits them to the terminal (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("wide_terminal")


FWD_BWD_BODY = """
import pytest
import torch


def step():
    # drawn from the RNGs the marker seeds: equal in both passes only if seeded identically
    x = torch.randn(4, 8)
    w = torch.randn(8, 8, requires_grad=True)
    loss = torch.compile(lambda a, b: (torch.sin(a @ b) * 2).sum())(x, w)
    loss.backward()
    return loss.detach(), w.grad


@pytest.mark.compile_cache
def test_inprocess(compile_cache):
    loss, grad = step()
    compile_cache.record("loss", loss)
    compile_cache.record("grad", grad)


@pytest.mark.compile_cache(mode="subprocess")
def test_subprocess(compile_cache):
    loss, grad = step()
    compile_cache.record("loss", loss)
    compile_cache.record("grad", grad)
"""


def _report(path: Path) -> dict:
    """The report as its readers see it: each fact the file stores once spelled out where it is looked for."""
    return json.loads(path.read_text())


@pytest.mark.slow
def test_marker_cold_warm_in_both_modes_under_xdist(pytester: pytest.Pytester):
    pytester.makepyfile(test_fwd_bwd=FWD_BWD_BODY)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("-n", "2", f"--cudagraph-report={report}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    tests = _report(report)["tests"]
    assert sorted(tests) == ["test_fwd_bwd.py::test_inprocess", "test_fwd_bwd.py::test_subprocess"]
    probe_dirs = set()
    for nodeid, mode in (
        ("test_fwd_bwd.py::test_inprocess", "inprocess"),
        ("test_fwd_bwd.py::test_subprocess", "subprocess"),
    ):
        entry = tests[nodeid]
        assert entry["outcome"] == "passed"
        passes = entry["extra"]["compile_cache"]
        assert passes["mode"] == mode
        cold, warm = passes["cold"]["stats"], passes["warm"]["stats"]
        assert cold["fxgraph"]["miss"] == 2 and cold["aot_autograd"]["saved"] == 1
        assert warm["fxgraph"] == {"hit": 2, "miss": 0, "bypass": 0, "saved": 0}
        assert warm["aot_autograd"]["hit"] == 1 and warm["aot_autograd"]["miss"] == 0
        assert passes["warm"]["recorded"]["grad"] == {"shape": [8, 8], "dtype": "float32"}
        # the report's caches section is the whole test: cold plus warm, counted once
        assert entry["caches"]["fxgraph"]["hit"] == 2 and entry["caches"]["fxgraph"]["miss"] == 2
        owner = Path(passes["cold"]["cache_dir"]).parent.parent
        # each worker owns its probes apart: a directory named by the worker, tagged and locked
        assert owner.name.startswith(("gw0-", "gw1-")) and (owner / ".pytest-cudagraph").is_file()
        probe_dirs.add(owner.parent)
        if mode == "subprocess":
            assert passes["warm"]["process"].startswith("a fresh interpreter")
    # both workers' probes live under one cache root (…/probes/<worker>-<pid>-<token>/<test>-<n>/marked-1)
    assert len(probe_dirs) == 1 and next(iter(probe_dirs)).name == "probes"
    assert _report(report)["summary"]["caches"]["fxgraph"]["hit"] == 4


@pytest.mark.slow
def test_bypass_and_changed_outputs_fail_the_marker_with_reasons(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_bad="""
        import pytest
        import torch

        PASSES = []


        @pytest.mark.compile_cache
        def test_lambda_pass_bypasses():
            with torch._inductor.config.patch(post_grad_custom_post_pass=lambda graph: None):
                torch.compile(lambda a: a.cos() + 1)(torch.randn(8))


        @pytest.mark.compile_cache
        def test_output_changes(compile_cache):
            PASSES.append(1)
            out = torch.compile(lambda a: a.sin() * 3)(torch.ones(4)) + len(PASSES)
            compile_cache.record("out", out)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_lambda_pass_bypasses*",
            "a graph bypassed the fxgraph cache on the warm pass (@pytest.mark.compile_cache(mode='inprocess'))",
            "*fxgraph: bypass 1 on the warm pass*",
            "*what follows from *",
            "*fxgraph: no hit on the warm pass*",
        ]
    )
    # the plugin breaks failure lines at spaces to fit the terminal: the sentences are read as one text
    flat = " ".join(text.split())
    assert "bypass reason (fxgraph, warm pass): Unsupported post grad custom pass" in flat
    # verbatim where torch logs it; torch 2.6 only counts AOTAutograd's bypass, and
    # the report then says the reason was not logged instead of leaving it out
    assert "bypass reason (aot_autograd, warm pass)" in flat
    assert "subclass CustomGraphPass and return a uuid()" in flat
    # the other test hit the cache, but its warm pass recorded other values
    assert "recorded 'out': not bitwise equal: 4 of 4 elements differ" in text
    assert "a hit that loads the wrong artifact gives other outputs" in text
    # failures are the plugin's own message, in the call phase, without a torch traceback
    assert "Traceback" not in text and "ERROR" not in text


@pytest.mark.slow
def test_disabled_caches_fail_the_marker_with_the_variable_named(pytester: pytest.Pytester, monkeypatch):
    pytester.makepyfile(
        """
        import pytest
        import torch

        @pytest.mark.compile_cache
        def test_model():
            torch.compile(lambda a: a + 1)(torch.ones(2))
        """
    )
    monkeypatch.setenv("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*compile_cache: @pytest.mark.compile_cache(mode='inprocess') cannot show a warm start because the compile "
            "caches are disabled: *force_disable_caches is True (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1); unset that*"
        ]
    )


KILLED_MODEL = '''
import os
import signal

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass


class KillOnBackward(CustomGraphPass):
    """A cacheable pass that, when asked, SIGKILLs the process while the backward graph compiles."""

    calls = 0

    def __call__(self, graph):
        KillOnBackward.calls += 1
        if os.environ.get("KILL_MID_COMPILE") and KillOnBackward.calls == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    def uuid(self):
        return "kill-on-backward-1"


def test_model():
    x = torch.randn(4, 8)
    w = torch.randn(8, 8, requires_grad=True)
    with torch._inductor.config.patch(post_grad_custom_post_pass=KillOnBackward()):
        loss = torch.compile(lambda a, b: (torch.sin(a @ b) * 2).sum())(x, w)
        loss.backward()
    assert torch.isfinite(w.grad).all()
'''


@pytest.mark.slow
def test_persistent_cache_dir_survives_a_kill_and_the_next_run_only_hits(pytester: pytest.Pytester, monkeypatch):
    """Run A is SIGKILLed inside the backward compile; B completes from what A left; C only hits.

    The test module uses no fixture or marker of the plugin: the ``caches`` counters
    are reported for every test that compiled something.
    """
    pytester.makepyfile(test_model=KILLED_MODEL)
    cache_dir = pytester.path / "cache"
    # No plugin marker turns the AOTAutograd cache on here, and torch 2.6 leaves it
    # off by default: switch it on for every torch, as a user of that layer would.
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    monkeypatch.setenv("KILL_MID_COMPILE", "1")
    killed = pytester.runpytest_subprocess(f"--cudagraph-cache-dir={cache_dir}", "-p", "no:cacheprovider")
    assert killed.ret == -9, killed.stdout.str()
    assert list((cache_dir / "inductor" / "fxgraph").rglob("*")), "the forward graph was saved before the kill"
    assert not (cache_dir / "inductor" / "aotautograd").exists() or not any(
        p.is_file() for p in (cache_dir / "inductor" / "aotautograd").rglob("*")
    )
    monkeypatch.delenv("KILL_MID_COMPILE")

    runs = {}
    for name in ("after_kill", "warm"):
        report = pytester.path / f"{name}.json"
        result = pytester.runpytest_subprocess(
            f"--cudagraph-cache-dir={cache_dir}", f"--cudagraph-report={report}", "-p", "no:cacheprovider"
        )
        result.assert_outcomes(passed=1)
        runs[name] = _report(report)["tests"]["test_model.py::test_model"]["caches"]
    after_kill, warm = runs["after_kill"], runs["warm"]
    # the run after the kill reuses the forward entry and compiles only the rest
    assert after_kill["fxgraph"]["hit"] == 1 and after_kill["fxgraph"]["miss"] == 1
    assert after_kill["aot_autograd"]["miss"] == 1 and after_kill["aot_autograd"]["saved"] == 1
    # the next run: only hits
    assert warm["fxgraph"] == {"hit": 2, "miss": 0, "bypass": 0}
    assert warm["aot_autograd"]["hit"] == 1
    assert all(warm["aot_autograd"][k] == 0 for k in ("miss", "bypass", "saved", "guard_miss"))
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != str(cache_dir / "inductor")


# a real cold and warm compile in a pytest subprocess each; test_caches holds the same rule in-process
@pytest.mark.slow
@pytest.mark.parametrize("how", ["code", "environment"])
def test_a_layer_the_user_turned_off_is_disabled_and_the_others_are_checked(
    pytester: pytest.Pytester, monkeypatch, how
):
    """The probe does not turn the AOTAutograd cache back on: the marker checks the FX-graph cache without it.

    The pass, the record, the summary and the page say the layer was disabled; a
    warm FX-graph miss would still fail.
    """
    turn_off = "torch._functorch.config.enable_autograd_cache = False" if how == "code" else "pass"
    if how == "environment":
        monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
    pytester.makepyfile(
        f"""
        import pytest
        import torch
        import torch._functorch.config

        {turn_off}


        @pytest.mark.compile_cache
        def test_model(compile_cache):
            compile_cache.record("t", torch.compile(lambda a: a.t() * 2)(torch.ones(2, 3)))
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--cudagraph-report=run.json")
    result.assert_outcomes(passed=1)
    why = "(set in code)" if how == "code" else "(TORCHINDUCTOR_AUTOGRAD_CACHE=0)"
    reason = f"torch._functorch.config.enable_autograd_cache is False {why}"
    # the line is wrapped to the terminal's width: read the section's text as one
    section = " ".join(line.strip() for line in result.stdout.lines)
    assert f"aot_autograd cache disabled in 1 test ({reason}; first: " in section
    assert "::test_model): not checked there, the other layers were" in section
    record = json.loads((pytester.path / "run.json").read_text())["tests"]
    entry = next(iter(record.values()))["extra"]["compile_cache"]
    assert entry["warm"]["stats"]["disabled"] == {"aot_autograd": reason}
    assert entry["warm"]["stats"]["fxgraph"]["hit"] >= 1 and entry["warm"]["stats"]["fxgraph"]["miss"] == 0
    # the test's one line, under its file's line
    row = next(line for line in result.stdout.lines if line.startswith("  test_model "))
    assert " off " in f"{row} "  # the aot column (every row passed: no outcome column)


TWO_CACHE_FAILURES = """
import pytest
import torch


@pytest.mark.compile_cache
def test_a_custom_pass_bypasses(compile_cache):
    with torch._inductor.config.patch(post_grad_custom_post_pass=lambda graph: None):
        compile_cache.record("out", torch.compile(lambda x: x.relu() + 1)(torch.randn(8)))


@pytest.mark.compile_cache
def test_caches_disabled_by_config(compile_cache):
    with torch._inductor.config.patch(force_disable_caches=True):
        compile_cache.record("out", torch.compile(lambda x: x.sin() * 2)(torch.randn(8)))
"""


@pytest.mark.slow
def test_a_failure_table_holds_its_own_tests_counts_and_names_the_setting_in_effect(pytester: pytest.Pytester):
    """Run after a test that bypassed the cache, the disabled test's table shows its own counts, and why."""
    pytester.makepyfile(test_two=TWO_CACHE_FAILURES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    section = text.split("test_caches_disabled_by_config ___")[1].split("short test summary")[0].split("\n___")[0]
    assert "force_disable_caches was True while the test compiled" in section
    assert "compiled nothing with Inductor" not in section
    assert "fx_graph_cache=False" not in section  # the setting in play, not a list of candidates
    counters = ("hit", "miss", "bypass", "saved")
    rows = [line.split() for line in section.splitlines() if line.split()[:1] == ["fxgraph"]]
    rows = [row for row in rows if row[1] in counters]
    assert rows and all(row[2:4] == ["0", "0"] for row in rows), rows  # nothing of the test before


CHILD_REPORT_BODY = """
import pytest
import torch


@pytest.mark.compile_cache(mode="subprocess")
def test_warm_pass_in_a_child(compile_cache):
    compile_cache.record("t", torch.compile(lambda a: a.t())(torch.arange(6.0).reshape(2, 3)))
"""

COUNT_REPORTS = """
import os


def pytest_cudagraph_update_env(config, env):
    # called once per report built: a child pytest that built one would add a line
    with open(os.path.join(str(config.rootpath), "reports-built.txt"), "a") as fh:
        fh.write(f"{os.getpid()}\\n")
"""


@pytest.mark.slow
def test_the_warm_pass_child_never_writes_the_runs_report_from_addopts(pytester: pytest.Pytester):
    pytester.makepyfile(test_child=CHILD_REPORT_BODY)
    pytester.makeconftest(COUNT_REPORTS)
    pytester.makeini("[pytest]\naddopts = --cudagraph-report=run.json -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert len((pytester.path / "reports-built.txt").read_text().split()) == 1  # the parent's alone
    passes = _report(pytester.path / "run.json")["tests"]["test_child.py::test_warm_pass_in_a_child"]
    marker = passes["extra"]["compile_cache"]
    assert marker["cold"]["process"] == "this interpreter" and marker["warm"]["process"] != "this interpreter"


FIXTURE_WITHOUT_MARKER = """
import pytest
import torch


def test_fixture_without_marker_compiles(compile_cache):
    fn = torch.compile(lambda x: torch.sin(x) * 3.0, backend="eager")
    compile_cache.record("out", fn(torch.randn(3)))


def test_fixture_without_marker_reads_its_counters(compile_cache):
    assert compile_cache.stats().fxgraph["hit"] == 0  # the fixture's other uses need no marker
"""


# in this process: the suite compiles with the eager backend only, and nothing checked here is about a fresh interpreter
def test_record_of_the_fixture_without_the_marker_fails_naming_the_fix(dynamo_modules_loaded, pytester):
    pytester.makepyfile(test_record=FIXTURE_WITHOUT_MARKER)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1 and outcomes.get("passed") == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*compile_cache.record() compares the cold and warm passes of @pytest.mark.compile_cache; this test "
            "has no such marker, so nothing would be compared: add the marker, or use "
            "compile_cache.cold_warm(fn, ...)*",
            "FAILED test_record.py::test_fixture_without_marker_compiles*",
        ]
    )
    result.stdout.no_fnmatch_line("*pytest_cudagraph/caches/probe.py*")  # no traceback from inside the plugin
