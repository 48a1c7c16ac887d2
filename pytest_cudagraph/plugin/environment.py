"""What a user needs to reproduce a run: torch, Triton, CUDA, the GPU, Python, the commit.

Used for the report's ``env`` block and the header line.  torch is imported inside
``torch_environment()`` only, which runs once a test uses the plugin or a report is
asked for.  The block names versions and hardware, never environment variables or
anything else that could hold a secret; users add fields of their own through the
``pytest_cudagraph_update_env`` hook.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import __version__

# The fields every report's env block has (None where unknown); compare diffs them.
ENV_FIELDS = ("torch", "triton", "cuda", "gpu", "python", "platform", "plugin", "git_commit")

# Triton ships under these distribution names (upstream, and PyTorch's own builds).
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")


def git_commit(rootdir: Path) -> str | None:
    """The commit checked out at ``rootdir``, with ``-dirty`` when tracked files changed; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=rootdir, capture_output=True, text=True, timeout=5)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        commit = head.stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=rootdir,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # a report from uncommitted code must not claim to be that commit
    return f"{commit}-dirty" if status.returncode == 0 and status.stdout.strip() else commit


def _triton_version() -> str | None:
    # Read the installed metadata instead of importing triton: the import costs
    # seconds and fails on some CPU-only builds.
    for name in _TRITON_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    module = sys.modules.get("triton")
    return getattr(module, "__version__", None) if module is not None else None


@lru_cache(maxsize=1)
def torch_environment() -> dict[str, Any]:
    """torch, triton, cuda and gpu; computed once per process."""
    import torch

    gpu = None
    try:
        if torch.cuda.is_available():
            index = torch.cuda.current_device()
            gpu = torch.cuda.get_device_name(index)
    except RuntimeError:  # a broken driver must not stop the report
        gpu = None
    return {
        "torch": torch.__version__,
        "triton": _triton_version(),
        "cuda": torch.version.cuda,
        "gpu": gpu,
    }


def collect_environment(rootdir: Path) -> dict[str, Any]:
    """The report's ``env`` block, with every field of ENV_FIELDS present.

    Example::

        >>> collect_environment(Path("."))["torch"]
        '2.13.0+cpu'
    """
    env = dict(torch_environment())
    env.update(
        {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "plugin": __version__,
            "git_commit": git_commit(rootdir),
        }
    )
    return {name: env.get(name) for name in ENV_FIELDS}


def header_line(cache_root: str | None) -> str:
    env = torch_environment()
    return (
        f"cudagraph: torch {env['torch']}, triton {env['triton'] or 'none'}, "
        f"CUDA {env['cuda'] or 'none'}, GPU {env['gpu'] or 'none'}, "
        f"cache root {cache_root or 'torch default (no plugin cache check in this run)'}"
    )
