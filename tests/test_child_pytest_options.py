"""The child pytest of ``@pytest.mark.compile_cache(mode="subprocess")`` gets the parent's command-line options.

A suite with its own ``pytest_addoption`` (``--dtype``, ``--model``) chooses what
its tests build with them: a child pytest without them warmed another
configuration, and a sound cache failed.  The child gets the parent's options less
the selection, the reports and xdist (``plugin/parent_options.py``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_cudagraph.plugin.parent_options import options_for_child, parent_options

SUITE_OPTIONS = """
def pytest_addoption(parser):
    parser.addoption("--dtype", default="float32")
    parser.addoption("--model", default="tiny")
    parser.addoption("--layers", nargs="+", default=[])
"""


def test_the_child_gets_the_suites_options_and_not_the_selection_reports_or_xdist(pytester):
    pytester.makeconftest(SUITE_OPTIONS)
    config = pytester.parseconfig(
        "tests/test_x.py",
        "--dtype",
        "float64",
        "--model=big",
        "-k",
        "dtype",
        "-m",
        "not slow",
        "-n",
        "2",
        "--dist=load",
        "--junitxml=out.xml",
        "-xvs",
        "-kfoo",
        "--deselect",
        "tests/a.py::test_b",
        "tests/test_y.py::test_t",
        "--layers",
        "3",
        "4",
        "-p",
        "no:randomly",
        # A category, not a bare "error": in-process, pytest >= 9.2 warns that the
        # plugin was imported before its assertion rewriting could start.
        "-W",
        "error::DeprecationWarning",
        "--cudagraph-report=r.json",
        "--cudagraph",
        "-o",
        "console_output_style=classic",
        "--lf",
        "--splits=2",
        "--group",
        "1",
        "--",
        "-not-an-option",
    )
    assert parent_options(config) == [
        "--dtype",
        "float64",
        "--model=big",
        "-x",
        "-v",
        "-s",
        "--layers",
        "3",
        "4",
        "-p",
        "no:randomly",
        "-W",
        "error::DeprecationWarning",
        "--cudagraph",
        "-o",
        "console_output_style=classic",
    ]


def test_an_option_pytest_does_not_know_is_passed_on_whole():
    arities = {"-x": ("exitfirst", 0), "-k": ("keyword", None)}
    assert options_for_child(["-xq", "--unknown=3", "-kexpr", "test_a.py"], arities) == ["-xq", "--unknown=3"]


ARITIES = {
    "-k": ("keyword", None),
    "-x": ("exitfirst", 0),
    "-v": ("verbose", 0),
    "-n": ("numprocesses", None),
    "-p": ("plugins", None),
    "--dtype": ("dtype", None),
    "--layers": ("layers", "+"),
    "--junitxml": ("xmlpath", None),
    "--lf": ("lf", 0),
    "--strict": ("strict", 0),
}
# one option as written: (its arguments, whether the child gets them)
WRITTEN = st.sampled_from(
    [
        (["-k", "expr"], False),
        (["-kexpr"], False),
        (["-x"], True),
        (["-n", "2"], False),
        (["-n2"], False),
        (["-p", "no:randomly"], True),
        (["--dtype", "float64"], True),
        (["--dtype=float64"], True),
        (["--junitxml", "o.xml"], False),
        (["--junitxml=o.xml"], False),
        (["--lf"], False),
        (["--strict"], True),
        (["--layers", "3", "4", "-v"], True),
        (["tests/test_a.py::test_b"], False),
        (["tests"], False),
    ]
)


@given(st.lists(WRITTEN, max_size=8))
def test_whatever_the_order_the_child_gets_exactly_the_options_it_should(written):
    args = [arg for arguments, _ in written for arg in arguments]
    expected = [arg for arguments, kept in written if kept for arg in arguments]
    assert options_for_child(args, ARITIES) == expected


DTYPE_SUITE = """
from pathlib import Path

import pytest
import torch


@pytest.fixture
def dtype(request):
    # a path relative to where pytest was started
    return getattr(torch, Path(request.config.getoption("dtype_file")).read_text().strip())


@pytest.mark.compile_cache(mode="subprocess")
def test_step(dtype, compile_cache):
    x = torch.linspace(0, 1, 8, dtype=dtype)
    compile_cache.record("y", torch.compile(lambda a: (a.sin() * 2).sum())(x))
"""


@pytest.mark.slow  # a cold compile and a child pytest that compiles again (about 25 s on two cores)
def test_a_suite_option_reaches_the_warm_pass_in_a_fresh_pytest(pytester, monkeypatch):
    pytester.makeini("[pytest]\n")
    tests = pytester.mkdir("tests")
    (tests / "conftest.py").write_text(
        'def pytest_addoption(parser):\n    parser.addoption("--dtype-file", default="float32.txt")\n'
    )
    (tests / "test_dtype.py").write_text(DTYPE_SUITE)
    (tests / "float32.txt").write_text("float32\n")
    (tests / "float64.txt").write_text("float64\n")
    monkeypatch.chdir(tests)  # started from below the rootdir, a relative path among the options
    result = pytester.runpytest_subprocess(
        "test_dtype.py", "--dtype-file=float64.txt", "-k", "step", "-p", "no:cacheprovider", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=1)
