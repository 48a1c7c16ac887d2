"""Environment variables changed for a while and put back exactly as they were.

Two shapes of the same job:

- ``EnvironmentPatch`` (or the ``environment_set()`` block) sets or unsets the
  variables it is given and, on ``restore()``, puts back exactly what each of them
  was before its first change: a value, or absent;
- ``environment_snapshot(prefixes)`` / ``restore_environment_snapshot()`` take every
  variable whose name starts with one of the prefixes and later put that whole set
  back, dropping the ones added since (for state a test may have changed anywhere).

Example::

    with environment_set({"TORCHINDUCTOR_CACHE_DIR": "/tmp/probe", "TRITON_CACHE_DIR": None}):
        ...  # Inductor's cache points into /tmp/probe; TRITON_CACHE_DIR is unset
    # both are as they were
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


class EnvironmentPatch:
    """Variables set (a string) or unset (None), each restored to what it was before its first change."""

    def __init__(self) -> None:
        self._saved: dict[str, str | None] = {}

    def set(self, changes: Mapping[str, str | None]) -> None:
        """Apply ``changes``; a name changed again keeps its first saved value."""
        for name, value in changes.items():
            self._saved.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def restore(self) -> None:
        """Put every changed variable back as it was (absent ones removed); the patch is then empty."""
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved.clear()


@contextlib.contextmanager
def environment_set(changes: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) ``changes`` inside the block; restore them exactly on exit."""
    patch = EnvironmentPatch()
    try:
        patch.set(changes)
        yield
    finally:
        patch.restore()


# Names the warm pass of a ``compile_cache``-marked test in a fresh pytest reads
# (plugin/compile_cache_marker.py sets it only in the environment of the child it
# starts); never passed on to a child of a child.  Here, in a module the plugin
# loads in every run, so that a child pytest knows it is one without importing torch.
CHILD_PASS_ENV = "PYTEST_CUDAGRAPH_CACHE_PASS"
# Set by ``pytest-cudagraph startup --instructions`` in the environment of each run it
# starts under callgrind: the plugin then toggles callgrind's collection around every
# frame compile (``_compat.count_compile_instructions``).
INSTRUCTIONS_ENV = "PYTEST_CUDAGRAPH_COUNT_COMPILE_INSTRUCTIONS"


def environment_snapshot(prefixes: tuple[str, ...]) -> dict[str, str]:
    """Every variable whose name starts with one of ``prefixes``, with its value."""
    return {name: value for name, value in os.environ.items() if name.startswith(prefixes)}


def restore_environment_snapshot(snapshot: Mapping[str, str], prefixes: tuple[str, ...]) -> list[str]:
    """Make the ``prefixes`` variables exactly ``snapshot`` again; returns the names changed, sorted."""
    now = environment_snapshot(prefixes)
    changed = []
    for name in sorted(set(now) | set(snapshot)):
        if now.get(name) == snapshot.get(name):
            continue
        if name in snapshot:
            os.environ[name] = snapshot[name]
        else:
            del os.environ[name]
        changed.append(name)
    return changed
