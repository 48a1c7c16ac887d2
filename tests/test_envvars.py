"""pytest_cudagraph.envvars: variables changed for a while are put back exactly as they were."""

from __future__ import annotations

import os

import pytest

from pytest_cudagraph.envvars import (
    EnvironmentPatch,
    environment_set,
    environment_snapshot,
    restore_environment_snapshot,
)

SET = "PYTEST_CUDAGRAPH_TEST_SET"
ABSENT = "PYTEST_CUDAGRAPH_TEST_ABSENT"


@pytest.fixture
def environ(monkeypatch):
    monkeypatch.setenv(SET, "before")
    monkeypatch.delenv(ABSENT, raising=False)


def test_a_block_sets_and_unsets_then_restores_values_and_absence(environ):
    with environment_set({SET: None, ABSENT: "added"}):
        assert SET not in os.environ and os.environ[ABSENT] == "added"
    assert os.environ[SET] == "before" and ABSENT not in os.environ


def test_a_block_restores_even_when_the_body_raises_and_changed_the_variables_again(environ):
    with pytest.raises(RuntimeError), environment_set({SET: "inside"}):
        os.environ[SET] = "changed by the body"
        os.environ[ABSENT] = "also by the body"
        raise RuntimeError
    assert os.environ[SET] == "before"
    assert os.environ[ABSENT] == "also by the body"  # never given to the block: not its to undo


def test_a_patch_set_twice_restores_what_was_there_before_the_first_change(environ):
    patch = EnvironmentPatch()
    patch.set({SET: "first", ABSENT: "first"})
    patch.set({SET: "second"})
    assert os.environ[SET] == "second"
    patch.restore()
    assert os.environ[SET] == "before" and ABSENT not in os.environ
    patch.restore()  # empty now: a second restore changes nothing
    assert os.environ[SET] == "before"


def test_a_snapshot_puts_back_changed_removed_and_added_variables_and_names_them(environ, monkeypatch):
    prefixes = ("PYTEST_CUDAGRAPH_TEST_",)
    snapshot = environment_snapshot(prefixes)
    assert snapshot == {SET: "before"}
    os.environ[ABSENT] = "added"
    os.environ[SET] = "changed"
    monkeypatch.setenv("OTHER_PREFIX_VARIABLE", "left alone")
    assert restore_environment_snapshot(snapshot, prefixes) == [ABSENT, SET]
    assert environment_snapshot(prefixes) == {SET: "before"}
    assert os.environ["OTHER_PREFIX_VARIABLE"] == "left alone"
    assert restore_environment_snapshot(snapshot, prefixes) == []
