"""The steps a pair of passes is made of, as ``cold_warm``, ``portable``, ``relocate`` and ``sweep`` run them on a probe.

``CacheProbe`` (``probe``) is the front: its ``cold_warm()``, ``portable()``,
``relocate()`` and ``sweep()`` hand themselves to those modules, which need only
these steps of it.  Typed here, below all five, so that none of them imports the probe.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from .arguments import PassArguments
from .results import PassResult


class PassSteps(Protocol):
    """What ``CacheProbe`` offers a runner of passes: fresh directories, and a pass here or in a fresh interpreter."""

    def new_pass_directory(self, label: str) -> Path: ...

    def _use_directory(self, directory: Path) -> AbstractContextManager[None]: ...

    def run_pass(self, name: str, call: Callable[[], Any], seed: int, directory: Path) -> PassResult: ...

    def run_pass_on_copy(
        self, name: str, fn: Callable[..., Any], arguments: PassArguments, seed: int, directory: Path
    ) -> PassResult: ...

    def run_child_pass(
        self, cmd: list[str], *, out_path: Path, what: str, env: dict[str, str], cwd: str, name: str = "warm"
    ) -> PassResult: ...

    def read_child_pass(self, out_path: Path, *, what: str, cmd: list[str], name: str) -> PassResult: ...
