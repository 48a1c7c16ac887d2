"""What ``import pytest_cudagraph`` offers: the plain API, the types it hands back, the errors; and no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import typing

import pytest

import pytest_cudagraph
from pytest_cudagraph import errors

# entry point -> the types it and its results hand back (methods' and properties' return types)
RETURNED = {
    "capture_graphs": ["GraphSet", "GraphReplayCheck", "PoolCheck", "CapturedGraph", "GraphSetResult"],
    "watch_recompiles": ["RecompileWatch", "RecompileStats", "FunctionRecompiles", "GraphBreaks"],
    "cache_probe": ["CacheProbe", "CacheStats", "ColdWarm", "PassResult", "ProbeResult"],
    "piecewise_compile": ["PiecewiseModule", "PiecewiseStats", "PiecewiseReplayCheck", "SizeCheck", "PiecewiseResult"],
    "watch_trees": ["TreeWatch", "ReduceOverheadResult"],
    "observe_graphs": ["GraphObservation", "ObservedGraphs", "ObservedCapture"],
}


def test_importing_the_package_and_the_plugin_imports_no_torch():
    code = "import sys, pytest_cudagraph, pytest_cudagraph.plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# Checked in a fresh interpreter: an in-process pytester run earlier in this session restores
# sys.modules afterwards, so a module first imported inside it is imported anew later, and the
# package's cached attribute would then name the earlier module object.
IDENTITY_CHECK = """
import json, sys, pytest_cudagraph
names = sorted(set(pytest_cudagraph.__all__) - {"__version__"})
print(json.dumps({name: getattr(pytest_cudagraph, name) is getattr(
    sys.modules["pytest_cudagraph." + pytest_cudagraph._LAZY[name]], name) for name in names}))
"""


@pytest.fixture(scope="module")
def resolved_in_a_fresh_interpreter() -> dict[str, bool]:
    out = subprocess.run([sys.executable, "-c", IDENTITY_CHECK], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("name", sorted(set(pytest_cudagraph.__all__) - {"__version__"}))
def test_every_exported_name_resolves_to_its_modules_object(name, resolved_in_a_fresh_interpreter):
    assert resolved_in_a_fresh_interpreter[name], f"pytest_cudagraph.{name} is not its module's object"


@pytest.mark.parametrize("entry", sorted(RETURNED))
def test_the_types_an_entry_point_hands_back_are_exported(entry):
    assert entry in pytest_cudagraph.__all__
    function = getattr(pytest_cudagraph, entry)
    returned = typing.get_type_hints(function)["return"]
    assert returned.__name__ == RETURNED[entry][0]
    assert set(RETURNED[entry]) <= set(pytest_cudagraph.__all__)


def test_every_error_is_exported_and_a_cudagraph_error():
    from pytest_cudagraph.plugin.markers import MarkerArgumentError

    types = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    for error in [*types, MarkerArgumentError]:
        assert error.__name__ in pytest_cudagraph.__all__
        assert issubclass(error, pytest_cudagraph.CudagraphError)


def test_every_public_exception_class_of_the_package_is_a_cudagraph_error():
    """Not only ``errors``': one a module defines for itself reaches a user too (a reader of the documented
    ``pytest_cudagraph.report`` path gets ``FileRefused``), and ``except CudagraphError`` must catch it."""
    import importlib
    import pkgutil

    outside = []
    for module_info in pkgutil.walk_packages(pytest_cudagraph.__path__, "pytest_cudagraph."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            defined_here = isinstance(value, type) and value.__module__ == module.__name__
            # an Exception: a KeyboardInterrupt of its own (startup's signal handler) is no error to catch
            if defined_here and issubclass(value, Exception) and not name.startswith("_"):
                if not issubclass(value, pytest_cudagraph.CudagraphError):
                    outside.append(f"{module.__name__}.{name}")
    assert outside == []


def test_a_malformed_field_reads_as_its_sentence():
    from pytest_cudagraph.records.validate import Malformed

    problem = Malformed(("tests", "a::t", "graphs", "sizes"), 5, "which is not a list of integers")
    assert isinstance(problem, errors.ReportError)
    assert str(problem) == problem.describe() == "tests['a::t'].graphs.sizes = 5, which is not a list of integers"


def test_misuse_is_not_the_session_start_usage_error():
    assert not issubclass(errors.MisuseError, errors.UsageProblem)
    assert not issubclass(errors.UsageProblem, errors.MisuseError)
    assert issubclass(errors.MisuseError, ValueError)
