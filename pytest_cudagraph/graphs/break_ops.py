"""Break ops: the one validator of the ``break_at=`` names of a breakable capture.

``capture_graphs(..., break_at=...)``, ``cudagraphs.agree(..., break_at=...)`` and
``@pytest.mark.cudagraph(break_at=...)`` all take the ops a breakable capture ends
a graph at, as ``"namespace::op"`` names (optionally ``".overload"``).  Their form is
checked here, with no torch, so the marker reports a typo at collection in the same
sentence the plain API uses; whether the op is registered is checked at capture
(``breakable.resolve_break_at``).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import MisuseError

EXAMPLE = "break_at=('mylib::attention',)"
# namespace::op or namespace::op.overload, as torch.library names them
OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def is_op_name(value: Any) -> bool:
    """Whether ``value`` is a ``"namespace::op"`` string (optionally with ``".overload"``)."""
    return isinstance(value, str) and OP_NAME.fullmatch(value) is not None


def break_at_entries(
    value: Any, where: str = "break_at", *, error: type[Exception] = MisuseError, names_only: bool = False
) -> tuple[Any, ...]:
    """The entries of ``value`` (one name, or an iterable of names), each name's form checked.

    With ``names_only`` every entry must be a name (the marker); otherwise an entry
    that is not a string (an OpOverload, a ``torch.library.custom_op`` object) is
    passed on for ``resolve_break_at`` to name.  ``None`` and an empty tuple are no
    break ops.  Raises ``error`` with one sentence naming ``where``, the value and the fix.

    Example::

        break_at_entries("mylib::attention")          # ("mylib::attention",)
        break_at_entries(("attention",))              # MisuseError: not a 'namespace::op' name
    """
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    if not hasattr(value, "__iter__") or isinstance(value, (bytes, dict)):
        raise error(f"{where}={value!r} is not a list of op names; give 'namespace::op' strings, e.g. {EXAMPLE}")
    entries = tuple(value)
    for entry in entries:
        if isinstance(entry, str) or names_only:
            if not is_op_name(entry):
                raise error(
                    f"{where}={list(entries)!r}: {entry!r} is not a 'namespace::op' name; name each registered op "
                    f"the graph ends at (torch.library's name, as in torch.ops.mylib.attention), e.g. {EXAMPLE}"
                )
    return tuple(dict.fromkeys(entries))
