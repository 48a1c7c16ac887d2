"""Every code block in the docs that is a complete test module is run here.

A block is a test module when its first line is a comment naming a test file
(``# test_something.py``) or its fence says ``title="test_something.py"``.  On a
machine without a GPU its ``cudagraph`` tests skip; everything else must pass.

Without ``--cudagraph`` each quick block runs alone in this process (torch is
imported already; they compile with the eager backend only).  With it, the
blocks capture graphs on the GPU, and all the quick ones run together in one
child interpreter; the slow blocks, which compile with Inductor or start other
interpreters, are child runs each.
"""

import re
import sys
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


# a block that compiles with Inductor (the compile_cache marker or fixture), runs a bundle's cycle through fresh
# interpreters, or spawns rank processes, takes seconds: it runs alone, with the slow tests
SLOW_BLOCK_WORDS = ("compile_cache", "cudagraph_ranks", ".bundle_cycle(")


def _slow(source: str) -> bool:
    return any(word in source for word in SLOW_BLOCK_WORDS)


SLOW_BLOCKS = [
    pytest.param(*block.values, marks=pytest.mark.slow, id=block.id) for block in BLOCKS if _slow(block.values[2])
]
QUICK_BLOCKS = [block for block in BLOCKS if not _slow(block.values[2])]
# pytest's -rA lines: "PASSED f.py::test", "SKIPPED [1] f.py:9: reason", "FAILED f.py::test - ..."
SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?:\[\d+\] )?(test_\w+\.py)\b(.*)$")


def _gpu_args(config: pytest.Config) -> list[str]:
    return ["--cudagraph"] if config.getoption("cudagraph") else []


def _summary_lines(output_lines: list[str], filename: str) -> list[str]:
    """The -rA lines of one block file."""
    return [line for line in output_lines if (match := SUMMARY_LINE.match(line)) and match[2] == filename]


def _check_block_outcomes(lines: list[str], output: str) -> None:
    """A block's summary lines: nothing failed, at least one test ran or skipped, each skip for want of a GPU."""
    assert lines, output
    assert not [line for line in lines if line.startswith(("FAILED", "ERROR", "XPASS"))], output
    for line in lines:
        if line.startswith("SKIPPED"):
            assert "needs --cudagraph" in line or "no CUDA device" in line, line


@pytest.fixture(scope="module")
def quick_blocks_run(request, tmp_path_factory) -> tuple[dict[str, list[str]], str]:
    """Every quick block in one child pytest, under --cudagraph: one interpreter imports torch for all of them.

    Returns each block file's summary lines and the whole output.
    """
    import subprocess

    directory = tmp_path_factory.mktemp("doc_blocks")
    for block in QUICK_BLOCKS:
        (directory / block.values[1]).write_text(block.values[2])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-rA", "--color=no"]
        + _gpu_args(request.config),
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        match = SUMMARY_LINE.match(line)
        if match:
            lines.setdefault(match[2], []).append(line)
    return lines, result.stdout + result.stderr


@pytest.mark.parametrize("page, filename, source", QUICK_BLOCKS)
def test_doc_block_runs(request, dynamo_modules_loaded, pytester, monkeypatch, page, filename, source):
    if request.config.getoption("cudagraph"):
        # the blocks capture graphs on the GPU: in a child interpreter, one for all the quick blocks
        lines, output = request.getfixturevalue("quick_blocks_run")
        _check_block_outcomes(lines.get(filename, []), output)
        return
    # in this process: without --cudagraph the blocks' graph tests skip, and the rest compile with the eager backend.
    # A module of this suite of the block's name, imported here, would stand in the block's way while it runs.
    monkeypatch.delitem(sys.modules, filename[:-3], raising=False)
    pytester.makepyfile(**{filename[:-3]: source})
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-rA", "--color=no")
    _check_block_outcomes(_summary_lines(result.stdout.lines, filename), result.stdout.str())


@pytest.mark.parametrize("page, filename, source", SLOW_BLOCKS)
def test_slow_doc_block_runs(pytester, request, page, filename, source):
    pytester.makepyfile(**{filename[:-3]: source})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--color=no", *_gpu_args(request.config))
    _check_block_outcomes(_summary_lines(result.stdout.lines, filename), result.stdout.str())


def test_docs_site_builds_without_warnings(tmp_path):
    """The MkDocs site builds in strict mode: no broken link, no missing page, no bad fence."""
    # mkdocs comes with the "test" extra; a GPU runner with a fixed environment may lack it
    pytest.importorskip("mkdocs", reason="building the docs needs mkdocs (pip install -e '.[test]')")
    import subprocess

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
    # the reports the pages link to are on the site, and so is every page
    assert (tmp_path / "site" / "reports" / "annotations-examples-failing-cpu.txt").exists()
    assert (tmp_path / "site" / "zoo" / "index.html").exists()


def test_the_strict_docs_build_fails_on_links_that_break_on_the_site_or_on_github(tmp_path):
    """A page left out of the nav, a link into a file the site leaves out, and a section link in MkDocs' format."""
    pytest.importorskip("mkdocs", reason="building the docs needs mkdocs (pip install -e '.[test]')")
    import shutil
    import subprocess

    docs = tmp_path / "docs"
    (docs / "examples").mkdir(parents=True)
    shutil.copy(DOCS / "source_links.py", docs)
    (docs / "examples" / "test_x.py").write_text("")
    (docs / "index.md").write_text(
        "# Home\n\n## `--cudagraph-cache-dir` and the cache root\n\n"
        "[GitHub's anchor](#--cudagraph-cache-dir-and-the-cache-root), "
        "[MkDocs' anchor](#-cudagraph-cache-dir-and-the-cache-root), [excluded](examples/test_x.py)\n"
    )
    (docs / "other.md").write_text("# Other\n")
    config = (DOCS.parent / "mkdocs.yml").read_text()
    nav = config[config.index("\nnav:") + 1 : config.index("\nhooks:") + 1]
    (tmp_path / "mkdocs.yml").write_text(config.replace(nav, "nav:\n  - Home: index.md\n"))
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--no-strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 3, result.stderr
    assert 'are not included in the "nav"' in warnings[0] and "other.md" in result.stderr
    assert "index.md links to examples/test_x.py, which the site leaves out (exclude_docs)" in result.stderr
    assert "'#-cudagraph-cache-dir-and-the-cache-root', but there is no such anchor" in result.stderr
