"""MkDocs hook: links as they work on GitHub, where the README sends readers, and on the site alike.

- A link from a page to a file of the repository outside docs/ becomes its text on the
  site. architecture.md links the source files it names
  (``[records/schema.py](../pytest_cudagraph/records/schema.py)``), which works where
  the Markdown is read in the repository (GitHub, an editor); the site publishes docs/
  alone, so there the link is left as its text rather than broken.
  tests/test_docs_architecture.py checks that every such link names a file that exists.
- A link to a file the site leaves out (``exclude_docs``) is a warning, so ``mkdocs
  build --strict`` fails: MkDocs itself only notes it.
- Headings get GitHub's anchors (``github_slug``), so a section link that jumps on
  GitHub jumps on the site, and one in another format fails the strict build
  (``validation: links: anchors``).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from mkdocs.plugins import get_plugin_logger

log = get_plugin_logger(__name__)

# [text](../path) where the path leaves docs/ and is not a page of the site
OUTSIDE_LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s#]+)(?:#[^)\s]*)?\)")
# [text](path) or [text](path#anchor) relative to the page: no scheme, no bare anchor
RELATIVE_LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s#]+)(?:#[^)\s]*)?\)")
# what GitHub drops from a heading's text to make its anchor (github-slugger's punctuation)
_GITHUB_DROPPED = re.compile(r"[\u2000-\u206F\u2E00-\u2E7F\\'!\"#$%&()*+,./:;<=>?@\[\]^`{|}~]")

_excluded: set[str] = set()


def github_slug(value: str, separator: str = "-") -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, each space a hyphen."""
    return _GITHUB_DROPPED.sub("", value.strip().lower()).replace(" ", "-")


def on_config(config: Any, **_: Any) -> Any:
    config.mdx_configs.setdefault("toc", {})["slugify"] = github_slug
    return config


def on_files(files: Any, **_: Any) -> Any:
    _excluded.clear()
    _excluded.update(file.src_uri for file in files if file.inclusion.is_excluded())
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    base = posixpath.dirname(page.file.src_uri)
    for target in RELATIVE_LINK.findall(markdown):
        resolved = posixpath.normpath(posixpath.join(base, target))
        if resolved in _excluded:
            log.warning(f"{page.file.src_uri} links to {target}, which the site leaves out (exclude_docs)")
    return OUTSIDE_LINK.sub(lambda match: match.group(1), markdown)
