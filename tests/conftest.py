"""Shared setup of the plugin's own tests."""

# Imported once here so that in-process pytester runs, which drop every module
# they import, never re-import torch: its C extension cannot be loaded twice.
import torch  # noqa: F401
