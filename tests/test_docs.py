"""Every code block in the docs that is a complete test module is run here.

A block is a test module when its first line is a comment naming a test file
(``# test_something.py``) or its fence says ``title="test_something.py"``.  On a
machine without a GPU its ``cudagraph`` tests skip; everything else must pass.
"""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
TITLE = re.compile(r'title="(test_[\w]+\.py)"')
FIRST_LINE = re.compile(r"#\s*(test_\w+\.py)\s*$")


def doc_test_modules():
    blocks = []
    for page in sorted(DOCS.glob("*.md")):
        for match in FENCE.finditer(page.read_text()):
            info, body = match.groups()
            first = body.splitlines()[0] if body else ""
            name = TITLE.search(info) or FIRST_LINE.match(first)
            if name:
                blocks.append(pytest.param(page.name, name.group(1), body, id=f"{page.name}::{name.group(1)}"))
    return blocks


BLOCKS = doc_test_modules()


def test_docs_hold_test_modules():
    assert len(BLOCKS) >= 3, "the quickstart's examples should be runnable test modules"


# a block that compiles with Inductor cold and warm, runs a bundle's cycle through fresh interpreters, or
# spawns rank processes, takes seconds: it runs with the slow tests
SLOW_BLOCK_WORDS = ("@pytest.mark.compile_cache", "cudagraph_ranks", ".bundle_cycle(")
BLOCK_PARAMS = [
    pytest.param(*block.values, marks=pytest.mark.slow, id=block.id)
    if any(word in block.values[2] for word in SLOW_BLOCK_WORDS)
    else block
    for block in BLOCKS
]


@pytest.mark.parametrize("page, filename, source", BLOCK_PARAMS)
def test_doc_block_runs(pytester, request, page, filename, source):
    pytester.makepyfile(**{filename[:-3]: source})
    gpu = ["--cudagraph"] if request.config.getoption("cudagraph") else []
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", *gpu)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) >= 1
    for line in result.stdout.lines:
        if line.startswith("SKIPPED"):
            assert "needs --cudagraph" in line or "no CUDA device" in line, line


def test_docs_site_builds_without_warnings(tmp_path):
    """The MkDocs site builds in strict mode: no broken link, no missing page, no bad fence."""
    # mkdocs comes with the "test" extra; a GPU runner with a fixed environment may lack it
    pytest.importorskip("mkdocs", reason="building the docs needs mkdocs (pip install -e '.[test]')")
    import subprocess
    import sys

    root = DOCS.parent
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "concepts" / "index.html").exists()
