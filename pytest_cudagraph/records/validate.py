"""Checking a loaded report against its types (``schema.py``), with errors that name the field and the fix.

Three passes, each over data ``json.loads`` gave:

1. text: no key or string holds a lone surrogate (printing it would fail);
2. numbers: every number fits a float (compare and show do their arithmetic in
   floats) and nothing nests ``MAX_DEPTH`` deep, sections this plugin does not
   know included;
3. types: ``msgspec.convert`` against ``schema.Report``, strict (no string is
   read as a number).  Its error names a path such as ``$.tests[...].graphs``:
   the keys it leaves out are found again here, and the words of the error are
   the description the type carries, so a report with ``sizes: 5`` reads
   ``tests['a::t'].graphs.sizes = 5, which is not a list of integers``.
"""

from __future__ import annotations

import math
import re
import sys
import types
import typing
from typing import TYPE_CHECKING, Any

from ..errors import ReportError
from .json_values import is_text
from .older_schemas import SCHEMA_V3

if TYPE_CHECKING:
    from .schema import Report

# the schema this pytest-cudagraph writes and reads (a /1 or /2 file is read as /3: records/older_schemas)
SCHEMA = SCHEMA_V3
# Deeper than this, a report is not one this plugin wrote (its deepest field is 7 levels down).
MAX_DEPTH = 64
# compare and show do their arithmetic in floats: a larger integer is no measurement
_FLOAT_MAX = int(sys.float_info.max)
# JSON text reaches a lone surrogate only through a \\udXXX escape: without one, no string needs a look.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# one step of a msgspec error path: ``.field``, ``[3]`` or ``[...]`` (a mapping's key, left out)
_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[(\.\.\.)\]")


class Malformed(ReportError):
    """A field that does not hold what the schema says: where it is, and what is wrong with its value.

    A ``ReportError`` whose ``str()`` is ``describe()``'s sentence: readers turn it into one naming the report.
    """

    def __init__(self, path: tuple[Any, ...], value: Any, complaint: str):
        super().__init__(path, value, complaint)
        self.path, self.value, self.complaint = path, value, complaint

    def describe(self) -> str:
        """``tests['a::t'].graphs.sizes = 5, which is not a list of integers``"""
        return f"{field_path(self.path)} = {short(self.value)}, {self.complaint}"

    def __str__(self) -> str:
        return self.describe()


def validate_report(data: Any, name: str = "report", *, text: str | None = None) -> dict[str, Any]:
    """Check a parsed report; return it unchanged, or raise ReportError naming the file, the field and the fix.

    ``checked_report`` is the same check, returning the typed view it builds.
    """
    checked_report(data, name, text=text)
    report: dict[str, Any] = data  # checked_report raised unless it is a JSON object
    return report


def checked_report(data: Any, name: str = "report", *, text: str | None = None) -> Report:
    """Check a parsed report as ``validate_report`` does; return its typed view (``schema.Report``).

    Checked: the schema; the type of every field this plugin writes (``schema.py``);
    every number fits a float; every string is text (no lone surrogate: with
    ``text``, the JSON it was parsed from, only when it has a ``\\udXXX`` escape);
    sections it does not know nest less than MAX_DEPTH deep and are otherwise kept
    as they are, so a newer plugin's report still loads.
    """
    if not isinstance(data, dict) or "schema" not in data:
        raise ReportError(
            f"report {name} has no 'schema' field, so it is not a pytest-cudagraph report; "
            f"give a file written by --cudagraph-report"
        )
    if data["schema"] != SCHEMA:
        raise ReportError(
            f"report {name} has schema {short(data['schema'])}, but this pytest-cudagraph reads {SCHEMA!r}; "
            f"write both reports with the same plugin version"
        )
    if not isinstance(data.get("tests"), dict):
        raise ReportError(
            f"report {name} has no 'tests' mapping, so it is truncated or not a pytest-cudagraph report; "
            f"write it again with --cudagraph-report"
        )
    if not isinstance(data.get("env", {}), dict):
        raise ReportError(f"report {name} has an 'env' that is not a mapping; write the report again")
    for nodeid, record in data["tests"].items():
        if not isinstance(record, dict) or "outcome" not in record:
            raise ReportError(
                f"report {name} has a malformed record for {short(nodeid)} (no 'outcome'); write the report again"
            )
    try:
        if text is None or _SURROGATE_ESCAPE.search(text):
            check_text(data)
        check_numbers(data)
        typed: Report = check_types(data, _report_type())
    except Malformed as problem:
        raise ReportError(
            f"report {name} has {problem.describe()}; write it again with --cudagraph-report, or correct that field"
        ) from None
    return typed


def _report_type() -> Any:
    require_msgspec()
    from .schema import Report

    return Report


def require_msgspec() -> None:
    """ReportError unless msgspec can be imported (an install with --no-deps leaves it out)."""
    try:
        import msgspec  # noqa: F401
    except ImportError:
        raise ReportError(
            "checking a report needs msgspec, which is not installed: pip install msgspec "
            "(a dependency of pytest-cudagraph that an install with --no-deps leaves out)"
        ) from None


# ----------------------------------------------------------------------------
# the three passes
# ----------------------------------------------------------------------------


def check_types(value: Any, type_: Any, path: tuple[Any, ...] = ()) -> Any:
    """``value`` as ``type_`` (a schema type); Malformed at the first field that does not follow the type."""
    require_msgspec()
    import msgspec

    try:
        return msgspec.convert(value, type_, strict=True)
    except msgspec.ValidationError as error:
        raise _malformed_from(value, type_, path, str(error)) from None


def check_numbers(value: Any, path: tuple[Any, ...] = ()) -> None:
    """Every number in ``value`` fits a float, and it nests less than MAX_DEPTH levels from the top."""
    if not _numbers_fit(value, MAX_DEPTH - len(path)):
        _raise_at_number(value, path)


def _numbers_fit(value: Any, depth_left: int) -> bool:
    """The quick walk: no paths kept (a 10,000-test report is 300,000 objects); False at the first doubt."""
    isfinite = math.isfinite
    stack = [(value, depth_left)]
    while stack:
        container, left = stack.pop()
        if left <= 0:
            return False
        for item in container.values() if type(container) is dict else container:
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if not -_FLOAT_MAX <= item <= _FLOAT_MAX:
                    return False
            elif kind is float:
                if not isfinite(item):
                    return False
            elif kind is dict or kind is list:
                stack.append((item, left - 1))
            else:  # a subclass of a JSON type (a live record, not parsed JSON): the careful walk decides
                return False
    return True


def _raise_at_number(value: Any, path: tuple[Any, ...]) -> None:
    """The careful walk, with paths: raise Malformed at the number, or the nesting, the quick walk stopped at."""
    stack = [(value, path)]
    while stack:
        container, where = stack.pop()
        if len(where) >= MAX_DEPTH:
            raise Malformed(where, "...", f"which is nested deeper than {MAX_DEPTH} levels")
        for key, item in container.items() if type(container) is dict else enumerate(container):
            if isinstance(item, (dict, list)):
                stack.append((item, (*where, key)))
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and not _fits_float(item):
                raise Malformed((*where, key), item, "a number too large for a float")


def check_text(value: Any, path: tuple[Any, ...] = ()) -> None:
    """Raise Malformed at a key or string holding a lone surrogate (not text: printing it fails)."""
    stack = [(value, path)]
    while stack:
        container, where = stack.pop()
        for key, item in container.items() if type(container) is dict else enumerate(container):
            if type(key) is str and not is_text(key):
                raise Malformed((*where, key), item, "whose key is not text (a lone surrogate)")
            if isinstance(item, (dict, list)):
                stack.append((item, (*where, key)))
            elif type(item) is str and not is_text(item):
                raise Malformed((*where, key), item, "which is not text (a lone surrogate)")


def _fits_float(value: Any) -> bool:
    if isinstance(value, int):
        return -_FLOAT_MAX <= value <= _FLOAT_MAX
    return math.isfinite(value)


# ----------------------------------------------------------------------------
# msgspec's error, said as this plugin says it
# ----------------------------------------------------------------------------


def _malformed_from(value: Any, type_: Any, path: tuple[Any, ...], message: str) -> Malformed:
    """Find the field msgspec's error names (its path leaves mapping keys out) and word it from the type."""
    where = message.rsplit(" - at `$", 1)
    steps = _PATH_STEP.findall(where[1].rstrip("`")) if len(where) == 2 else []
    here = value
    trail: list[tuple[tuple[Any, ...], Any, Any]] = [(path, here, type_)]
    for field, index, _ in steps:
        if field:
            type_ = _field_type(type_, field)
            key: Any = field
        else:
            type_ = _item_type(type_, here)
            key = int(index) if index else _failing_key(here, type_)
        if key is None or not isinstance(here, (dict, list)):
            break
        here = here[key]
        path = (*path, key)
        trail.append((path, here, type_))
    # a list or mapping of scalars that carries its own words is reported whole, as one field
    if len(trail) >= 2 and _description(trail[-2][2]) is not None and not _is_container(trail[-1][2]):
        trail.pop()
    path, here, type_ = trail[-1]
    return Malformed(path, here, f"which is not {_words(type_)}")


def _alternatives(type_: Any) -> list[Any]:
    """A union's alternatives, UNSET left out; any other type is its own one alternative."""
    from msgspec import UnsetType

    if typing.get_origin(type_) in (typing.Union, types.UnionType):
        return [t for t in typing.get_args(type_) if t is not UnsetType]
    return [type_]


def _bare(type_: Any) -> Any:
    """The type without its ``Annotated`` words and, where one alternative is left, without UNSET."""
    while True:
        if typing.get_origin(type_) is typing.Annotated:
            type_ = typing.get_args(type_)[0]
            continue
        alternatives = _alternatives(type_)
        if len(alternatives) == 1 and alternatives[0] is not type_:
            type_ = alternatives[0]
            continue
        return type_


def _field_type(type_: Any, name: str) -> Any:
    """The type of the field a report names ``name`` in a Struct (or in the Struct among a union's alternatives)."""
    from msgspec import Struct

    for alternative in map(_bare, _alternatives(_bare(type_))):
        if isinstance(alternative, type) and issubclass(alternative, Struct):
            hints = typing.get_type_hints(alternative, include_extras=True)
            fields = dict(zip(alternative.__struct_encode_fields__, alternative.__struct_fields__))
            return hints.get(fields.get(name, name), Any)
    return Any


def _item_type(type_: Any, container: Any) -> Any:
    """The type of an item of ``container``, a list or a mapping, as ``type_`` (or its alternative of that kind) says."""
    kind = dict if isinstance(container, dict) else list
    for alternative in map(_bare, _alternatives(_bare(type_))):
        if typing.get_origin(alternative) is kind:
            return typing.get_args(alternative)[-1]
    return Any


def _failing_key(mapping: Any, item_type: Any) -> Any:
    """The first key of ``mapping`` whose value does not follow ``item_type`` (msgspec's path names none)."""
    import msgspec

    if not isinstance(mapping, dict):
        return None
    for key, item in mapping.items():
        try:
            msgspec.convert(item, item_type, strict=True)
        except msgspec.ValidationError:
            return key
    return None


def _description(type_: Any) -> str | None:
    """The words an ``Annotated[..., Meta(description=...)]`` alias carries (UNSET aside), else None."""
    from msgspec import Meta

    alternatives = _alternatives(type_)
    if len(alternatives) == 1 and typing.get_origin(alternatives[0]) is typing.Annotated:
        meta = next((m for m in typing.get_args(alternatives[0])[1:] if isinstance(m, Meta)), None)
        return meta.description if meta is not None else None
    return None


def _is_container(type_: Any) -> bool:

    from msgspec import Struct

    bare = _bare(type_)
    return typing.get_origin(bare) in (list, dict) or (isinstance(bare, type) and issubclass(bare, Struct))


def _words(type_: Any) -> str:
    """What a field of this type holds, in words: the alias's description, or the kind of container."""
    from msgspec import Struct

    described = _description(type_)
    if described is not None:
        return described
    bare = _bare(type_)
    alternatives = _alternatives(bare)
    if len(alternatives) > 1:  # an older plugin's shape beside the current one: the first
        return _words(alternatives[0])
    if typing.get_origin(bare) is dict or (isinstance(bare, type) and issubclass(bare, Struct)):
        return "a mapping"
    if typing.get_origin(bare) is list:
        return "a list"
    return "valid"


# ----------------------------------------------------------------------------
# words
# ----------------------------------------------------------------------------


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut in the middle to ``limit`` characters (a node id can be 3000 long)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + "..." + text[len(text) - (limit - 3 - head) :]


def field_path(path: tuple[Any, ...]) -> str:
    """``("tests", "a::t", "graphs", "sets", 1)`` -> ``tests['a::t'].graphs.sets[1]``."""
    text = ""
    for key in path:
        if isinstance(key, str) and _IDENTIFIER.fullmatch(key):
            text += f".{key}" if text else key
        else:
            text += f"[{short(key)}]"
    return text or "the top level"
