"""Where a rank was: its Python stack, read from a faulthandler dump or an exception's traceback.

A rank blocked in a collective sits in C code (NCCL, Gloo) with the GIL released;
no Python signal handler would run there, but ``faulthandler``'s does, in C, so
the launcher sends each stuck rank SIGUSR1 before killing it and reads the dump
the rank's ``faulthandler.register`` wrote.  These functions turn a dump into a
clause such as "in all_reduce (torch/distributed/distributed_c10d.py:2950),
called from body.py:12 in tp_body `dist.all_reduce(y)`".  Plain text in, text
out: no torch.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+|\d+)")
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+)(?: in (?P<func>.+?))?\s*$')
_PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIR = sysconfig.get_paths().get("stdlib", "")


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    function: str


def parse_dump(text: str) -> list[list[Frame]]:
    """Every thread's frames in a faulthandler dump, most recent call first, in the dump's order."""
    threads: list[list[Frame]] = []
    for line in text.splitlines():
        if _THREAD.match(line.strip()):
            threads.append([])
            continue
        match = _FRAME.match(line)
        if match and threads:
            threads[-1].append(Frame(match["file"], int(match["line"]), (match["func"] or "?").strip()))
    return [frames for frames in threads if frames]


def main_thread_frames(text: str, entry: str) -> list[Frame]:
    """The frames of the thread that runs the rank (the one whose stack holds ``entry``); else the first thread."""
    threads = parse_dump(text)
    for frames in threads:
        if any(frame.function == entry for frame in frames):
            return frames
    return threads[0] if threads else []


def is_library_frame(filename: str, library_dirs: Sequence[str]) -> bool:
    """A frame of torch, of the plugin or of the standard library: not where the user's code is.

    Installed packages can live under the standard library's directory
    (``/usr/lib/python3.X/site-packages``); those are the user's unless named.
    """
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    for directory in library_dirs:
        if directory and path.startswith(directory + os.sep):
            rest = path[len(directory) :].split(os.sep)
            if directory == _STDLIB_DIR and ("site-packages" in rest or "dist-packages" in rest):
                continue
            return True
    return False


def default_library_dirs() -> list[str]:
    """torch's package directory (found without importing it), the plugin's and the standard library's."""
    import importlib.util

    dirs = [_PLUGIN_DIR, _STDLIB_DIR]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        dirs += [os.path.abspath(location) for location in spec.submodule_search_locations]
    return [d for d in dirs if d]


def _short_path(filename: str) -> str:
    """``torch/distributed/distributed_c10d.py`` rather than the whole site-packages path."""
    parts = os.path.abspath(filename).split(os.sep)
    for top in ("torch", "pytest_cudagraph"):
        if top in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(top) :])
    return os.path.basename(filename)


def describe_frame(frame: Frame) -> str:
    """``body.py:12 in tp_body `dist.all_reduce(y)```, with the source line where it can be read."""
    source = linecache.getline(frame.filename, frame.lineno).strip()
    text = f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.function}"
    return f"{text} `{source}`" if source else text


def describe_waiting(
    frames: Sequence[Frame], library_dirs: Sequence[str], skip_functions: Sequence[str] = ()
) -> str | None:
    """Where a stack was: the innermost frame, and the user's frame that called into it.

    ``frames`` are most recent first.  Frames whose function is in
    ``skip_functions`` (the harness's own entry) are never "the user's".
    """
    if not frames:
        return None
    user = next(
        (f for f in frames if not is_library_frame(f.filename, library_dirs) and f.function not in skip_functions),
        None,
    )
    inner = frames[0]
    if user is None:
        return f"in {inner.function} ({_short_path(inner.filename)}:{inner.lineno})"
    if user is inner:
        return f"at {describe_frame(user)}"
    return f"in {inner.function} ({_short_path(inner.filename)}:{inner.lineno}), called from {describe_frame(user)}"


def where_raised(exc: BaseException, library_dirs: Sequence[str], skip_functions: Sequence[str] = ()) -> str | None:
    """The innermost frame of the user's code in an exception's traceback, as ``describe_frame`` words it."""
    summary = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    for entry in reversed(summary):
        if entry.lineno is None or is_library_frame(entry.filename, library_dirs) or entry.name in skip_functions:
            continue
        return describe_frame(Frame(entry.filename, entry.lineno, entry.name))
    return None
