"""``@pytest.mark.compile_cache``: run a test body cold, then warm, and check the warm pass.

Both passes get the same fixture values and the same seeds.  In ``inprocess``
mode the warm pass runs in this interpreter after every in-memory compile cache is
dropped; in ``subprocess`` mode it is ``python -m pytest <nodeid>`` in a fresh
interpreter, given this run's command-line options less the selection, reports
and xdist (``parent_options``), that joins the cold pass's cache directory (told by the
``CHILD_PASS_ENV`` variable) and sends back its counters, recorded tensors and
cache lookups.  A warm miss names the key components that differ from the cold
pass's same graph; under a persistent ``--cudagraph-cache-dir`` the failure also
says what differs from an earlier run of the test.
The probes, the passes and the invariant are the library's (``caches``); this
module is the pytest side: calling the test function, starting the child pytest,
and, in that child, running the one pass it was asked for.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .. import _compat
from ..caches.cache_root import CacheRoot
from ..caches.keys import MissExplanation
from ..caches.probe import (
    CHILD_PASS_ENV,
    DEFAULT_SEED,
    CacheProbe,
    ColdWarm,
    PassResult,
    cache_probe,
    child_environment,
    refuse_if_caches_disabled,
    write_pass_output,
)
from ..errors import MisuseError
from .items import report_nodeid
from .parent_options import parent_options
from .recording import active_lookup_log, cross_run_explanations


def run_marked_test(item: pytest.Function, marker: Any, cache_root: CacheRoot, record: Any) -> None:
    """Run a ``@pytest.mark.compile_cache`` test body cold, then warm, and check the warm pass.

    Raises InvariantViolation with the counter table when the warm pass missed,
    saved, bypassed, compiled a Triton kernel, or recorded other tensors.  In the
    child pytest of ``subprocess`` mode it runs the one warm pass and hands it back.
    """
    __tracebackhide__ = True

    def body() -> Any:
        return item.obj(**{arg: item.funcargs[arg] for arg in _compat.pyfunc_argnames(item)})

    fixture_probe = item.funcargs.get("compile_cache")
    if not isinstance(fixture_probe, CacheProbe):
        fixture_probe = None
    spec = _child_pass_spec(report_nodeid(item))
    if spec is not None:
        _run_child_test_pass(spec, body, fixture_probe)
        return

    refuse_if_caches_disabled(f"@pytest.mark.compile_cache(mode={marker.mode!r})")
    with contextlib.ExitStack() as stack:
        probe = fixture_probe or stack.enter_context(cache_probe(root=cache_root, name=item.name))
        pair_dir = probe.new_pass_directory("marked")
        cold = probe.run_pass("cold", body, DEFAULT_SEED, pair_dir)
        if marker.mode == "inprocess":
            warm = probe.run_pass("warm", body, DEFAULT_SEED, pair_dir)
        else:
            warm = _test_pass_in_child(item, probe, pair_dir, DEFAULT_SEED)
        result = ColdWarm(cold=cold, warm=warm, mode=marker.mode, cache_dir=str(pair_dir))
        record.set("caches", probe.result())
        record.note("compile_cache", result.to_json())
    across_runs = _explain_pair(item, result)
    args = [f"mode={marker.mode!r}"] + [
        f"{k}={v}" for k, v in (("rtol", marker.rtol), ("atol", marker.atol)) if v is not None
    ]
    result.check(
        rtol=marker.rtol,
        atol=marker.atol,
        context=f"@pytest.mark.compile_cache({', '.join(args)})",
        across_runs=across_runs,
    )


def _explain_pair(item: pytest.Function, result: ColdWarm) -> tuple[MissExplanation, ...]:
    """Why the passes' lookups missed: the warm pass's against the cold pass, the rest against an earlier run.

    The explanations go into the test's ``cache_keys`` record; the ones against an
    earlier run (a persistent ``--cudagraph-cache-dir``) of lookups the cold pass
    does not explain are returned for the failure message.
    """
    log = active_lookup_log(item)
    same_run = result.explanations()
    explained = {(e.lookup.pass_name, e.lookup.layer, e.lookup.graph) for e in same_run}
    across = [
        e
        for e in cross_run_explanations(item, result.cold.lookups + result.warm.lookups)
        if (e.lookup.pass_name, e.lookup.layer, e.lookup.graph) not in explained
    ]
    if log is not None:
        for explanation in same_run:
            log.annotate(explanation)
        for explanation in across:
            log.annotate(explanation, replace_existing=False)
    return tuple(across)


# ----------------------------------------------------------------------------
# the warm pass in a fresh pytest
# ----------------------------------------------------------------------------


def _child_pass_spec(nodeid: str) -> dict[str, Any] | None:
    """In the child pytest: the pass its parent asked for (CHILD_PASS_ENV); None in any other run."""
    raw = os.environ.get(CHILD_PASS_ENV)
    if not raw:
        return None
    spec = json.loads(raw)
    if spec.get("nodeid") != nodeid:
        raise MisuseError(
            f"{CHILD_PASS_ENV} asks for a warm pass of {spec.get('nodeid')} but this interpreter runs {nodeid}; "
            f"do not set {CHILD_PASS_ENV} by hand"
        )
    return spec


def _run_child_test_pass(spec: dict[str, Any], body: Callable[[], Any], fixture_probe: CacheProbe | None) -> None:
    """In the child pytest: run the one pass in the parent's cache directory and hand it back."""
    directory = Path(spec["cache_dir"])
    try:
        with contextlib.ExitStack() as stack:
            probe = fixture_probe or stack.enter_context(cache_probe(directory=directory))
            result = probe.run_pass(spec.get("pass", "warm"), body, int(spec["seed"]), directory)
    except BaseException:
        write_pass_output(spec["out"], None, error=traceback.format_exc(limit=-8))
        raise
    write_pass_output(spec["out"], result)


def _test_pass_in_child(item: pytest.Function, probe: CacheProbe, directory: Path, seed: int) -> PassResult:
    """In the parent: run the warm pass of ``item`` as ``python -m pytest <nodeid>`` and load its result."""
    out_path = directory / "warm-pass.out.pt"
    env = child_environment(directory)
    env[CHILD_PASS_ENV] = json.dumps(
        {"nodeid": report_nodeid(item), "cache_dir": str(directory), "out": str(out_path), "seed": seed, "pass": "warm"}
    )
    rootdir = Path(str(item.config.rootpath))
    # the node id as collected: xdist's --dist loadgroup suffixes item.nodeid with "@group",
    # which no fresh pytest can select
    nodeid = report_nodeid(item)
    # from where this run was started, so that a relative path among its options means what it meant
    # here; the node id (relative to the rootdir) is given from the rootdir
    path, separator, rest = nodeid.partition("::")
    selected = f"{rootdir / path}{separator}{rest}"
    cmd = _child_pytest_command(item.config, selected, rootdir, basetemp=directory / "child-basetemp")
    cwd = str(item.config.invocation_params.dir)
    return probe.run_child_pass(cmd, out_path=out_path, what=nodeid, env=env, cwd=cwd)


def _child_pytest_command(config: pytest.Config, nodeid: str, rootdir: Path, basetemp: Path) -> list[str]:
    """The command line of a child pytest that runs ``nodeid`` alone, as one interpreter, with this run's ini.

    It is given this run's own command-line options (a suite's ``--dtype``, say),
    less the selection, reports and xdist (``parent_options``).
    """
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        nodeid,
        *parent_options(config),
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        f"--rootdir={rootdir}",
        f"--basetemp={basetemp}",
    ]
    if config.inipath is not None:
        cmd += ["-c", str(config.inipath)]
    if config.pluginmanager.hasplugin("xdist"):
        cmd += ["-n", "0"]  # whatever the ini's addopts say, the child is one interpreter
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        cmd += ["-p", "pytest_cudagraph.plugin"]
    return cmd
