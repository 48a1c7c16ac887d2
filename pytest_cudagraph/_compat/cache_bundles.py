"""Mega-Cache bundles read as torch loads them, and ``torch.compiler.precompile`` artifacts.

A bundle is what ``torch.compiler.save_cache_artifacts()`` returns: a version word,
then one section per ``save`` call and artifact type (``inductor``,
``aot_autograd``, ``autotune``, ``pgo``, ``precompile``), each a list of
``(key, content)``.  ``load_cache_artifacts()`` reads the sections into a dict by
type (``CacheArtifactManager.deserialize``), so where one process saved twice the
bundle holds a type twice and a load keeps only the last section of each
(measured on torch 2.13.0 and 2.14.1: a process that compiled f, saved, compiled g
and saved again wrote a bundle whose load held g alone, while the second save's
``CacheInfo`` listed both).  ``bundle_sections`` reads every section;
``loaded_sections`` keeps what a load keeps.

What a save holds (measured on torch 2.13.0+cpu and 2.14.1 on a CPU): each artifact
this process compiled, and each one a lookup hit here (FX-graph and AOTAutograd
lookups record the entry they hit); an artifact ``load_cache_artifacts()`` wrote
that no lookup hit is left out of the next save.
"""

from __future__ import annotations

import pickle
from typing import Any

from .cache_lookups import _torch_version

# torch's artifact type -> the report's layer
BUNDLE_LAYERS = {
    "inductor": "fxgraph",
    "aot_autograd": "aot_autograd",
    "autotune": "autotune",
    "pgo": "pgo",
    "precompile": "precompile",
}
# the Triton kernels bundled inside each FX-graph entry (Inductor's Triton bundler, 2.6+): a layer of their own
TRITON_LAYER = "triton"
# torch versions whose re-recording on a hit was measured (2.13.0 and 2.14.1, a CPU)
_MEASURED_RERECORDING = ((2, 13), (2, 14))


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def bundle_rerecording() -> str:
    """One sentence: what this torch puts in a save after a bundle was loaded (for a failure's hint)."""
    version = torch_version()
    if _torch_version(version) in _MEASURED_RERECORDING:
        return (
            f"torch {version} re-records a loaded artifact only when a lookup hits it in the process that saves: "
            "one loaded but not hit there is left out of that save"
        )
    return (
        f"torch {version} was not measured here; torch 2.13 and 2.14 re-record a loaded artifact only when a "
        "lookup hits it in the process that saves"
    )


def bundle_sections(blob: bytes) -> list[tuple[str, list[tuple[str, int]]]]:
    """Every section of a saved bundle, in order: (torch's artifact type, [(key, bytes)]).

    Triton kernels bundled in an FX-graph entry come as an extra section of type
    ``"triton"`` after it (key ``kernel hash``, bytes of its files).  Raises
    ValueError when the bytes are not a bundle this torch can read.
    """
    from torch.compiler._cache import CacheArtifactManager, _deserialize_single_cache
    from torch.utils._appending_byte_serializer import AppendingByteSerializer

    CacheArtifactManager._ensure_cache_artifacts_registered()
    try:
        raw = AppendingByteSerializer.to_list(blob, deserialize_fn=_deserialize_single_cache)
    except Exception as exc:
        raise ValueError(f"not a Mega-Cache bundle of torch {torch_version()} ({type(exc).__name__}: {exc})") from None
    sections: list[tuple[str, list[tuple[str, int]]]] = []
    for artifact_type, artifacts in raw:
        sections.append((artifact_type, [(a.key, len(a.content)) for a in artifacts]))
        if artifact_type == "inductor":
            kernels = [kernel for a in artifacts for kernel in _triton_kernels(a.content)]
            sections.append((TRITON_LAYER, kernels))
    return sections


def _triton_kernels(content: bytes) -> list[tuple[str, int]]:
    """The Triton kernels an FX-graph entry carries (``CompiledFxGraph._triton_bundle``): (hash, bytes) each."""
    try:
        graph = pickle.loads(content)  # the bundle this process just saved or was given to check
    except Exception:
        return []
    bundle = getattr(graph, "_triton_bundle", None)
    kernels = []
    for kernel in getattr(bundle, "kernel_artifacts", None) or ():
        size = sum(len(getattr(file, "payload", b"")) for file in getattr(kernel, "artifacts", ()))
        kernels.append((str(getattr(kernel, "kernel_hash", "?")), size))
    return kernels


def loaded_sections(sections: list[tuple[str, list[tuple[str, int]]]]) -> dict[str, list[tuple[str, int]]]:
    """What ``load_cache_artifacts()`` writes of those sections: the last section of each type wins."""
    kept: dict[str, list[tuple[str, int]]] = {}
    for index, (artifact_type, artifacts) in enumerate(sections):
        if artifact_type == TRITON_LAYER:
            continue  # the kernels ride in the FX-graph section before them: kept when it is
        kept[artifact_type] = artifacts
        if artifact_type == "inductor":
            following = sections[index + 1] if index + 1 < len(sections) else None
            kept[TRITON_LAYER] = following[1] if following and following[0] == TRITON_LAYER else []
    return kept


# --------------------------------------------------------------------------
# torch.compiler.precompile (torch 2.14+)
# --------------------------------------------------------------------------


def precompile_missing() -> str | None:
    """What this torch lacks for ``torch.compiler.precompile`` (one line naming the version); None if nothing."""
    import torch

    api = getattr(torch.compiler, "precompile", None)
    if api is None or not hasattr(api, "load"):
        return f"torch {torch.__version__} has no torch.compiler.precompile (torch 2.14 and newer)"
    return None


def precompile(fn: Any, *args: Any) -> tuple[str, bytes]:
    """``torch.compiler.precompile(fn, *args)``: the self-contained Python source and its cache."""
    import torch

    python_code, cache = torch.compiler.precompile(fn, *args)  # type: ignore[attr-defined]
    return str(python_code), bytes(cache)


def load_precompiled(python_code: str, cache: bytes) -> Any:
    """``torch.compiler.precompile.load(python_code, cache)``: the runnable (the cache primes Inductor's)."""
    import torch

    return torch.compiler.precompile.load(python_code, cache)  # type: ignore[attr-defined]


def precompile_error_class() -> type[BaseException] | None:
    """``torch.compiler.PrecompileError`` where this torch has it."""
    import torch

    error = getattr(torch.compiler, "PrecompileError", None)
    return error if isinstance(error, type) else None
