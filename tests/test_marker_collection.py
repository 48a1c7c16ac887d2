"""Marks seen at collection, through pytester: every bad one in a file is reported at once, misspellings included.

Without ``--strict-markers`` pytest only warns about an unknown mark, so
``@pytest.mark.max_recompile(0)`` used to pass with nothing checked.
"""

from __future__ import annotations

BAD_MARKS = """
import pytest

@pytest.mark.max_recompile(0)
def test_misspelled():
    pass

@pytest.mark.cudagraph(capture_sizes=[0, 8])
def test_bad_size():
    pass

@pytest.mark.max_recompiles("x")
def test_bad_n():
    pass

@pytest.mark.slow
def test_unknown_but_not_ours():
    pass

def test_fine():
    pass

class TestInAClass:
    @pytest.mark.compile_cahce
    def test_swapped_letters(self):
        pass
"""


def test_every_bad_mark_of_a_file_is_one_collection_error_naming_each_test(pytester):
    pytester.makepyfile(test_marks=BAD_MARKS)
    result = pytester.runpytest("-W", "ignore::pytest.PytestUnknownMarkWarning")
    assert result.ret == 2
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    for expected in (
        "test_marks.py::test_misspelled: @pytest.mark.max_recompile is not a marker of pytest-cudagraph, "
        "so it checks nothing; did you mean @pytest.mark.max_recompiles?",
        "test_marks.py::test_bad_size: @pytest.mark.cudagraph: capture_sizes=[0, 8]",
        "test_marks.py::test_bad_n: @pytest.mark.max_recompiles: n='x'",
        "test_marks.py::TestInAClass::test_swapped_letters: @pytest.mark.compile_cahce is not a marker",
    ):
        assert expected in output
    assert "test_unknown_but_not_ours" not in output and "Traceback" not in output


def test_a_misspelled_mark_fails_even_where_it_is_the_only_problem(pytester):
    pytester.makepyfile(
        test_one="""
import pytest

@pytest.mark.max_recompile(0)
def test_misspelled():
    pass
"""
    )
    result = pytester.runpytest("-W", "ignore::pytest.PytestUnknownMarkWarning")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*did you mean @pytest.mark.max_recompiles?*--strict-markers*"])


def test_a_mark_registered_by_the_project_is_its_own_even_if_close_to_ours(pytester):
    pytester.makeini("[pytest]\nmarkers =\n    max_recompile: the project's own mark\n")
    pytester.makepyfile(
        test_one="""
import pytest

@pytest.mark.max_recompile(0)
def test_project_mark():
    pass
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)


def test_the_trees_all_check_wraps_the_call_of_every_test(pytestconfig):
    """The trees='all' check is a wrapper of pytest_runtest_call (its effect needs a GPU: tests/gpu/test_trees_gpu.py)."""
    names = [impl.function.__name__ for impl in pytestconfig.pluginmanager.hook.pytest_runtest_call.get_hookimpls()]
    assert "pytest_runtest_call_fully_cudagraphed" in names
