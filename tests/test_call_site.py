"""Which frames are the user's: the package's own files, torch's and the standard library's never are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import pytest_cudagraph
from pytest_cudagraph.compile.call_site import is_library_file

PACKAGE = Path(pytest_cudagraph.__file__).resolve().parent
MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_every_module_of_the_package_is_library_code(path):
    """A frame in any of the package's folders (the gateway's patched torch methods among them) is never the user's."""
    assert is_library_file(str(path))


def test_a_test_file_and_an_installed_package_are_the_users(tmp_path):
    assert not is_library_file(__file__)
    assert not is_library_file(str(tmp_path / "test_model.py"))
    assert is_library_file(os.__file__)
    assert is_library_file("<string>")
