"""docs/architecture.md keeps up with the package: one line per module, and every link to a file resolves.

"What each module owns" has a table per folder; its first column names each module
of that folder once. A module added without its line, or a line left behind by a
module that is gone, fails here. An ``__init__`` needs a line only where it holds
more than re-exports (a lazy ``__getattr__``, the plugin's options, ...).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_cudagraph"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

FOLDER_IN_HEADING = re.compile(r"`([\w/]+)/`")
MODULE_CELL = re.compile(r"^\| `(\w+)` \|")
OUTSIDE_LINK = re.compile(r"\]\((\.\./[^)\s#]+)(?:#[^)\s]*)?\)")


def _only_re_exports(path: Path) -> bool:
    """True for a module of a docstring, imports and ``__all__`` alone."""
    for statement in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, ast.Assign) and [getattr(t, "id", None) for t in statement.targets] == ["__all__"]:
            continue
        return False
    return True


def _modules_in_package() -> set[tuple[str, str]]:
    """(folder, module) for every module that needs its line; folder "" is the package's top level."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py" and _only_re_exports(path):
            continue
        folder = path.parent.relative_to(PACKAGE).as_posix()
        found.add(("" if folder == "." else folder, path.stem))
    return found


def _modules_in_doc() -> list[tuple[str, str]]:
    """(folder, module) for every row of the tables under "What each module owns", in order."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## What each module owns\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    folder = None
    for line in section.splitlines():
        if line.startswith("### "):
            match = FOLDER_IN_HEADING.search(line)
            assert match, f"name the folder of {line!r} in backticks, as `records/`"
            folder = "" if match.group(1) == "pytest_cudagraph" else match.group(1)
            continue
        cell = MODULE_CELL.match(line)
        if cell:
            assert folder is not None, f"{line!r} comes before any folder's heading"
            rows.append((folder, cell.group(1)))
    return rows


def _name(folder: str, module: str) -> str:
    return f"pytest_cudagraph/{folder + '/' if folder else ''}{module}.py"


def test_every_module_has_one_line_under_its_folder() -> None:
    in_doc = _modules_in_doc()
    twice = sorted({_name(*row) for row in in_doc if in_doc.count(row) > 1})
    missing = sorted(_name(*row) for row in _modules_in_package() - set(in_doc))
    gone = sorted(_name(*row) for row in set(in_doc) - _modules_in_package())
    assert not missing, f"docs/architecture.md, What each module owns: add a line for {missing}"
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"
    assert not twice, f"docs/architecture.md names these modules twice: {twice}"


def test_every_link_to_a_file_of_the_repository_resolves() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    targets = OUTSIDE_LINK.findall(text)
    assert targets, "architecture.md links the files of its walk-through"
    broken = sorted({target for target in targets if not (ARCHITECTURE.parent / target).resolve().is_file()})
    assert not broken, f"docs/architecture.md links files that do not exist: {broken}"
