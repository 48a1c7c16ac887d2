"""Hook specifications other plugins and conftest files can implement."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_cudagraph_update_env(config: pytest.Config, env: dict[str, Any]) -> None:
    """Add or change fields of the report's ``env`` block before it is written.

    Example, in a ``conftest.py``::

        def pytest_cudagraph_update_env(config, env):
            env["vllm"] = vllm.__version__

    Only JSON-serialisable values; never secrets or environment variables.
    """
