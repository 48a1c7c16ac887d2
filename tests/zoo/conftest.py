"""The model zoo: real architectures at real widths, captured on the GPU (docs/zoo.md).

The GPU tests are marked ``cudagraph``: without ``--cudagraph`` (and a CUDA device)
they skip before any model library is imported, so the zoo costs the README's CPU
run its collection and a few CPU checks at tiny widths.  A test whose model comes
from a library that is not installed (transformers, timm, torchvision) skips with
the reason; nothing is downloaded, every model is built from its config with random
weights.

    pytest tests/zoo --cudagraph-require-gpu -n 2 --cudagraph-devices=auto --cudagraph-report=zoo-gpu.json
"""

from __future__ import annotations

import pytest

INSTALL = {
    "transformers": "pip install transformers",
    "timm": "pip install timm",
    "torchvision": "pip install torchvision",
}


@pytest.fixture(autouse=True)
def zoo_library(request):
    """Skip a zoo test whose model's library is not installed; the library module otherwise."""
    callspec = getattr(request.node, "callspec", None)
    spec = callspec.params.get("spec") if callspec is not None else None
    if spec is None:
        return None
    return pytest.importorskip(
        spec.library, reason=f"the zoo's {spec.name} model needs {spec.library} ({INSTALL[spec.library]})"
    )
