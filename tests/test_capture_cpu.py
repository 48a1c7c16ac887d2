"""The capture API's parts that need no GPU: skips, option errors, failed-capture messages."""

from __future__ import annotations

import math

import pytest
import torch

from pytest_cudagraph import CaptureError, UsageProblem
from pytest_cudagraph.capture import GraphSet, GraphSetResult, capture_graphs, describe_capture_failure, real_cause

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
def test_bad_options_are_usage_problems_naming_the_value(options, fragment):
    kwargs = {"sizes": [1, 2]} | options
    sizes = kwargs.pop("sizes")
    with pytest.raises(UsageProblem, match=fragment.replace("(", r"\(").replace(")", r"\)")):
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
    error = RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned")
    message, _ = describe_capture_failure(error, "batch size 2", "f")
    assert "a copy between host and GPU memory" in message
    assert "failed when the capture ended" in message  # no traceback, so no line to name


def test_graph_set_result_json_has_the_report_fields():
    result = GraphSetResult(
        sizes=(1, 2, 4), captured=3, pool_bytes=60 * 2**20, largest_graph_bytes=42 * 2**20, max_abs_err=0.0,
        capture_s=1.25, order="largest_first", pool="shared", keep_outputs=False,
        cublas_workspace_bytes=32 * 2**20, graph_bytes={4: 3, 1: 1}, pool_check_passed=True,
    )
    data = result.to_json()
    for key in ("sizes", "captured", "pool_bytes", "largest_graph_bytes", "max_abs_err", "capture_s",
                "cublas_workspace_bytes", "order", "pool", "keep_outputs"):
        assert key in data
    assert data["graph_bytes"] == {"1": 1, "4": 3}
    nan = GraphSetResult(
        sizes=(1,), captured=1, pool_bytes=None, largest_graph_bytes=None, max_abs_err=float("nan"),
        capture_s=0.0, order="as_given", pool="separate", keep_outputs=True, cublas_workspace_bytes=None,
    ).to_json()
    assert math.isnan(nan["max_abs_err"])  # the report writer stores it as "nan"
