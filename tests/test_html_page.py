"""The HTML page as a reader sees it: failures first with their messages, cold/warm tables, and a layout that fits.

The content tests read the page with html.parser.  The layout test opens the page
in headless Chromium at a wide and at a laptop width and asserts that nothing
pushes the page sideways; it skips where no Chromium is installed.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from sample_reports import (
    ENV_2_13,
    graph_record,
    recompile_events_record,
    recompile_record,
    sample_report,
    where_and_why_report,
)

from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.show import render_html

EVIL = '<script>alert("x")</script>'
CACHE_TEST = "tests/test_model.py::test_warm_start_hits_every_layer"
BROKEN_TEST = "tests/test_model.py::test_custom_pass_bypasses_the_cache"
LONG_TEST = "tests/test_model.py::test_decode[" + "config-" * 60 + "bs16]"
KEYS_TEST = "tests/test_model.py::test_warm_lookup_explained"
LONG_METADATA = (
    "TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 4096]), stride=(4096, 1), device=device(type='cuda', "
    "index=0), layout=torch.strided, memory_format=torch.contiguous_format, storage_offset=0, storage_bytes=None, "
    "requires_grad=True, is_quantized=False, is_conj=False, is_neg=False, is_inference=False, is_sparse=False)"
)

# the plugin's message for a warm pass that was no pure hit: a headline, its table, a hint
BROKEN_MESSAGE = (
    "Failed: @pytest.mark.compile_cache(mode='inprocess'): the warm pass was not a pure cache hit (1 problem); "
    "cache dir /tmp/pytest-of-ci/pytest-7/cudagraph-cache/probes/main-1-abc/test_custom_pass-1/marked-1\n"
    f"  - fxgraph: bypass 1 on the warm pass {EVIL}\n\n"
    "  layer         counter     cold  warm  expected on warm\n"
    "  fxgraph       bypass      1     1     0\n"
    "  hint: subclass CustomGraphPass and return a uuid() that changes only when the pass changes " + "x" * 300
)


def _stats(hit=0, miss=0, saved=0, bypass=0, compiled=0, loaded=0) -> dict:
    counts = {"hit": hit, "miss": miss, "bypass": bypass, "saved": saved}
    return {
        "fxgraph": dict(counts),
        "aot_autograd": {**counts, "guard_miss": 0},
        "triton": {"compiled": compiled, "loaded": loaded, "bundler_saved_files": 0},
    }


def _pass(stats: dict, duration_s: float, process: str = "this interpreter") -> dict:
    return {
        "stats": stats,
        "recorded": {"out": {"shape": [16, 16], "dtype": "float32"}},
        "duration_s": duration_s,
        "process": process,
        "cache_dir": "/tmp/cudagraph-cache/probes/marked-1",
    }


def warm_start_record() -> dict:
    """A passing compile_cache test: cold misses and saves, warm hits; its caches section adds the two up."""
    return {
        "outcome": "passed",
        "duration_s": 65.9,
        "caches": _stats(hit=1, miss=1, saved=1, compiled=3, loaded=3),
        "extra": {
            "compile_cache": {
                "mode": "subprocess",
                "cold": _pass(_stats(miss=1, saved=1, compiled=3), 1.0537),
                "warm": _pass(_stats(hit=1, loaded=3), 51.6423, "a fresh interpreter (pid 1660)"),
            },
            "restored_after_test": ["torch.backends.cudnn.benchmark"],
        },
    }


def broken_cache_record() -> dict:
    """A failed compile_cache test: the warm pass bypassed the FX-graph cache."""
    cold = _stats(bypass=1)
    cold["bypass_reasons"] = {"fxgraph": ["Unsupported post grad custom pass"]}
    return {
        "outcome": "failed",
        "duration_s": 10.3,
        "caches": _stats(bypass=2),
        "failure": {"when": "call", "message": BROKEN_MESSAGE},
        "extra": {
            "compile_cache": {"mode": "inprocess", "cold": _pass(cold, 10.2), "warm": _pass(_stats(bypass=1), 0.1)}
        },
    }


def cache_keys_record() -> dict:
    """A passing test whose warm pass missed, explained by long components, and whose AOT lookup bypassed."""
    record = {"outcome": "passed", "duration_s": 3.1, "caches": _stats(miss=2, saved=2, bypass=1)}
    gm = ["abcdefabcdef", None]
    explained = [f"example_inputs[0]: {LONG_METADATA} -> {LONG_METADATA.replace('True', 'False')}", EVIL]
    record["cache_keys"] = {
        "lookups": [
            {
                "layer": "fxgraph",
                "outcome": "miss",
                "key": "f" + "a" * 51,
                "pass": "cold",
                "graph": 1,
                "components": {"gm": gm},
            },
            {
                "layer": "fxgraph",
                "outcome": "miss",
                "key": "f" + "b" * 51,
                "pass": "warm",
                "graph": 1,
                "components": {"gm": gm, "x": ["bbbbbbbbbbbb", "1"]},
                "explained": explained,
                "compared_with": "the cold pass",
            },
            {
                "layer": "aot_autograd",
                "outcome": "bypass",
                "key": None,
                "pass": "warm",
                "graph": 1,
                "components": None,
                "bypass_reason": "Unsupported call_function target " + "flex_attention_" * 20,
            },
        ],
        "note": "torch 2.14.1 records no AOTAutograd components without DEBUG logging",
    }
    return record


def page_report() -> dict:
    """sample_report's five tests, a failed and a passing compile_cache test, and a 400-character node id.

    And a passing test whose cache lookups the page draws (long explanations, a bypass).
    """
    report = sample_report()
    tests = dict(report["tests"])
    tests[CACHE_TEST] = warm_start_record()
    tests[BROKEN_TEST] = broken_cache_record()
    tests[LONG_TEST] = graph_record()
    tests[KEYS_TEST] = cache_keys_record()
    return build_report(ENV_2_13, tests, exitstatus=1, created="2025-01-31T12:00:00+00:00")


def layout_report() -> dict:
    """page_report's tests and the where-and-why ones, their guards, code lines and errors long and unbroken."""
    report = page_report()
    extra = where_and_why_report()["tests"]
    long_code = "out = model(" + "x" * 300 + ")"
    event = extra["tests/test_x.py::test_dynamic_batch"]["recompiles"]["events"][1]
    event["call_site"]["code"] = long_code
    event["guards"][1]["guard"] = "check_tensor(L['x'], " + "a" * 400 + ")"
    event["guards"][1]["actual"] = "TensorMetadata(" + "b" * 200 + ")"
    extra["tests/test_x.py::test_reduce_overhead"]["reduce_overhead"]["skipped"][0]["code"] = long_code
    extra["tests/test_x.py::test_reduce_overhead"]["reduce_overhead"]["regions"]["r" * 200] = {"replayed": 1}
    extra["tests/test_x.py::test_pieces"]["piecewise"]["uncaptured"][0]["piece"] = "submod_" + "1" * 200
    rank = extra["tests/test_x.py::test_tp"]["ranks"]["per_rank"][0]
    rank["waiting_at"] = "in " + "all_reduce" * 40
    return build_report(ENV_2_13, {**report["tests"], **extra}, exitstatus=1, created=report["created"])


class Page(HTMLParser):
    """The parts of a page the tests look at: section order, texts by element, tables' cells."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.section_titles: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.open: list[tuple[str, dict]] = []
        self.texts: dict[str, list[str]] = {}  # class of the element -> its texts
        self.tables: list[list[list[str]]] = []  # class "passes" tables: rows of cell texts
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "wbr":
            return
        if tag == "h2" and self.open and self.open[-1][0] == "section":
            self.section_titles.append(attrs.get("title", ""))
        if tag == "table" and attrs.get("class") == "passes":
            self.tables.append([])
        if tag in ("tr", "caption") and self._inside_passes():
            self.tables[-1].append([])
        if tag in ("td", "th", "caption") and self._inside_passes():
            self.tables[-1][-1].append("")
        self.open.append((tag, attrs))

    def handle_endtag(self, tag):
        while self.open and self.open[-1][0] != tag:
            self.open.pop()  # void elements
        if self.open:
            self.open.pop()

    def handle_data(self, data):
        for _, attrs in self.open:
            for css in (attrs.get("class") or "").split():
                self.texts.setdefault(css, []).append(data)
        if self._inside_passes() and any(tag in ("td", "th", "caption") for tag, _ in self.open):
            self.tables[-1][-1][-1] += data.strip()

    def _inside_passes(self) -> bool:
        return any(tag == "table" and attrs.get("class") == "passes" for tag, attrs in self.open)

    def text(self, css: str) -> str:
        return "".join(self.texts.get(css, []))


# ----------------------------------------------------------------------------
# failures first, with their messages
# ----------------------------------------------------------------------------


def test_failed_tests_come_first_each_with_its_whole_message_escaped():
    page = render_html(page_report())
    parsed = Page(page)
    assert parsed.section_titles[0] == BROKEN_TEST  # the only failure, before the tests listed above it
    assert parsed.text("failure-message") == BROKEN_MESSAGE  # whole, as pytest reported it
    assert parsed.text("failure-head") == "failed in call"
    assert EVIL not in page and html.escape(EVIL) in page
    # the overview row of the failure comes first and carries the message's first line
    assert parsed.text("headline").startswith("Failed: @pytest.mark.compile_cache(mode='inprocess'): the warm pass")
    links = [attrs["title"] for tag, attrs in parsed.tags if tag == "a" and "title" in attrs]
    assert links[0] == BROKEN_TEST


def test_errors_crashes_and_recompile_limit_hits_are_listed_with_the_failures():
    limit_hit = recompile_record(2)
    limit_hit["recompiles"]["limit_hits"] = ["forward hit config.recompile_limit (8)"]
    tests = {
        "a::test_passes": graph_record(),
        # passed: the recompiles fixture does not fail a test on a limit hit, and the hit is no alarm
        "b::test_limit": limit_hit,
        "c::test_setup": {"outcome": "error", "failure": {"when": "setup", "message": "fixture 'model' not found"}},
        "d::test_worker_died": {"outcome": "crashed"},
        "e::test_old_record": {"outcome": "failed"},
    }
    parsed = Page(render_html(build_report(ENV_2_13, tests)))
    assert parsed.section_titles == [
        "c::test_setup",
        "d::test_worker_died",
        "e::test_old_record",
        "a::test_passes",
        "b::test_limit",
    ]
    assert parsed.text("failure-head") == "error in setup"
    assert "Its worker died while it ran: there is no failure message." in parsed.text("note")
    assert "The record holds no failure message." in parsed.text("note")
    assert "Recompile limit hit 1 time:" in parsed.text("warn")


# ----------------------------------------------------------------------------
# cold and warm passes
# ----------------------------------------------------------------------------


def test_each_cold_warm_pair_is_a_table_of_layers_by_cold_and_warm_counters():
    parsed = Page(render_html(page_report()))
    broken, warm_start = parsed.tables  # the failure's first
    caption, groups, counters, *rows = warm_start
    assert caption[0].startswith("@pytest.mark.compile_cache(mode='subprocess')")
    assert "cold pass 1.05 s in this interpreter" in caption[0]
    assert "warm pass 51.6 s in a fresh interpreter (pid 1660)" in caption[0]
    assert groups == ["layer", "cold pass", "warm pass"]
    assert counters == ["hit", "miss", "saved", "bypass", "compiled", "loaded"] * 2
    assert rows == [
        ["fxgraph", "0", "1", "1", "0", "", "", "1", "0", "0", "0", "", ""],
        ["aot_autograd", "0", "1", "1", "0", "", "", "1", "0", "0", "0", "", ""],
        ["triton", "", "", "", "", "3", "0", "", "", "", "", "0", "3"],
    ]
    assert broken[3][:5] == ["fxgraph", "0", "0", "0", "1"]


def test_a_warm_pass_that_is_no_pure_hit_is_marked_and_its_bypass_reason_shown():
    page = render_html(page_report())
    section = page[page.index(f'<h2 title="{BROKEN_TEST}"') :]
    section = section[: section.index("</section>")]
    # warm: no hit on fxgraph and aot_autograd, one bypass each; the cold pass is not judged
    assert section.count('class="num off"') + section.count('class="num first off"') == 4
    assert "bypass (fxgraph, cold pass): Unsupported post grad custom pass" in html.unescape(section)


def test_the_overview_shows_cold_to_warm_not_the_passes_added_up():
    page = render_html(page_report())
    row = next(cells for cells in _overview_rows(page) if cells[0].endswith("test_warm_start_hits_every_layer"))
    assert row[6:] == ["m=1 s=1 -> h=1", "m=1 s=1 -> h=1", "c=3 -> l=3"]
    assert not any("h=1 m=1" in cell for cell in row)  # the whole-life counters, added up
    assert "a -> b: the cold pass, then the warm pass" in Page(page).text("legend-line")


def test_the_passes_the_page_draws_are_not_repeated_as_json_and_the_rest_of_extra_is_folded():
    page = render_html(page_report())
    section = page[page.index(f'<h2 title="{CACHE_TEST}"') :]
    section = section[: section.index("</section>")]
    assert "compile_cache" not in section.replace("@pytest.mark.compile_cache", "")
    assert "&quot;cold&quot;" not in section and '"stats"' not in section
    assert section.count("/tmp/cudagraph-cache/probes/marked-1") == 1  # the pair's cache dir, once
    assert "compared between the passes: out (float32 16x16)" in section
    folded = re.findall(r"<details>(.*?)</details>", section, re.S)
    assert any("extra: restored_after_test" in block and "torch.backends.cudnn.benchmark" in block for block in folded)
    # the whole-life counters, which add the passes up, are folded away too
    assert any("whole-life counters" in block for block in folded)
    assert "<details open" not in page


def test_a_pair_the_page_cannot_draw_stays_in_the_raw_block():
    record = warm_start_record()
    record["extra"]["cold_warm"] = [{"mode": "inprocess", "cold": "garbled"}]
    page = render_html(build_report(ENV_2_13, {CACHE_TEST: record}))
    folded = re.findall(r"<details>(.*?)</details>", page, re.S)
    assert any("extra: restored_after_test, cold_warm" in block and "garbled" in block for block in folded)
    assert len(Page(page).tables) == 1  # the marker's pair still gets its table


def test_several_cold_warm_calls_get_a_table_each_and_their_sum_in_the_overview():
    record = {
        "outcome": "passed",
        "extra": {
            "cold_warm": [
                {"mode": "inprocess", "cold": _pass(_stats(miss=1), 1.0), "warm": _pass(_stats(hit=1), 0.5)},
                {"mode": "portable", "cold": _pass(_stats(miss=2), 2.0), "warm": _pass(_stats(hit=2), 0.5)},
            ]
        },
    }
    page = render_html(build_report(ENV_2_13, {"a::t": record}))
    first, second = Page(page).tables
    assert first[0][0].startswith("cold_warm(mode='inprocess') #1") and second[0][0].startswith("portable() #2")
    assert _overview_rows(page)[0][6] == "m=3 -> h=3"
    assert "<details" not in page  # both pairs drawn, no raw block, no whole-life counters


def test_each_tests_cache_lookups_are_a_table_with_explained_misses_marked():
    page = render_html(page_report())
    section = page[page.index(f'<h2 title="{KEYS_TEST}"') :]
    section = section[: section.index("</section>")]
    assert "<h3>Cache lookups</h3>" in section
    table = section[section.index('<table class="lookups">') : section.index("</table>", section.index("lookups"))]
    rows = re.findall(r"<tr( class=\"explained\")?>(.*?)</tr>", table, re.S)[1:]
    cells = [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for _, row in rows
    ]
    assert [c[:5] for c in cells] == [
        ["fxgraph", "cold", "1", "miss", "faaaaaaaaaaa"],
        ["fxgraph", "warm", "1", "miss", "fbbbbbbbbbbb"],
        ["aot_autograd", "warm", "1", "bypass", "-"],
    ]
    assert [marked for marked, _ in rows] == ["", ' class="explained"', ' class="explained"']
    assert f'title="f{"b" * 51}"' in table  # the whole key, on the prefix
    assert cells[1][5].startswith("compared with the cold pass:example_inputs[0]: TensorMetadata(")
    assert cells[2][5].startswith("bypass: Unsupported call_function target flex_attention_")
    assert EVIL not in section and html.escape(EVIL) in section
    assert '<p class="small">torch 2.14.1 records no AOTAutograd components without DEBUG logging</p>' in section
    assert "cache_keys" not in section  # not repeated as a raw section


def test_a_report_without_failures_extra_or_caches_renders():
    tests = {"a::test_plain": {"outcome": "passed"}, "b::test_skipped": {"outcome": "skipped", "duration_s": 0.0}}
    page = render_html(build_report({}, tests))
    parsed = Page(page)
    assert parsed.section_titles == ["a::test_plain", "b::test_skipped"]
    assert "failure" not in parsed.texts and "<details" not in page and parsed.tables == []


def test_the_verdict_line_says_when_the_run_is_incomplete():
    run = {"complete": False, "incomplete_reasons": ["2 selected tests never ran"], "not_run": [], "not_run_count": 2}
    page = render_html(sample_report(run=run))
    assert '<p class="verdict bad">' in page
    assert "; the run is incomplete (see the summary)" in Page(page).text("verdict")
    assert '<p class="verdict">' in render_html(sample_report())  # every test passed or skipped, nothing missing


def test_node_ids_break_after_slashes_and_double_colons_and_before_parameters():
    page = render_html(
        build_report(ENV_2_13, {"tests/gpu/test_model.py::TestDecode::test_step[bs-16]": graph_record()})
    )
    assert '<span class="path">tests/<wbr>gpu/<wbr>test_<wbr>model.py::</span><wbr>' in page
    assert "TestDecode::<wbr>test_<wbr>step<wbr>[bs-<wbr>16]" in page


def _overview_rows(page: str) -> list[list[str]]:
    """The overview's test rows as cell texts (the failure headline rows left out)."""
    table = page[page.index('<table class="tests">') :]
    table = table[: table.index("</table>")]
    rows = []
    for row in re.findall(r"<tr(?: class=\"has-headline\")?>(.*?)</tr>", table)[1:]:
        cells = [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        rows.append(cells)
    return rows


# ----------------------------------------------------------------------------
# the layout in a browser
# ----------------------------------------------------------------------------

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# a laptop's width and a wide screen's
WIDTHS = (1024, 1400)
# measured on load: does anything stick out of the window, or out of its own box?
LAYOUT_PROBE = """
<pre id="layout-result"></pre>
<script>
addEventListener("load", () => {
  const width = innerWidth, problems = [];
  const name = (el) => el.tagName.toLowerCase() + (el.className ? "." + el.className : "") + " " + JSON.stringify(el.textContent.slice(0, 60));
  for (const el of document.querySelectorAll("body *")) {
    if (el.id === "layout-result" || el.tagName === "SCRIPT") continue;
    const box = el.getBoundingClientRect();
    if (box.width && (box.right > width + 1 || box.left < -1)) problems.push(name(el) + " reaches " + Math.round(box.right));
  }
  for (const el of document.querySelectorAll("table, pre, td, th, caption, li, h2, p, summary")) {
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== "inline")
      problems.push(name(el) + " content " + el.scrollWidth + " > box " + el.clientWidth);
  }
  // a figure shown on one line must stay on one line: all its boxes at one height
  const lines = (el) => new Set([...el.getClientRects()].map((box) => Math.round(box.top))).size;
  const wrapped = [...document.querySelectorAll(".nowrap")].filter((el) => lines(el) > 1);
  document.getElementById("layout-result").textContent = JSON.stringify({
    width, scrollWidth: document.documentElement.scrollWidth, problems, wrapped: wrapped.map(name),
    tables: document.querySelectorAll("table").length,
  });
});
</script>
"""


def _chromium() -> str:
    for name in ("/usr/bin/chromium", *CHROMIUM_NAMES):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"no Chromium found (looked for /usr/bin/chromium and {', '.join(CHROMIUM_NAMES)} on PATH)")


def _run_chromium(chromium: str, profile: Path, width: int, *args: str) -> subprocess.CompletedProcess:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        f"--window-size={width},1600",
        *args,
    ]
    # a browser that hangs must not hang the suite
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_overflows_the_page_in_chromium(tmp_path, width):
    chromium = _chromium()
    page = render_html(layout_report(), title="pytest-cudagraph report: page.json")
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")

    dumped = _run_chromium(
        chromium, tmp_path / "profile", width, "--virtual-time-budget=2000", "--dump-dom", probe.as_uri()
    )
    found = re.search(r'<pre id="layout-result">(.*?)</pre>', dumped.stdout, re.S)
    assert found and found.group(1), f"Chromium gave no measurement (exit {dumped.returncode}): {dumped.stderr[-2000:]}"
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["width"] == width and layout["tables"] >= 3
    assert layout["scrollWidth"] <= width, f"the page scrolls sideways at {width}px: {layout}"
    assert layout["problems"] == [], f"at {width}px"
    assert layout["wrapped"] == [], f"figures split over lines at {width}px"

    screenshot = tmp_path / f"page-{width}.png"
    _run_chromium(
        chromium, tmp_path / "profile", width, f"--screenshot={screenshot}", (tmp_path / "page.html").as_uri()
    )
    assert screenshot.exists() and screenshot.stat().st_size > 10_000
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_verdict_says_how_many_gpu_tests_skipped_and_the_summary_reads_yes_or_no():
    no_cuda = "no CUDA device (torch 2.13.0+cpu reports torch.cuda.is_available() == False)"
    records = {
        "t.py::gpu_a": {"outcome": "skipped", "skip_reason": no_cuda},
        "t.py::gpu_b": {"outcome": "skipped", "skip_reason": no_cuda},
        "t.py::cpu": recompile_record(),
    }
    run = {"complete": True, "incomplete_reasons": [], "not_run": [], "not_run_count": 0, "deselected": 0}
    page = render_html(build_report(ENV_2_13, records, run=run))
    verdict = re.search(r'<p class="verdict[^"]*">(.*?)</p>', page, re.S).group(1)
    assert html.escape(f"2 GPU tests skipped: {no_cuda}") in verdict
    assert re.search(r"<th>complete</th><td[^>]*>yes</td>", page), "complete should read yes"
    assert ">True<" not in page


# ----------------------------------------------------------------------------
# where and why: recompile events, graph-break sites, reduce-overhead, pieces, ranks
# ----------------------------------------------------------------------------


def _test_section(page: str, nodeid: str) -> str:
    section = page[page.index(f'<h2 title="{nodeid}"') :]
    return section[: section.index("</section>")]


def _table_rows(section: str, css: str) -> list[list[str]]:
    """The cell texts of every row of the first ``<table class=css>`` in ``section`` (the header's too)."""
    table = section[section.index(f'<table class="{css}">') :]
    table = table[: table.index("</table>")]
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table)
    ]


def test_each_recompile_names_its_call_site_and_its_failed_guards_in_a_table():
    page = render_html(where_and_why_report())
    section = _test_section(page, "tests/test_x.py::test_dynamic_batch")
    parsed = Page(section)
    assert parsed.texts["event"] == [
        "recompile 1 of 2: forward (tests/model.py:12), called from tests/test_x.py:10 `out = model(x)`",
        "recompile 2 of 2: forward (tests/model.py:12), called from tests/test_x.py:11 `out = model(y)`",
    ]
    assert _table_rows(section, "guards") == [
        ["entry", "failed guard", "expected", "actual"],
        ["0/0", "tensor 'x' size mismatch at index 0", "2", "4"],
    ]
    second = section[section.index("recompile 2 of 2") :]
    assert _table_rows(second, "guards")[2] == [
        "0/1",
        "check_tensor(L['x'], Tensor, DispatchKeySet(CPU), torch.float32) *",
        "float32",
        "bfloat16",
    ]
    assert "* not in torch&#x27;s message, which names only the first failing guard of an entry" in section
    assert 'title="tests/model.py:14"' in section  # where the guard was installed
    # the limit hit with its line, the graph break with its site and caller; the flat reasons left out
    assert "forward (tests/model.py:12): hit config.recompile_limit (8); ran it eagerly" in parsed.texts["reasons"][0]
    assert (
        html.escape(
            "Unsupported: call to builtin print (x2) at tests/model.py:30 `print(x.shape)`, "
            "called from tests/test_x.py:10 `out = model(x)`"
        )
        in section
    )
    assert "old flat reason" not in section


def test_a_record_without_events_keeps_its_reasons_per_function():
    record = recompile_events_record()
    del record["recompiles"]["events"]
    del record["recompiles"]["graph_breaks"]["sites"]
    section = _test_section(render_html(build_report(ENV_2_13, {"a::t": record})), "a::t")
    assert "old flat reason" in section and "forward (tests/model.py:12) (2 recompiles)" in section
    assert "Unsupported: call to builtin print</li>" in section and 'class="guards"' not in section


def test_reduce_overhead_shows_how_much_got_cudagraphed_per_region_and_each_skip():
    section = _test_section(render_html(where_and_why_report()), "tests/test_x.py::test_reduce_overhead")
    assert '<p class="warn">2/3 regions ran as CUDA graphs; 64% of calls after warm-up (18 of 28)</p>' in section
    assert _table_rows(section, "regions") == [
        ["region", "replayed", "recorded", "warm-up", "without graph"],
        ["forward", "8", "1", "1", "0"],
        ["head", "8", "1", "1", "0"],
        ["step", "0", "0", "0", "10"],
    ]
    assert '<tr class="off"><td>step</td>' in section
    skip = "mutated inputs (1 instances), argument 'cache', in step, at tests/model.py:40 `cache.add_(x)`"
    assert f"<li>{html.escape(skip)}</li>" in section
    assert "<details><summary>torch's skip messages</summary>" in section  # the raw ones folded away
    for drawn in ("regions_total", "fraction_of_calls", "<th>skipped</th>", '"replayed"'):
        assert drawn not in section  # not repeated as a row or as JSON


def test_an_older_reduce_overhead_section_renders_as_before():
    older = {"recordings": 2, "skips": 0, "skip_reasons": [], "pool_bytes": 1024}
    page = render_html(build_report(ENV_2_13, {"a::t": {"outcome": "passed", "reduce_overhead": older}}))
    assert '<h3>reduce_overhead</h3><table class="kv"><tr><th>recordings</th>' in page
    assert "regions" not in _test_section(page, "a::t")


def test_piecewise_lists_the_pieces_without_a_graph_and_why():
    section = _test_section(render_html(where_and_why_report()), "tests/test_x.py::test_pieces")
    assert _table_rows(section, "pieces") == [
        ["piece", "reason"],
        ["submod_1", "splitting op toy::attention: runs eagerly between graphs"],
    ]
    assert "<li>3 calls: batch size above the largest captured size 8: ran without graphs</li>" in section
    assert "<th>pieces</th>" in section and "uncaptured" not in section


def test_a_multi_rank_test_shows_its_world_size_and_a_row_per_rank():
    section = _test_section(render_html(where_and_why_report()), "tests/test_x.py::test_tp")
    assert "world size 2 (nccl): failed, first failure rank 1, 8.7 s (timeout 300 s)" in section
    assert _table_rows(section, "ranks") == [
        ["rank", "device", "outcome", "graphs", "pool / largest", "max error", "waiting at / error"],
        [
            "0",
            "cuda:0",
            "aborted",
            "2 (8, 1)",
            "24.0M / 20.0M",
            "1.5e-06",
            "waiting in all_reduce (tests/test_tp.py:22 `dist.all_reduce(x)`)",
        ],
        [
            "1",
            "cuda:1",
            "failed",
            "2 (8, 1)",
            "24.0M / 20.0M",
            "1.5e-06",
            "CaptureError: a sync inside capture (at tests/test_tp.py:30 in body `x.item()`)",
        ],
    ]
    assert "<details><summary>the run's message</summary><pre>rank 1 of 2 failed" in section
    assert "per_rank" not in section  # drawn, not dumped as JSON


NARROW_PROBE = """
<pre id="narrow-result"></pre>
<script>
addEventListener("load", () => {
  const ids = [...document.querySelectorAll("table.tests td:first-child")].map((td) => td.getBoundingClientRect().width);
  const wide = document.querySelector(".wide");
  document.getElementById("narrow-result").textContent = JSON.stringify({
    width: innerWidth, scrollWidth: document.documentElement.scrollWidth, ids,
    tableScrolls: wide ? wide.scrollWidth > wide.clientWidth : null,
  });
});
</script>
"""


def test_on_a_narrow_window_the_overview_scrolls_and_keeps_the_test_ids_readable(tmp_path):
    """At 720 px the test ids took 2 to 4 characters a line; the overview now scrolls inside its own box."""
    chromium = _chromium()
    page = render_html(layout_report(), title="pytest-cudagraph report: page.json")
    probe = tmp_path / "narrow.html"
    probe.write_text(page.replace("</body>", NARROW_PROBE + "</body>"), encoding="utf-8")
    dumped = _run_chromium(
        chromium, tmp_path / "profile", 720, "--virtual-time-budget=2000", "--dump-dom", probe.as_uri()
    )
    found = re.search(r'<pre id="narrow-result">(.*?)</pre>', dumped.stdout, re.S)
    assert found and found.group(1), f"Chromium gave no measurement (exit {dumped.returncode}): {dumped.stderr[-2000:]}"
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["width"] == 720
    assert layout["scrollWidth"] <= 720, "the page itself scrolls sideways; only the overview's box may"
    assert layout["tableScrolls"] is True
    # 26 characters of 12.5 px monospace: well over a test id of a few letters a line
    assert layout["ids"] and min(layout["ids"]) >= 150, layout["ids"]
