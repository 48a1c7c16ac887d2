"""The layers of docs/architecture.md hold: every import of the package, module-level or inside a function, is checked.

- gateway: ``_compat`` alone touches torch's, Triton's, pytest's and xdist's internals;
- plugin layer: ``plugin/`` alone imports pytest (and xdist);
- records and offline tools: never import torch or the library, so ``compare``
  and ``show`` run on a machine without torch;
- library: never imports the plugin layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_cudagraph"

GATEWAY = ("_compat",)
PLUGIN = ("plugin",)
# JSON in, text/HTML/exit code out, plus the record and report they read
OFFLINE = (
    "compare",
    "compare_noise",
    "instructions",
    # names of environment variables and setting them: pure, read by every layer
    "envvars",
    "key_diff",
    "key_text",
    "show",
    "record_text",
    "compile_time_text",
    "html_page",
    "cli",
    "summary",
    "passes",
    "shards",
    "text",
    "report",
    "record",
    "progress",
    "errors",
    "__main__",
    "startup_bench",
)
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
    if top in GATEWAY:
        return "gateway"
    if top in PLUGIN:
        return "plugin"
    if top in OFFLINE:
        return "offline"
    return "library"


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
        if layer in ("library", "offline", "gateway") and target_layer == "plugin":
            wrong.append(f"{path.name}:{line} imports the plugin layer ({target})")
        if layer == "gateway" and target_layer not in ("gateway",) and target != "errors":
            wrong.append(f"{path.name}:{line} imports {target} (the gateway is the bottom layer; errors aside)")
        if layer == "offline" and target_layer in ("library", "gateway"):
            wrong.append(f"{path.name}:{line} imports {target} (offline tools never import the library)")
    uses_torch = [f"{path.name}:{line}" for line, name in _imports(path, module) if name.split(".")[0] == "torch"]
    if layer == "offline" and uses_torch:
        wrong.append(f"imports torch at {', '.join(uses_torch)}")
    assert not wrong, "; ".join(wrong)
