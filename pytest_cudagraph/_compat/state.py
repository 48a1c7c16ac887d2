"""Global torch state a plugin test must leave as it found it (isolation.py).

Dynamo's, Inductor's and functorch's configs, the compile stance, the default device and
Dynamo's per-code caches; everything imports torch lazily.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch

# The config modules a test may change and the plugin puts back (ConfigModule, 2.6-2.14);
# functorch's holds the AOTAutograd cache switch, which a leak would make a later test's
# compile_cache marker blame on that test's user.
_ISOLATED_CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")


def compile_config_snapshot() -> dict[str, dict[str, Any]]:
    """Copies of Dynamo's, Inductor's and functorch's configs: ``{"torch._dynamo.config": {key: value}, ...}``.

    ``ConfigModule.get_config_copy()`` (2.6-2.14) returns every entry's current value.
    """
    return {name: importlib.import_module(name).get_config_copy() for name in _ISOLATED_CONFIG_MODULES}


def restore_compile_config(snapshot: dict[str, dict[str, Any]]) -> list[str]:
    """Set back every config entry that changed since ``snapshot``; returns ``"module.key"`` of each.

    Only the changed keys are set, so entries nobody touched keep torch's own
    bookkeeping (a value set in code stays distinguishable from a default).
    """
    restored: list[str] = []
    for name in _ISOLATED_CONFIG_MODULES:
        module = importlib.import_module(name)
        before = snapshot[name]
        for key, value in module.get_config_copy().items():
            if key in before and not _same(value, before[key]):
                setattr(module, key, before[key])
                restored.append(f"{name}.{key}")
    return restored


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # values without a boolean equality (tensors): treat as changed
        return False


def compile_stance() -> Any | None:
    """The active ``torch.compiler.set_stance`` setting, or None where torch has no stances.

    ``set_stance`` (2.6+) keeps the setting in ``torch._dynamo.eval_frame._stance``,
    a small dataclass replaced on every change; a test that calls ``set_stance``
    without its context manager leaves it changed for every later test.
    """
    from torch._dynamo import eval_frame

    return getattr(eval_frame, "_stance", None)


def restore_compile_stance(stance: Any) -> None:
    from torch._dynamo import eval_frame

    if stance is not None and getattr(eval_frame, "_stance", None) is not stance:
        eval_frame._set_stance(stance)


def default_device_setting() -> Any | None:
    """What ``torch.set_default_device`` was last given (a ``torch.device``), or None if unset.

    ``torch.get_default_device()`` answers ``cpu`` both when nothing was set and after
    ``set_default_device("cpu")``; the two differ (the second installs a function mode
    that slows every torch call), so the setting itself is read: the 2.6-2.14 home is
    ``torch._GLOBAL_DEVICE_CONTEXT.device_context``.
    """
    import torch

    context = getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)
    return getattr(context, "device", None)


def dynamo_cache_entry_counts() -> dict[int, int]:
    """Compiled entries per code object Dynamo has seen: ``{id(code): entries}``.

    Dynamo keeps the code objects it processed in ``convert_frame.input_codes`` (weak
    references) and their compiled entries on the code object itself; both are read
    the same way in 2.6-2.14.  A change in this map between two points means something
    was compiled, recompiled or reset in between.
    """
    from torch._dynamo import convert_frame, eval_frame

    counts: dict[int, int] = {}
    for ref in list(convert_frame.input_codes.seen):
        code = ref()
        if code is not None:
            counts[id(code)] = len(eval_frame._debug_get_cache_entry_list(code))
    return counts


def tensor_version(tensor: torch.Tensor) -> int | None:
    """The tensor's version counter (every in-place write bumps it), or None where it keeps none.

    ``Tensor._version`` (2.6-2.14) counts in-place ops, ``out=`` writes and, for a
    compiled function, the mutations AOTAutograd applies to its inputs.  Inference
    tensors (made under ``torch.inference_mode``) keep no counter: reading it raises.
    """
    try:
        return int(tensor._version)
    except RuntimeError:
        return None
