"""Where in the user's code something happened: the first frame outside torch, the plugin and Python itself.

A recompile, a graph break or a failed capture is raised or logged deep inside
torch; the line a user can act on is the one in their own code that called into
it (a helper's ``return model(x)``, a test's ``f(x)``).  :func:`user_call_site`
walks the live stack outward from the caller, :func:`innermost_user_frame` walks
an exception's traceback inward; both skip:

* torch's package and this plugin's,
* Python's standard library (``logging`` emits the records the watches read),
* code with no file (``<frozen ...>``, ``<string>``),
* the frames a caller names (the compiled function itself, whose frame Dynamo is
  about to run when it decides to recompile: the call site is its caller).

Nothing here imports torch: torch's directory is found from its import spec.
"""

from __future__ import annotations

import importlib.util
import inspect
import linecache
import os
import re
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from types import FrameType, TracebackType
from typing import Any

__all__ = [
    "CallSite",
    "in_function",
    "is_library_file",
    "relative_path",
    "innermost_user_frame",
    "resumed_function",
    "same_statement",
    "user_call_site",
]


@dataclass(frozen=True)
class CallSite:
    """A line of the user's code: ``file`` (relative to the working directory when inside it), ``line``, ``code``."""

    file: str
    line: int
    code: str
    function: str

    @property
    def label(self) -> str:
        """``tests/test_model.py:42``."""
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        """``tests/test_model.py:42 `return f(x)```, the form the failure messages print."""
        return f"{self.label} `{self.code}`" if self.code else self.label

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "code": self.code, "function": self.function}


def relative_path(filename: str) -> str:
    """``filename`` relative to the working directory when inside it, so reports match across checkouts."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if rel.startswith("..") else rel


@lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    # the package's own directory (this module sits one folder down, in compile/)
    dirs = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        dirs.append(os.path.dirname(os.path.abspath(spec.origin)))
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.append(os.path.abspath(path))
    # site-packages lives under the stdlib directory on most layouts: it is user code here
    return tuple(dict.fromkeys(d.rstrip(os.sep) + os.sep for d in dirs))


@lru_cache(maxsize=1)
def _library_files() -> frozenset[str]:
    # typing_extensions' @deprecated wrapper, which torch puts around the functions it deprecates
    # (dist.all_gather_into_tensor): a single module in site-packages whose frame is never the user's line
    spec = importlib.util.find_spec("typing_extensions")
    return frozenset({os.path.abspath(spec.origin)} if spec is not None and spec.origin else ())


@lru_cache(maxsize=1)
def _site_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(
        dict.fromkeys(os.path.abspath(paths[k]).rstrip(os.sep) + os.sep for k in ("purelib", "platlib") if k in paths)
    )


@lru_cache(maxsize=4096)
def is_library_file(filename: str) -> bool:
    """True for torch's, the plugin's and the standard library's files, typing_extensions', and code with no file."""
    if not filename or filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    ours_or_torch = _library_dirs()[:2]
    if any(path.startswith(d) for d in ours_or_torch) or path in _library_files():
        return True
    if any(path.startswith(d) for d in _site_dirs()):
        return False  # another package (transformers, timm, the user's installed project)
    return any(path.startswith(d) for d in _library_dirs()[2:])


def _site(filename: str, line: int, function: str, code: str | None = None) -> CallSite:
    if code is None:
        code = linecache.getline(filename, line).strip()
    return CallSite(relative_path(filename), line, code.strip(), function)


def user_call_site(
    skip: Callable[[FrameType], bool] | None = None, *, start: FrameType | None = None
) -> CallSite | None:
    """The innermost frame of the running stack that is the user's, or None.

    ``skip(frame)`` leaves out more frames (the compiled function's own).  Walks
    from ``start`` (default: the caller of this function) outward.
    """
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not is_library_file(code.co_filename) and not (skip is not None and skip(frame)):
            return _site(code.co_filename, frame.f_lineno or code.co_firstlineno, code.co_name)
        frame = frame.f_back
    return None


def innermost_user_frame(
    tb: TracebackType | None, skip: Callable[[str], bool] | None = None
) -> traceback.FrameSummary | None:
    """The innermost frame of a traceback that is the user's; ``skip(filename)`` leaves out more files."""
    for frame in reversed(traceback.extract_tb(tb) if tb is not None else []):
        if is_library_file(frame.filename) or (skip is not None and skip(frame.filename)):
            continue
        return frame
    return None


# Dynamo runs the code after a graph break as a function it made, named after the one it continues.
RESUME_FUNCTION = re.compile(r"^torch_dynamo_resume_in_(?P<function>\w+?)_at_\d+$")


def resumed_function(name: str) -> str | None:
    """``"step"`` for Dynamo's ``torch_dynamo_resume_in_step_at_12``; None for any other name."""
    match = RESUME_FUNCTION.match(name)
    return match["function"] if match else None


# ----------------------------------------------------------------------------
# stack traces torch kept from another compile
# ----------------------------------------------------------------------------
# Inductor's FX graph cache serves the code, the line map and the reasons another
# function compiled to the same graph wrote: their file:line name that function.
# A line is trusted only inside a function on the live stack; else the same
# statement is looked up in it.


def function_lines(code: Any) -> range:
    """The lines of ``code``'s function in its file, read from the source.

    Not from the code object's line table: Dynamo runs a frame with rewritten
    bytecode whose table may name only the ``def`` line.
    """
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno
    if not lines or first > len(lines):
        return range(first, first + 1)
    try:
        block = inspect.getblock(lines[first - 1 :])
    except Exception:  # tokenize errors on odd source: the def line alone
        block = lines[first - 1 : first]
    return range(first, first + max(1, len(block)))


def in_function(code: Any, filename: str, line: int) -> bool:
    """Whether ``filename:line`` is a line of ``code``'s function."""
    return os.path.abspath(code.co_filename) == os.path.abspath(filename) and line in function_lines(code)


def _statement(filename: str, line: int) -> str:
    return linecache.getline(filename, line).split("#", 1)[0].strip()


def same_statement(codes: Iterable[Any], filename: str, line: int) -> tuple[str, int, str] | None:
    """``(file, line, function)`` of the line of ``codes``' functions that reads like ``filename:line``, or None.

    The innermost function (the last of ``codes``) is searched first; comments are ignored.
    """
    wanted = _statement(filename, line)
    if not wanted:
        return None
    for code in reversed(list(codes)):
        for number in function_lines(code):
            if _statement(code.co_filename, number) == wanted:
                return code.co_filename, number, code.co_name
    return None
