"""Dynamo's guard-failure reasons as data: which entry, which guard, what it expected, what came.

Dynamo writes one reason per cached entry that failed, as text meant for a log::

    0/0: n == 2                          # return x * n + N  # r1.py:5 in g
    User stack trace:
      File "/tmp/r1.py", line 5, in g
        return x * n + N

    0/1: tensor 'x' size mismatch at index 0. expected 4, actual 8

    3/0: 2 <= x.size()[0]  # ... (user code shown is first use of this value--...)

A check such as ``"y" not in reason`` goes wrong on that text: the comment quotes
the user's source line and the stack names files.  :func:`parse_reason` splits a
reason into its entry (``"0/1"``), its flat first line with no comment or stack
(what ``RecompileWatch.reasons`` lists), and one :class:`FailedGuard` per guard
it names, with the expected and actual values where the text gives them.  The
recompile watch adds the guards torch did not print (it reports only the first
failing guard of an entry) from its own evaluation; see ``_compat.failing_guards``.

Pure string work: no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "FailedGuard",
    "ParsedReason",
    "evaluated_guard",
    "flat_reason",
    "local_names",
    "parse_guard",
    "parse_reason",
]

ENTRY = re.compile(r"^\s*(?P<entry>\d+/\d+): ")
TENSOR_MISMATCH = re.compile(
    r"^tensor '(?P<name>.+?)' (?P<what>.+?) mismatch(?: at index (?P<index>-?\d+))?"
    r"\.\s*expected (?P<expected>.+?), actual (?P<actual>.+?)\s*$"
)
TENSOR_OTHER = re.compile(r"^tensor '(?P<name>.+?)' (?P<what>.+?)\s*$")
# torch 2.6 prints a frame local as L['x'], 2.8+ as x
LOCAL_SCOPE = re.compile(r"\bL\[\s*(['\"])(?P<name>.*?)\1\s*\]")
GLOBAL_STATE = re.compile(r"^GLOBAL_STATE changed:\s*(?P<what>.*?)\s*$")
CHECK_CALL = re.compile(r"^(?:not\s+)?(?P<func>___\w+|hasattr|isinstance|len)\((?P<args>.*)\)$")
USER_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
COMPARISON_OPS = ("==", "!=", "<=", ">=", "<", ">", " is not ", " is ", " not in ", " in ")
# the opposite of "a OP b" read from b's side
FLIPPED = {"==": "==", "!=": "!=", "<=": ">=", ">=": "<=", "<": ">", ">": "<"}
_CALL_KINDS = {
    "___check_obj_id": "identity",
    "___check_type_id": "type",
    "___check_tensors": "tensor",
    "___check_global_state": "global_state",
    "___dict_contains": "membership",
    "hasattr": "attribute",
    "isinstance": "type",
    "len": "length",
}


@dataclass(frozen=True)
class FailedGuard:
    """One guard that failed for one cached entry.

    * ``entry``: Dynamo's compile id of the entry, ``"0/1"`` (frame 0, its second compile);
    * ``source``: what the guard reads, as Dynamo prints it: ``x``, ``n``, ``G['N']``, ``self.training``;
    * ``kind``: ``size``, ``stride``, ``dtype``, ``device``, ``requires_grad``, ``rank``, ``tensor``
      (another tensor property), ``value`` (a comparison), ``identity``, ``type``, ``global_state``,
      ``length``, ``attribute``, ``membership`` or ``other``;
    * ``guard``: the guard as Dynamo prints it, its comment and stack left out;
    * ``expected``/``actual``: the value the entry was compiled for and the one that came,
      where torch's text or the watch's own evaluation gives them (else None);
    * ``origin``: ``file:line`` of the user code that made Dynamo install the guard, when torch says;
    * ``reported_by_torch``: False for a guard torch did not print (it stops at an entry's first
      failing guard; the watch evaluates the rest itself).
    """

    entry: str | None
    source: str | None
    kind: str
    guard: str
    expected: str | None = None
    actual: str | None = None
    origin: str | None = None
    reported_by_torch: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "source": self.source,
            "kind": self.kind,
            "guard": self.guard,
            "expected": self.expected,
            "actual": self.actual,
            "origin": self.origin,
            "reported_by_torch": self.reported_by_torch,
        }

    def same_check(self, other: FailedGuard) -> bool:
        """Both name the same check of the same entry (torch's text and the watch's evaluation of one guard)."""
        return (
            self.entry == other.entry
            and self.kind == other.kind
            and local_names(self.source or "") == local_names(other.source or "")
        )

    def with_values(self, expected: str | None, actual: str | None) -> FailedGuard:
        return replace(self, expected=self.expected or expected, actual=self.actual or actual)


@dataclass(frozen=True)
class ParsedReason:
    """One verbatim reason: its ``entry``, its ``flat`` first line, its ``guards``."""

    entry: str | None
    flat: str
    guards: tuple[FailedGuard, ...]
    verbatim: str


def local_names(text: str) -> str:
    """``L['x'].size()[0]`` -> ``x.size()[0]``: the way torch 2.8+ prints a frame local."""
    return LOCAL_SCOPE.sub(lambda m: m["name"], text)


# the C++ guard classes the evaluation names, as this module's kinds
_EVALUATED_KINDS = {
    "EQUALS_MATCH": "value",
    "LAMBDA_GUARD": "value",
    "TRUE_MATCH": "value",
    "FALSE_MATCH": "value",
    "NONE_MATCH": "value",
    "SYMBOLIC_SHAPE_GUARD": "value",
    "ID_MATCH": "identity",
    "TYPE_MATCH": "type",
    "GLOBAL_STATE": "global_state",
    "LENGTH_CHECK": "length",
    "NO_HASATTR": "attribute",
    "NO_TENSOR_ALIASING": "aliasing",
    "OBJECT_ALIASING": "aliasing",
    "STORAGE_OVERLAPPING": "aliasing",
    "BACKEND_MATCH": "backend",
}
_TENSOR_PROPERTIES = {"size": "size", "stride": "stride", "dtype": "dtype", "requires_grad": "requires_grad"}
_TENSOR_PROPERTIES.update({"rank": "rank", "device index": "device"})


# torch's guard messages name a dtype by its scalar type ("Float"); the evaluation reads torch.float32
_SCALAR_TYPE_NAMES = {
    "torch.float32": "Float",
    "torch.float64": "Double",
    "torch.float16": "Half",
    "torch.bfloat16": "BFloat16",
    "torch.int64": "Long",
    "torch.int32": "Int",
    "torch.int16": "Short",
    "torch.int8": "Char",
    "torch.uint8": "Byte",
    "torch.bool": "Bool",
    "torch.complex64": "ComplexFloat",
    "torch.complex128": "ComplexDouble",
}


def evaluated_guard(found: dict[str, Any]) -> FailedGuard:
    """A guard the watch's own evaluation found failing (``_compat.failing_guards_of_recompile``) as a FailedGuard."""
    kind_name = str(found.get("kind") or "")
    prop = found.get("property")
    source = local_names(str(found["source"])) if found.get("source") else None
    message = local_names(str(found.get("message") or found.get("code") or ""))
    if kind_name == "TENSOR_MATCH":
        kind = _TENSOR_PROPERTIES.get(str(prop), "tensor")
        guard = message.split(". expected", 1)[0]
    elif kind_name == "GLOBAL_STATE":
        kind, source = "global_state", str(prop) if prop else source
        guard = f"GLOBAL_STATE changed: {prop}" if prop else "GLOBAL_STATE changed"
    else:
        kind = _EVALUATED_KINDS.get(kind_name, "other")
        guard = local_names(str(found.get("code") or message))
    expected, actual = found.get("expected"), found.get("actual")
    if kind == "dtype":  # spelled as torch's own rows spell it, so one table reads alike
        expected = _SCALAR_TYPE_NAMES.get(str(expected), expected)
        actual = _SCALAR_TYPE_NAMES.get(str(actual), actual)
    return FailedGuard(
        entry=found.get("entry"),
        source=source,
        kind=kind,
        guard=guard,
        expected=None if expected is None else str(expected),
        actual=None if actual is None else str(actual),
        reported_by_torch=False,
    )


def _split_top_level(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` where it is outside quotes and brackets."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            i += len(separator)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _without_comment(line: str) -> str:
    """A guard's code without Dynamo's ``# source line  # file:line in fn`` comment."""
    head = _split_top_level(line, "#")[0] if "#" in line else line
    return head.rstrip()


def flat_reason(verbatim: str) -> str:
    """The reason's first line with its comments left out: ``"0/0: n == 2"``; several guards joined by ``; ``."""
    entry, body = _entry_and_body(verbatim)
    guards = [_without_comment(part).strip() for part in _split_top_level(body, "; ")]
    text = "; ".join(g for g in guards if g)
    return f"{entry}: {text}" if entry else text


def _entry_and_body(verbatim: str) -> tuple[str | None, str]:
    first = verbatim.strip().splitlines()[0] if verbatim.strip() else ""
    match = ENTRY.match(first)
    if match:
        return match["entry"], first[match.end() :]
    return None, first


def _origin(verbatim: str) -> str | None:
    _, _, stack = verbatim.partition("User stack trace:")
    frames = USER_FRAME.findall(stack)
    if not frames:
        return None
    file, line = frames[-1]
    from .call_site import relative_path

    return f"{relative_path(file)}:{line}"


def parse_guard(text: str, entry: str | None = None, origin: str | None = None) -> FailedGuard:
    """One guard's text (no entry prefix, comment allowed) as a :class:`FailedGuard`."""
    guard = _without_comment(text).strip()
    match = TENSOR_MISMATCH.match(guard)
    if match:
        what = match["what"].strip()
        kind = (
            what.replace(" ", "_")
            if what in ("size", "stride", "dtype", "device", "requires_grad", "rank")
            else "tensor"
        )
        at = f" at index {match['index']}" if match["index"] is not None else ""
        return FailedGuard(
            entry, match["name"], kind, f"tensor '{match['name']}' {what} mismatch{at}",
            match["expected"].strip(), match["actual"].strip(), origin,
        )  # fmt: skip
    match = GLOBAL_STATE.match(guard)
    if match:
        what = match["what"] or None
        return FailedGuard(entry, what, "global_state", guard, None, None, origin)
    match = TENSOR_OTHER.match(guard)
    if match:
        return FailedGuard(entry, match["name"], "tensor", guard, None, None, origin)
    match = CHECK_CALL.match(guard)
    if match:
        first_arg = _split_top_level(match["args"], ",")[0].strip() or None
        return FailedGuard(entry, first_arg, _CALL_KINDS.get(match["func"], "other"), guard, None, None, origin)
    return _comparison(guard, entry, origin)


def _comparison(guard: str, entry: str | None, origin: str | None) -> FailedGuard:
    for op in COMPARISON_OPS:
        parts = _split_top_level(guard, op)
        if len(parts) != 2:
            continue
        left, right = parts[0].strip(), parts[1].strip()
        symbol = op.strip()
        if _is_literal(left) and not _is_literal(right):
            # "2 <= x.size()[0]" reads "x.size()[0] >= 2"
            left, right, symbol = right, left, FLIPPED.get(symbol, symbol)
        expected = right if symbol == "==" else f"{symbol} {right}"
        return FailedGuard(entry, left, "value", guard, expected, None, origin)
    return FailedGuard(entry, None, "other", guard, None, None, origin)


def _is_literal(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+(\.\d*)?|True|False|None|'[^']*'|\"[^\"]*\"", text))


def parse_reason(verbatim: str) -> ParsedReason:
    """A verbatim reason split into its entry, flat first line and guards."""
    entry, body = _entry_and_body(verbatim)
    origin = _origin(verbatim)
    guards = tuple(
        parse_guard(part, entry, origin) for part in _split_top_level(body, "; ") if _without_comment(part).strip()
    )
    return ParsedReason(entry, flat_reason(verbatim), guards, verbatim)
