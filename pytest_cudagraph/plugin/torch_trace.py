"""torch's structured-trace records kept out of pytest's log capture and out of ``caplog``.

pytest 9.2 attaches its log-capture handlers to every logger that does not
propagate, and torch's structured-trace logger is one.  torch writes a trace
record (compile events, graphs, guards) whenever that logger has a handler, so
every failing test that compiled ended with dozens to hundreds of empty
``DEBUG torch.__trace`` lines under "Captured log call", burying the message the
test failed with.  The handlers are taken off that logger again at the start of
each test phase and of the test loop, inside pytest's own capture (these wrappers
run last, so innermost), which also spares torch from building the payloads.
``cudagraph_capture_torch_trace = true`` in the ini file leaves them on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from .. import _compat

INI_OPTION = "cudagraph_capture_torch_trace"


def detach_pytest_handlers_from_torch_trace() -> None:
    """Take pytest's handlers off torch's trace logger, if torch has made it (this never creates it)."""
    logger = logging.Logger.manager.loggerDict.get(_compat.TORCH_TRACE_LOGGER)
    if isinstance(logger, logging.Logger):
        for handler in _compat.pytest_log_handlers(logger):
            logger.removeHandler(handler)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[None]:
    """Inside pytest's capture of the test loop: the live-log and log-file handlers off the trace logger."""
    detach_pytest_handlers_from_torch_trace()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Inside pytest's capture of a test's setup: its capture and caplog handlers off the trace logger."""
    detach_pytest_handlers_from_torch_trace()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Inside pytest's capture of a test's call: as for its setup."""
    detach_pytest_handlers_from_torch_trace()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Inside pytest's capture of a test's teardown: as for its setup."""
    detach_pytest_handlers_from_torch_trace()
    return (yield)
