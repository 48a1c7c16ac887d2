"""The HTML page: well-formed, self-contained, escaped, one chart bar per capture size."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser

import pytest
from sample_reports import ENV_2_13, MiB, graph_record, ranks_record, sample_report, where_and_why_report

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.record_text import call_site_text, detail_lines
from pytest_cudagraph.render.show import render_html

DECODE = "tests/test_model.py::test_decode_graphs"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# SVG shapes written self-closed (<line .../>) are complete elements too
SELF_CLOSING_OK = {"line", "rect", "path", "circle"}


class PageChecker(HTMLParser):
    """Parses a page with html.parser and records what the tests look at.

    It fails on a closing tag that does not match the open one, so a page with
    broken nesting does not pass as "valid".
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.charts: list[list[dict]] = []  # each <svg>: its bars' attributes
        self.text: list[str] = []
        self.doctype = None

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "svg":
            self.charts.append([])
        if tag == "rect" and "bar" in (attrs.get("class") or "").split():
            self.charts[-1].append(attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag not in VOID and tag not in SELF_CLOSING_OK:
            self.errors.append(f"self-closed <{tag}/>")
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> PageChecker:
    checker = PageChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == []
    assert checker.stack == [], f"unclosed tags {checker.stack}"
    return checker


def test_page_is_well_formed_and_self_contained():
    page = render_html(sample_report())
    checker = parse(page)
    assert checker.doctype == "DOCTYPE html"
    names = [tag for tag, _ in checker.tags]
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    assert names.count("style") == 1
    for tag, attrs in checker.tags:
        for name in ("src", "href"):
            if name in attrs:
                assert attrs[name].startswith("#"), (tag, attrs)  # only in-page anchors
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page


def test_one_bar_per_capture_size_against_pool_and_largest_graph():
    checker = parse(render_html(sample_report()))
    (bars,) = checker.charts  # only the decode test has per-size figures
    assert [bar["data-size"] for bar in bars] == ["1", "2", "4", "8"]
    widths = [float(bar["width"]) for bar in bars]
    assert widths == sorted(widths) and widths[0] > 0
    assert [bar["class"] for bar in bars] == ["bar", "bar", "bar", "bar largest"]
    lines = {attrs["class"]: attrs for tag, attrs in checker.tags if tag == "line" and "class" in attrs}
    # pool 60 MiB is the chart's scale; the largest graph (42 MiB) line ends where the size-8 bar ends
    pool_x, largest_x = float(lines["pool-line"]["x1"]), float(lines["largest-line"]["x1"])
    bar_x = float(bars[-1]["x"])
    assert largest_x == pytest.approx(bar_x + widths[-1], abs=0.2)
    assert (largest_x - bar_x) / (pool_x - bar_x) == pytest.approx(42 / 60, abs=0.01)
    text = " ".join(checker.text)
    assert "pool 60.0M" in text and "largest 42.0M" in text and "1.43x" in text


def test_records_without_graph_bytes_get_a_note_instead_of_a_chart():
    record = graph_record()
    del record["graphs"]["graph_bytes"]
    checker = parse(render_html(build_report(ENV_2_13, {"a::t": record})))
    assert checker.charts == []
    assert "No per-size chart: this record has no graphs.graph_bytes (per-size high-water marks)." in "".join(
        checker.text
    )


def test_several_graph_sets_get_a_chart_each():
    one, two = graph_record()["graphs"], copy.deepcopy(graph_record()["graphs"])
    two.update(sizes=[16, 32], captured=2, graph_bytes={"16": 50 * MiB, "32": 70 * MiB}, pool_bytes=80 * MiB)
    merged = {
        "sizes": [1, 2, 4, 8, 16, 32],
        "captured": 6,
        "pool_bytes": 80 * MiB,
        "largest_graph_bytes": 70 * MiB,
        "sets": [one, two],
    }
    checker = parse(render_html(build_report(ENV_2_13, {"a::t": {"outcome": "passed", "graphs": merged}})))
    assert [[b["data-size"] for b in bars] for bars in checker.charts] == [["1", "2", "4", "8"], ["16", "32"]]


def test_everything_from_the_report_is_escaped():
    evil = '<script>alert("x")</script>'
    report = build_report(
        {**ENV_2_13, "user_field": '"><img src=x onerror=alert(1)>'},
        {
            f"tests/test_x.py::test_{evil}": {
                "outcome": "failed<b>",
                "recompiles": {
                    "count": 1,
                    "reasons": [f"guard {evil} failed"],
                    "limit_hits": [evil],
                    "by_function": {evil: {"count": 1, "reasons": [evil]}},
                },
                "graphs": {
                    "sizes": [1],
                    "captured": 1,
                    "pool_bytes": 2 * MiB,
                    "largest_graph_bytes": 2 * MiB,
                    "graph_bytes": {"1": 2 * MiB},
                },
                "extra": {evil: evil},
            }
        },
    )
    page = render_html(report, title=evil)
    checker = parse(page)
    names = {tag for tag, _ in checker.tags}
    assert not names & {"script", "img", "b"}
    assert all(not any(k.startswith("on") for k in attrs) for _, attrs in checker.tags)
    assert evil in "".join(checker.text)  # shown as text, verbatim


def test_missing_sections_and_odd_values_still_render():
    report = build_report(
        {},
        {
            "a::t": {"outcome": "passed", "graphs": {"graph_bytes": {"8": None, "x": 3}}},
            "b::t": {"outcome": "skipped", "recompiles": {"limit_hits": 2}},
        },
    )
    checker = parse(render_html(report))
    assert "The report has no environment block." in "".join(checker.text)
    assert checker.charts == []  # no usable (size, bytes) pair
    assert "Recompile limit hit 2 times" in "".join(checker.text)


def test_a_report_built_in_memory_that_breaks_the_types_is_one_sentence_naming_the_field():
    # the page reads the typed view: a section of another shape is refused as show refuses its file
    report = build_report({}, {"b::t": {"outcome": "skipped", "caches": "garbled"}})
    with pytest.raises(ReportError, match=r"^report given to render_html has tests\['b::t'\]\.caches = 'garbled'"):
        render_html(report)
    with pytest.raises(ReportError, match=r"^report given to detail_lines has tests\['b::t'\]\.caches = 'garbled'"):
        detail_lines(report)


def test_cublas_workspace_draws_the_bound_line_and_leaves_the_ratio():
    report = sample_report()
    decode = "tests/test_model.py::test_decode_graphs"
    report["tests"][decode]["graphs"]["cublas_workspace_bytes"] = 16 * MiB
    checker = parse(render_html(report))
    lines = {attrs["class"]: attrs for tag, attrs in checker.tags if tag == "line" and "class" in attrs}
    bar_x = float(checker.charts[0][0]["x"])
    pool_x, bound_x = float(lines["pool-line"]["x1"]), float(lines["bound-line"]["x1"])
    # the bound is largest 42 MiB + workspace 16 MiB = 58 MiB, against a 60 MiB pool
    assert (bound_x - bar_x) / (pool_x - bar_x) == pytest.approx(58 / 60, abs=0.01)
    text = " ".join(checker.text)
    assert "16.0M" in text and "1.05x" in text  # (60 - 16) / 42


def test_cache_lookups_render_well_formed_and_escaped():
    evil = '<script>alert("x")</script>'
    lookup = {
        "layer": f"fxgraph{evil}",
        "outcome": "miss",
        "key": f"f{evil}",
        "pass": evil,
        "graph": 1,
        "components": {"gm": ["abc", evil]},
        "explained": [f"inductor_config[{evil}]: False -> True"],
        "bypass_reason": evil,
        "compared_with": evil,
    }
    record = {"outcome": "passed", "cache_keys": {"lookups": [lookup], "note": evil}}
    checker = parse(render_html(build_report(ENV_2_13, {"a::t": record})))
    names = {tag for tag, _ in checker.tags}
    assert "script" not in names
    text = "".join(checker.text)
    assert "Cache lookups" in text and f"inductor_config[{evil}]: False -> True" in text
    assert text.count(evil) >= 5  # layer, pass, bypass reason, explanation, note: shown as text
    # lookups read through their types: a garbled one is one sentence naming it, not a traceback
    record["cache_keys"]["lookups"] += ["garbled"]
    with pytest.raises(
        ReportError, match=r"^report given to render_html has tests\['a::t'\]\.cache_keys\.lookups\[1\] = 'garbled'"
    ):
        render_html(build_report(ENV_2_13, {"a::t": record}))


# ----------------------------------------------------------------------------
# where and why: recompile events, graph-break sites, reduce-overhead, pieces, ranks
# ----------------------------------------------------------------------------


def test_show_prints_each_recompile_with_its_call_site_and_failed_guards():
    lines = detail_lines(where_and_why_report())
    text = "\n".join(lines)
    assert lines[1] == "where and why (recompiles, graph breaks, reduce-overhead, pieces, capture cost, ranks)"
    assert "recompile 1 of 2: forward (tests/model.py:12), called from tests/test_x.py:10 `out = model(x)`" in text
    guard_rows = [line.split() for line in lines if line.strip().startswith("0/")]
    assert guard_rows[0] == ["0/0", "tensor", "'x'", "size", "mismatch", "at", "index", "0", "2", "4"]
    assert guard_rows[2][-3:] == ["*", "float32", "bfloat16"]  # torch printed only the entry's size guard
    assert "    * not in torch's message, which names only the first failing guard of an entry" in lines
    assert "    - forward (tests/model.py:12): hit config.recompile_limit (8); ran it eagerly" in lines
    # a line past 120 columns is broken at a space, what follows indented under the item
    assert (
        "    - Unsupported: call to builtin print (x2) at tests/model.py:30 `print(x.shape)`, "
        "called from tests/test_x.py:10\n      `out = model(x)`" in text
    )
    assert "old flat reason" not in text  # the events replace the flat reasons per function


def test_a_long_call_site_loses_its_comment_before_it_is_clipped():
    commented = "fn(x, step)  # an int argument is specialised: the second value recompiles (the first compile"
    assert call_site_text({"file": "t.py", "line": 23, "code": commented}) == "t.py:23 `fn(x, step)`"
    # a short line keeps its comment; a '#' inside a string is no comment
    assert (
        call_site_text({"file": "t.py", "line": 1, "code": "f(x)  # once"}) == "t.py:1 `f(x) # once`"
    )  # whitespace runs become one space
    hashed = 'print("#" * 70, x)  # a row of hashes, then the value, for the log readers to find it'
    assert call_site_text({"file": "t.py", "line": 2, "code": hashed}) == 't.py:2 `print("#" * 70, x)`'
    # a call too long even without its comment is clipped, its quote closed
    long_call = "fn(" + ", ".join(f"argument_{i}" for i in range(12)) + ")  # twelve"
    text = call_site_text({"file": "t.py", "line": 3, "code": long_call})
    assert text.endswith("...`") and "twelve" not in text


def test_show_prints_how_much_reduce_overhead_cudagraphed_and_each_skip():
    lines = detail_lines(where_and_why_report())
    assert "  reduce-overhead: 2/3 regions ran as CUDA graphs; 64% of calls after warm-up (18 of 28)" in lines
    assert [line.split() for line in lines if line.strip().startswith(("region", "step"))] == [
        ["region", "replayed", "recorded", "warm-up", "without", "graph"],
        ["step", "0", "0", "0", "10"],
    ]
    assert (
        "    - mutated inputs (1 instances), argument 'cache', in step, at tests/model.py:40 `cache.add_(x)`" in lines
    )


def test_show_prints_the_pieces_without_a_graph_and_each_rank():
    lines = detail_lines(where_and_why_report())
    assert "    - submod_1: splitting op toy::attention: runs eagerly between graphs" in lines
    assert "    - 3 calls: batch size above the largest captured size 8: ran without graphs" in lines
    assert "  ranks: world size 2 (nccl): failed, first failure rank 1, 8.7 s (timeout 300 s)" in lines
    ranks = [line.split(None, 6) for line in lines if re.match(r"\s+[01]\s+cuda:", line)]
    assert [row[:6] for row in ranks] == [
        ["0", "cuda:0", "aborted", "2", "(8,", "1)"],
        ["1", "cuda:1", "failed", "2", "(8,", "1)"],
    ]
    # the last column's words go on under it where the row would pass 120 columns
    words = " ".join(" ".join(lines).split())
    assert "waiting in all_reduce (tests/test_tp.py:22 `dist.all_reduce(x)`)" in words
    assert "CaptureError: a sync inside capture (at tests/test_tp.py:30 in body `x.item()`)" in words
    assert all(len(line) <= 120 for line in lines)


def test_show_prints_each_run_of_a_test_that_ran_several_bodies():
    record = ranks_record()
    first = copy.deepcopy(record["ranks"])
    second = {**copy.deepcopy(first), "world_size": 4, "outcome": "passed", "first_failure": None}
    record["ranks"] = {**first, "world_size": 4, "runs": [first, second]}
    lines = detail_lines(build_report(ENV_2_13, {"a::t": record}))
    assert "  ranks: 2 runs; all told world size 4 (nccl): failed, first failure rank 1, 8.7 s (timeout 300 s)" in lines
    assert "    run 2 of 2:" in lines and "      world size 4 (nccl): passed, 8.7 s (timeout 300 s)" in lines


def test_show_adds_nothing_for_a_report_without_the_where_and_why_fields():
    assert detail_lines(sample_report()) == []


def test_the_where_and_why_sections_render_well_formed_and_escaped():
    evil = '<script>alert("x")</script>'
    report = where_and_why_report()
    tests = report["tests"]
    event = tests["tests/test_x.py::test_dynamic_batch"]["recompiles"]["events"][0]
    event["function"] = evil
    event["call_site"]["code"] = evil
    event["guards"][0].update(guard=evil, expected=evil, actual=evil, origin=evil)
    tests["tests/test_x.py::test_dynamic_batch"]["recompiles"]["graph_breaks"]["sites"][0]["reason"] = evil
    trees = tests["tests/test_x.py::test_reduce_overhead"]["reduce_overhead"]
    trees["skipped"][0]["arguments"] = [evil]
    trees["regions"][evil] = trees["regions"].pop("step")
    tests["tests/test_x.py::test_pieces"]["piecewise"]["uncaptured"][0]["reason"] = evil
    rank = tests["tests/test_x.py::test_tp"]["ranks"]["per_rank"][1]
    rank["error"]["message"] = evil
    rank["device"] = evil
    page = render_html(report)
    checker = parse(page)
    assert "script" not in {tag for tag, _ in checker.tags}
    assert evil not in page
    assert "".join(checker.text).count(evil) >= 9


# ----------------------------------------------------------------------------
# the typed view: show reads a LoadedReport, and keeps what no type names
# ----------------------------------------------------------------------------


def test_show_reads_the_typed_view_and_still_shows_fields_no_type_names(tmp_path):
    import json

    from sample_reports import reduce_overhead_record

    from pytest_cudagraph.records.loaded import read_report
    from pytest_cudagraph.render.shard_text import describe_shard

    record = reduce_overhead_record()
    record["reduce_overhead"]["newer_figure"] = "kept-ro-7"  # a field of a newer plugin in a typed section
    record["newer_section"] = {"gauge": "kept-ns-3"}  # a section no type names
    report = build_report(ENV_2_13, {"a::t": record})
    report["summary"]["shard"] = {"group": 2, "splits": 3, "selected": 4}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    loaded = read_report(path)
    page = render_html(loaded)
    text = "".join(parse(page).text)
    assert "kept-ro-7" in text and "newer_figure" in text  # the reduce-overhead table of its other fields
    assert "newer_section" in text and "kept-ns-3" in text  # a table of the section's values
    assert "2/3 regions ran as CUDA graphs" in text
    assert "shard 2 of 3" in text
    assert page == render_html(report)  # the same page from the file's view and from the mapping
    lines = detail_lines(loaded)
    assert lines == detail_lines(report) and any("reduce-overhead: 2/3 regions" in line for line in lines)
    assert describe_shard(loaded.report.summary.shard) == describe_shard(report["summary"]["shard"])
