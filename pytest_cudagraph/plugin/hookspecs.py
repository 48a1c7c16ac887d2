"""Hook specifications other plugins and conftest files can implement."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_cudagraph_update_env(config: pytest.Config, env: dict[str, Any]) -> None:
    """Add or change fields of the report's ``env`` block before it is written.

    Called once per run, at the end, in the process that writes the report (the
    xdist controller under ``-n``), whenever ``--cudagraph-report`` or
    ``--cudagraph-baseline`` is given.  ``pytest-cudagraph compare`` shows every
    field that differs between two reports, yours included.  Example, in a
    ``conftest.py``::

        def pytest_cudagraph_update_env(config, env):
            import vllm
            env["vllm"] = vllm.__version__

    Only JSON-serialisable values (others are written as their ``str()``); never
    secrets, tokens or environment variables.
    """
