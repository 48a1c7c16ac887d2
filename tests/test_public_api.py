"""What ``import pytest_cudagraph`` offers: the plain API, the types it hands back, the errors; and no torch."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import typing
from pathlib import Path

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


# -- one import path per public name ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_cudagraph"
REFERENCE = ROOT / "docs" / "reference.md"
_PATH = re.compile(r"`pytest_cudagraph((?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?=[`(])")


def _is_module(dotted: str) -> bool:
    """Whether ``pytest_cudagraph.<dotted>`` is a module of this checkout (a file or a package folder)."""
    path = PACKAGE.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _names_in(text: str) -> list[str]:
    """The identifiers a parenthesised list names: ``(`a`, `b(x, y)`, `C`)`` -> a, b, C."""
    return re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)[`(]", text)


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return len(text)


def documented_paths() -> dict[tuple[str, str], str]:
    """``(module, name) -> where in reference.md``: every public name the reference places in a module.

    Read from ``pytest_cudagraph.<module>.<name>``, from ``pytest_cudagraph.<module>`` followed by a
    parenthesised list of names, and from a table that follows ``In `pytest_cudagraph.<module>```.
    """
    text = REFERENCE.read_text(encoding="utf-8")
    found: dict[tuple[str, str], str] = {}
    for match in _PATH.finditer(text):
        dotted = match.group(1)[1:]
        line = text.count("\n", 0, match.start()) + 1
        where = f"docs/reference.md:{line}"
        if _is_module(dotted):
            rest = text[match.end() + 1 :]
            if rest.startswith(" ("):
                start = match.end() + 2
                for name in _names_in(text[start : _closing(text, start)]):
                    found[(dotted, name)] = where
            elif text[max(0, match.start() - 3) : match.start()] == "In ":
                table = re.match(r"[^\n]*\n\n((?:\|[^\n]*\n)+)", rest)
                for row in table.group(1).splitlines()[2:] if table else []:
                    found.update({(dotted, name): where for name in _names_in(row.split("|")[1])})
        else:
            module, _, name = dotted.rpartition(".")
            found[(module or "", name)] = where
    return found


DOCUMENTED = documented_paths()


def test_the_reference_names_the_layer_modules():
    """A sanity check of the reading itself: it finds the lower-level paths the reference lists."""
    assert ("graphs.capture", "capture_callable") in DOCUMENTED
    assert ("graphs.capture", "guarded_capture") in DOCUMENTED
    assert ("graphs.memory", "PoolMeter") in DOCUMENTED
    assert ("records.report", "build_report") in DOCUMENTED


def _layer(module: str) -> str:
    return module.split(".")[0]


@pytest.mark.parametrize(("module", "name"), sorted(DOCUMENTED), ids=[f"{m}.{n}" for m, n in sorted(DOCUMENTED)])
def test_a_documented_name_imports_from_its_documented_module(module, name):
    where = DOCUMENTED[(module, name)]
    if not module:  # the package top level: one of its lazy names
        assert name in pytest_cudagraph.__all__, f"{where}: pytest_cudagraph.{name} is not in pytest_cudagraph.__all__"
        return
    imported = importlib.import_module(f"pytest_cudagraph.{module}")
    assert hasattr(imported, name), f"{where}: {name} does not import from pytest_cudagraph.{module}"
    defined_in = getattr(getattr(imported, name), "__module__", None)
    if isinstance(defined_in, str) and defined_in.startswith("pytest_cudagraph."):
        # the module the reference names, or one of its own layer that it joins (graphs.capture: graphs.guarded)
        assert _layer(defined_in.removeprefix("pytest_cudagraph.")) == _layer(module), (
            f"{where}: {name} is defined in {defined_in}, another layer than pytest_cudagraph.{module}"
        )


def _exported(path: Path) -> set[str]:
    """The names a module's ``__all__`` lists (its public names, its own or re-exported)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def test_no_module_outside_a_names_layer_exports_it():
    """The package top level apart (its lazy names), a documented name is exported only within its own layer."""
    owners: dict[str, set[str]] = {}
    for module, name in DOCUMENTED:
        if module:
            owners.setdefault(name, set()).add(_layer(module))
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).with_suffix("")
        if relative.parts == ("__init__",):
            continue
        layer = relative.parts[0] if len(relative.parts) > 1 else relative.parts[0]
        for name in _exported(path) & set(owners):
            if layer not in owners[name]:
                wrong.append(f"{path.relative_to(ROOT)} exports {name} (documented in {sorted(owners[name])})")
    assert not wrong, "; ".join(wrong)


def test_no_top_level_module_stands_in_for_a_layer_module():
    """``pytest_cudagraph.capture`` and the like are gone: a layer module has one path, its own."""
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top <= {"__init__", "__main__", "errors", "envvars", "strategies"}
