"""pytest's log capture kept off torch's own loggers: the structured trace, and torch's stderr loggers.

pytest 9.2 attaches its log-capture handlers to every logger that does not
propagate, and torch's are such loggers.  torch writes a structured-trace record
(compile events, graphs, guards) whenever ``torch.__trace`` has a handler, so every
failing test that compiled ended with dozens to hundreds of empty ``DEBUG
torch.__trace`` lines under "Captured log call", burying the message the test
failed with.  torch's own loggers (``torch`` and the Dynamo and Inductor ones below it) print through
their own stderr handlers, so a recompile-limit WARNING was shown twice (captured
stderr and captured log), and torch's off-by-default artifact loggers, which have
no handler and drop their records, had their INFO records (Inductor's ``Output code
written to``) captured under every failure.  The handlers are taken off those loggers
again at the start of each test phase and of the test loop, inside pytest's own
capture (these wrappers run last, so innermost), which also spares torch from
building trace payloads.

``cudagraph_capture_torch_trace = true`` in the ini file leaves them on the trace
logger only.  A user who asked for torch's logs (``TORCH_LOGS`` set, or pytest's
``--log-level``/``log_level`` given) keeps them on torch's other loggers.  The
hooks are registered once the run uses the plugin or imports torch
(``activation``): before that no logger of torch exists.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from .. import _compat
from .options import TORCH_TRACE_INI as INI_OPTION

__all__ = ["INI_OPTION", "detach_pytest_handlers", "detach_pytest_handlers_from_torch_trace"]


def detach_pytest_handlers_from_torch_trace() -> None:
    """Take pytest's handlers off torch's trace logger, if torch has made it (this never creates it)."""
    logger = logging.Logger.manager.loggerDict.get(_compat.TORCH_TRACE_LOGGER)
    if isinstance(logger, logging.Logger):
        _detach(logger)


def _user_asked_for_torch_logs(config: pytest.Config) -> bool:
    """``TORCH_LOGS`` set, or a pytest log level given (option or ini): the user wants torch's records captured."""
    return bool(os.environ.get("TORCH_LOGS")) or bool(config.getoption("log_level") or config.getini("log_level"))


def detach_pytest_handlers(config: pytest.Config) -> None:
    """Take pytest's handlers off torch's trace logger, and off its other non-propagating loggers unless asked.

    With ``cudagraph_capture_torch_trace = true`` the trace logger keeps them, and
    torch's other loggers still lose theirs (a recompile-limit WARNING is shown
    once, not in both the captured stderr and the captured log).  Before torch has
    made its loggers (a run that never imports it) only the trace logger's name is
    read, and no other gateway module is loaded.
    """
    keep_trace = bool(config.getini(INI_OPTION))
    if not keep_trace:
        detach_pytest_handlers_from_torch_trace()
    torch_has_loggers = isinstance(logging.Logger.manager.loggerDict.get("torch"), logging.Logger)
    if torch_has_loggers and not _user_asked_for_torch_logs(config):
        for logger in _compat.torch_non_propagating_loggers():
            if not (keep_trace and logger.name == _compat.TORCH_TRACE_LOGGER):
                _detach(logger)


def _detach(logger: logging.Logger) -> None:
    for handler in _compat.pytest_log_handlers(logger):
        logger.removeHandler(handler)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[None]:
    """Inside pytest's capture of the test loop: the live-log and log-file handlers off torch's loggers."""
    detach_pytest_handlers(session.config)
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Inside pytest's capture of a test's setup: its capture and caplog handlers off torch's loggers."""
    detach_pytest_handlers(item.config)
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Inside pytest's capture of a test's call: as for its setup."""
    detach_pytest_handlers(item.config)
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Inside pytest's capture of a test's teardown: as for its setup."""
    detach_pytest_handlers(item.config)
    return (yield)
