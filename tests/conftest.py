"""Shared setup of the plugin's own tests."""

import os
import warnings

import pytest

# Imported once here so that in-process pytester runs, which drop every module
# they import, never re-import torch: its C extension cannot be loaded twice.
import torch

# ... and so is the compile stack: an in-process run that first imports Inductor would drop
# its modules at the end, and importing them again fails (torch 2.11: "Artifact of
# type=autotune already registered in mega-cache artifact factory").
# Importing it warns torch's own deprecations (2.13: "torch.jit.script_method is deprecated", 14
# times), which no test of this suite causes.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import torch._inductor.compile_fx  # noqa: F401

# The suite itself runs in random order (pytest-randomly), so no verdict may depend
# on which test ran first.  The small suites generated inside tests are a different
# matter: several put a "remember the state" test before a "check it is back" one
# on purpose, so the runs this suite starts keep their files' order.  A run that
# passes "-p randomly" still shuffles: the command line's -p comes after this variable's.
#
# And an in-process run started under the `pytest` script of an editable install warns
# that it cannot rewrite the asserts of pytest_cudagraph, which the outer run imported
# through the install's own finder, not through pytest's import hook (`python -m pytest`
# from the checkout imports it from the path, and does not warn).  The warning is about
# how this suite was started, not about the plugin, and it would be counted in every
# in-process run's outcomes.
#
# A child that reads the variable below gets both (a subprocess of a plain test);
# pytester deletes it (its runs must not see the outer run's options), so the fixture
# below sets it again for the pytester runs.
CHILD_RUN_OPTIONS = " ".join(
    (os.environ.get("PYTEST_ADDOPTS", ""), "-p no:randomly -W ignore::pytest.PytestAssertRewriteWarning")
).strip()
os.environ["PYTEST_ADDOPTS"] = CHILD_RUN_OPTIONS


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's pytester, whose runs (in-process and subprocess) get CHILD_RUN_OPTIONS."""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_RUN_OPTIONS)
    return pytester


def pytest_collection_modifyitems(config, items):
    """Leave the tests marked slow out of a run without ``-m`` (the README's test command).

    ``pytest -m slow`` runs them and ``-m "slow or not slow"`` runs everything, as
    .ci/run and .ci/gpu do.  Done here rather than with ``-m`` in addopts, so that a
    run of the example suite from the repository root records no selection.
    """
    if config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


@pytest.fixture(scope="module")
def dynamo_modules_loaded() -> None:
    """Load every module a Dynamo compile imports lazily, before in-process runs that compile.

    pytester's in-process runs drop the modules they imported, and a second import of
    torch's compile stack fails (its registries refuse duplicates).
    """
    import torch._dynamo.testing  # noqa: F401

    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    torch._dynamo.reset()


@pytest.fixture
def wide_terminal(monkeypatch):
    """Child runs print failure lines whole: the plugin fits them to the terminal, 80 columns where pytest sees none."""
    monkeypatch.setenv("COLUMNS", "250")
