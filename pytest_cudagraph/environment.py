"""What a user needs to reproduce a run: torch, Triton, CUDA, the GPU, Python, the commit.

Used for the report's ``env`` block and the header line.  Imports torch, so it is
only called once a test uses the plugin (or a report is asked for).
"""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import __version__


def _git_commit(rootdir: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=rootdir, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@lru_cache(maxsize=1)
def torch_environment() -> dict[str, Any]:
    """torch, triton, cuda and gpu; computed once per process."""
    import torch

    try:
        import triton  # noqa: F401

        triton_version = triton.__version__
    except Exception:  # triton absent, or broken on a CPU-only build
        triton_version = None
    gpu = None
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(torch.cuda.current_device())
    return {
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda,
        "gpu": gpu,
    }


def collect_environment(rootdir: Path) -> dict[str, Any]:
    env = dict(torch_environment())
    env.update(
        {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "plugin": __version__,
            "git_commit": _git_commit(rootdir),
        }
    )
    return env


def header_line(cache_root: str | None) -> str:
    env = torch_environment()
    return (
        f"cudagraph: torch {env['torch']}, triton {env['triton'] or 'none'}, "
        f"CUDA {env['cuda'] or 'none'}, GPU {env['gpu'] or 'none'}, "
        f"cache root {cache_root or 'torch default (no plugin cache check in this run)'}"
    )
