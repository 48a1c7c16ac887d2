"""The replay check's eager reference run beside the replay, on a second stream.

At the batch sizes a serving engine captures, neither a replay nor an eager forward
fills the device: run side by side, the replay on the caller's stream and the
reference on the graph set's own stream (where its warm-ups ran, so its cuBLAS
workspace and cached blocks are there already), they take about 0.79 of the time
they take one after the other (docs/performance.md).  Both are compared exactly as
before; what changes is only when the device runs them.

Side by side is safe only when the two cannot disturb each other, so the check runs
them one after the other unless all of these hold, each checked before the first
side-by-side pair:

- the first reference call wrote no tensor the check can reach from the reference
  (a module's parameters and buffers, tensors held in module
  attributes, lists or dicts, closures, a bound object, ``functools.partial``
  arguments, the globals the function names): a KV cache written in place, a running
  statistic, a step counter.  Writes are seen through the tensors' version counters,
  which in-place ops, ``out=`` writes and a compiled function's input mutations bump;
- every reachable tensor keeps a version counter (inference tensors keep none, so a
  write to them cannot be seen);
- no process group is initialized: two collectives issued from two streams of one
  rank can be ordered differently on every rank, and the ranks hang.

A write the counters cannot see (a raw kernel of a C++ extension or a Triton kernel
launched on a tensor passed to it) is why a mismatch found side by side is never
reported as it stands: the check runs again one after the other first
(``graph_set.py``).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from .. import _compat

# Enough for a large model's modules and their attributes; a reference that reaches
# more objects than this is checked one after the other rather than walked for long.
_MAX_OBJECTS = 200_000
# How deep the walk follows plain objects' attributes and containers (modules are
# walked through their own tree, whatever their depth): a Hugging Face StaticCache
# keeps its tensors 5 levels below the module holding it (a dict of caches, the
# cache, its list of layers, a layer, its tensors).  Deeper than this the walk
# cannot vouch for the reference, and the check runs one after the other.
_MAX_DEPTH = 12


class StateWatch:
    """The version counters of every tensor reachable from a reference (its inputs are fresh per pair).

    ``reason`` is None when the watch can vouch for the reference (every reachable
    tensor keeps a counter), else why it cannot; ``written()`` names the first
    watched tensor whose counter moved since the watch was made.
    """

    def __init__(self, reference: Callable[..., Any]) -> None:
        self.reason: str | None = None
        self._watched: list[tuple[str, torch.Tensor, int]] = []
        try:
            found = _reachable_tensors(reference)
        except Exception as exc:  # an attribute that raises when read: the walk cannot vouch, the check goes on
            self.reason = f"reading the reference's state raised {type(exc).__name__}"
            return
        if found is None:
            self.reason = (
                f"the reference reaches more than {_MAX_OBJECTS} objects, or objects nested more than "
                f"{_MAX_DEPTH} levels deep, whose writes the check does not follow"
            )
            return
        for name, tensor in found:
            version = _compat.tensor_version(tensor)
            if version is None:
                self.reason = f"{name} is an inference tensor, whose writes cannot be seen"
                return
            self._watched.append((name, tensor, version))

    def written(self) -> str | None:
        """The name of the first watched tensor written since the watch was made, or None."""
        for name, tensor, version in self._watched:
            if _compat.tensor_version(tensor) != version:
                return name
        return None


def serial_reason(watch: StateWatch) -> str | None:
    """Why the reference must run one after the replay (None: side by side is safe).

    Call it after the reference's first call, which the check makes one after the
    replay either way.
    """
    if watch.reason is not None:
        return watch.reason
    written = watch.written()
    if written is not None:
        return f"the reference writes {written} in place"
    if _compat.process_group_initialized():
        return "a process group is initialized (collectives from two streams can be ordered differently per rank)"
    return None


def _reachable_tensors(reference: Callable[..., Any]) -> list[tuple[str, Any]] | None:
    """``(name, tensor)`` of every tensor reachable from ``reference``; None past the object limit.

    Its inputs are not watched: each pair's inputs are fresh, copied into the graph's
    own buffers before the reference starts, so a reference that writes them in
    place disturbs nothing the replay reads.
    """
    found: dict[int, tuple[str, Any]] = {}
    seen: set[int] = set()
    budget = [_MAX_OBJECTS]

    def visit(value: Any, name: str, depth: int) -> bool:
        if id(value) in seen:
            return True
        seen.add(id(value))
        budget[0] -= 1
        if budget[0] < 0:
            return False
        if isinstance(value, torch.Tensor):
            found.setdefault(id(value), (name, value))
            return True
        if isinstance(value, torch.nn.Module):
            return visit_module(value, name)
        if value is None or isinstance(value, _LEAF_TYPES):
            return True
        if depth >= _MAX_DEPTH:
            return False
        if isinstance(value, dict):
            return all(visit(item, f"{name}[{key!r}]", depth + 1) for key, item in list(value.items()))
        if isinstance(value, (list, tuple, set, frozenset)):
            return all(visit(item, f"{name}[{i}]", depth + 1) for i, item in enumerate(list(value)))
        if isinstance(value, functools.partial):
            return (
                visit(value.func, name, depth + 1)
                and visit(value.args, f"{name}.args", depth + 1)
                and visit(value.keywords, f"{name}.keywords", depth + 1)
            )
        if isinstance(value, types.MethodType):
            return visit(value.__self__, _label(value.__self__), depth) and visit(value.__func__, name, depth)
        if isinstance(value, types.FunctionType):
            return visit_function(value, name, depth)
        return all(visit(item, f"{name}.{key}", depth + 1) for key, item in _attributes(value))

    def visit_module(module: torch.nn.Module, name: str) -> bool:
        for prefix, sub in module.named_modules(prefix=name):
            seen.add(id(sub))
            for key, item in list(vars(sub).items()):
                if key in ("_parameters", "_buffers"):
                    for tensor_name, tensor in list(item.items()):
                        if tensor is not None and not visit(tensor, f"{prefix}.{tensor_name}", 0):
                            return False
                elif key not in _MODULE_BOOKKEEPING and not visit(item, f"{prefix}.{key}", 1):
                    return False
        return True

    def visit_function(fn: types.FunctionType, name: str, depth: int) -> bool:
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is not None and not visit(wrapped, name, depth + 1):
            return False
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                content = cell.cell_contents
            except ValueError:  # a cell not filled yet
                continue
            if not visit(content, f"{name}:{var}", depth + 1):
                return False
        for global_name in fn.__code__.co_names:
            value = fn.__globals__.get(global_name)
            if isinstance(value, (torch.Tensor, torch.nn.Module, list, dict, tuple)):
                if not visit(value, global_name, depth + 1):
                    return False
        return True

    label = _label(reference)
    if not visit(reference, label, 0):
        return None
    return list(found.values())


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """An object's attributes: its ``__dict__`` and its ``__slots__`` (objects built in C have neither)."""
    attributes = getattr(value, "__dict__", None)
    found = list(attributes.items()) if isinstance(attributes, dict) else []
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                found.append((slot, getattr(value, slot)))
    return found


def _label(value: Any) -> str:
    """What a watched tensor's name starts with: the function's name, or the object's class."""
    if isinstance(value, types.MethodType):
        return _label(value.__self__)
    if isinstance(value, types.FunctionType):
        return value.__name__
    # a compiled module is named by the module it wraps (OptimizedModule keeps it in _orig_mod)
    return type(getattr(value, "_orig_mod", value)).__name__


# values that hold no tensor: not walked
_LEAF_TYPES = (str, bytes, int, float, complex, bool, type, types.ModuleType, torch.dtype, torch.device)
# nn.Module's own bookkeeping: submodules are walked through named_modules; backward and state-dict
# hooks do not run in a forward (forward hooks do, and are walked)
_MODULE_BOOKKEEPING = frozenset(
    {
        "_modules",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
        "_non_persistent_buffers_set",
        "_is_full_backward_hook",
        "training",
    }
)
