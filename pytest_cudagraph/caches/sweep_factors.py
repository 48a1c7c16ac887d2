"""What a cache sweep varies: ``Factor`` (a setting, an environment variable, a change of the inputs) and the defaults.

A factor is something the compiled code may depend on.  ``CacheProbe.sweep()``
runs the function under each one and asks whether the cache key changed with it
(``sweep``).  A factor is

- a name and a zero-argument callable returning a context manager, entered around
  each run under the factor: ``{"scale=2": lambda: scale_set_to(2.0)}``; or
- a ``Factor``, which may also transform the arguments: ``Factor.config(...)``,
  ``Factor.env(...)``, ``Factor.inputs(...)``, ``dtype_factor()``, ``stride_factor()``.

``factors=None`` is ``default_factors(args)``: the Inductor config entries of
``_compat.DEFAULT_SWEEP_CONFIGS`` this torch has (each enters the FX-graph key and
changes the code Inductor generates on a CPU), then the inputs' dtype and stride
where the arguments hold a floating-point tensor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _compat as compat
from ..envvars import environment_set
from ..errors import MisuseError

# other dtypes for the dtype factor: float32 <-> float64, the half types to float32
_OTHER_DTYPE = {"float32": "float64", "float64": "float32", "float16": "float32", "bfloat16": "float32"}


@dataclass(frozen=True)
class Factor:
    """One thing the compiled code may depend on: a context entered around the run, a change of the arguments, or both.

    ``context``: a zero-argument callable returning a context manager (called once
    per run, so it may be a generator-based ``contextlib.contextmanager``).
    ``transform``: ``args -> args`` applied to the function's arguments.
    """

    name: str
    context: Callable[[], contextlib.AbstractContextManager] | None = None
    transform: Callable[[tuple], tuple] | None = None

    @classmethod
    def config(cls, entry: str, value: Any, name: str | None = None) -> Factor:
        """Inductor's config entry ``entry`` (dotted for nested ones, ``cpp.vec_isa_ok``) set to ``value``."""
        if not isinstance(entry, str) or not compat.has_inductor_config(entry):
            raise MisuseError(
                f"Factor.config({entry!r}, ...): {compat.INDUCTOR_CONFIG_NAME} has no entry {entry!r} in this torch; "
                f"give the name of an existing entry"
            )
        return cls(name or f"{entry}={value!r}", context=lambda: compat.inductor_config_patch({entry: value}))

    @classmethod
    def env(cls, variable: str, value: str | None, name: str | None = None) -> Factor:
        """The environment variable ``variable`` set to ``value`` (None: unset) for the run."""
        return cls(name or f"{variable}={value}", context=lambda: environment_set({variable: value}))

    @classmethod
    def inputs(cls, name: str, transform: Callable[[tuple], tuple]) -> Factor:
        """The arguments changed by ``transform`` (``args -> args``): another shape, dtype, stride, device."""
        return cls(name, transform=transform)

    def entered(self) -> contextlib.AbstractContextManager:
        """The factor's context for one run (a no-op when it has none)."""
        if self.context is None:
            return contextlib.nullcontext()
        manager = self.context()
        if not (hasattr(manager, "__enter__") and hasattr(manager, "__exit__")):
            raise MisuseError(
                f"sweep(): factor {self.name!r} returned {type(manager).__name__}, not a context manager; "
                f"return one, such as {compat.INDUCTOR_CONFIG_NAME}.patch(...) or a contextlib.contextmanager"
            )
        return manager

    def arguments(self, args: tuple) -> tuple:
        if self.transform is None:
            return args
        changed = self.transform(args)
        if not isinstance(changed, tuple):
            raise MisuseError(
                f"sweep(): factor {self.name!r} transformed the arguments into a {type(changed).__name__}; "
                f"return a tuple of the function's arguments"
            )
        return changed


# ----------------------------------------------------------------------------
# the input factors
# ----------------------------------------------------------------------------


def _map_floating(args: tuple, change: Callable[[Any], Any]) -> tuple:
    import torch

    return tuple(
        compat.tree_map(lambda t: change(t) if isinstance(t, torch.Tensor) and t.is_floating_point() else t, a)
        for a in args
    )


def _other_dtype(tensor: Any) -> Any:
    import torch

    other = _OTHER_DTYPE.get(str(tensor.dtype).removeprefix("torch."), "float32")
    return tensor.to(getattr(torch, other))


def _strided(tensor: Any) -> Any:
    """The same values in a non-contiguous tensor: every stride doubled (a 0-d tensor stays as it is)."""
    if tensor.dim() == 0:
        return tensor
    spread = tensor.new_empty((*tensor.shape, 2))[..., 0]
    spread.copy_(tensor)
    return spread.requires_grad_(tensor.requires_grad) if tensor.is_leaf else spread


def dtype_factor(name: str = "inputs' dtype") -> Factor:
    """Every floating-point tensor argument in another dtype (float32 <-> float64, half types to float32)."""
    return Factor.inputs(name, lambda args: _map_floating(args, _other_dtype))


def stride_factor(name: str = "inputs' stride") -> Factor:
    """Every floating-point tensor argument non-contiguous, same values: each stride doubled."""
    return Factor.inputs(name, lambda args: _map_floating(args, _strided))


def _has_floating_tensor(args: tuple) -> bool:
    import torch

    return any(
        isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.dim() > 0
        for leaf in compat.tree_leaves(args)
    )


def default_factors(args: tuple) -> tuple[Factor, ...]:
    """The default sweep: Inductor configs that change CPU code and enter the key, then the inputs' dtype and stride.

    The configs are ``_compat.DEFAULT_SWEEP_CONFIGS`` that this torch has
    (``size_asserts=False``, ``cpp.vec_isa_ok=False``, ``fallback_random=True``);
    the input factors only where the arguments hold a floating-point tensor of one
    dimension or more.  torch keys on each of them, so each should be a miss.
    """
    factors = [
        Factor.config(entry, value)
        for entry, value in compat.DEFAULT_SWEEP_CONFIGS
        if compat.has_inductor_config(entry)
    ]
    if _has_floating_tensor(args):
        factors += [dtype_factor(), stride_factor()]
    return tuple(factors)


# ----------------------------------------------------------------------------
# the factors a caller gives
# ----------------------------------------------------------------------------


def normalized_factors(factors: Any, args: tuple) -> tuple[Factor, ...]:
    """``factors`` as a tuple of ``Factor``: a mapping name -> callable or Factor, a sequence of Factors, or None.

    Raises MisuseError, one sentence each, for anything else: another type, a
    name that is not a non-empty string, a value that is not callable, two
    factors of one name, no factor at all.
    """
    if factors is None:
        return default_factors(args)
    if isinstance(factors, Factor):
        factors = [factors]
    if isinstance(factors, Mapping):
        out = [_from_entry(name, value) for name, value in factors.items()]
    elif isinstance(factors, Sequence) and not isinstance(factors, (str, bytes)):
        out = []
        for item in factors:
            if not isinstance(item, Factor):
                raise MisuseError(
                    f"sweep(factors=[...]): {item!r} is a {type(item).__name__}, not a Factor; give Factor objects "
                    f"in a list, or a mapping of names to zero-argument callables returning a context manager"
                )
            out.append(item)
    else:
        raise MisuseError(
            f"sweep(factors=...) got a {type(factors).__name__}; give a mapping of names to zero-argument callables "
            f"returning a context manager, a list of Factor objects, or None for the default factors"
        )
    if not out:
        raise MisuseError("sweep(factors=...) is empty; give at least one factor, or None for the default factors")
    seen: set[str] = set()
    for factor in out:
        if not isinstance(factor.name, str) or not factor.name.strip():
            raise MisuseError(f"sweep(): factor name {factor.name!r} is not a non-empty string; name each factor")
        if factor.name in seen:
            raise MisuseError(f"sweep(): two factors are named {factor.name!r}; give each factor its own name")
        seen.add(factor.name)
    return tuple(out)


def _from_entry(name: Any, value: Any) -> Factor:
    if not isinstance(name, str) or not name.strip():
        raise MisuseError(f"sweep(factors={{...}}): the key {name!r} is not a non-empty string; name each factor")
    if isinstance(value, Factor):
        return value if value.name == name else Factor(name, value.context, value.transform)
    if not callable(value):
        raise MisuseError(
            f"sweep(factors={{{name!r}: ...}}): the value is a {type(value).__name__}, not callable; give a "
            f"zero-argument callable returning a context manager (lambda: {compat.INDUCTOR_CONFIG_NAME}.patch(...))"
        )
    return Factor(name, context=value)
