"""The run's Markdown summary appended to GitHub's job summary (``$GITHUB_STEP_SUMMARY``).

``--cudagraph-summary=github`` appends it at the end of the run; so does a run
that writes its report (``--cudagraph-report``) in a GitHub Actions step, where
``GITHUB_STEP_SUMMARY`` is set (``auto``, the default).  ``off`` never does.  The
text is ``pytest-cudagraph show REPORT --markdown``'s (``render.markdown``), drawn
from the run's records, with the baseline comparison under it when
``--cudagraph-baseline`` was given.  Only the process that writes the report
writes it (the xdist controller).  A file that cannot be written costs the run
nothing but a line in the terminal section: the report and the exit status stand.

On Buildkite, give the Markdown to ``buildkite-agent annotate`` from the report
(``docs/ci.md``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ..errors import UsageProblem
from .items import PROGRESS_KEY, is_worker
from .options import SUMMARY_CHOICES
from .ran_no_test import ran_no_test  # --cudagraph-summary's values, defined with the options
from .session import RunState

__all__ = ["SUMMARY_CHOICES", "SUMMARY_ENV", "JobSummary", "check_summary_option", "register", "summary_markdown"]
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def check_summary_option(config: pytest.Config) -> None:
    """At start: ``--cudagraph-summary=github`` needs the file GitHub Actions names in each step."""
    if config.getoption("cudagraph_summary") == "github" and not os.environ.get(SUMMARY_ENV):
        raise UsageProblem(
            f"--cudagraph-summary=github appends to the file ${SUMMARY_ENV} names, and it is not set; "
            f"run in a GitHub Actions step (which sets it), or leave the option out"
        )


def summary_path(config: pytest.Config, state: RunState) -> Path | None:
    """Where the run's summary goes: ``$GITHUB_STEP_SUMMARY`` when asked for (or by default with a report); else None."""
    choice = config.getoption("cudagraph_summary")
    target = os.environ.get(SUMMARY_ENV)
    if not target or choice == "off":
        return None
    if choice == "github" or state.options.report_path is not None:
        return Path(target)
    return None


def register(config: pytest.Config, state: RunState) -> None:
    """In the process that writes the report (never an xdist worker), where a summary is wanted."""
    if is_worker(config):
        return
    path = summary_path(config, state)
    if path is not None:
        config.pluginmanager.register(JobSummary(state, path), "cudagraph-job-summary")


class JobSummary:
    """Appends the run's Markdown to the job summary at the end of the run."""

    def __init__(self, state: RunState, path: Path):
        self.state = state
        self.path = path
        self.error: str | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """At the end, after the report is written and compared: the Markdown appended to the job summary."""
        config = session.config
        if ran_no_test(config, int(exitstatus)) is not None:
            return  # no verdict of a run of no test, and no report named as this run's
        progress = config.stash.get(PROGRESS_KEY, None)
        text = summary_markdown(self.state, progress, int(exitstatus))
        try:
            with open(self.path, "a", encoding="utf-8") as summary:
                summary.write(text + "\n")
        except OSError as exc:
            self.error = (
                f"cudagraph: the job summary was NOT appended to {self.path} ({exc.strerror or type(exc).__name__}); "
                f"the report and the outcome are unchanged"
            )

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """In pytest's closing summary: why the job summary could not be written, if it could not."""
        if self.error is not None:
            terminalreporter.write_line(self.error, yellow=True)


def summary_markdown(state: RunState, progress: Any, exitstatus: int) -> str:
    """The run's Markdown: its records as ``show --markdown`` draws them, then the baseline comparison."""
    from ..render.markdown import comparison_markdown, run_markdown
    from ..render.markdown_blocks import MAX_BYTES

    options = state.options
    notes = []
    if progress is not None and progress.shard is not None:
        from ..render.shard_text import describe_shard

        notes.append(describe_shard(progress.shard_fields()))
    if options.report_path is not None and state.report_error is None:
        notes.append(f"report: {options.report_path}")
    reasons = progress.incomplete_reasons(exitstatus) if progress is not None else []
    title = f"pytest-cudagraph: {options.report_path.name}" if options.report_path is not None else "pytest-cudagraph"
    # GitHub drops a step's summary over 1 MiB whole: the run's page and the comparison share the room
    room = MAX_BYTES if state.baseline_comparison is None else MAX_BYTES // 2
    text = run_markdown(
        state.records,
        title=title,
        incomplete_reasons=reasons,
        not_run_count=len(progress.not_run()) if progress is not None and reasons else 0,
        notes=notes,
        max_bytes=room,
    )
    if state.baseline_comparison is not None:
        from ..tools.compare_rules import INCOMPLETE_RULE

        title = f"pytest-cudagraph: compared with baseline {options.baseline_path}"
        text += "\n" + comparison_markdown(
            state.baseline_comparison, incomplete_rule=INCOMPLETE_RULE, title=title, max_bytes=room
        )
    return text
