"""No import cycles in the package: every module is built on the ones below it, and the imports say which.

Read with ``ast``, not by importing: every import counts, at module level, inside a
function (a lazy import) and under ``if TYPE_CHECKING:``, relative or absolute.
``from pkg import sub`` is an edge to the submodule ``pkg.sub``, not to ``pkg``'s
``__init__``; ``from pkg import name`` (a name ``pkg/__init__.py`` defines) is an
edge to ``pkg``.  Importing ``pkg.sub`` also runs ``pkg/__init__.py``, but that
implicit import of a parent is not an edge: a package's ``__init__`` re-exporting
its modules' names would otherwise close a cycle with every module of it.

One test per top-level folder of the package (the package's own top-level modules
are ``top``): a cycle fails the test of each folder it passes through.
"""

from __future__ import annotations

import ast
import graphlib
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_cudagraph"
TOP = "top"


def module_files(package: Path) -> dict[str, Path]:
    """Every module of ``package`` (a folder with ``__init__.py``) by its dotted name; a package by its own."""
    modules: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: Mapping[str, Path]
) -> set[str]:
    """The modules of ``modules`` that one import statement of ``module`` names."""
    if isinstance(node, ast.Import):
        # ``import a.b.c``: the longest of a.b.c, a.b, a that is one of the modules
        found_here = set()
        for alias in node.names:
            parts = alias.name.split(".")
            named = next(
                (".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in modules), None
            )
            if named is not None:
                found_here.add(named)
        return found_here
    if node.level:
        # a package's relative imports start from the package itself, a module's from its package
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    found: set[str] = set()
    for alias in node.names:
        submodule = f"{target}.{alias.name}"
        if submodule in modules:
            found.add(submodule)  # ``from pkg import sub``: the submodule
        elif target in modules:
            found.add(target)  # ``from pkg import name``: what pkg/__init__.py (or the module) defines
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """``module -> the package's modules it imports``, every import statement of it counted."""
    modules = module_files(package)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(module, is_package, node, modules)
        edges.discard(module)
        graph[module] = edges
    return graph


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The components of more than one module in which every module reaches every other (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _shortest_path(graph: Mapping[str, set[str]], start: str, goal: str, within: set[str]) -> list[str]:
    """The shortest import path from ``start`` to ``goal`` through ``within`` (breadth first)."""
    came_from: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            previous = came_from[node]
            while previous is not None:
                path.append(previous)
                previous = came_from[previous]
            return path[::-1]
        for step in sorted(graph.get(node, ())):
            if step in within and step not in came_from:
                came_from[step] = node
                queue.append(step)
    raise AssertionError(f"{goal} is not reachable from {start} within its component")


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Cycles that together hold every import edge that lies on a cycle: ``[a, b, a]`` each, smallest module first.

    Per edge ``a -> b`` inside a strongly connected component, the shortest way back
    from ``b`` to ``a``; the same cycle found from two of its edges is listed once.
    """
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for source in component:
            for target in sorted(graph[source] & members):
                ring = [source, *_shortest_path(graph, target, source, members)[:-1]]
                first = ring.index(min(ring))
                ring = ring[first:] + ring[:first]
                if tuple(ring) not in seen:
                    seen.add(tuple(ring))
                    cycles.append([*ring, ring[0]])
    return sorted(cycles)


def cycles_message(cycles: list[list[str]], prefix: str = "") -> str:
    """One readable message: each cycle as ``a -> b -> a``, with ``prefix`` left off the names."""
    lines = [" -> ".join(name.removeprefix(prefix) for name in cycle) for cycle in cycles]
    return f"{len(cycles)} import cycle(s):\n  " + "\n  ".join(lines)


def _layer(module: str) -> str:
    """The top-level folder a module of the package is in; ``top`` for the package's own modules."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1] / "__init__.py").is_file()):
        return parts[1]
    return TOP


def _layers() -> list[str]:
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    return [*folders, TOP]


# -- the package ---------------------------------------------------------------------------------

PACKAGE_CYCLES = import_cycles(import_graph(PACKAGE))


@pytest.mark.parametrize("layer", _layers())
def test_no_import_cycle_passes_through_the_folder(layer):
    """Where two modules need each other, the part they share belongs in a module below both."""
    mine = [cycle for cycle in PACKAGE_CYCLES if layer in {_layer(module) for module in cycle}]
    if mine:
        pytest.fail(cycles_message(mine, prefix="pytest_cudagraph."), pytrace=False)


def test_the_graph_reads_the_package_as_it_is_built():
    """A sanity check of the reading on the real package: edges it must find, and one it must not."""
    graph = import_graph(PACKAGE)
    assert "pytest_cudagraph.records.validate" in graph["pytest_cudagraph.records.report"]
    # ``from . import results as R``: the submodule, not the package that re-exports it
    assert "pytest_cudagraph.ranks.results" in graph["pytest_cudagraph.ranks.child"]
    assert "pytest_cudagraph.ranks" not in graph["pytest_cudagraph.ranks.child"]
    # a lazy import inside a function counts: ``import torch`` apart, the child's probe
    assert "pytest_cudagraph.caches.probe" in graph["pytest_cudagraph.caches.__main__"]


# -- the reading and the cycle finder, on packages written here -----------------------------------


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_lazy_import_and_a_type_checking_import_close_a_cycle(tmp_path):
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/front.py": "from .back import helper\n",
            "pkg/back.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .front import Thing\n"
                "def helper():\n    from pkg import side\n"
            ),
            "pkg/side.py": "def f():\n    import pkg.back\n",
        },
    )
    cycles = import_cycles(import_graph(package))
    assert cycles == [["pkg.back", "pkg.front", "pkg.back"], ["pkg.back", "pkg.side", "pkg.back"]]
    assert (
        cycles_message(cycles, prefix="pkg.") == "2 import cycle(s):\n  back -> front -> back\n  back -> side -> back"
    )


def test_from_a_package_a_submodule_is_the_edge_and_a_parent_is_no_edge(tmp_path):
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .sub import run\n",
            "pkg/sub/__init__.py": "from .launch import run\nfrom .results import Result\n",
            "pkg/sub/launch.py": "from . import results as R\nfrom ..base import BASE\nrun = R\n",
            "pkg/sub/results.py": "import pkg.base\nResult = 1\n",
            "pkg/base.py": "BASE = 1\n",
        },
    )
    graph = import_graph(package)
    assert graph["pkg.sub.launch"] == {"pkg.sub.results", "pkg.base"}
    assert graph["pkg.sub.results"] == {"pkg.base"}
    assert graph["pkg"] == {"pkg.sub"}
    assert import_cycles(graph) == []


def test_a_name_taken_from_a_package_s_init_is_an_edge_to_the_package(tmp_path):
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .session import start\nSTATE = {}\n",
            "pkg/session.py": "from . import STATE\ndef start():\n    return STATE\n",
        },
    )
    assert import_cycles(import_graph(package)) == [["pkg", "pkg.session", "pkg"]]


def test_each_edge_on_a_cycle_is_shown_once(tmp_path):
    # a -> b -> c -> a and b -> a: two cycles, one component
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from . import a, c\n",
            "pkg/c.py": "from .a import x\n",
        },
    )
    assert import_cycles(import_graph(package)) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


NAMES = [f"m{i}" for i in range(6)]


@given(st.dictionaries(st.sampled_from(NAMES), st.sets(st.sampled_from(NAMES)), min_size=1))
def test_cycles_are_found_exactly_when_the_graph_has_one(edges):
    graph = {name: {t for t in edges.get(name, set()) if t != name} for name in NAMES}
    cycles = import_cycles(graph)
    try:
        graphlib.TopologicalSorter(graph).prepare()
        acyclic = True
    except graphlib.CycleError:
        acyclic = False
    assert acyclic == (cycles == [])
    for cycle in cycles:
        assert cycle[0] == cycle[-1] and len(set(cycle[:-1])) == len(cycle) - 1
        assert all(b in graph[a] for a, b in zip(cycle, cycle[1:]))
    # every edge that lies on a cycle (a -> b, and b reaches a) is in one of the listed cycles
    on_cycle = {(a, b) for a in graph for b in graph[a] if a in _reachable(graph, b)}
    listed = {(a, b) for cycle in cycles for a, b in zip(cycle, cycle[1:])}
    assert on_cycle == listed


def _reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for step in graph[todo.pop()]:
            if step not in seen:
                seen.add(step)
                todo.append(step)
    return seen
