"""The plugin's exception types.

Every error a user can cause is raised as one of these, with ``str()`` being one
sentence that names the thing and the fix.  The plugin turns them into pytest
usage errors, collection errors or test failures without a traceback from inside
torch.

Where each one shows:

- ``UsageProblem``: at session start, a bad option value or environment; pytest
  stops with exit code 4 before any test runs;
- ``MarkerArgumentError`` (``pytest_cudagraph.plugin.markers``): at collection, a bad
  marker argument; a collection error naming the test;
- ``MisuseError``: inside a test, a call of the plain API or a fixture that cannot
  work (a bad argument, a closed object); it fails that test;
- ``InvariantViolation``, ``CaptureError``, ``StaleGraphError``: inside a test, a
  check that does not hold; it fails that test;
- ``ReportError``: a report file that cannot be read (``compare``, ``show``,
  ``--cudagraph-baseline``).

A few errors live beside the code that raises them, each a subclass of one of
these: ``records.files.FileRefused`` and ``records.validate.Malformed`` are
``ReportError``s, ``tools.explain.BadTest`` a ``MisuseError``, ``tools.cli.OutputLost``
a ``CudagraphError``; ``tests/test_public_api.py`` holds every public exception
class of the package to that.
"""

from __future__ import annotations


class CudagraphError(Exception):
    """Base class of every error the plugin raises on purpose."""

    # The user's line the failure points at, ``(file, line)``, where the raising code found one:
    # the op of a failed capture, the call site of a recompile.  The plugin records it with the
    # test's failure, and places CI annotations there.
    site: tuple[str, int] | None = None


class UsageProblem(CudagraphError):
    """A bad option value or environment, found at session start (pytest exit code 4).

    Only the session-start checks raise it; a bad call inside a test is a
    :class:`MisuseError`.
    """


class MisuseError(CudagraphError, ValueError):
    """A call of the plain API or a fixture with arguments that cannot work.

    Examples: ``sizes=[0, 8]``, ``pool="shared_pool"``, replaying a size that was not
    captured, using a GraphSet after ``close()``, entering a watch that is already
    active.  Raised inside a test it fails that test with one sentence naming the
    argument and the fix.  It subclasses ValueError, so code that caught the
    ValueError of a bad argument keeps working.
    """


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
