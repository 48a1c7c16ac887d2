"""The plugin's command-line and ini options: their definitions and the values they accept.

``pytest_addoption`` (the entry point's) adds them in every run, so this module
imports nothing but pytest.  The modules that act on an option (``session``,
``job_summary``, ``failure_annotations``, ``torch_trace``) read its accepted
values from here.
"""

from __future__ import annotations

import pytest

# --cudagraph-group's values (session reads them)
GROUP_CHOICES = ("none", "module")
# the ini option of torch_trace
TORCH_TRACE_INI = "cudagraph_capture_torch_trace"
# --cudagraph-summary's and --cudagraph-annotations's values (job_summary, failure_annotations)
SUMMARY_CHOICES = ("auto", "github", "off")
ANNOTATION_CHOICES = ("auto", "github", "off")


def add_options(parser: pytest.Parser) -> None:
    """The plugin's command-line and ini options, added to pytest's parser."""
    group = parser.getgroup("cudagraph", "CUDA graph and torch.compile cache validation (pytest-cudagraph)")
    _add_command_line_options(group)
    _add_ini_options(parser)


def _add_command_line_options(group: pytest.OptionGroup) -> None:
    """``--cudagraph`` and the ``--cudagraph-*`` options, in the plugin's group of ``pytest --help``."""
    group.addoption(
        "--cudagraph",
        action="store_true",
        default=False,
        help="run the tests marked cudagraph or using the cudagraphs fixture (without it they skip with 'needs --cudagraph').",
    )
    group.addoption(
        "--cudagraph-require-gpu",
        action="store_true",
        default=False,
        help="implies --cudagraph; stop at start with a usage error when no CUDA device is visible, "
        "instead of skipping the GPU tests.",
    )
    group.addoption(
        "--cudagraph-report",
        metavar="PATH",
        default=None,
        help="write the run's JSON report (schema pytest-cudagraph/3) to PATH; a PATH ending in .gz is written gzip-compressed.",
    )
    group.addoption(
        "--cudagraph-baseline",
        metavar="PATH",
        default=None,
        help="compare the run against an earlier report at the end; a regression fails the session.",
    )
    group.addoption(
        "--cudagraph-cache-dir",
        metavar="PATH",
        default=None,
        help="root of the compile caches (Inductor, AOTAutograd, Triton) for the whole run; "
        "default: a fresh private directory per run, used only by the plugin's checks.",
    )
    group.addoption(
        "--cudagraph-devices",
        metavar="auto|LIST",
        default=None,
        help="under pytest-xdist, pin each worker to one GPU, round-robin over LIST (indices such as 0,1) "
        "or over every visible GPU (auto); a worker's GPU is its cuda:0. Without -n the run itself is "
        "pinned to the first device of the list.",
    )
    group.addoption(
        "--cudagraph-group",
        choices=GROUP_CHOICES,
        default="none",
        help="module: under pytest-xdist, run all GPU tests of a module on one worker (the plugin's own "
        "scheduling), so that they share its GPU and its module-scoped fixtures; default: none.",
    )
    group.addoption(
        "--cudagraph-summary",
        choices=SUMMARY_CHOICES,
        default="auto",
        help="github: append the run's summary in Markdown to $GITHUB_STEP_SUMMARY (GitHub's job summary); "
        "auto (default): do so where that variable is set and --cudagraph-report is given; off: never.",
    )
    group.addoption(
        "--cudagraph-annotations",
        choices=ANNOTATION_CHOICES,
        default="auto",
        help="auto (default): under GitHub Actions (GITHUB_ACTIONS=true) print each failure of the plugin's checks "
        "as an ::error annotation at the user's line; github: print them anywhere; off: never.",
    )


def _add_ini_options(parser: pytest.Parser) -> None:
    """The ``cudagraph_*`` ini options: the fixtures' defaults, the baseline's rules, torch's trace records."""
    parser.addini(
        "cudagraph_capture_sizes",
        "default batch sizes for the cudagraphs fixture, e.g. '1 2 4 8'",
        default="",
    )
    parser.addini("cudagraph_rtol", "default relative tolerance of replay-vs-eager checks", default="")
    parser.addini("cudagraph_atol", "default absolute tolerance of replay-vs-eager checks", default="")
    parser.addini(
        "cudagraph_baseline_fail_on",
        "compare rules that make --cudagraph-baseline fail the run, as for 'pytest-cudagraph compare --fail-on' "
        "(e.g. 'default,graph-breaks'); default: the default rules",
        default="",
    )
    parser.addini(
        TORCH_TRACE_INI,
        "keep torch's structured-trace records (logger torch.__trace) in pytest's log capture and caplog; "
        "default false: they are kept out, so a failing test's captured log shows what matters",
        type="bool",
        default=False,
    )
