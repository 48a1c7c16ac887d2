"""The plugin's exception types.

Every error a user can cause is raised as one of these, with ``str()`` being one
sentence that names the thing and the fix.  The plugin turns them into pytest
usage errors, collection errors or test failures without a traceback from inside
torch.
"""

from __future__ import annotations


class CudagraphError(Exception):
    """Base class of every error the plugin raises on purpose."""


class UsageProblem(CudagraphError):
    """A bad option value or environment, found at session start (pytest exit code 4)."""


class InvariantViolation(CudagraphError, AssertionError):
    """A checked invariant does not hold: too many recompiles, a cache miss, a pool too big.

    It subclasses AssertionError so that it reads as a test failure, and pytest
    prints only the message (``__tracebackhide__`` in the raising frames).
    """


class CaptureError(CudagraphError, RuntimeError):
    """A CUDA graph capture failed; the message names the real cause and the op."""


class StaleGraphError(CudagraphError, RuntimeError):
    """A replay would read memory the graph no longer owns (a moved input or parameter)."""


class ReportError(CudagraphError):
    """A report file is unreadable, truncated, or of another schema."""
