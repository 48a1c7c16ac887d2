"""What a cache sweep varies: Inductor config entries, custom graph passes, and the config a factor changed.

``CacheProbe.sweep()`` runs a function under each of a list of *factors* (a config
patch, a global setting, an environment variable, another dtype or stride of the
inputs) and asks whether the compile caches keyed on it.  The parts that touch
torch's internals are here: patching Inductor's config by entry name, whether an
entry exists in this torch, what a factor changed in the compile configs (named
as the cache key names them, ``inductor_config[size_asserts]``), and whether this
torch has ``CustomGraphPass`` (a custom pass whose ``uuid()`` enters the key).
Everything imports torch lazily.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import warnings
from typing import Any

# The default sweep's config factors: (entry, value), each changing the code Inductor generates on
# a CPU and entering the FX-graph cache key in 2.6-2.14: the wrapper's assert_size_stride calls;
# vectorized C++ (ATen's Vectorized) or scalar loops; Inductor's own random numbers or ATen's.
DEFAULT_SWEEP_CONFIGS: tuple[tuple[str, Any], ...] = (
    ("size_asserts", False),
    ("cpp.vec_isa_ok", False),
    ("fallback_random", True),
)

# config module -> how the FX-graph / AOTAutograd key names its entries (2.6-2.14)
_KEY_COMPONENT_PREFIX = {
    "torch._inductor.config": "inductor_config",
    "torch._functorch.config": "autograd_config",
}
# the module users patch Inductor's settings with, named in the sweep's advice
INDUCTOR_CONFIG_NAME = "torch._inductor.config"

_CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")


def custom_graph_pass_missing() -> str | None:
    """What this torch lacks for a custom post-grad pass with a ``uuid()`` in the cache key; None if nothing.

    ``torch._inductor.custom_graph_pass.CustomGraphPass`` (its ``uuid()`` goes into
    the FX-graph cache key as the component named after the config entry,
    ``post_grad_custom_post_pass``) is present from 2.6; checked by name.
    """
    try:
        module = importlib.import_module("torch._inductor.custom_graph_pass")
    except ImportError:
        return "torch._inductor.custom_graph_pass (torch 2.6 and newer)"
    if not hasattr(module, "CustomGraphPass"):
        return "torch._inductor.custom_graph_pass.CustomGraphPass (torch 2.6 and newer)"
    return None


def custom_graph_pass_class() -> type:
    """``CustomGraphPass``: the base class of a custom Inductor pass that can be cached (its ``uuid()``)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    return CustomGraphPass


def has_inductor_config(entry: str) -> bool:
    """``torch._inductor.config`` has the entry ``entry`` (dotted for nested ones: ``cpp.vec_isa_ok``)."""
    import torch._inductor.config as inductor_config

    return entry in getattr(inductor_config, "_config", {})


def inductor_config_patch(values: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
    """``torch._inductor.config.patch(values)``: the entries set for the block, put back after it."""
    import torch._inductor.config as inductor_config

    # torch's config-module stub leaves patch() unannotated; it returns a ContextDecorator
    patched: contextlib.AbstractContextManager[None] = inductor_config.patch(values)
    return patched


def compile_config_values() -> dict[str, dict[str, Any]]:
    """Every entry of Dynamo's, Inductor's and functorch's configs now, the objects themselves.

    Not ``get_config_copy()``: its deep copies make a custom pass object differ
    from itself.  Entries are the keys of ``ConfigModule._config`` (2.6-2.14); a
    list, dict or set is copied (shallow), so that a change made in place shows.
    """
    out: dict[str, dict[str, Any]] = {}
    for name in _CONFIG_MODULES:
        module = importlib.import_module(name)
        values = {}
        with warnings.catch_warnings():  # reading a deprecated entry warns (2.13: three of Dynamo's)
            warnings.simplefilter("ignore")
            for entry in getattr(module, "_config", {}):
                value = getattr(module, entry, None)
                values[entry] = copy.copy(value) if isinstance(value, (list, dict, set)) else value
        out[name] = values
    return out


def config_changes_as_key_components(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """The config entries that differ between two ``compile_config_values()``, named as a cache key names them.

    ``inductor_config[size_asserts]``, ``autograd_config[donated_buffer]``; Dynamo's
    entries are in no key (they change the graph Dynamo traces) and are named
    ``torch._dynamo.config.<entry>``.
    """
    names = []
    for module_name in _CONFIG_MODULES:
        old, new = before.get(module_name, {}), after.get(module_name, {})
        for entry in list(new) + [e for e in old if e not in new]:
            if entry in old and entry in new and _same(old[entry], new[entry]):
                continue
            prefix = _KEY_COMPONENT_PREFIX.get(module_name)
            names.append(f"{prefix}[{entry}]" if prefix else f"{module_name}.{entry}")
    return names


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # values without a boolean equality: treated as changed
        return False
