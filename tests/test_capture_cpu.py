"""The capture API's parts that need no GPU: skips, option errors, failed-capture messages."""

from __future__ import annotations

import math

import pytest
import torch

from pytest_cudagraph import CaptureError, MisuseError
from pytest_cudagraph.graphs.capture import (
    GraphSet,
    GraphSetResult,
    capture_graphs,
    describe_capture_failure,
    real_cause,
)
from pytest_cudagraph.graphs.sizes import capture_sizes_in_order, validate_capture_sizes

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a CUDA device")

GPU_TEST = """
import pytest
import torch

@pytest.mark.cudagraph(capture_sizes=[1, 2])
def test_marked(cudagraphs):
    cudagraphs.capture(lambda x: x * 2, lambda n: torch.randn(n, 4, device="cuda")).check_replay()

def test_fixture_only(cudagraphs):
    cudagraphs.capture(lambda x: x * 2, lambda n: torch.randn(n, 4, device="cuda"), sizes=[1])
"""


@no_cuda
def test_gpu_tests_skip_without_the_flag(pytester):
    pytester.makepyfile(test_gpu=GPU_TEST)
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)
    # Asking for the cudagraphs fixture gates a test like the marker does, so the
    # unmarked test skips for the missing flag too, before any device check.
    skip_lines = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert sum(int(line.split("[")[1].split("]")[0]) for line in skip_lines) == 2, skip_lines
    assert all(line.endswith("needs --cudagraph") for line in skip_lines), skip_lines
    assert "no CUDA device" not in result.stdout.str()


@no_cuda
def test_gpu_tests_skip_without_a_device_even_with_the_flag(pytester):
    pytester.makepyfile(test_gpu=GPU_TEST)
    result = pytester.runpytest("--cudagraph", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no CUDA device*is_available*"])
    assert "needs --cudagraph" not in result.stdout.str()


@no_cuda
def test_plain_api_without_a_device_raises_one_clear_sentence():
    with pytest.raises(CaptureError, match=r"needs a CUDA device.*use the cudagraphs fixture"):
        capture_graphs(lambda x: x, lambda n: torch.randn(n), [1])


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"pool": "private"}, "pool='private' is not a pool mode"),
        ({"order": "smallest_first"}, "order='smallest_first' is not a capture order"),
        ({"warmup_iters": 0}, "warmup_iters=0"),
        ({"sizes": [4, 0]}, "capture size 0 is not a positive integer"),
        ({"sizes": []}, "empty"),
        ({"sizes": None}, "no capture sizes were given"),
    ],
)
def test_bad_options_are_misuse_errors_naming_the_value(options, fragment):
    kwargs = {"sizes": [1, 2]} | options
    sizes = kwargs.pop("sizes")
    with pytest.raises(MisuseError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        GraphSet(lambda x: x, lambda n: torch.randn(n), sizes, **kwargs)


def _invalidated_after(inner: BaseException) -> BaseException:
    """A capture_end error whose __context__ is ``inner``, as torch raises them."""
    try:
        try:
            raise inner
        except Exception:
            # implicit chaining on purpose: torch's capture_end error carries the cause in __context__
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")  # noqa: B904
    except RuntimeError as outer:
        return outer


def host_sync(x):
    raise RuntimeError("CUDA error: operation not permitted when stream is capturing")  # like x.item()


def test_failure_message_names_the_real_cause_not_the_follow_up():
    try:
        host_sync(None)
    except RuntimeError as exc:
        error = _invalidated_after(exc)
    assert real_cause(error).args[0].endswith("stream is capturing")
    message, op = describe_capture_failure(error, "batch size 8", "MLP")
    assert message.startswith("capturing MLP for batch size 8 failed: a call that waits for the GPU")
    assert "real cause RuntimeError: operation not permitted when stream is capturing" in message
    assert "test_capture_cpu.py" in message and "like x.item()" in message
    assert "previous error during capture" not in message
    assert op == ".item()"


def test_cpu_copy_failure_is_named_as_such():
    error = RuntimeError(
        "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned"
    )
    message, _ = describe_capture_failure(error, "batch size 2", "f")
    assert "a copy between host and GPU memory" in message
    assert "failed when the capture ended" in message  # no traceback, so no line to name


def test_graph_set_result_json_has_the_report_fields():
    result = GraphSetResult(
        sizes=(1, 2, 4),
        captured=3,
        pool_bytes=60 * 2**20,
        largest_graph_bytes=42 * 2**20,
        max_abs_err=0.0,
        capture_s=1.25,
        order="largest_first",
        pool="shared",
        keep_outputs=False,
        cublas_workspace_bytes=32 * 2**20,
        graph_bytes={4: 3, 1: 1},
        pool_check_passed=True,
    )
    data = result.to_json()
    for key in (
        "sizes",
        "captured",
        "pool_bytes",
        "largest_graph_bytes",
        "max_abs_err",
        "capture_s",
        "cublas_workspace_bytes",
        "order",
        "pool",
        "keep_outputs",
    ):
        assert key in data
    assert data["graph_bytes"] == {"1": 1, "4": 3}
    nan = GraphSetResult(
        sizes=(1,),
        captured=1,
        pool_bytes=None,
        largest_graph_bytes=None,
        max_abs_err=float("nan"),
        capture_s=0.0,
        order="as_given",
        pool="separate",
        keep_outputs=True,
        cublas_workspace_bytes=None,
    ).to_json()
    assert math.isnan(nan["max_abs_err"])  # the report writer stores it as "nan"


def test_the_one_size_validator_sorts_dedupes_and_keeps_the_given_order_on_request():
    assert validate_capture_sizes([8, 1, 8, 2]) == (1, 2, 8)
    assert validate_capture_sizes(4) == (4,)
    assert capture_sizes_in_order([8, 1, 8, 2], "sizes") == (8, 1, 2)


@pytest.mark.parametrize(
    "sizes, fragment",
    [
        (None, "no capture sizes were given: the capture needs capture_sizes; pass capture_sizes=[1, 2, 4, 8]"),
        ([], "capture_sizes=[] is empty; give at least one positive batch size"),
        ("1 2", "capture_sizes='1 2' is not a list of batch sizes"),
        ([2, True], "capture size True is not a positive integer"),
        ([2, -1], "capture_sizes=[2, -1] must be a non-empty list of positive ints, but capture size -1 is not"),
        ([1.5], "capture size 1.5 is not a positive integer; give sizes such as [1, 2, 4, 8]"),
    ],
)
def test_the_one_size_validator_says_one_sentence(sizes, fragment):
    with pytest.raises(MisuseError) as problem:
        validate_capture_sizes(sizes)
    assert fragment in str(problem.value)
    assert "\n" not in str(problem.value)


def test_the_validator_raises_the_callers_error_type():
    class MarkerError(ValueError):
        pass

    with pytest.raises(MarkerError, match=r"@pytest.mark.cudagraph: capture_sizes=\[0\] must be"):
        validate_capture_sizes([0], "@pytest.mark.cudagraph: capture_sizes", error=MarkerError)


def _cholesky_of_sine(x):
    y = x.sin()
    z = torch.linalg.cholesky(y)  # raises inside Inductor's generated code
    return z * 2


def _same_graph_elsewhere(x):
    y = x.sin()
    z = torch.linalg.cholesky(y)  # the same graph: Inductor's cache serves the first one's code
    return z * 2


@pytest.mark.parametrize("function", [_cholesky_of_sine, _same_graph_elsewhere])
def test_an_error_inside_inductor_generated_code_maps_to_the_users_line(function):
    """What a failed capture inside compiled code names: the user's line of the op, not the generated file.

    The second function compiles to the graph of the first, so its generated code (and the
    line map in it) may come from the FX graph cache, naming the first function's lines:
    each must still be mapped to its own line.
    """
    import inspect

    from pytest_cudagraph.graphs.capture import _generated_code_site

    compiled = torch.compile(function)
    try:
        compiled(-torch.eye(3))
    except Exception as exc:
        error = exc
    else:
        pytest.skip(f"torch {torch.__version__} does not check the factorization inside compiled code")
    site = _generated_code_site(error)
    assert site is not None, "the error was not raised inside generated code"
    frame, inside = site
    _, first = inspect.getsourcelines(function)
    assert (frame.filename, frame.lineno, frame.name) == (__file__, first + 2, function.__name__)
    assert frame.line.startswith("z = torch.linalg.cholesky(y)")
    assert inside.startswith("in the compiled code `") and "linalg" in inside


OTHER_FILE = """
import torch


# padding, so that this copy's lines differ from the test file's


def compiled_elsewhere(x, index):
    y = x.sin()
    z = y[index]
    return z * 2


try:
    torch.compile(compiled_elsewhere)(torch.ones(4), torch.tensor([7]))
except Exception:
    pass
"""


def _gather_out_of_bounds(x, index):
    y = x.sin()
    z = y[index]  # an index past the end: Inductor's kernel raises
    return z * 2


@pytest.mark.slow
def test_a_line_map_from_another_files_cached_compile_is_not_trusted(tmp_path):
    """Inductor's FX graph cache serves the code another file compiled, line map included: map by statement."""
    import subprocess
    import sys

    from pytest_cudagraph.caches.probe import cache_probe, child_environment
    from pytest_cudagraph.graphs.capture import _generated_code_site

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    other = tmp_path / "other_model.py"
    other.write_text(OTHER_FILE)
    with cache_probe(directory=cache) as probe:
        subprocess.run([sys.executable, str(other)], check=True, timeout=300, env=child_environment(cache))
        compiled = torch.compile(_gather_out_of_bounds)
        with pytest.raises(Exception) as info:
            compiled(torch.ones(4), torch.tensor([7]))
        stats = probe.stats()
    assert stats.fxgraph["hit"] == 1, stats.fxgraph  # the code, and its line map, came from the other file
    site = _generated_code_site(info.value)
    assert site is not None
    frame, _ = site
    import inspect

    lines, first = inspect.getsourcelines(_gather_out_of_bounds)
    assert frame.filename == __file__ and first < frame.lineno < first + len(lines), frame
