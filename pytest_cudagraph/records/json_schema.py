"""The report's JSON Schema (draft 2020-12), generated from ``schema.py``'s types: what ``pytest-cudagraph schema`` prints.

A CI dashboard validates reports with any standard validator against it; the
types stay the one definition, and nothing here is written by hand but the
schema's name and title.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .schema import Report

# a name, not an address: the schema is printed by `pytest-cudagraph schema`, not served anywhere
SCHEMA_ID = "urn:pytest-cudagraph:report:3"


def report_json_schema() -> dict[str, Any]:
    """The report's JSON Schema (draft 2020-12), generated from the types of ``schema.py``."""
    schema = msgspec.json.schema(Report)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "pytest-cudagraph report",
        "description": (
            "A report written by pytest --cudagraph-report (schema pytest-cudagraph/3). "
            "Every field but schema, tests and a record's outcome is optional; fields not named are allowed."
        ),
        **schema,
    }
