"""What a run that uses no plugin feature loads of the package, and which of its hooks it registers.

pytest loads ``pytest_cudagraph.plugin`` in every run, so each module it imports is
paid by every suite (under ``PYTHONDONTWRITEBYTECODE`` pytest rewrites each of them
again in every run), and each hook it registers is called by every run.  Until a
run uses the plugin (``plugin/activation.py`` says what counts), it loads the
entry point, ``activation`` and the fixture modules; the run's state, the recorder,
the marker checks, the gateway, the library, records, render and tools load once a
feature is used.  Each check runs in a fresh interpreter, and lists the modules
exactly: a module added to the start-up path fails here until it is either
deferred or added on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent

# the plugin's entry point, the hooks every run registers, the fixture modules, and what they import
HOOK_MODULES = {
    "pytest_cudagraph",
    "pytest_cudagraph.plugin",
    "pytest_cudagraph.plugin.activation",
    "pytest_cudagraph.plugin.fixtures",
    "pytest_cudagraph.plugin.items",
    "pytest_cudagraph.plugin.marker_docs",
    "pytest_cudagraph.plugin.options",
    # the one rule by which a run of no test body writes nothing: it watches for pytest's test loop
    "pytest_cudagraph.plugin.ran_no_test",
    "pytest_cudagraph.plugin.run_so_far",
    "pytest_cudagraph.plugin.state_isolation",
    # the running test's slot: the record and the open-object registry take it on first use
    "pytest_cudagraph.records",
    "pytest_cudagraph.records.running",
}
# what collecting adds: the hook specifications, registered at start-up
COLLECT_MODULES = HOOK_MODULES | {"pytest_cudagraph.plugin.hookspecs"}
# what running tests adds: nothing; each test's record is made when the plain API first asks for it
RUN_MODULES = COLLECT_MODULES


LOADED = """
    import json, sys
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("pytest_cudagraph", "torch", "msgspec"))))
"""


def featureless_environment() -> dict[str, str]:
    """This process's environment without the plugin's own variables.

    The suite's own session (its cache root, its child passes) may have put some in
    ``os.environ``; a run that uses no plugin feature has none.
    """
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_CUDAGRAPH_")}


def loaded_after(code: str, cwd: Path) -> set[str]:
    env = featureless_environment()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + textwrap.dedent(LOADED)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_importing_the_plugin_loads_its_hook_modules_only(tmp_path):
    assert loaded_after("import pytest_cudagraph.plugin", tmp_path) == HOOK_MODULES


def _plain_suite(path: Path) -> None:
    (path / "pytest.ini").write_text("[pytest]\n")
    body = ["import pytest", ""]
    for t in range(4):
        body.append(f"@pytest.mark.parametrize('x', [1, 2])\ndef test_{t}(x):\n    assert x\n")
    (path / "test_plain.py").write_text("\n".join(body))


def test_a_run_that_uses_no_plugin_feature_loads_no_gateway_capability_nor_library(tmp_path):
    _plain_suite(tmp_path)
    code = """
        import pytest
        code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_plain.py"])
        assert code == 0, code
    """
    assert loaded_after(code, tmp_path) == RUN_MODULES
    # collection only (what bench_startup_instructions.py counts)
    code = code.replace('"-q",', '"-q", "--collect-only",')
    assert loaded_after(code, tmp_path) == COLLECT_MODULES


# a run's hook implementations of the plugin, by plugin name, as pytest holds them at the end of the run
REGISTERED = """
    import json, pytest

    class Probe:
        def pytest_unconfigure(self, config):
            names = {}
            for name, plugin in config.pluginmanager.list_name_plugin():
                if plugin is not None and name.startswith("cudagraph"):
                    impls = config.pluginmanager.get_hookcallers(plugin) or []
                    names[name] = sorted(caller.name for caller in impls)
            print(json.dumps(names))

    pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", *ARGS], plugins=[Probe()])
"""


def registered_hooks(args: list[str], cwd: Path) -> dict[str, list[str]]:
    env = featureless_environment()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    code = textwrap.dedent(REGISTERED).replace("ARGS", repr(args))
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


# the plugin's hooks in a run that uses no feature: at start-up, once per module or class collected, once after
# collection, once as the test loop starts (whether the run ran test bodies at all), and the test's record around
# each phase (a test that imports torch in its body still gets one)
FEATURELESS_HOOKS = {
    "cudagraph": [
        "pytest_addhooks",
        "pytest_addoption",
        "pytest_configure",
        "pytest_report_collectionfinish",
        "pytest_report_header",
        "pytest_unconfigure",
    ],
    "cudagraph-activation": [
        "pytest_collection_modifyitems",
        "pytest_make_collect_report",
        "pytest_runtest_makereport",
        "pytest_runtest_setup",
    ],
    "cudagraph-run-so-far": ["pytest_collectreport", "pytest_deselected", "pytest_runtest_logreport"],
    "cudagraph-fixtures": [],
    "cudagraph-state-isolation": ["pytest_fixture_setup", "pytest_runtest_call", "pytest_runtest_teardown"],
    "cudagraph-ran-no-test": ["pytest_runtestloop"],
}


@pytest.mark.slow
def test_a_run_that_uses_no_plugin_feature_registers_only_the_hooks_that_look_for_one(tmp_path):
    _plain_suite(tmp_path)
    assert registered_hooks(["--collect-only"], tmp_path) == FEATURELESS_HOOKS
    assert registered_hooks([], tmp_path) == FEATURELESS_HOOKS


def test_the_gateway_resolves_a_capability_on_first_use_by_either_import_form(tmp_path):
    code = """
        import sys
        from pytest_cudagraph import _compat as compat
        assert "pytest_cudagraph._compat.cuda" not in sys.modules
        assert callable(compat.cuda_device_count)
        from pytest_cudagraph._compat import tree_map
        assert tree_map is sys.modules["pytest_cudagraph._compat.fx"].tree_map
        assert set(compat.__all__) == set(compat._CAPABILITIES) and set(compat.__all__) <= set(dir(compat))
        try:
            compat.no_such_capability
        except AttributeError as exc:
            assert "no_such_capability" in str(exc)
        else:
            raise AssertionError("an unknown name resolved")
    """
    loaded = loaded_after(code, tmp_path)
    assert {"pytest_cudagraph._compat.cuda", "pytest_cudagraph._compat.fx"} <= loaded
    assert "pytest_cudagraph._compat.guards" not in loaded and "torch" not in loaded


def test_every_capability_the_gateway_names_resolves_from_its_submodule(tmp_path):
    code = """
        import importlib
        from pytest_cudagraph import _compat as compat
        for name, module in compat._CAPABILITIES.items():
            assert getattr(compat, name) is getattr(importlib.import_module(f"pytest_cudagraph._compat.{module}"), name)
    """
    assert "torch" not in loaded_after(code, tmp_path)  # the gateway's submodules import torch on first use only
