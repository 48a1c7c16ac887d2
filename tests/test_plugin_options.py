"""The plugin seen from outside: options, markers, skips, gating, the header, exit codes (bad input: test_bad_input.py).

The pytester runs are in-process (torch is already imported by tests/conftest.py), save those whose
point is a fresh interpreter: a run with the plugin disabled, and a run that uses none of the plugin's
features, which must not import torch (one such run serves the three tests that read it).
"""

import os
import stat
import sys

import pytest

CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


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
            "@pytest.mark.cudagraph(capture_sizes=None, rtol=None, atol=None, *, trees=None, world_size=None, timeout=None, "
            "break_at=None, max_rerecords=None, align_collectives=True, observe=False, expect_sizes=None, "
            "check_sizes=True, one_pool=True, pool_check=True, require_replay=False, allow_capture_failures=False)*",
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
    environ = {name: os.environ.get(name) for name in CACHE_ENV}
    result = pytester.runpytest(f"--cudagraph-cache-dir={root}")
    result.assert_outcomes(passed=1)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "inductor").stat().st_mode) == 0o700
    # the run was in this process: the variables are put back at its end
    assert {name: os.environ.get(name) for name in CACHE_ENV} == environ


# A suite that uses none of the plugin's features, run with a cache directory of the user's in the environment.
PLAIN_SUITE = {
    "test_no_torch": """
        import sys

        def test_plain():
            assert "torch" not in sys.modules
        """,
    "test_cache_env": """
        import os

        def test_env():
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/user/chosen/inductor"
            assert "TRITON_CACHE_DIR" not in os.environ
        """,
}


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory) -> pytest.LineMatcher:
    """PLAIN_SUITE run once in a fresh interpreter (torch is imported in this one): three tests read its output."""
    import subprocess
    import textwrap

    directory = tmp_path_factory.mktemp("plain_suite")
    for name, source in PLAIN_SUITE.items():
        (directory / f"{name}.py").write_text(textwrap.dedent(source))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": "/user/chosen/inductor"}
    env.pop("TRITON_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", f"--rootdir={directory}"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return pytest.LineMatcher((done.stdout + done.stderr).splitlines())


def test_run_without_plugin_features_leaves_cache_environment_alone(plain_run):
    plain_run.fnmatch_lines(["test_cache_env.py::test_env PASSED*"])


def test_header_names_versions_and_cache_root_when_plugin_is_used(pytester):
    root = pytester.path / "root"
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest(f"--cudagraph-cache-dir={root}")
    result.stdout.fnmatch_lines([f"cudagraph: torch *, triton *, CUDA *, GPU *, cache root {root}"])


def test_no_header_when_plugin_is_unused(plain_run):
    assert "cudagraph: torch" not in plain_run.str()


def test_plugin_import_does_not_import_torch():
    code = (
        "import sys, pytest_cudagraph.plugin, pytest_cudagraph.plugin.markers, pytest_cudagraph.records.report, "
        "pytest_cudagraph.render.summary, pytest_cudagraph.plugin.session\n"
        "sys.exit(3 if 'torch' in sys.modules else 0)"
    )
    import subprocess

    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_run_without_plugin_features_does_not_import_torch(plain_run):
    plain_run.fnmatch_lines(["test_no_torch.py::test_plain PASSED*"])
