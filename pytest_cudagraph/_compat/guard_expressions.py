"""A guard's Python code, evaluated in the scope torch uses for its verbose reasons: what a failing guard expected.

:class:`_Scope` holds the globals and locals of one guard manager;
:func:`_generic_expected_actual` reads a failing comparison, type-id or object-id
check's guarded expression and its expected and actual values from the code's AST;
:func:`_equals_type_ok` adds the exact-type test of ``EQUALS_MATCH``.  The values are
shown short (:func:`_short`), a tensor by its size, dtype and device.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    from torch._dynamo.guards import GuardManagerWrapper


class _Scope:
    """The globals and locals torch itself evaluates a guard's code in (its verbose reasons)."""

    def __init__(self, gm: GuardManagerWrapper, f_locals: Mapping[str, object]) -> None:
        gs: dict[str, object] = dict(getattr(gm, "global_scope", None) or {})
        self.globals = gs
        self.locals: dict[str, object] = {"L": f_locals, "G": gs.get("G", {})}
        self.locals.update(getattr(gm, "closure_vars", None) or {})

    def eval(self, expr: str) -> object:
        g = dict(self.globals)
        g["__compile_source__"] = expr
        return eval(expr, g, self.locals)


_MISSING = object()


def _try_eval(scope: _Scope, expr: str) -> object:
    try:
        return scope.eval(expr)
    except Exception:
        return _MISSING


def _short(v: object, n: int = 120) -> str:
    try:
        import torch

        if isinstance(v, torch.Tensor):
            return f"Tensor(size={list(v.shape)}, dtype={v.dtype}, device={v.device})"
        s = repr(v)
    except Exception:
        s = f"<{type(v).__name__}>"
    return s if len(s) <= n else s[: n - 3] + "..."


def _type_by_id(tid: int) -> type | None:
    """Resolve a type id (TYPE_MATCH's ___check_type_id arg) by walking object's subclasses."""
    seen: set[int] = set()
    stack: list[type] = [object, type]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if id(t) == tid:
            return t
        try:
            subs: list[type] = type.__subclasses__(t) if t is type else t.__subclasses__()
        except Exception:
            continue
        stack.extend(subs)
    return None


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def _generic_expected_actual(
    scope: _Scope, code: str, gm: GuardManagerWrapper
) -> tuple[str | None, str | None, str | None]:
    """expected/actual for a failing Python-evaluable code part, from its AST."""
    try:
        node = ast.parse(code, mode="eval").body
    except SyntaxError:
        return None, None, None
    # X == c / X is c / X <= c ... : actual = X, expected = "<op> c"
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        lnode, rnode, opn = node.left, node.comparators[0], node.ops[0]
        # shape-env guards read "2 <= L['x'].size()[0]": put the constant on the right
        flip = {
            ast.Lt: ast.Gt,
            ast.LtE: ast.GtE,
            ast.Gt: ast.Lt,
            ast.GtE: ast.LtE,
            ast.Eq: ast.Eq,
            ast.NotEq: ast.NotEq,
        }
        if isinstance(lnode, ast.Constant) and not isinstance(rnode, ast.Constant) and type(opn) in flip:
            lnode, rnode, opn = rnode, lnode, flip[type(opn)]()
            node = ast.Compare(left=lnode, ops=[opn], comparators=[rnode])
        left = ast.unparse(node.left)
        right = ast.unparse(node.comparators[0])
        lv = _try_eval(scope, left)
        rv = _try_eval(scope, right)
        op = {
            ast.Eq: "",
            ast.Is: "is ",
            ast.NotEq: "!= ",
            ast.IsNot: "is not ",
            ast.Lt: "< ",
            ast.LtE: "<= ",
            ast.Gt: "> ",
            ast.GtE: ">= ",
            ast.In: "in ",
            ast.NotIn: "not in ",
        }.get(type(node.ops[0]), "? ")
        exp = op + (_short(rv) if rv is not _MISSING else right)
        act = _short(lv) if lv is not _MISSING else None
        if lv is not _MISSING and rv is not _MISSING and type(lv) is not type(rv) and lv == rv:
            exp, act = f"{exp} ({_type_name(type(rv))})", f"{act} ({_type_name(type(lv))})"
        return left, exp, act
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2:
        fname = node.func.id
        src = ast.unparse(node.args[0])
        try:
            want = int(ast.literal_eval(node.args[1]))
        except Exception:
            want = None
        val = _try_eval(scope, src)
        if fname == "___check_type_id" and want is not None:
            t = _type_by_id(want)
            exp = _type_name(t) if t is not None else f"type id {want}"
            act = _type_name(type(val)) if val is not _MISSING else None
            return src, exp, act
        if fname == "___check_obj_id" and want is not None:
            exp = f"object id {want}"
            for o in (True, False, None, Ellipsis, NotImplemented):  # 2.6 ID_MATCHes bools
                if id(o) == want:
                    exp = repr(o)
            # id_matched_objs: {local_name: weakref} of ID_MATCH'ed objects (2.x)
            for ref in (getattr(gm, "id_matched_objs", None) or {}).values():
                try:
                    o = ref()
                except Exception:
                    o = None
                if o is not None and id(o) == want:
                    exp = f"{_short(o)} (id {want})"
            act = f"{_short(val)} (id {id(val)})" if val is not _MISSING else None
            return src, exp, act
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = ast.unparse(node.operand)
        return inner, "falsy", _short(_try_eval(scope, inner))
    return None, None, None


def _equals_type_ok(scope: _Scope, code: str) -> bool:
    """EQUALS_MATCH compares Py_TYPE first: 3.0 == 3 is True in Python but fails the guard."""
    try:
        node = ast.parse(code, mode="eval").body
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            lv = scope.eval(ast.unparse(node.left))
            rv = scope.eval(ast.unparse(node.comparators[0]))
            return type(lv) is type(rv)
    except Exception:
        pass
    return True


def _strip_L(s: str) -> str:
    return re.sub(r"L\[\s*['\"](.*?)['\"]\s*\]", r"\1", s)
