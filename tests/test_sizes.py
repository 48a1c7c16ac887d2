"""docs/architecture.md's size rules hold: no module over 700 lines, no class over 300, no function over 80.

A class or function is measured with ``ast`` from its ``def``/``class`` line to its
last line, both included (its decorators are not counted); a module by its lines.
Every function counts, a method or a nested function as much as a module's own.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_cudagraph"

MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 80


def _span(node: ast.AST) -> int:
    end = node.end_lineno
    assert end is not None
    return end - node.lineno + 1


def module_offenders(path: str, source: str, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``path:1 module N lines (max M)`` when the module's source is over ``limit`` lines."""
    lines = len(source.splitlines())
    return [f"{path}:1 module {lines} lines (max {limit})"] if lines > limit else []


def node_offenders(path: str, source: str, kinds: tuple[type[ast.AST], ...], limit: int) -> list[str]:
    """``path:line name N lines (max M)`` for each node of ``kinds`` in ``source`` longer than ``limit``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, kinds) and _span(node) > limit:
            name = getattr(node, "name", type(node).__name__)
            found.append((node.lineno, f"{path}:{node.lineno} {name} {_span(node)} lines (max {limit})"))
    return [message for _, message in sorted(found)]


def _sources() -> list[tuple[str, str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    assert paths, f"no module found under {PACKAGE}"
    return [(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")) for path in paths]


def _report(offenders: list[str], what: str) -> str:
    return f"{len(offenders)} {what} over the limit of docs/architecture.md's size rules:\n" + "\n".join(offenders)


def test_no_module_is_over_700_lines():
    offenders = [message for path, source in _sources() for message in module_offenders(path, source)]
    assert not offenders, _report(offenders, "module(s)")


def test_no_class_is_over_300_lines():
    offenders = [
        message
        for path, source in _sources()
        for message in node_offenders(path, source, (ast.ClassDef,), MAX_CLASS_LINES)
    ]
    assert not offenders, _report(offenders, "class(es)")


def test_no_function_is_over_80_lines():
    offenders = [
        message
        for path, source in _sources()
        for message in node_offenders(path, source, (ast.FunctionDef, ast.AsyncFunctionDef), MAX_FUNCTION_LINES)
    ]
    assert not offenders, _report(offenders, "function(s)")


SMALL_SOURCE = """\
@decorator
def short():
    return 1


class Holder:
    def long(self):
        a = 1
        b = 2
        c = 3
        return a + b + c

    async def waits(self):
        return 2
"""


def test_the_measure_counts_def_to_last_line_without_decorators_and_names_each_offender():
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    assert node_offenders("m.py", SMALL_SOURCE, functions, 2) == ["m.py:7 long 5 lines (max 2)"]
    assert node_offenders("m.py", SMALL_SOURCE, functions, 1) == [
        "m.py:2 short 2 lines (max 1)",
        "m.py:7 long 5 lines (max 1)",
        "m.py:13 waits 2 lines (max 1)",
    ]
    assert node_offenders("m.py", SMALL_SOURCE, functions, 5) == []
    assert node_offenders("m.py", SMALL_SOURCE, (ast.ClassDef,), 7) == ["m.py:6 Holder 9 lines (max 7)"]
    assert node_offenders("m.py", SMALL_SOURCE, (ast.ClassDef,), 9) == []
    assert module_offenders("m.py", SMALL_SOURCE, 13) == ["m.py:1 module 14 lines (max 13)"]
    assert module_offenders("m.py", SMALL_SOURCE, 14) == []
