"""Shared setup of the plugin's own tests."""

import os

# Imported once here so that in-process pytester runs, which drop every module
# they import, never re-import torch: its C extension cannot be loaded twice.
import torch  # noqa: F401

# The suite itself runs in random order (pytest-randomly), so no verdict may depend
# on which test ran first.  The small suites generated inside tests are a different
# matter: several put a "remember the state" test before a "check it is back" one
# on purpose, so pytester runs (in-process and subprocess both read this variable)
# keep their files' order.
os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} -p no:randomly".strip()
