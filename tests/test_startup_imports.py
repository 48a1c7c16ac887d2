"""What a run that uses no plugin feature loads of the package: the hook modules, and nothing else.

pytest loads ``pytest_cudagraph.plugin`` in every run, so each module it imports is
paid by every suite (under ``PYTHONDONTWRITEBYTECODE`` pytest rewrites each of them
again in every run).  The gateway's submodules, the library, records beyond a
test's record, render and tools load on first use.  Each check runs in a fresh
interpreter, and lists the modules exactly: a module added to the start-up path
fails here until it is either deferred or added on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent

# the plugin's hook modules and what they need to register their hooks
HOOK_MODULES = {
    "pytest_cudagraph",
    "pytest_cudagraph._compat",  # the gateway's package only: its capabilities load on first use
    "pytest_cudagraph.envvars",
    "pytest_cudagraph.errors",
    "pytest_cudagraph.text",
    "pytest_cudagraph.graphs",
    "pytest_cudagraph.graphs.open_objects",
    "pytest_cudagraph.records",
    "pytest_cudagraph.records.progress",
    "pytest_cudagraph.records.record",
    "pytest_cudagraph.plugin",
    "pytest_cudagraph.plugin.collection",
    "pytest_cudagraph.plugin.fixtures",
    "pytest_cudagraph.plugin.handles",
    "pytest_cudagraph.plugin.items",
    "pytest_cudagraph.plugin.marker_checks",
    "pytest_cudagraph.plugin.markers",
    "pytest_cudagraph.plugin.pytest_split",
    "pytest_cudagraph.plugin.rank_fixture",
    "pytest_cudagraph.plugin.recording",
    "pytest_cudagraph.plugin.session",
    "pytest_cudagraph.plugin.startup",
    "pytest_cudagraph.plugin.state_isolation",
    "pytest_cudagraph.plugin.torch_trace",
    "pytest_cudagraph.plugin.xdist",
}

LOADED = """
    import json, sys
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("pytest_cudagraph", "torch", "msgspec"))))
"""


def loaded_after(code: str, cwd: Path) -> set[str]:
    env = dict(os.environ)
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


def test_a_run_that_uses_no_plugin_feature_loads_no_gateway_capability_nor_library(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    body = ["import pytest", ""]
    for t in range(4):
        body.append(f"@pytest.mark.parametrize('x', [1, 2])\ndef test_{t}(x):\n    assert x\n")
    (tmp_path / "test_plain.py").write_text("\n".join(body))
    code = """
        import pytest
        code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_plain.py"])
        assert code == 0, code
    """
    # the hook specifications are registered at start-up too, and torch_trace's wrapper of the test loop (run
    # under --collect-only as well) reads the name of torch's trace logger from the gateway's dynamo module
    expected = HOOK_MODULES | {"pytest_cudagraph.plugin.hookspecs", "pytest_cudagraph._compat.dynamo"}
    assert loaded_after(code, tmp_path) == expected
    # collection only (what bench_startup_instructions.py counts): the same
    code = code.replace('"-q",', '"-q", "--collect-only",')
    assert loaded_after(code, tmp_path) == expected


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
