"""MkDocs hook: a link from a page to a file of the repository outside docs/ becomes its text on the site.

architecture.md links the source files it names (``[records/schema.py](../pytest_cudagraph/records/schema.py)``),
which works where the Markdown is read in the repository (GitHub, an editor); the site publishes docs/ alone,
so there the link is left as its text rather than broken. tests/test_docs_architecture.py checks that every
such link names a file that exists.
"""

from __future__ import annotations

import re
from typing import Any

# [text](../path) where the path leaves docs/ and is not a page of the site
OUTSIDE_LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s#]+)(?:#[^)\s]*)?\)")


def on_page_markdown(markdown: str, **_: Any) -> str:
    return OUTSIDE_LINK.sub(lambda match: match.group(1), markdown)
