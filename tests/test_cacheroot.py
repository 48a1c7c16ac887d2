"""The cache root: private, owned by the user, refused otherwise."""

import os
import stat

import pytest

from pytest_cudagraph.caches.cache_root import PLUGIN_TAG, CacheRoot, check_secure_dir, ensure_private_dir
from pytest_cudagraph.errors import UsageProblem


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_created_with_mode_0700_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        root = ensure_private_dir(tmp_path / "a" / "b", "cache root")
    finally:
        os.umask(old)
    assert mode(root) == 0o700


def test_existing_private_dir_is_accepted(tmp_path):
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    assert ensure_private_dir(target, "cache root") == target.resolve()


@pytest.mark.parametrize("bits", [0o777, 0o770, 0o702, 0o720])
def test_group_or_world_writable_dir_is_refused(tmp_path, bits):
    target = tmp_path / "open"
    target.mkdir()
    os.chmod(target, bits)
    with pytest.raises(UsageProblem, match=rf"writable by group or others \(mode {bits:04o}\).*chmod 700"):
        ensure_private_dir(target, "--cudagraph-cache-dir")


@pytest.mark.skipif(os.getuid() != 0, reason="creating a directory owned by another user needs root")
def test_foreign_owned_dir_is_refused(tmp_path):
    target = tmp_path / "foreign"
    target.mkdir(mode=0o700)
    os.chown(target, 12345, 12345)
    with pytest.raises(UsageProblem, match="is owned by uid 12345, not by you"):
        check_secure_dir(target, "--cudagraph-cache-dir")


def test_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("")
    with pytest.raises(UsageProblem, match="is not a directory"):
        ensure_private_dir(target, "--cudagraph-cache-dir")


@pytest.mark.skipif(os.getuid() == 0, reason="root can write anywhere")
def test_unwritable_dir_is_refused(tmp_path):
    target = tmp_path / "ro"
    target.mkdir(mode=0o500)
    with pytest.raises(UsageProblem, match="is not writable"):
        ensure_private_dir(target, "--cudagraph-cache-dir")


def test_symlink_to_open_dir_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.chmod(real, 0o777)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UsageProblem, match="writable by group or others"):
        ensure_private_dir(link, "--cudagraph-cache-dir")


def test_probe_dirs_are_fresh_private_and_distinct(tmp_path):
    root = CacheRoot(ensure_private_dir(tmp_path / "root", "cache root"), persistent=False)
    first = root.new_probe_dir("test_x[a/b]")
    second = root.new_probe_dir("test_x[a/b]")
    assert first != second
    # one tagged owner directory per process, holding every probe that process makes
    owner = first.parent
    assert second.parent == owner and owner.parent == root.path / "probes"
    assert (owner / PLUGIN_TAG).is_file()
    assert "/" not in first.name[len("test_x") :]
    assert mode(first) == 0o700 and not any(first.iterdir())


def test_prune_keeps_the_live_process_probes_and_the_shared_caches(tmp_path):
    root = CacheRoot(ensure_private_dir(tmp_path / "root", "cache root"), persistent=True)
    probe = root.new_probe_dir("mine")
    (probe / "fxgraph").mkdir()
    ensure_private_dir(root.inductor_dir, "inductor")
    (root.inductor_dir / "entry").write_text("kept")
    # this process is alive and holds its owner lock: a prune from anywhere keeps its probes
    assert CacheRoot(root.path, persistent=True).prune_probes() == []
    assert (probe / "fxgraph").is_dir()
    assert (root.inductor_dir / "entry").read_text() == "kept"
