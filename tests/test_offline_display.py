"""What the terminal summary and ``show`` print: long node ids clipped, and a pool ratio taken per GraphSet."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

from sample_reports import ENV_2_13, MiB, graph_record, graph_set_record

from pytest_cudagraph.records.record import merge_graph_sets
from pytest_cudagraph.records.report import build_report, load_report, write_report
from pytest_cudagraph.render.plain_text import NODEID_WIDTH, clip_nodeid
from pytest_cudagraph.render.show import render_html
from pytest_cudagraph.render.summary import summary_row, terminal_summary_lines
from pytest_cudagraph.tools.cli import main

LONG_ID = "tests/test_model.py::test_decode[" + "config-" * 430 + "bs16]"  # 3000+ characters
WIDE = 200  # no line of a table may get near a 3000-character id


def long_id_records() -> dict:
    return {LONG_ID: graph_record(), "tests/test_model.py::test_short": graph_record(outcome="failed")}


# ----------------------------------------------------------------------------
# long node ids
# ----------------------------------------------------------------------------


def test_a_long_id_is_clipped_in_the_middle_keeping_the_function_and_the_param_end():
    clipped = clip_nodeid(LONG_ID)
    assert len(clipped) == NODEID_WIDTH
    assert clipped.startswith("tests/test_model.py::test_decode[config-config-")
    assert clipped.endswith("config-bs16]") and "..." in clipped
    short = "tests/test_model.py::test_decode[bs16]"
    assert clip_nodeid(short) == short


def test_a_long_path_keeps_the_function_name_whole():
    nodeid = "tests/" + "nested/" * 40 + "test_model.py::TestDecode::test_graphs[" + "p" * 200 + "-end]"
    clipped = clip_nodeid(nodeid)
    assert len(clipped) == NODEID_WIDTH
    assert "::test_graphs[" in clipped and clipped.endswith("-end]") and clipped.startswith("tests/nested/")


def test_the_terminal_summary_stays_narrow_with_a_3000_character_id():
    lines = terminal_summary_lines(long_id_records(), None, max_rows=None)
    assert max(len(line) for line in lines) <= 120
    at = next(i for i, line in enumerate(lines) if line.startswith("  test_decode["))
    # one line: the name, clipped in the middle under its file's line, then the row's cells
    assert lines[at - 1] == "tests/test_model.py" or lines[at - 2] == "tests/test_model.py"
    assert "config-bs16]  passed" in lines[at] and "60.0M / 42.0M  1.43x" in lines[at]


def test_show_text_and_html_stay_narrow_and_the_report_keeps_the_id_whole(tmp_path):
    path = write_report(tmp_path / "r.json", build_report(ENV_2_13, long_id_records()))
    assert LONG_ID in load_report(path)["tests"]
    stdout = io.StringIO()
    assert main(["show", str(path)], stdout=stdout, stderr=io.StringIO()) == 0
    assert max(len(line) for line in stdout.getvalue().splitlines()) < WIDE

    page = render_html(load_report(path))
    cells = LinkAndHeadingText()
    cells.feed(page)
    assert cells.link_texts and max(map(len, cells.link_texts)) <= NODEID_WIDTH
    assert cells.heading_texts and max(map(len, cells.heading_texts)) <= NODEID_WIDTH + 20
    assert LONG_ID in cells.titles  # the whole id is one hover away, and once on the page
    assert page.count(f'<p class="mono full-id">{LONG_ID}</p>') == 1


class LinkAndHeadingText(HTMLParser):
    """The text of the overview's links and of the test headings, and every title attribute."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.inside: str | None = None
        self.link_texts: list[str] = []
        self.heading_texts: list[str] = []
        self.titles: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "title" in attrs:
            self.titles.append(attrs["title"])
        if tag in ("a", "h2"):
            self.inside = tag
            (self.link_texts if tag == "a" else self.heading_texts).append("")

    def handle_endtag(self, tag):
        if tag == self.inside or tag == "span":
            self.inside = None

    def handle_data(self, data):
        if self.inside == "a":
            self.link_texts[-1] += data
        elif self.inside == "h2":
            self.heading_texts[-1] += data


# ----------------------------------------------------------------------------
# several GraphSets: the cuBLAS workspace and a ratio per set
# ----------------------------------------------------------------------------


def two_sets_each_with_its_workspace() -> list[dict]:
    """What the GPU run showed as 34.0M / 2.0M 17.00x: two sets, each pool holding its own 32 MiB workspace."""
    return [
        graph_set_record([1, 2, 4], [1 * MiB, 3 * MiB // 2, 2 * MiB], 34 * MiB, 32 * MiB),
        graph_set_record([8, 16], [3 * MiB // 2, 2 * MiB], 34 * MiB, 32 * MiB),
    ]


def a_matmul_set_and_an_elementwise_set() -> list[dict]:
    """The maxima come from different sets: the largest pool and workspace from one, the largest graph from the other."""
    return [
        graph_set_record([1, 2, 4], [1 * MiB, 3 * MiB // 2, 2 * MiB], 34 * MiB, 32 * MiB),  # 1.00x
        graph_set_record([8, 16], [3 * MiB, 4 * MiB], 5 * MiB, 0),  # no matmul, no workspace: 1.25x
    ]


def test_merging_sets_keeps_the_cublas_workspace():
    merged = merge_graph_sets(a_matmul_set_and_an_elementwise_set())
    assert merged["cublas_workspace_bytes"] == 32 * MiB
    assert (merged["pool_bytes"], merged["largest_graph_bytes"]) == (34 * MiB, 4 * MiB)
    assert "cublas_workspace_bytes" not in merge_graph_sets([graph_record()["graphs"], graph_record()["graphs"]])


def test_the_summary_of_sets_that_passed_shows_no_17x():
    graphs = merge_graph_sets(two_sets_each_with_its_workspace())
    cell = summary_row("t", {"outcome": "passed", "graphs": graphs})[3]
    assert cell == "34.0M / 2.0M (+32.0M cuBLAS)  1.00x (set 1 of 2)"


def test_the_summary_shows_the_worst_set_not_a_ratio_of_maxima():
    graphs = merge_graph_sets(a_matmul_set_and_an_elementwise_set())
    cell = summary_row("t", {"outcome": "passed", "graphs": graphs})[3]
    # the maxima would say (34 - 32) / 4 = 0.50x, or without the workspace 8.50x: neither is a set's
    assert cell == "5.0M / 4.0M  1.25x (set 2 of 2)"


def test_show_names_the_worst_set_and_its_ratio():
    graphs = merge_graph_sets(a_matmul_set_and_an_elementwise_set())
    page = render_html(build_report(ENV_2_13, {"t": {"outcome": "passed", "graphs": graphs}}))
    text = re.sub(r"<[^>]+>", " ", page)
    assert "worst set: pool / largest" in text and "5.0M / 4.0M  1.25x (set 2 of 2)" in text
    assert "0.50x" not in text and "8.50x" not in text


def test_sets_without_figures_show_the_maxima_but_no_ratio():
    sets = [graph_set_record([1], [2 * MiB], 4 * MiB, 0, largest_graph_bytes=None) for _ in range(2)]
    cell = summary_row("t", {"outcome": "passed", "graphs": merge_graph_sets(sets)})[3]
    assert cell == "4.0M / -"


def test_a_crashed_test_is_listed_first_with_the_failures():
    records = {"a::test_ok": graph_record(), "z::test_worker_died": {"outcome": "crashed"}}
    lines = terminal_summary_lines(records, None)
    assert lines[1] == "z" and lines[2].startswith("  test_worker_died  crashed")
