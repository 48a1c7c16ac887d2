"""The how-to's jq recipes, run with jq on real reports: each prints what the report holds where the reference says.

Each recipe's output is checked against the same facts read in Python from the
report, on a CPU run with failures, recompiles and cache misses, and on a GPU run
with graph pools.  Skipped where jq is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOWTO = ROOT / "docs" / "howto.md"
REPORTS = [
    ROOT / "docs" / "reports" / "examples-failing-cpu.json",  # failures, recompiles, cache misses (CPU)
    ROOT / "docs" / "reports" / "examples-torch2.11-h200-round3.json",  # graphs and their pools (H200)
]

pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (apt-get install jq)")


def recipes() -> dict[str, list[str]]:
    """The recipes of the how-to's jq section: {its comment: the command's words}."""
    text = HOWTO.read_text()
    section = text[text.index("## Read a report with jq") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    found, comment = {}, ""
    for line in block.group(1).splitlines():
        if line.startswith("# "):
            comment = line[2:]
        elif line.startswith("jq "):
            found[comment] = shlex.split(line)
    return found


def run(recipe: str, report: Path) -> str:
    words = recipes()[recipe]
    assert words[-1] == "report.json"
    done = subprocess.run([*words[:-1], str(report)], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def recipe_named(start: str) -> str:
    [name] = [name for name in recipes() if name.startswith(start)]
    return name


def test_the_section_has_five_recipes():
    assert len(recipes()) == 5


@pytest.fixture(params=REPORTS, ids=[path.name for path in REPORTS])
def report(request) -> tuple[Path, dict[str, Any]]:
    return request.param, json.loads(request.param.read_text())


def lines_of_tests_with(data: dict[str, Any], section: str, text: Any) -> str:
    """One line per test whose record has ``section``: ``node id: text(section)``, each ending in a newline."""
    return "".join(
        f"{nodeid}: {text(record[section])}\n" for nodeid, record in data["tests"].items() if record.get(section)
    )


def test_failed_tests_with_their_causes(report):
    path, data = report
    # a message may take several lines (the failure's whole account)
    expected = lines_of_tests_with(
        data, "failure", lambda failure: f"{failure.get('rule', 'test')} {failure['message']}"
    )
    assert run(recipe_named("failed tests"), path) == expected


def test_recompile_reasons_per_test(report):
    path, data = report
    expected = {
        nodeid: record["recompiles"]["reasons"]
        for nodeid, record in data["tests"].items()
        if record.get("recompiles", {}).get("count", 0) > 0
    }
    assert json.loads(run(recipe_named("recompile reasons"), path)) == expected


def test_cache_misses_per_layer(report):
    path, data = report
    caches = data["summary"]["caches"]
    expected = {layer: counts["miss"] for layer, counts in caches.items() if counts.get("miss") is not None}
    assert json.loads(run(recipe_named("cache misses"), path)) == expected


def test_the_pool_of_each_test_with_graphs(report):
    path, data = report
    expected = lines_of_tests_with(
        data, "graphs", lambda graphs: f"pool {graphs['pool_bytes']} bytes, {graphs['captured']} graphs"
    )
    assert run(recipe_named("the pool"), path) == expected


def test_durations_slowest_first(report):
    path, data = report
    ordered = sorted(data["durations"].items(), key=lambda item: -item[1])
    lines = run(recipe_named("durations"), path).splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [nodeid for nodeid, _ in ordered]
    assert [float(line.split("s ", 1)[0]) for line in lines] == [seconds for _, seconds in ordered]


def test_each_recipe_finds_something_in_one_of_the_reports():
    for recipe in recipes():
        assert any(run(recipe, path).strip() not in ("", "{}") for path in REPORTS), recipe
