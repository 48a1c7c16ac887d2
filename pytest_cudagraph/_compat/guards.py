"""Every failing guard of a recompile, evaluated from Dynamo's cache entries (torch reports only the first).

Placeholder until the evaluation lands: returns None, so callers keep torch's text.
"""

from __future__ import annotations

from typing import Any


def failing_guards_of_recompile() -> list[Any] | None:
    """Called inside Dynamo's recompile log record: every failing guard of every cached entry, or None."""
    return None
