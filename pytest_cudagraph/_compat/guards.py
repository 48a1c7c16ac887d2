"""Every failing guard of a recompile, evaluated from Dynamo's cache entries: torch reports only the first.

Dynamo's reason for a recompile names one guard per cached entry: the first its
C++ guard tree found failing (``get_guard_fail_reason_helper``).  With static
shapes a change of x's size then hides a change of y's dtype.  This module finds
the rest, from inside the recompile log record (Dynamo emits it synchronously
while its reason function still holds the frame and the cache entries):

* :func:`failing_guards_of_recompile` walks the Python stack up to Dynamo's
  ``get_and_maybe_log_recompilation_reason(s)`` (2.13+: a ``cache_entries`` list;
  2.6 and 2.11: the head of a linked list, read from the caller, because the
  function's own loop has used its local up by the time it logs);
* each entry's guard tree is walked (``get_leaf_guards``, ``get_child_managers``,
  ``get_key_value_managers``, ``get_epilogue_lambda_guards``) and every leaf's code
  is evaluated in Python in the scope torch itself uses for verbose reasons.  No
  C++ leaf is called: Python has no check for one, and the relational guards'
  state is reset only by a root check;
* ``check_tensor(...)`` code is parsed and every property compared (torch stops at
  the first); ``EQUALS_MATCH`` also compares the exact type (``3.0 == 3`` fails the
  guard); ``GLOBAL_STATE`` is diffed against this compile's snapshot.

It never raises and gives up after :data:`TIME_BUDGET_S` (a model with thousands of
parameter guards is walked in well under that); None means "not evaluated", and the
caller keeps torch's text.  Verified on torch 2.6, 2.11, 2.13 and 2.14.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import time
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from .guard_expressions import (
    _MISSING,
    _equals_type_ok,
    _generic_expected_actual,
    _Scope,
    _short,
    _strip_L,
    _try_eval,
    _type_name,
)

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch
    from torch._C._dynamo.eval_frame import _CacheEntry, _PyInterpreterFrame
    from torch._C._dynamo.guards import GuardManager, LeafGuard, RootGuardManager
    from torch._dynamo.guards import GuardManagerWrapper

__all__ = ["failing_guards_of_recompile"]

# seconds one recompile's evaluation may take before the rest of its guards are left out
TIME_BUDGET_S = 2.0
# failing guards kept per entry: the first ones name the change
MAX_PER_ENTRY = 32


def failing_guards_of_recompile() -> list[GuardFailure] | None:
    """Inside Dynamo's recompile log record: every failing guard of every cached entry, or None.

    Each is ``{entry, kind, source, code, expected, actual, message, property}``:
    ``kind`` is the C++ guard class (``TENSOR_MATCH``, ``EQUALS_MATCH``, ...),
    ``source`` the guarded expression (``L['x']``), ``property`` the tensor property
    or global-state field that differs.
    """
    try:
        context = find_recompile_context(sys._getframe(1))
        if context is None:
            return None
        return all_failing_guards(context.cache_entries, context.f_locals, context.backend)
    except Exception:  # the user's compile must never fail because of the watch
        return None


# One failing guard: {entry, kind, source, code, expected, actual, message[, property]}.  ``expected`` and
# ``actual`` are whatever the guard's code read from the user's objects (str, int, bool, a JSON value), so Any
GuardFailure = dict[str, Any]


class FailureRecorder:
    """Keeps the failing guards of the entry being walked, in ``failures``; called once per failing guard (a repeat
    of one already kept is dropped)."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        self.failures: list[GuardFailure] = []
        self._seen: set[tuple[str, str, str]] = set()

    def __call__(
        self,
        kind: str,
        source: str | None,
        code: str,
        expected: object,
        actual: object,
        message: str | None = None,
        **extra: object,
    ) -> None:
        key = (kind, code, str(extra.get("property")))
        if key in self._seen:
            return
        self._seen.add(key)
        d: GuardFailure = dict(
            entry=self.entry_id,
            kind=kind,
            source=source,
            code=code,
            expected=expected,
            actual=actual,
            message=message or _strip_L(code),
        )
        d.update(extra)
        self.failures.append(d)


class TensorMismatch(TypedDict):
    """One property of a tensor that differs from its TENSOR_MATCH guard."""

    source: str
    property: str
    expected: object
    actual: object
    message: str


class GlobalStateChange(TypedDict):
    """One field of the global state (grad mode, default dtype, ...) that differs from the compile's snapshot."""

    property: str | None
    expected: object
    actual: object


class AddMismatch(Protocol):
    """Keep one tensor property that differs from what the TENSOR_MATCH guard expects."""

    def __call__(self, prop: str, exp: object, act: object, idx: int | None = None) -> None: ...


_REASON_FUNCS = (
    "get_and_maybe_log_recompilation_reasons",  # 2.11 (linked-list head "cache_entry"), 2.13+ ("cache_entries" list)
    "get_and_maybe_log_recompilation_reason",  # 2.6 (linked-list head "cache_entry")
)


# --------------------------------------------------------------------------
# Reaching Dynamo's frame and cache entries from inside a log handler
# --------------------------------------------------------------------------


@dataclass
class RecompileContext:
    frame: _PyInterpreterFrame  # Dynamo's frame object (DynamoFrameType): f_code, f_locals, f_globals
    f_locals: Mapping[str, object]
    code: types.CodeType
    cache_entries: list[_CacheEntry] = field(default_factory=list)
    backend: object = None  # the new call's backend (2.13+ local "backend"), None before
    reason_frame: types.FrameType | None = None  # the python frame of get_and_maybe_log_recompilation_reason(s)


def _is_guards_py(code: types.CodeType) -> bool:
    return code.co_filename.endswith(os.path.join("_dynamo", "guards.py"))


def _entries_from_linked_list(head: _CacheEntry | None) -> list[_CacheEntry]:
    """2.6 and 2.11 chain a frame's cache entries through ``next``; 2.13's entries have no such attribute."""
    out: list[_CacheEntry] = []
    while head is not None and len(out) < 10_000:
        out.append(head)
        head = getattr(head, "next", None)
    return out


def find_recompile_context(start: types.FrameType | None = None) -> RecompileContext | None:
    """From a logging handler's emit(): find the frame Dynamo is checking and its cache entries."""
    f: types.FrameType | None = start if start is not None else sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_name in _REASON_FUNCS and _is_guards_py(code):
            loc = f.f_locals
            frame = loc.get("frame")
            if frame is None:
                return None
            entries = loc.get("cache_entries")  # 2.13+: a list
            if entries is None:
                # 2.6 / 2.11: the local "cache_entry" was walked to None by the time it logs; the
                # caller (convert_frame._compile) still holds the head of the linked list
                caller = f.f_back
                head = caller.f_locals.get("cache_entry") if caller is not None else None
                entries = _entries_from_linked_list(head)
                if not entries:
                    try:
                        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

                        entries = list(_debug_get_cache_entry_list(frame.f_code))
                    except Exception:
                        entries = []
            f_locals: Mapping[str, object]
            try:
                f_locals = frame.f_locals
            except Exception:
                f_locals = {}
            return RecompileContext(
                frame=frame,
                f_locals=f_locals,
                code=frame.f_code,
                cache_entries=list(entries),
                backend=loc.get("backend"),
                reason_frame=f,
            )
        f = f.f_back
    return None


_RELATIONAL = {"NO_TENSOR_ALIASING", "OBJECT_ALIASING", "STORAGE_OVERLAPPING"}


def _iter_managers(mgr: GuardManager, depth: int = 0) -> Iterator[GuardManager]:
    """Yield every GuardManager of the tree (pre-order), DictGuardManager keys/values too."""
    if depth > 200:
        return
    yield mgr
    kids: list[GuardManager] = []
    try:
        kids.extend(mgr.get_child_managers())
    except Exception:
        pass
    if hasattr(mgr, "get_key_value_managers"):
        try:
            for _idx, pair in mgr.get_key_value_managers().items():
                for m in pair:
                    if m is not None:
                        kids.append(m)
        except Exception:
            pass
    for k in kids:
        yield from _iter_managers(k, depth + 1)


def _strip(verbose_part: str, code_parts: list[str]) -> str:
    """Verbose parts (2.11+) carry '  # user source  # file:line in fn'; gm.code_parts don't."""
    best = ""
    for cp in code_parts:
        if len(cp) > len(best) and verbose_part.startswith(cp):
            best = cp
    if best:
        return best.strip()
    m = re.search(r"\s{2,}#\s", verbose_part)
    return (verbose_part[: m.start()] if m else verbose_part).strip()


def _tensor_match(scope: _Scope, code: str) -> list[TensorMismatch]:
    """Parse check_tensor(SRC, Type, DispatchKeySet(...), dtype, device=, requires_grad=, size=, stride=)
    and compare every property with the actual value (torch stops at the first)."""
    import torch

    try:
        call = ast.parse(code, mode="eval").body
        assert isinstance(call, ast.Call)
    except Exception:
        return []
    src = ast.unparse(call.args[0])
    t = _try_eval(scope, src)
    if t is _MISSING:
        return []
    name = _strip_L(src)
    out: list[TensorMismatch] = []

    def add(prop: str, exp: object, act: object, idx: int | None = None) -> None:
        at = f" at index {idx}" if idx is not None else ""
        out.append(
            TensorMismatch(
                source=src,
                property=prop,
                expected=exp,
                actual=act,
                message=f"tensor '{name}' {prop} mismatch{at}. expected {exp}, actual {act}",
            )
        )

    if not isinstance(t, torch.Tensor):
        add("type", "a Tensor", _type_name(type(t)))
        return out
    kw = {k.arg: k.value for k in call.keywords}
    if len(call.args) > 1:
        exp_t = ast.unparse(call.args[1])
        if type(t).__name__ != exp_t.split(".")[-1]:
            add("Tensor type", exp_t, type(t).__name__)
    if len(call.args) > 3:
        exp_dtype = ast.unparse(call.args[3])
        if str(t.dtype) != exp_dtype:
            add("dtype", exp_dtype, str(t.dtype))
    if "device" in kw:
        try:
            exp_dev = ast.literal_eval(kw["device"])
            if exp_dev != t.device.index:
                add("device index", exp_dev, t.device.index)
        except Exception:
            pass
    if "requires_grad" in kw:
        try:
            exp_rg = ast.literal_eval(kw["requires_grad"])
            if exp_rg != t.requires_grad:
                add("requires_grad", exp_rg, t.requires_grad)
        except Exception:
            pass
    _shape_mismatches(t, kw, add)
    if len(call.args) > 2 and not out:
        # dispatch keys: compare last, only as a last resort (TLS include/exclude matter)
        _dispatch_key_mismatch(t, ast.unparse(call.args[2]), add)
    return out


def _shape_mismatches(t: torch.Tensor, kw: Mapping[str | None, ast.expr], add: AddMismatch) -> None:
    """``add`` each size and stride entry of ``t`` that differs from the guard's ``size=``/``stride=``."""
    import torch

    for prop, actual in (("size", list(t.shape)), ("stride", list(t.stride()) if t.layout == torch.strided else None)):
        if prop not in kw or actual is None:
            continue
        try:
            exp = ast.literal_eval(kw[prop])  # [4] / [None] (dynamic dims are None)
        except Exception:
            continue
        if len(exp) != len(actual):
            add("rank" if prop == "size" else prop, len(exp), len(actual))
            continue
        for i, (e, a) in enumerate(zip(exp, actual)):
            if e is not None and e != a:
                add(prop, e, a, i)


def _dispatch_key_mismatch(t: torch.Tensor, exp_keys: str, add: AddMismatch) -> None:
    """``add`` the dispatch key set of ``t`` (with the thread's include/exclude sets) if it is not ``exp_keys``."""
    import torch

    try:
        ks = torch._C._dispatch_keys(t)
        try:
            ks = (ks | torch._C._dispatch_tls_local_include_set()) - torch._C._dispatch_tls_local_exclude_set()
        except Exception:
            pass
        if _norm_keys(str(ks)) != _norm_keys(exp_keys):
            add("dispatch key set", exp_keys, str(ks))
    except Exception:
        pass


def _norm_keys(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _global_state_detail(part: str, gm: GuardManagerWrapper) -> list[GlobalStateChange]:
    """GLOBAL_STATE: 2.11+ code reads '___check_global_state() against {json}' (expected);
    the snapshot is also ``gm.closure_vars['___check_global_state'].__self__`` (all versions)."""
    import torch._C._dynamo.guards as cg

    snap_fn = (getattr(gm, "closure_vars", None) or {}).get("___check_global_state")
    snap = getattr(snap_fn, "__self__", None)  # the compile's GlobalStateGuard, reached through a bound method
    expected: dict[str, object] | None = None
    m = re.search(r" against (\{.*\})", part)
    if m:
        expected = _json_object(m.group(1))
    if expected is None and snap is not None:
        try:
            expected = _json_object(snap.__getstate__())
        except Exception:
            expected = None
    try:
        # the pickling method (2.7+) that torch's stub for the C class leaves out
        actual = _json_object(cg.GlobalStateGuard().__getstate__())  # type: ignore[attr-defined, unused-ignore]
    except Exception:
        actual = None
    out: list[GlobalStateChange] = []
    if expected is not None and actual is not None:
        for k in sorted(set(expected) | set(actual)):
            if expected.get(k) != actual.get(k):
                out.append(GlobalStateChange(property=k, expected=expected.get(k), actual=actual.get(k)))
        return out
    # 2.6: no JSON; GlobalStateGuard.reason() names the fields (e.g. "grad_mode ")
    reason = ""
    try:
        reason = snap.reason() if snap is not None else ""
    except Exception:
        pass
    import torch

    getters = {
        "grad_mode": torch.is_grad_enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "torch_function": lambda: torch._C._is_torch_function_enabled(),
        "default_dtype": torch.get_default_dtype,
        "num_threads": torch.get_num_threads,
    }
    for k in reason.split():
        act = None
        try:
            act = getters[k]() if k in getters else None
        except Exception:
            pass
        exp = (not act) if isinstance(act, bool) else None
        out.append(GlobalStateChange(property=k, expected=exp, actual=act))
    return out


def _json_object(state: object) -> dict[str, object] | None:
    """A GlobalStateGuard's pickled state (a JSON object, 2.7+) as a dict; None where it is not one."""
    if not isinstance(state, str):
        return None
    try:
        parsed = json.loads(state)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _aliasing(scope: _Scope, kind: str, code: str) -> dict[str, str] | None:
    """check_no_aliasing(L['x'], L['y']) and friends: the sources that now share an object."""
    try:
        call = ast.parse(code, mode="eval").body
        if not isinstance(call, ast.Call):
            return None
        srcs = [ast.unparse(a) for a in call.args]
    except Exception:
        return None
    by_id: dict[int, list[str]] = {}
    for s in srcs:
        v = _try_eval(scope, s)
        if v is _MISSING:
            return None
        by_id.setdefault(id(v), []).append(s)
    dups = [v for v in by_id.values() if len(v) > 1]
    if kind == "NO_TENSOR_ALIASING" and dups:
        return dict(expected="distinct tensors", actual=" is ".join(dups[0]))
    return None


def _failures_for_entry(
    entry: _CacheEntry, f_locals: Mapping[str, object], backend: object, deadline: float
) -> list[GuardFailure]:
    gm = entry.guard_manager
    eid = str(getattr(entry, "compile_id", "?"))
    if type(gm).__name__ == "DeletedGuardManagerWrapper":
        return [_deleted_entry(eid, gm)]
    scope = _Scope(gm, f_locals)
    code_parts = list(getattr(gm, "code_parts", None) or [])
    record = FailureRecorder(eid)
    out = record.failures

    root = gm.root
    pairs = _leaf_guards(root)  # (manager source, leaf)
    for msrc, leaf in pairs:
        if len(out) >= MAX_PER_ENTRY or time.monotonic() > deadline:
            break
        kind = type(leaf).__name__
        try:
            vparts = list(leaf.verbose_code_parts())
        except Exception:
            continue
        for vp in vparts:
            _check_part(scope, gm, kind, msrc, vp, _strip(vp, code_parts), record)

    if not out:
        # safety net: what torch itself says (first failure only), or the backend
        try:
            info = root.check_verbose(f_locals)
            if not info.result:
                record(
                    "UNKNOWN", None, "; ".join(info.verbose_code_parts), None, None, "; ".join(info.verbose_code_parts)
                )
            elif backend is not None and getattr(entry, "backend", backend) is not backend:
                record("BACKEND_MATCH", None, "backend", _short(entry.backend), _short(backend))
        except Exception:
            pass
    return out


def _deleted_entry(eid: str, gm: GuardManagerWrapper) -> GuardFailure:
    """The one failure of an entry whose guards were deleted: torch's invalidation reason."""
    return dict(
        entry=eid,
        kind="DELETED",
        source=None,
        code=getattr(gm, "invalidation_reason", ""),
        expected=None,
        actual=None,
        message=getattr(gm, "invalidation_reason", ""),
    )


def _leaf_guards(root: RootGuardManager) -> list[tuple[str | None, LeafGuard]]:
    """``(manager source, leaf guard)`` for every leaf under ``root``, the epilogue lambda guards last."""

    def leaves_of(mgr: GuardManager) -> list[LeafGuard]:
        try:
            return list(mgr.get_leaf_guards())
        except Exception:
            return []

    pairs: list[tuple[str | None, LeafGuard]] = []  # (manager source, leaf)
    for mgr in _iter_managers(root):
        msrc: str | None
        try:
            msrc = mgr.get_source()
        except Exception:
            msrc = None
        for leaf in leaves_of(mgr):
            pairs.append((msrc, leaf))
    try:
        for leaf in root.get_epilogue_lambda_guards():  # 2.6: shape-env lambda guards live here
            pairs.append(("L", leaf))
    except Exception:
        pass
    return pairs


def _check_part(
    scope: _Scope, gm: GuardManagerWrapper, kind: str, msrc: str | None, vp: str, code: str, record: FailureRecorder
) -> None:
    """Evaluate one verbose code part ``vp`` (``code`` once stripped) of a leaf guard; ``record`` what failed."""
    try:
        if kind == "TENSOR_MATCH":
            for m in _tensor_match(scope, code):
                record(kind, m["source"], code, m["expected"], m["actual"], m["message"], property=m["property"])
            return
        if kind == "GLOBAL_STATE":
            fn = scope.locals.get("___check_global_state")
            ok = fn() if callable(fn) else True
            if not ok:
                unnamed = GlobalStateChange(property=None, expected=None, actual=None)
                for change in _global_state_detail(vp, gm) or [unnamed]:
                    record(
                        kind,
                        None,
                        code.split(" against ")[0],
                        change["expected"],
                        change["actual"],
                        f"GLOBAL_STATE changed: {change['property']}: "
                        f"expected {change['expected']}, actual {change['actual']}",
                        property=change["property"],
                    )
            return
        if kind in _RELATIONAL:
            r = _aliasing(scope, kind, code)
            if r:
                record(kind, None, code, r["expected"], r["actual"], f"{kind}: {_strip_L(r['actual'])}")
            return
        res = scope.eval(code)
        if kind == "EQUALS_MATCH" and res is True:
            res = _equals_type_ok(scope, code)  # C++ EQUALS_MATCH also checks the exact type
    except Exception:
        return  # not evaluable here (e.g. an earlier guard on the path failed): skip
    if isinstance(res, bool) and not res:
        src, exp, act = _generic_expected_actual(scope, code, gm)
        record(kind, src if src is not None else msrc, code, exp, act)
    elif isinstance(res, str):  # ___check_tensors-style verbose reason
        record(kind, msrc, code, None, None, res)


def all_failing_guards(
    cache_entries: Iterable[_CacheEntry] | None, f_locals: Mapping[str, object], backend: object = None
) -> list[GuardFailure]:
    """Every failing guard of every cache entry, as dicts:
    {entry, kind, source, code, expected, actual, message[, property]}.  Never raises."""
    out: list[GuardFailure] = []
    deadline = time.monotonic() + TIME_BUDGET_S
    for e in cache_entries or []:
        if time.monotonic() > deadline:
            break
        try:
            out.extend(_failures_for_entry(e, f_locals, backend, deadline))
        except Exception:  # one entry the walk does not understand: torch's text still names it
            continue
    return out
