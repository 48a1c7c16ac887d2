"""pytest's and pytest-xdist's internals: the run's base temp directory, its options, a test's arguments,
scope scheduling, pytest's log-capture handlers, and torch's loggers they would be attached to.

Read in pytest 8.0-9.2 and pytest-xdist 3.5-3.8.  Imports neither pytest nor xdist
at import time (xdist is optional), nor torch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: importing this module never imports pytest
    import pytest


def run_basetemp(config: pytest.Config) -> Path | None:
    """pytest's base temporary directory of this run (made on first use), or None before pytest has one.

    The factory behind ``tmp_path``/``tmp_path_factory`` is ``config._tmp_path_factory``,
    set by pytest's tmpdir plugin in its ``pytest_configure``; outside a fixture it has
    no public handle.  ``getbasetemp()`` raises OSError when the directory cannot be
    made (a read-only temp directory, one owned by another user or a symlink).
    """
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return None
    return Path(factory.getbasetemp())


def pytest_log_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers of pytest's logging plugin attached to ``logger`` (capture, caplog, live log, log file).

    pytest 9.2's ``catching_logs`` attaches its handler to the root logger and to
    every logger that does not propagate, at the start of each phase of each test
    and of the test loop; pytest 8.x and 9.0-9.1 attach to the root logger only.
    The handlers are classes of ``_pytest.logging`` (``LogCaptureHandler``,
    ``_LiveLoggingNullHandler``, ``_FileHandler``, ...) with no public base class.
    """
    return [handler for handler in logger.handlers if type(handler).__module__ == "_pytest.logging"]


def torch_non_propagating_loggers() -> list[logging.Logger]:
    """torch's loggers that do not propagate, among those already made (this creates none and imports no torch).

    torch's logging setup (``torch._logging._internal._init_logs``, at torch's import
    and at every ``set_logs``) makes ``torch`` and each registered logger
    (``torch._dynamo``, ``torch._inductor``, ...) non-propagating, each with its own
    stderr handler, and every off-by-default artifact logger
    (``torch._inductor.graph.__output_code``, ...) non-propagating with none; the
    structured-trace logger ``torch.__trace`` does not propagate either (torch
    2.6-2.13).  These are the loggers pytest 9.2's ``catching_logs`` adds its
    handlers to.
    """
    return [
        logger
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if isinstance(logger, logging.Logger)
        and (name == "torch" or name.startswith("torch."))
        and not logger.propagate
    ]


def pytest_option_arities(config: pytest.Config) -> dict[str, tuple[str, Any]]:
    """Every option string this run's pytest knows (its own, each plugin's, each conftest's): ``(dest, nargs)``.

    ``nargs`` is argparse's: ``0`` for a flag, ``None`` for one value, ``"?"``,
    ``"*"``, ``"+"`` or a count.  The argparse parser is ``config._parser``'s: pytest
    8.x builds it anew from the registered options with ``_getparser()``, 9.x keeps
    one, ``optparser``, that every ``addoption`` adds to.  Its actions by option
    string are argparse's ``_option_string_actions`` (unchanged since Python 3.2).
    """
    parser = config._parser
    build = getattr(parser, "_getparser", None)
    optparser = build() if build is not None else parser.optparser
    return {string: (action.dest, action.nargs) for string, action in optparser._option_string_actions.items()}


def pyfunc_argnames(item: pytest.Function) -> tuple[str, ...]:
    """The names a Python test function is called with: what pytest's own ``pytest_pyfunc_call`` passes.

    ``item._fixtureinfo.argnames``: the function's parameters without defaults, less
    those ``mock.patch`` fills and a method's ``self``; every one of them is in
    ``item.funcargs`` once the fixtures are set up (which also holds autouse and
    indirectly requested fixtures, not passed).
    """
    return tuple(item._fixtureinfo.argnames)


def xdist_scope_scheduling(config: Any, log: Any, scope_of: Callable[[str], str]) -> Any:
    """xdist's ``LoadScopeScheduling`` with its scope rule replaced by ``scope_of(nodeid)``.

    A scope is handed to one worker whole.  ``_split_scope(nodeid)`` is the method
    xdist's own ``LoadFileScheduling`` and ``LoadGroupScheduling`` override to the same
    end (xdist 3.x); the scheduler is built by the controller's
    ``pytest_xdist_make_scheduler`` hook.
    """
    from xdist.scheduler import LoadScopeScheduling

    # xdist ships no type information, so its scheduler is Any to mypy
    class ScopeOfScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ScopeOfScheduling(config, log)
