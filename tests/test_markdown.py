"""The Markdown of a run and of a comparison, rendered by a real Markdown library and read back.

markdown-it-py renders the text as CommonMark with GitHub's tables and strikethrough, raw HTML
allowed (as GitHub allows some): the tables are parsed back from the tokens and must hold the
terminal section's cells; text from a report (node ids, failure messages) must come out as the
same text, never as markup, HTML or a mention.
"""

from __future__ import annotations

import copy
import io
import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sample_reports import (
    ENV_2_13,
    cache_keys_record,
    graph_record,
    modified,
    recompile_events_record,
    recompile_record,
    sample_report,
    warm_start_record,
)

from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.markdown import comparison_markdown, run_markdown
from pytest_cudagraph.render.markdown_blocks import WIDTH, code, paragraph, table, text
from pytest_cudagraph.render.plain_text import terminal_safe
from pytest_cudagraph.render.summary import HEADER, summary_row
from pytest_cudagraph.tools import cli
from pytest_cudagraph.tools.compare import compare_reports
from pytest_cudagraph.tools.compare_rules import INCOMPLETE_RULE

markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is in the test extra")


def gfm() -> Any:
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def plain(inline: Any) -> str:
    """An inline token's text as a reader sees it: code spans' and text's content, line breaks as spaces."""
    parts = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def blocks(markdown: str) -> list[tuple[str, Any]]:
    """The document as (kind, content): ("heading", text), ("paragraph", text), ("item", text), ("table", rows)."""
    tokens = gfm().parse(markdown)
    out: list[tuple[str, Any]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.type == "heading_open":
            out.append(("heading", plain(tokens[index + 1])))
        elif token.type == "paragraph_open" and not token.hidden:
            out.append(("paragraph", plain(tokens[index + 1])))
        elif token.type == "paragraph_open":  # a tight list item's paragraph
            out.append(("item", plain(tokens[index + 1])))
        elif token.type == "table_open":
            rows: list[list[str]] = []
            while tokens[index].type != "table_close":
                if tokens[index].type == "tr_open":
                    rows.append([])
                elif tokens[index].type == "inline":
                    rows[-1].append(plain(tokens[index]))
                index += 1
            out.append(("table", rows))
        index += 1
    return out


def failing_record(message: str, rule: str | None = None, **site: Any) -> dict[str, Any]:
    failure: dict[str, Any] = {"when": "call", "message": message}
    if rule is not None:
        failure.update(rule=rule, **site)
    return {**recompile_events_record(), "outcome": "failed", "failure": failure}


def run_records() -> dict[str, dict[str, Any]]:
    records = {nodeid: record for nodeid, record in sample_report()["tests"].items()}
    records["tests/test_model.py::test_warm_start"] = warm_start_record()
    records["tests/other/test_rec.py::test_dtype"] = failing_record(
        "Failed: @pytest.mark.max_recompiles(0): Dynamo recompiled 2 times, expected at most 0.\n\n  recompile 1 of 2",
        "max_recompiles",
        file="tests/other/test_rec.py",
        line=15,
    )
    return records


def test_the_run_reads_verdict_failures_then_tables_holding_the_terminal_cells():
    records = run_records()
    document = blocks(run_markdown(records, title="pytest-cudagraph: run.json"))
    kinds = [kind for kind, _ in document]
    assert document[0] == ("heading", "pytest-cudagraph: run.json")
    assert document[1][1].startswith(
        "FAILED: 7 tests recorded: 1 failed, 5 passed, 1 skipped; 3 recompiles (1 recompile-limit hit); "
        "16 graphs captured"
    )
    assert kinds.index("heading", 1) < kinds.index("table")  # failures come before the tables
    assert ("heading", "Failures (1)") in document
    item = next(content for kind, content in document if kind == "item" and "test_dtype" in content)
    assert item.startswith("tests/other/test_rec.py::test_dtype failed, max_recompiles at tests/other/test_rec.py:15: ")
    assert item.endswith(
        "@pytest.mark.max_recompiles(0): Dynamo recompiled 2 times, expected at most 0. First: 0/0: tensor 'x' size "
        "mismatch at index 0. expected 2, actual 4"
    )
    # each file's table: the kept columns of the terminal section, each row the terminal row's cells
    rows_seen = {}
    for number, (kind, content) in enumerate(document):
        if kind != "table":
            continue
        file = document[number - 1][1]
        header, *rows = content
        assert header[0] == "test" and set(header) <= set(HEADER)
        for row in rows:
            nodeid = f"{file}::{row[0]}"
            # the same cells; Markdown has no runs of spaces ("60.0M / 42.0M  1.43x" reads with one)
            expected = {
                name: " ".join(cell.split()) for name, cell in zip(HEADER[1:], summary_row(nodeid, records[nodeid])[1:])
            }
            assert dict(zip(header[1:], row[1:])) == {name: expected[name] for name in header[1:]}
            rows_seen[nodeid] = row
    # as in the terminal, the skipped test that measured nothing has no row: a line counts it
    assert set(rows_seen) == set(records) - {"tests/test_model.py::test_gpu_only"}
    assert list(rows_seen)[0] == "tests/other/test_rec.py::test_dtype"  # the file with a failure comes first


def test_raw_lines_stay_within_120_columns():
    markdown = run_markdown(run_records(), title="pytest-cudagraph: run.json")
    assert max(map(len, markdown.splitlines())) <= WIDTH
    new = modified(sample_report(), "tests/test_model.py::test_decode_graphs", "graphs.pool_bytes", 90 * 2**20)
    compared = comparison_markdown(compare_reports(sample_report(), new), incomplete_rule=INCOMPLETE_RULE)
    assert max(map(len, compared.splitlines())) <= WIDTH


HOSTILE_IDS = [
    "tests/t.py::test_pipe[a|b]",
    "tests/t.py::test_tick[`x`]",
    "tests/t.py::test_html[<script>alert(1)</script>]",
    "tests/t.py::test_emphasis[*a*_b_]",
    "tests/t.py::test_link[[x](http://evil)]",
]
HOSTILE_MESSAGE = (
    "Failed: boom | <img src=x onerror=alert(1)> **bold** _it_ [link](http://evil) ~~gone~~ #1 & &amp; \\\n"
    "- not a list\n> not a quote\n1. not a list"
)


def test_text_from_reports_renders_as_the_same_text_never_as_markup():
    records = {nodeid: failing_record(HOSTILE_MESSAGE, "misuse", file="a|b.py", line=3) for nodeid in HOSTILE_IDS}
    markdown = run_markdown(records, title="run <b>x</b>")
    html = gfm().render(markdown)
    assert not re.search(r"<(script|img|a |em>|s>|b>)", html.replace("<strong>misuse</strong>", ""))
    document = blocks(markdown)
    assert document[0] == ("heading", "run <b>x</b>")
    items = [content for kind, content in document if kind == "item" and content.startswith("tests/")]
    one_line = " ".join(HOSTILE_MESSAGE.removeprefix("Failed: ").split("\n")[0].split())
    assert len(items) == len(HOSTILE_IDS)
    for nodeid, item in zip(sorted(HOSTILE_IDS), items):
        assert item == f"{nodeid} failed, misuse at a|b.py:3: {one_line}"
    (table_rows,) = [content for kind, content in document if kind == "table"]
    assert all(len(row) == len(table_rows[0]) for row in table_rows)
    assert sorted(row[0] for row in table_rows[1:]) == sorted(nodeid.split("::")[1] for nodeid in HOSTILE_IDS)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="`"), max_size=80))
def test_any_text_reads_back_as_itself(value):
    """A piece of a report in a paragraph and in a table cell renders as its own characters."""
    expected = " ".join(terminal_safe(value).split())
    rendered = blocks("\n".join(paragraph(text(value))) + "\n")
    assert rendered == ([("paragraph", expected)] if expected else [])
    (kind, rows), *_ = blocks("\n".join(table(["a", "b"], [[text(value), "x"]])) + "\n")
    assert kind == "table" and rows[1] == [expected, "x"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40).filter(lambda v: v.strip()))
@example("\\|")  # a literal backslash before a pipe: the table's pipe escape must not eat it
@example("a\\\\|b")
def test_any_text_in_code_reads_back_as_itself(value):
    expected = " ".join(terminal_safe(value).split())
    (kind, rows), *_ = blocks("\n".join(table(["a"], [[code(value)]])) + "\n")
    assert rows[1] == [expected]
    assert blocks(paragraph(code(value))[0] + "\n") == [("paragraph", expected)]


MARKDOWN_PIECES = [
    *"`*_[]()<>|~#&!\\-+=.:1 a@\n\t",
    "<script>",
    "**",
    "__",
    "![x](y)",
    "[a]: b",
    "&amp;",
    "1.",
    "> ",
    "---",
]
PLAIN_TAGS = {"p", "code", "ul", "li", "table", "thead", "tbody", "tr", "th", "td"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(MARKDOWN_PIECES), min_size=1, max_size=30).map("".join))
def test_no_text_opens_a_block_or_markup_wherever_it_is_put(value):
    """In a list item wrapped narrow, a paragraph, a table cell or code: no quote, list, heading, emphasis or link."""
    for markdown in (
        "\n".join(paragraph(text(value), 20, first="- ", indent="  ")),
        "\n".join(paragraph(text(value), 15)),
        "\n".join(table(["h"], [[text(value)]])),
        code(value),
    ):
        tags = set(re.findall(r"</?([a-z0-9]+)", gfm().render(markdown + "\n")))
        assert tags <= PLAIN_TAGS, (value, markdown)


def test_a_decorator_is_code_not_a_mention():
    markdown = "\n".join(paragraph(text("@pytest.mark.max_recompiles(0): Dynamo recompiled")))
    assert "<code>@pytest.mark.max_recompiles(0)</code>" in gfm().render(markdown)


def github_html(markdown: str) -> str:
    """``markdown`` as GitHub renders it: cmark-gfm, with the autolink extension GitHub runs."""
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm is in the test extra")
    return cmarkgfm.markdown_to_html_with_extensions(
        markdown, extensions=["table", "autolink", "strikethrough", "tagfilter"]
    )


def live_mentions(html: str) -> list[str]:
    """The mentions GitHub would make of the rendered page: ``@name`` after a non-word character, outside code."""
    outside_code = re.sub(r"<(code|pre)>.*?</\1>", " ", html, flags=re.DOTALL)
    return re.findall(r"(?:^|[^\w])(@[A-Za-z0-9][\w/-]*)", re.sub(r"<[^>]+>", " ", outside_code))


def read_text(html: str) -> str:
    import html as entities

    return " ".join(entities.unescape(re.sub(r"<[^>]+>", "", html)).split())


LIVE_PIECES = ["@0xcafe", "@1ucas", "@org/team", "https://evil.example/x?a=1", "www.evil.example", "a.b@example.com"]
LIVE_PIECES += ["mailto:", "xmpp:", "@", "/", ".", ",", "(", ")", " ", "x", "_", "-", ":"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(LIVE_PIECES), min_size=1, max_size=25).map("".join))
def test_githubs_renderer_finds_no_mention_and_no_link_in_report_text(value):
    """Rendered by cmark-gfm with its autolink extension, as GitHub does: no link, no live mention, the same text."""
    expected = " ".join(value.split())
    for markdown, heading in (
        ("\n".join(paragraph(text(value), 20, first="- ", indent="  ")), []),
        ("\n".join(paragraph(text(value))), []),
        ("\n".join(table(["h"], [[text(value)]])), ["h"]),
    ):
        html = github_html(markdown + "\n")
        assert "<a " not in html, (value, markdown, html)
        assert live_mentions(html) == [], (value, markdown, html)
        assert read_text(html) == " ".join([*heading, expected]).strip(), (value, markdown, html)


def test_an_e_mail_address_is_one_code_span_not_cut_in_two():
    html = github_html("\n".join(paragraph(text("mail a.b@example.com or @0xcafe, see www.x.org"))))
    assert "<code>a.b@example.com</code>" in html
    assert "<code>@0xcafe</code>" in html and "<code>www.x.org</code>" in html


def test_show_and_compare_markdown_mention_and_link_no_one(tmp_path):
    hostile = "ask @0xcafe or @1ucas (https://evil.example, www.evil.example, a.b@example.com)"
    base = sample_report()
    new = copy.deepcopy(base)
    new["tests"]["tests/test_model.py::test_decode_graphs"] = failing_record(
        hostile, "misuse", file="@1ucas.py", line=2
    )
    new["tests"][f"tests/test_x.py::test_y[{hostile}]"] = {"outcome": "skipped", "skip_reason": hostile}
    paths = {}
    for name, report in (("base.json", base), ("new.json", new)):
        paths[name] = tmp_path / name
        paths[name].write_text(json.dumps(report))
    for argv in (["show", str(paths["new.json"])], ["compare", str(paths["base.json"]), str(paths["new.json"])]):
        out = io.StringIO()
        cli.main([*argv, "--markdown"], stdout=out, stderr=io.StringIO())
        html = github_html(out.getvalue())
        assert "0xcafe" in html and "a.b@example.com" in html, argv
        assert "<a " not in html and live_mentions(html) == [], (argv, html)


def test_a_wrapped_line_never_starts_a_list_a_quote_or_a_heading():
    words = " ".join(["word"] * 25 + ["-", "1.", "+", ">", "==", "---"] * 4)
    lines = paragraph(text(words), 40, first="- ", indent="  ")
    assert all(not re.match(r"\s*([-+>=]|\d+\.)(\s|$)", line[2:]) for line in lines)
    assert blocks("\n".join(lines) + "\n") == [("item", " ".join(words.split()))]


def comparison_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    base = sample_report()
    new = modified(base, "tests/test_model.py::test_decode_graphs", "graphs.pool_bytes", 90 * 2**20)
    new["env"] = {**new["env"], "torch": "2.14.1+cu128"}
    new["tests"]["tests/test_model.py::test_new_one"] = graph_record()
    del new["tests"]["tests/test_model.py::test_gpu_only"]
    return base, new


def test_a_failing_comparison_reads_verdict_regressions_environment_and_each_changed_test():
    base, new = comparison_pair()
    comparison = compare_reports(base, new, labels=("torch-2.13.json", "torch-2.14.json"))
    document = blocks(comparison_markdown(comparison, incomplete_rule=INCOMPLETE_RULE))
    assert document[0] == ("heading", "pytest-cudagraph compare: torch-2.13.json → torch-2.14.json")
    assert document[1][1].startswith("REGRESSION: 4 tests in both reports: 1 changed, 1 regressed; 1 new, 1 vanished")
    headings = [content for kind, content in document if kind == "heading"]
    assert headings[1:] == [
        "Regressions (1)",
        "Environment",
        "Changed tests (1)",
        "New tests (1)",
        "Vanished tests (1)",
    ]
    regression = next(content for kind, content in document if kind == "item")
    assert regression.startswith("tests/test_model.py::test_decode_graphs pool: graph pool 60.0 MiB -> 90.0 MiB")
    tables = [content for kind, content in document if kind == "table"]
    assert tables[0][0] == ["", "torch-2.13.json", "torch-2.14.json"]
    assert ["torch", "2.13.0+cu128", "2.14.1+cu128"] in tables[0]
    assert tables[1][0] == ["metric", "torch-2.13.json", "torch-2.14.json", "change", "rule"]
    assert ["graphs.pool_bytes", "60.0 MiB", "90.0 MiB", "+50.0%", "pool"] in tables[1]
    assert ("item", "tests/test_model.py::test_new_one") in document
    assert ("item", "tests/test_model.py::test_gpu_only") in document


def test_an_incomplete_new_run_says_so_and_is_a_regression():
    base, _ = comparison_pair()
    new = build_report(
        dict(base["env"]),
        copy.deepcopy(base["tests"]),
        exitstatus=2,
        run={"complete": False, "incomplete_reasons": ["interrupted"], "not_run": ["t::a"], "not_run_count": 1},
    )
    markdown = comparison_markdown(compare_reports(base, new), incomplete_rule=INCOMPLETE_RULE)
    assert markdown.splitlines()[2].startswith("**REGRESSION**:")
    assert "INCOMPLETE: new is the record of a run that did not run to its end: interrupted" in markdown


def test_cli_prints_markdown_for_show_and_compare(tmp_path):
    import json

    base, new = comparison_pair()
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "new.json").write_text(json.dumps(new))
    out = io.StringIO()
    assert cli.main(["show", str(tmp_path / "new.json"), "--markdown"], stdout=out) == 0
    assert out.getvalue().startswith("### pytest-cudagraph: new.json\n\n**PASSED**: 5 tests recorded: 5 passed;")
    assert "`tests/test_model.py`" in out.getvalue()
    out = io.StringIO()
    assert cli.main(["compare", str(tmp_path / "base.json"), str(tmp_path / "new.json"), "--markdown"], stdout=out) == 1
    assert "**REGRESSION**:" in out.getvalue() and "#### Changed tests (1)" in out.getvalue()
    for refused in (
        ["show", "r.json", "--markdown", "--html", "p.html"],
        ["compare", "a", "b", "--json", "--markdown"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(refused, stdout=io.StringIO(), stderr=io.StringIO())
        assert exit_info.value.code == 2


# ----------------------------------------------------------------------------
# the run's page in step with the terminal view
# ----------------------------------------------------------------------------

NO_GPU = "no CUDA device (torch 2.13.0+cpu reports torch.cuda.is_available() == False)"


def cpu_run_records() -> dict[str, dict[str, Any]]:
    """A CPU run: two files of tests that ran, one of which does not fit aligned, and GPU tests skipped."""
    records = {
        "tests/test_a.py::test_short": {"outcome": "passed", "recompiles": {"count": 0}},
        "tests/test_b.py::test_" + "long_name_" * 9: cache_keys_record(),
        "tests/test_c.py::test_dynamic_batch": recompile_events_record(),
    }
    for index in range(3):
        records[f"tests/test_gpu.py::test_gpu_{index}"] = {"outcome": "skipped", "skip_reason": NO_GPU}
    return records


def test_the_page_lays_every_table_out_alike():
    markdown = run_markdown(cpu_run_records(), title="run")
    separators = [line for line in markdown.splitlines() if re.fullmatch(r"\| -+( \| -+)* \|", line)]
    assert len(separators) == 3
    # one wide table: all are compact, none padded
    assert all(set(line.split(" | ")) == {"| ---", "---", "--- |"} for line in separators), separators


def test_skipped_gpu_tests_are_counted_in_one_line_not_listed_as_rows_of_dashes():
    markdown = run_markdown(cpu_run_records(), title="run")
    assert "test_gpu_" not in markdown and "test_gpu.py" not in markdown
    assert f"- 3 GPU tests skipped, not listed: {text(NO_GPU)}" in markdown


def test_a_test_that_recompiled_names_its_first_failed_guard_under_its_table():
    markdown = run_markdown(cpu_run_records(), title="run")
    item = next(content for kind, content in blocks(markdown) if kind == "item" and "recompiled" in content)
    assert item == (
        "test_dynamic_batch recompiled, first failed guard: tensor 'x' size mismatch at index 0 (expected 2, actual 4)"
    )


def test_the_cache_lookups_are_on_the_page_as_show_prints_them():
    markdown = run_markdown(cpu_run_records(), title="run")
    assert "<details><summary>Cache lookups of 1 test</summary>" in markdown
    assert markdown.rstrip().endswith("</details>")
    fenced = markdown[markdown.index("```text") :]
    assert fenced.splitlines()[1].split() == ["layer", "pass", "graph", "outcome", "key", "why"]
    assert max(map(len, markdown.splitlines())) <= WIDTH


def _all_skipped_comparison(count: int, reason: str) -> Any:
    ids = [f"tests/test_suite_{i // 100}.py::test_case_{i}[bs{i % 7}]" for i in range(count)]
    base = build_report(dict(ENV_2_13), {nodeid: recompile_record(0) for nodeid in ids}, exitstatus=0)
    new = build_report(
        dict(ENV_2_13), {nodeid: {"outcome": "skipped", "skip_reason": reason} for nodeid in ids}, exitstatus=0
    )
    return compare_reports(base, new)


def test_every_list_of_a_comparison_stops_and_says_how_many_more():
    """4,000 tests passed and now skip (a CPU-only wheel): each list stops, the page stays small, the verdict first."""
    markdown = comparison_markdown(
        _all_skipped_comparison(4000, "no CUDA device (torch was built without CUDA) " * 4),
        incomplete_rule=INCOMPLETE_RULE,
    )
    lines = markdown.splitlines()
    assert lines[2].startswith("**REGRESSION**: 4000 tests in both reports")
    assert len([line for line in lines if line.startswith("- `tests/")]) == 30
    assert "- ... 3970 more regressions (`pytest-cudagraph compare` lists them all)" in lines
    assert len(markdown.encode()) < 100_000


@settings(max_examples=30, deadline=None)
@given(limit=st.integers(min_value=2_000, max_value=60_000), reason_size=st.integers(min_value=1, max_value=5_000))
def test_a_page_over_its_byte_limit_is_cut_at_a_block_end_with_its_verdict_first(limit, reason_size):
    """A forged report's long text: the page stays within its limit, well formed, and says what it left out."""
    comparison = _all_skipped_comparison(40, "`x` ```fence``` <details> " + "w" * reason_size)
    whole = comparison_markdown(comparison, incomplete_rule=INCOMPLETE_RULE, max_tests=None)
    markdown = comparison_markdown(comparison, incomplete_rule=INCOMPLETE_RULE, max_tests=None, max_bytes=limit)
    assert len(markdown.encode()) <= limit
    assert markdown.splitlines()[:3] == whole.splitlines()[:3]  # the title and the verdict
    if markdown != whole:
        assert markdown.rstrip().splitlines()[-1].startswith("**... ")
        assert "more bytes left out**" in markdown
    fences = [line for line in markdown.splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0
    assert details_opened_and_closed(markdown)


def test_the_run_page_keeps_its_details_closed_when_cut():
    records = {f"tests/test_x.py::test_{i}": cache_keys_record() for i in range(40)}
    markdown = run_markdown(records, title="run", max_bytes=8_000)
    assert len(markdown.encode()) <= 8_000
    assert details_opened_and_closed(markdown)
    assert "more bytes left out" in markdown


def details_opened_and_closed(markdown: str) -> bool:
    """The page's own ``<details>`` (a line of its own, report text's is escaped) each closed."""
    lines = markdown.splitlines()
    return sum(line.startswith("<details>") for line in lines) == lines.count("</details>")
