"""No line the plugin prints from report text is a GitHub workflow command.

GitHub's runner reads every line of a job's log, and takes one that starts with
``::`` (after white space) as a command: ``::add-mask::REGRESSION`` would hide the
verdict, ``::error title=all good::`` would annotate the pull request.  Report text
(node ids, skip reasons, failure messages) is anyone's, so ``show``, ``compare``,
``explain`` and the terminal section make every such line inert; only the plugin's
own annotations start with ``::``.
"""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, graph_record

from pytest_cudagraph.records.report import build_report, write_report
from pytest_cudagraph.render.workflow_commands import inert_lines
from pytest_cudagraph.tools.cli import main

# what the runner would act on: "::" after leading white space, or its older form anywhere in a line
COMMAND_LINE = re.compile(r"^\s*::|##\[", re.MULTILINE)
FORGED_ID = "::add-mask::REGRESSION"
# a skip reason that, wrapped at any width, puts "::error" at the start of a line
ANNOTATING_REASON = " ".join(["::error title=all good::nothing to see"] * 12)


def _reports(tmp_path, reason: str, nodeid: str) -> tuple[str, str]:
    passed = {nodeid: graph_record(), "tests/test_model.py::test_gpu": graph_record()}
    skipped = {nodeid: graph_record(), "tests/test_model.py::test_gpu": {"outcome": "skipped", "skip_reason": reason}}
    paths = []
    for name, tests in (("base.json", passed), ("new.json", skipped)):
        path = tmp_path / name
        write_report(path, build_report(dict(ENV_2_13), tests, exitstatus=0, created="2025-01-31T12:00:00+00:00"))
        paths.append(str(path))
    return paths[0], paths[1]


def _printed(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    main(list(argv), stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def _every_command_output(base: str, new: str) -> dict[str, str]:
    return {
        "compare": _printed("compare", base, new),
        "compare --markdown": _printed("compare", base, new, "--markdown"),
        "show": _printed("show", new),
        "show --markdown": _printed("show", new, "--markdown"),
        "explain": _printed("explain", base, new),
    }


def test_a_forged_id_and_a_wrapped_skip_reason_start_no_line_as_a_command(tmp_path):
    base, new = _reports(tmp_path, ANNOTATING_REASON, FORGED_ID)
    outputs = _every_command_output(base, new)
    for command, printed in outputs.items():
        assert COMMAND_LINE.search(printed) is None, f"{command}:\n{printed}"
    # the text is still there, made visible rather than dropped
    assert "\\::error title=all good::" in outputs["compare"]
    assert "\nREGRESSION: " in outputs["compare"]
    assert "add-mask::REGRESSION" in outputs["show"]


@settings(max_examples=25, deadline=None)
@given(
    reason=st.lists(
        st.sampled_from(["::error::x", "::add-mask::y", "##[error]z", "  ::", "word", "a" * 40]), max_size=30
    ),
    nodeid=st.sampled_from([FORGED_ID, "  ::warning::w", "tests/t.py::test_x", "##[group]g"]),
)
def test_no_report_text_starts_a_line_as_a_command(tmp_path_factory, reason, nodeid):
    base, new = _reports(tmp_path_factory.mktemp("reports"), " ".join(reason) or "x", nodeid)
    for command, printed in _every_command_output(base, new).items():
        assert COMMAND_LINE.search(printed) is None, f"{command}:\n{printed}"


def test_a_markdown_line_made_inert_renders_as_it_was():
    markdown_it = pytest.importorskip("markdown_it")
    line = "::error title=all good::nothing"
    rendered = markdown_it.MarkdownIt().render(inert_lines(line))
    assert rendered == markdown_it.MarkdownIt().render(line.replace("::", ":\\:", 1)) and "::error" in rendered


def test_the_terminal_section_of_a_run_compared_with_a_baseline_starts_no_line_as_a_command(pytester):
    nodeid = "test_skips.py::test_gpu"
    base = pytester.path / "base.json"
    write_report(base, build_report(dict(ENV_2_13), {nodeid: graph_record()}, exitstatus=0))
    pytester.makepyfile(
        test_skips=f"""
        import pytest

        @pytest.mark.max_recompiles(0)
        def test_gpu():
            pytest.skip({ANNOTATING_REASON!r})
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", f"--cudagraph-baseline={base}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = result.stdout.str().split("= cudagraph =", 1)[1]
    assert "REGRESSION" in section
    assert COMMAND_LINE.search(section) is None, section
    assert "\\::error title=all good::" in section
