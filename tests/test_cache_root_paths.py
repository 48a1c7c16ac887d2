"""A cache root path is checked the way OpenSSH's StrictModes checks ~/.ssh: every component, not only the leaf.

Compile caches hold code that is executed on load, so another user must not be able to
swap the directory or any directory above it: a symlink planted by them, a parent they own,
a parent anyone may write to (unless it is sticky like /tmp and the next component is ours).
And the plugin deletes only what it made: a root pointed at an existing directory keeps the
user's own ``probes``.

These tests run as root in CI, where permission bits do not stop root, so they are built on
what the check reads (owners and modes): another user's files are made with ``os.chown``,
which needs root (those tests skip otherwise).
"""

from __future__ import annotations

import os
import stat

import pytest

from pytest_cudagraph.caches.cache_root import CacheRoot, check_secure_dir, ensure_private_dir
from pytest_cudagraph.errors import UsageProblem

IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0
AS_ROOT = pytest.mark.skipif(not IS_ROOT, reason="giving a path to another user (os.chown) needs root")
OTHER_UID = 65534  # "nobody"
OPTION = "--cudagraph-cache-dir"
FAST = ("-p", "no:hypothesispytest")


def private_dir(path):
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    return path


def refusal(path, create=False) -> str:
    check = ensure_private_dir if create else check_secure_dir
    with pytest.raises(UsageProblem) as info:
        check(path, OPTION)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{OPTION} {path} ")
    return message


@AS_ROOT
@pytest.mark.parametrize("create", [False, True], ids=["check", "ensure"])
def test_a_final_symlink_owned_by_another_user_is_refused(tmp_path, create):
    real = private_dir(tmp_path / "real")  # ours, private: only the link is foreign
    link = tmp_path / "cache"
    link.symlink_to(real)
    os.lchown(link, OTHER_UID, OTHER_UID)
    message = refusal(link, create)
    assert f"is a symlink owned by uid {OTHER_UID}, not by you (uid 0)" in message
    assert "give the directory's real path or a symlink you own" in message


def test_a_symlink_you_own_to_a_private_directory_is_followed(tmp_path):
    real = private_dir(tmp_path / "real")
    link = tmp_path / "cache"
    link.symlink_to(real)
    assert check_secure_dir(link, OPTION) == real.resolve()
    assert ensure_private_dir(link, OPTION) == real.resolve()


@AS_ROOT
def test_a_parent_owned_by_another_user_is_refused_and_nothing_is_created_under_it(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    mine = private_dir(theirs / "cache")  # ours, private, but its parent's owner could swap it
    message = refusal(mine)
    assert f"lies under {theirs}, which is owned by uid {OTHER_UID} (neither you, uid 0, nor root)" in message
    assert "use a directory whose every parent is owned by you or root" in message
    message = refusal(theirs / "new" / "cache", create=True)
    assert f"lies under {theirs}" in message
    assert not (theirs / "new").exists()


@pytest.mark.parametrize("bits", [0o777, 0o775, 0o757], ids=lambda bits: f"{bits:04o}")
def test_a_parent_others_can_write_without_the_sticky_bit_is_refused(tmp_path, bits):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(bits)
    mine = private_dir(shared / "cache")
    message = refusal(mine)
    assert (
        f"lies under {shared}, which is writable by group or others (mode {bits:04o}) without the sticky bit" in message
    )
    assert f"run 'chmod go-w {shared}'" in message
    refusal(shared / "new" / "cache", create=True)
    assert not (shared / "new").exists()


def test_a_sticky_parent_like_tmp_is_accepted_for_a_directory_of_yours(tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = private_dir(sticky / "cache")
    assert check_secure_dir(mine, OPTION) == mine.resolve()
    created = ensure_private_dir(sticky / "new" / "cache", OPTION)
    assert stat.S_IMODE((sticky / "new").stat().st_mode) == 0o700
    assert stat.S_IMODE(created.stat().st_mode) == 0o700


@AS_ROOT
def test_in_a_sticky_parent_what_another_user_made_is_refused(tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    # they created the directory first (the name we asked for): refused, not adopted
    planted = private_dir(sticky / "cache")
    os.chown(planted, OTHER_UID, OTHER_UID)
    assert f"is owned by uid {OTHER_UID}, not by you (uid 0)" in refusal(planted, create=True)
    theirs = sticky / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    assert f"lies under {theirs}, which is owned by uid {OTHER_UID}" in refusal(theirs / "cache", create=True)
    assert not (theirs / "cache").exists()


@AS_ROOT
def test_a_symlink_on_the_way_owned_by_another_user_is_refused(tmp_path):
    real = private_dir(tmp_path / "real")
    hop = tmp_path / "hop"
    hop.symlink_to(real)
    os.lchown(hop, OTHER_UID, OTHER_UID)
    message = refusal(hop / "cache", create=True)
    assert f"leads through the symlink {hop}, which is owned by uid {OTHER_UID}" in message
    assert not (real / "cache").exists()


def test_the_targets_of_symlinks_on_the_way_are_walked_too(tmp_path):
    real = private_dir(tmp_path / "real")
    hop = tmp_path / "hop"
    hop.symlink_to("real")  # relative, resolved from the link's directory
    assert ensure_private_dir(hop / "cache", OPTION) == (real / "cache").resolve()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    to_shared = tmp_path / "to-shared"
    to_shared.symlink_to(shared)
    assert f"lies under {shared}, which is writable by group or others" in refusal(to_shared / "cache", create=True)


def test_a_symlink_loop_is_refused_with_one_sentence(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert "leads through more than 40 symlinks (a loop); give the directory's real path" in refusal(tmp_path / "a")


def test_prune_deletes_nothing_the_plugin_did_not_make(tmp_path):
    """A root pointed at an existing directory (say ~) keeps the user's own ``probes``."""
    home = private_dir(tmp_path / "home")
    private_dir(home / "probes")
    (home / "probes" / "notes.txt").write_text("mine")
    private_dir(home / "probes" / "experiment-1")
    (home / "probes" / "experiment-1" / "data.bin").write_bytes(b"mine too")
    CacheRoot(ensure_private_dir(home, OPTION), persistent=True).prune_probes()
    assert (home / "probes" / "notes.txt").read_text() == "mine"
    assert (home / "probes" / "experiment-1" / "data.bin").read_bytes() == b"mine too"


def _one_line_usage_error(result) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    return lines[0].removeprefix("ERROR: ")


@AS_ROOT
def test_the_option_with_a_planted_symlink_stops_the_run_and_writes_nothing(pytester):
    real = private_dir(pytester.path / "real")
    link = pytester.path / "cache"
    link.symlink_to(real)
    os.lchown(link, OTHER_UID, OTHER_UID)
    pytester.makepyfile("def test_plain():\n    pass\n")
    message = _one_line_usage_error(pytester.runpytest(*FAST, f"{OPTION}={link}"))
    assert message.startswith(f"{OPTION} {link} is a symlink owned by uid {OTHER_UID}")
    assert list(real.iterdir()) == []


def test_the_option_under_an_open_parent_stops_the_run_naming_that_parent(pytester):
    shared = pytester.path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    pytester.makepyfile("def test_plain():\n    pass\n")
    message = _one_line_usage_error(pytester.runpytest(*FAST, f"{OPTION}={shared / 'cache'}"))
    assert f"lies under {shared}, which is writable by group or others (mode 0777)" in message
    assert list(shared.iterdir()) == []


def test_a_run_on_an_existing_directory_keeps_its_own_probes_directory(pytester):
    home = private_dir(pytester.path / "home")
    private_dir(home / "probes")
    (home / "probes" / "notes.txt").write_text("mine")
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.runpytest(*FAST, f"{OPTION}={home}").assert_outcomes(passed=1)
    assert (home / "probes" / "notes.txt").read_text() == "mine"
