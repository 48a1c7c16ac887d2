"""Whether a run ran no test body: the one rule every output the plugin writes follows.

The report, the job summary and the annotations are the account of tests that
ran.  A run that ran no test body would replace the last report with one of no
test marked complete, and tell the job summary a verdict of nothing.  pytest and
its plugins keep adding such modes, so the rule is not a list of options but
where the run got to:

- the session must enter pytest's test loop (``pytest_runtestloop``).
  ``--cache-show``, ``--fixtures`` and ``--fixtures-per-test`` wrap a session
  around a main of their own and never get there; ``--help``, ``--version`` and
  ``--markers`` open no session at all.  A session that ends before its loop with
  an error or an interrupt (Ctrl-C while collecting) meant to run tests: its
  report is written, incomplete;
- inside the loop, pytest's own switches that skip every body: ``--collect-only``
  and ``--setup-only`` (which ``--setup-plan`` turns on);
- and the loop must have had a test: a run that selected none (exit 5:
  ``--trace-config`` where there are no tests, ``-k`` matching nothing), but a
  pytest-split shard that got none, whose report ``merge`` asks for.

Such a run writes no output and leaves the last report as it was; the terminal
section says so.  This module is registered at configure in every run, so it
imports nothing but pytest.
"""

from __future__ import annotations

import pytest

LOOP_ENTERED_KEY = pytest.StashKey[bool]()
# the options that name a mode in the terminal section's line; the rule above does not read them
_NAMED_MODES = (
    ("collectonly", "--collect-only"),
    ("setupplan", "--setup-plan"),  # before --setup-only: pytest turns that on with it
    ("setuponly", "--setup-only"),
    ("showfixtures", "--fixtures"),
    ("show_fixtures_per_test", "--fixtures-per-test"),
    ("cacheshow", "--cache-show"),
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """As pytest's test loop starts (the xdist controller's too): this run runs tests, unless a switch skips them."""
    session.config.stash[LOOP_ENTERED_KEY] = True


def ran_no_test(config: pytest.Config, exitstatus: int) -> str | None:
    """Why this run ran no test body, as the start of a sentence (``--setup-plan ran no test``); None if it ran tests."""
    named = next((flag for dest, flag in _NAMED_MODES if _option(config, dest)), None)
    if not config.stash.get(LOOP_ENTERED_KEY, False):
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            return None  # stopped before its loop by an error or an interrupt: its report says so
        return f"{named or 'this pytest mode'} ran no test"
    if named in ("--collect-only", "--setup-plan", "--setup-only"):
        return "collection only" if named == "--collect-only" else f"{named} ran no test"
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not _option(config, "splits"):
        # a pytest-split shard that got no test is still a shard: merge asks for every shard's report
        return "no test was selected"
    return None


def _option(config: pytest.Config, name: str) -> object:
    try:
        return config.getoption(name)
    except ValueError:  # an option of a plugin that is not loaded
        return None
