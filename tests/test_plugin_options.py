"""The plugin seen from outside: options, markers, skips, usage errors, exit codes."""

import os
import stat
import sys

import pytest


def test_help_lists_options_and_ini(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*CUDA graph and torch.compile cache validation*"])
    text = result.stdout.str()
    for option in (
        "--cudagraph ",
        "--cudagraph-require-gpu",
        "--cudagraph-report=PATH",
        "--cudagraph-baseline=PATH",
        "--cudagraph-cache-dir=PATH",
        "cudagraph_capture_sizes",
        "cudagraph_rtol",
        "cudagraph_atol",
    ):
        assert option in text, option


def test_markers_are_registered_and_documented(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.cudagraph(capture_sizes=None, rtol=None, atol=None)*",
            "@pytest.mark.max_recompiles(n=0)*",
            "@pytest.mark.compile_cache(mode=*",
        ]
    )


def test_strict_markers_accepts_plugin_markers(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cudagraph(capture_sizes=[1, 2])
        def test_gpu():
            pass

        @pytest.mark.max_recompiles(2)
        def test_cpu():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "-rs")
    result.assert_outcomes(passed=1, skipped=1)


def test_cudagraph_tests_skip_without_flag(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cudagraph
        def test_gpu():
            raise AssertionError("must not run")

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*needs --cudagraph*"])


def test_tests_using_the_cudagraphs_fixture_are_gated_without_the_marker(pytester):
    pytester.makepyfile(
        """
        def test_fixture_only(cudagraphs):
            raise AssertionError("must not run")
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*needs --cudagraph*"])


def test_cudagraph_marker_on_class_and_module(pytester):
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.cudagraph(capture_sizes=[4])

        class TestGroup:
            def test_one(self):
                raise AssertionError("must not run")

        def test_two():
            raise AssertionError("must not run")
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=2)


@pytest.mark.skipif(
    os.environ.get("CUDA_VISIBLE_DEVICES") is None and os.path.exists("/dev/nvidia0"),
    reason="this test checks the skip on a machine without a CUDA device",
)
def test_cudagraph_flag_without_gpu_skips_with_reason(pytester):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible here; this test checks the no-GPU skip")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cudagraph
        def test_gpu():
            raise AssertionError("must not run")
        """
    )
    result = pytester.runpytest("--cudagraph", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*no CUDA device*"])


def test_require_gpu_without_gpu_is_a_usage_error(pytester):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible here; this test checks the no-GPU usage error")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("--cudagraph-require-gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # torch itself may warn on import (a missing NumPy); the plugin's own output is one line
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr.str()
    assert "--cudagraph-require-gpu: no CUDA device is visible" in errors[0]
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize(
    "marker, fragment",
    [
        ("cudagraph(capture_sizes=[0, 8])", "capture_sizes=[0, 8] contains 0, which is not a positive integer"),
        ("cudagraph(capture_sizes=[1.5])", "contains 1.5, which is not a positive integer"),
        ("cudagraph(capture_sizes=[])", "capture_sizes=[] is empty"),
        ("cudagraph(capture_sizes='8')", "capture_sizes='8' is not a list of batch sizes"),
        ("cudagraph(rtol=-1)", "rtol=-1 is not a non-negative number"),
        ("cudagraph(sizes=[1])", "unexpected keyword argument 'sizes'"),
        ("max_recompiles(-1)", "max_recompiles: n=-1 is not a non-negative integer"),
        ("max_recompiles(n='0')", "n='0' is not a non-negative integer"),
        ("max_recompiles(True)", "n=True is not a non-negative integer"),
        ("compile_cache(mode='warm')", "compile_cache: mode='warm' is not a known mode"),
        ("compile_cache('inprocess', atol='x')", "atol='x' is not a non-negative number"),
    ],
)
def test_bad_marker_argument_is_a_clear_collection_error(pytester, marker, fragment):
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}
        def test_bad():
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting*", "*1 error*"])
    text = result.stdout.str()
    assert "test_bad_marker_argument_is_a_clear_collection_error.py::test_bad: @pytest.mark." in text
    assert fragment in text
    assert "Traceback" not in text


def test_bad_marker_on_parametrized_case_names_the_case(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", [pytest.param(1), pytest.param(2, marks=pytest.mark.max_recompiles(-3))])
        def test_case(n):
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*test_case?2?: @pytest.mark.max_recompiles: n=-3*"])


def test_marker_added_after_collection_is_still_validated(pytester):
    pytester.makeconftest(
        """
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.max_recompiles(-1))
        """
    )
    pytester.makepyfile("def test_late():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_late: @pytest.mark.max_recompiles: n=-1 is not a non-negative integer*"])


@pytest.mark.parametrize(
    "ini, fragment",
    [
        ("cudagraph_capture_sizes = 1 0 4", "ini option cudagraph_capture_sizes=[1, 0, 4] contains 0"),
        ("cudagraph_capture_sizes = 1,two", "contains 'two'"),
        ("cudagraph_rtol = loose", "ini option cudagraph_rtol = 'loose' is not a non-negative number"),
        ("cudagraph_atol = -1e-3", "cudagraph_atol = '-1e-3' is not a non-negative number"),
    ],
)
def test_bad_ini_value_is_a_usage_error(pytester, ini, fragment):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert fragment in result.stderr.str()


def test_disabling_the_plugin(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cudagraph
        def test_gpu():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cudagraph", "--strict-markers")
    # without the plugin the marker is unknown, and --cudagraph is not an option
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'cudagraph' not found in `markers` configuration option*"])
    result = pytester.runpytest_subprocess("-p", "no:cudagraph", "--cudagraph")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_report_path_in_missing_directory_is_a_usage_error(pytester):
    pytester.makepyfile("def test_plain():\n    pass\n")
    target = pytester.path / "missing" / "report.json"
    result = pytester.runpytest_subprocess(f"--cudagraph-report={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "does not exist; create it or give another path" in result.stderr.str()


@pytest.mark.parametrize(
    "content, fragment",
    [
        ('{"schema": "pytest-cudagraph/1", "tests": {"a": ', "is not valid JSON"),
        ('{"schema": "pytest-cudagraph/0", "tests": {}}', "has schema 'pytest-cudagraph/0'"),
        ("not json at all", "is not valid JSON"),
        ("[1, 2]", "has no 'schema' field"),
    ],
)
def test_bad_baseline_is_a_usage_error(pytester, content, fragment):
    baseline = pytester.path / "base.json"
    baseline.write_text(content)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--cudagraph-baseline={baseline}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    stderr = [line for line in result.stderr.lines if line.strip()]
    assert len(stderr) == 1 and fragment in stderr[0], result.stderr.str()


def test_missing_baseline_is_a_usage_error(pytester):
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--cudagraph-baseline={pytester.path / 'nope.json'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "does not exist" in result.stderr.str()


def test_cache_dir_that_is_a_file_is_a_usage_error(pytester):
    target = pytester.path / "afile"
    target.write_text("x")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--cudagraph-cache-dir={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is not a directory" in result.stderr.str()


def test_world_writable_cache_dir_is_refused(pytester):
    target = pytester.path / "shared"
    target.mkdir()
    os.chmod(target, 0o777)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--cudagraph-cache-dir={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is writable by group or others (mode 0777)" in result.stderr.str()


def test_cache_dir_sets_the_run_cache_environment(pytester):
    root = pytester.path / "cache-root"
    pytester.makepyfile(
        f"""
        import os

        def test_env():
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == {str(root / "inductor")!r}
            assert os.environ["TRITON_CACHE_DIR"] == {str(root / "triton")!r}
        """
    )
    result = pytester.runpytest_subprocess(f"--cudagraph-cache-dir={root}")
    result.assert_outcomes(passed=1)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "inductor").stat().st_mode) == 0o700


def test_run_without_plugin_features_leaves_cache_environment_alone(pytester, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/user/chosen/inductor")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    pytester.makepyfile(
        """
        import os

        def test_env():
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/user/chosen/inductor"
            assert "TRITON_CACHE_DIR" not in os.environ
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_header_names_versions_and_cache_root_when_plugin_is_used(pytester):
    root = pytester.path / "root"
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--cudagraph-cache-dir={root}")
    result.stdout.fnmatch_lines([f"cudagraph: torch *, triton *, CUDA *, GPU *, cache root {root}"])


def test_no_header_when_plugin_is_unused(pytester):
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert "cudagraph: torch" not in result.stdout.str()


def test_plugin_import_does_not_import_torch():
    code = (
        "import sys, pytest_cudagraph.plugin, pytest_cudagraph.markers, pytest_cudagraph.report, "
        "pytest_cudagraph.summary, pytest_cudagraph.session\n"
        "sys.exit(3 if 'torch' in sys.modules else 0)"
    )
    import subprocess

    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_run_without_plugin_features_does_not_import_torch(pytester):
    pytester.makepyfile(
        """
        import sys

        def test_plain():
            assert "torch" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)
