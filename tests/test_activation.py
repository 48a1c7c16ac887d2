"""The plugin switched on late: a feature first seen in a later module, after collection, or inside a test.

A run that uses no feature of the plugin registers only ``activation``'s hooks
(tests/test_startup_imports.py); these runs start like that, and each uses a
feature where the plugin can only see it late.  Everything must behave as in a run
that used the plugin from its start.  Each runs in a subprocess (``-p no:randomly``
keeps the plain module first, and an in-process run would see this process's torch).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

PLAIN = """
def test_plain():
    pass
"""

MARKED_LATER = """
import pytest

@pytest.mark.cudagraph
def test_gpu():
    pass

def test_watch(recompiles):
    assert recompiles.count == 0
"""


def test_a_marker_and_a_fixture_first_seen_in_a_later_module_are_gated_and_recorded(pytester):
    pytester.makepyfile(test_a_plain=PLAIN, test_b_marked=MARKED_LATER)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*= cudagraph =*",
            "test_b_marked.py",
            "  test_watch *0",  # every row passed: no outcome column
            "1 GPU test skipped, not listed: needs --cudagraph",
            "SKIPPED [[]1[]] test_b_marked.py:*: needs --cudagraph",
        ]
    )
    section = result.stdout.str().split("= cudagraph =")[1]
    assert "test_a_plain.py" not in section and "test_plain " not in section  # a plain test has no record


def test_bad_marks_in_a_later_module_are_one_collection_error(pytester):
    pytester.makepyfile(
        test_a_plain=PLAIN,
        test_b_bad="""
import pytest

@pytest.mark.max_recompiles("x")
def test_bad():
    pass

class TestLater:
    @pytest.mark.compile_cahce
    def test_swapped(self):
        pass
""",
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-W", "ignore::pytest.PytestUnknownMarkWarning")
    assert result.ret == 2
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "test_b_bad.py::test_bad: @pytest.mark.max_recompiles: n='x'" in output
    assert "test_b_bad.py::TestLater::test_swapped: @pytest.mark.compile_cahce is not a marker" in output


def test_a_misspelled_mark_alone_in_a_suite_that_uses_nothing_else_fails_collection(pytester):
    pytester.makepyfile(
        test_a_plain=PLAIN, test_b_typo="import pytest\n\n@pytest.mark.max_recompile(0)\ndef test_typo():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-W", "ignore::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(errors=1)
    assert "did you mean @pytest.mark.max_recompiles?" in result.stdout.str()


def test_a_marker_given_after_collection_by_a_conftest_is_gated(pytester):
    pytester.makepyfile(test_a_plain=PLAIN)
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\n\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if item.name == 'test_late':\n"
        "            item.add_marker(pytest.mark.cudagraph)\n"
    )
    (sub / "test_late.py").write_text("def test_late():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] sub/test_late.py*: needs --cudagraph"])


def test_torch_first_imported_inside_a_test_switches_the_plugin_on_for_that_test(pytester):
    """The plain API used by a test that imports torch itself reports into its record; the run's progress
    counts the failure before it: -x/--maxfail stops the run, and the summary says so."""
    pytester.makepyfile(
        test_seq="""
def test_a_fail():
    assert False

def test_b_compiles():
    import torch
    from pytest_cudagraph import watch_recompiles

    compiled = torch.compile(lambda x: x + 1, backend="eager")
    with watch_recompiles():
        compiled(torch.ones(2))
        compiled(torch.ones(2, 2))

def test_c_fail():
    assert False

def test_d_never_runs():
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--maxfail=2")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= cudagraph =*",
            "test_seq.py",
            "  test_b_compiles *1",
            "INCOMPLETE run: stopped early by -x/--maxfail after 2 failures",
        ]
    )


def test_a_collection_error_before_the_plugin_is_on_is_counted(pytester):
    pytester.makepyfile(test_a_broken="import no_such_module_anywhere\n", test_b_marked=MARKED_LATER)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines(["INCOMPLETE run: 1 error during collection"])


def test_collect_only_with_a_marker_in_a_later_module_shows_the_header_line(pytester):
    pytester.makepyfile(test_a_plain=PLAIN, test_b_marked=MARKED_LATER)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["cudagraph: torch *, cache root *"])


def test_sigterm_after_torch_switched_the_plugin_on_inside_a_test_ends_the_run_as_ctrl_c(pytester):
    pytester.makepyfile(
        test_seq="""
import os
import signal

def test_b_compiles():
    import torch
    from pytest_cudagraph import watch_recompiles

    compiled = torch.compile(lambda x: x + 1, backend="eager")
    with watch_recompiles():
        compiled(torch.ones(2))
        compiled(torch.ones(2, 2))

def test_c_cancelled():
    os.kill(os.getpid(), signal.SIGTERM)

def test_d_never_runs():
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.stdout.fnmatch_lines(["test_seq.py", "  test_b_compiles *1", "INCOMPLETE run: interrupted (SIGTERM)"])
