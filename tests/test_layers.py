"""The layers of docs/architecture.md hold, read from the folders: every import of the package, module-level or inside a function, is checked.

Bottom to top:

- base (``errors``, ``envvars``, ``text``): imports nothing else of the package;
- gateway (``_compat/``): alone touches torch's, Triton's, pytest's and xdist's internals;
- records (``records/``): the report and its types; base only;
- render (``render/``): every text and HTML view; records and base;
- tools (``tools/``): the commands; render, records and base, so ``compare`` and
  ``show`` run on a machine without torch;
- library (``graphs/``, ``compile/``, ``caches/``, ``piecewise/``, ``ranks/``, ``strategies``):
  the gateway, records, render and base; never the tools or the plugin;
- plugin (``plugin/``): alone imports pytest (and xdist); may use every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_cudagraph"

FOLDER_LAYERS = {
    "_compat": "gateway",
    "records": "records",
    "render": "render",
    "tools": "tools",
    "graphs": "library",
    "compile": "library",
    "caches": "library",
    "piecewise": "library",
    "ranks": "library",
    "plugin": "plugin",
}
# the top-level modules; everything else is in the folder of its layer
TOP_LEVEL = {
    "__init__": "entry",
    "__main__": "entry",
    "errors": "base",
    "envvars": "base",
    "strategies": "library",
}
# what each layer may import (besides itself)
MAY_IMPORT = {
    "base": {"base"},
    "gateway": {"base"},
    "records": {"base"},
    "render": {"base", "records"},
    "tools": {"base", "records", "render"},
    "library": {"base", "gateway", "records", "render"},
    "plugin": {"base", "gateway", "records", "render", "tools", "library", "entry"},
    "entry": {"base", "records", "render", "tools", "library"},
}
TORCHLESS = ("base", "records", "render", "tools")
PRIVATE_PREFIXES = ("torch._", "torch.utils._", "triton", "_pytest", "xdist.")


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1] or ("__init__",)
        out.append((".".join(parts), path))
    return out


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every imported module name (absolute), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # the package a relative import starts from (a package's __init__ is named after the package)
    package = ["pytest_cudagraph", *module.split(".")[: None if path.name == "__init__.py" else -1]]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
                found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
            else:
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
                found.append((node.lineno, node.module or ""))
    return found


def _private_attribute_uses(path: Path) -> list[tuple[int, str]]:
    """``torch._dynamo.reset()`` after a plain ``import torch``: attribute chains that reach a private name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = []
            current: ast.AST = node
            while isinstance(current, ast.Attribute):
                chain.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id == "torch":
                dotted = ".".join(["torch", *reversed(chain)])
                if dotted.startswith(("torch._", "torch.utils._")) and not dotted.startswith("torch.__"):
                    uses.append((node.lineno, dotted))
    return uses


def _layer(module: str) -> str:
    top = module.split(".")[0]
    if top in FOLDER_LAYERS:
        return FOLDER_LAYERS[top]
    if top in TOP_LEVEL:
        return TOP_LEVEL[top]
    if not (PACKAGE / f"{top}.py").exists() and not (PACKAGE / top).is_dir():
        return "entry"  # a name the package's __init__ defines (``__version__``, the plain API)
    raise AssertionError(f"pytest_cudagraph/{top}.py is in no layer: put it in the folder of its layer")


MODULES = _modules()


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_only_the_gateway_touches_internals(module: str, path: Path) -> None:
    if _layer(module) == "gateway":
        return
    leaks = [f"{path.name}:{line} {name}" for line, name in _imports(path, module) if name.startswith(PRIVATE_PREFIXES)]
    leaks += [f"{path.name}:{line} {name}" for line, name in _private_attribute_uses(path)]
    assert not leaks, "ask pytest_cudagraph._compat for the capability instead: " + ", ".join(sorted(set(leaks)))


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_only_the_plugin_layer_imports_pytest(module: str, path: Path) -> None:
    if _layer(module) in ("plugin", "gateway"):
        return
    uses = [f"{path.name}:{line}" for line, name in _imports(path, module) if name.split(".")[0] == "pytest"]
    assert not uses, f"{module} imports pytest at " + ", ".join(uses)


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_dependencies_point_down(module: str, path: Path) -> None:
    layer = _layer(module)
    imported = [
        (line, name.removeprefix("pytest_cudagraph."))
        for line, name in _imports(path, module)
        if name.startswith("pytest_cudagraph.")
    ]
    wrong = []
    for line, target in imported:
        target_layer = _layer(target)
        if target_layer != layer and target_layer not in MAY_IMPORT[layer]:
            wrong.append(f"{path.name}:{line} imports {target} ({layer} never imports {target_layer})")
    uses_torch = [f"{path.name}:{line}" for line, name in _imports(path, module) if name.split(".")[0] == "torch"]
    if layer in TORCHLESS and uses_torch:
        wrong.append(f"imports torch at {', '.join(uses_torch)} ({layer} runs without torch)")
    assert not wrong, "; ".join(wrong)


def test_every_top_level_module_is_in_a_layer() -> None:
    top = {path.stem for path in PACKAGE.glob("*.py")}
    folders = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert top <= set(TOP_LEVEL), f"put {sorted(top - set(TOP_LEVEL))} in the folder of its layer"
    assert folders == set(FOLDER_LAYERS), f"folders without a layer: {sorted(folders ^ set(FOLDER_LAYERS))}"
    assert len(TOP_LEVEL) <= 8
