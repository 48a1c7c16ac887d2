"""The cache root: where the plugin keeps Inductor's, AOTAutograd's and Triton's caches.

Inductor's on-disk cache holds generated Python and shared objects that are
imported and executed on a hit, so a cache directory anyone else can write to is
a code-execution hole.  The root is therefore created with mode 0700, and a
directory given by the user is checked the way OpenSSH's StrictModes checks
``~/.ssh``: every component of the path, from ``/`` down, must be one that no
other user can replace (see ``check_secure_dir``).

Layout under the root::

    inductor/                   TORCHINDUCTOR_CACHE_DIR of the run (persistent roots only)
    triton/                     TRITON_CACHE_DIR of the run (persistent roots only)
    probes/<owner>/             one directory per process that made probes, tagged and locked
    probes/<owner>/<name>-<n>/  one isolated directory per cache probe (cold/warm checks)
    cache-keys/<test>/          the key components each graph of a test had (persistent roots only;
                                cache_keys.KeyIndex), to explain a miss in a later run

Two runs may share a persistent root (two CI jobs on one runner, a developer
re-running).  Each process that makes probes holds a lock on its owner directory
for its whole life; the OS drops the lock when the process ends, however it
ends.  ``prune_probes()`` deletes only owner directories that carry the plugin's
tag and whose lock it can take at once: those of processes that are gone.
Nothing without the tag is ever deleted, so a root that already held a
``probes`` directory of the user's keeps it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageProblem

INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_ENV = "TRITON_CACHE_DIR"

# A file in every directory the plugin may delete later: the plugin removes only
# what carries it.
PLUGIN_TAG = ".pytest-cudagraph"
_TAG_TEXT = (
    "Created by pytest-cudagraph for the compile-cache probes of one process.\n"
    "Deleted by a later run once that process has ended (its lock file is free).\n"
)
# The lock its owner process holds for its whole life, inside the owner directory.
OWNER_LOCK = "owner.lock"
# An owner directory being deleted is first renamed to this prefix, so that two
# pruners never delete the same directory and a half-deleted one is recognisable.
_DELETING_PREFIX = f"{PLUGIN_TAG}-deleting-"
# The cross-run index of cache keys, under a persistent root.
CACHE_KEYS_DIR = "cache-keys"
# The lock file of a directory whose files several runs write (private_lock).
DIRECTORY_LOCK = ".lock"
# Linux's own limit on symlinks followed in one path lookup (ELOOP past it).
_MAX_SYMLINKS = 40


# ----------------------------------------------------------------------------
# checking a path the way StrictModes does
# ----------------------------------------------------------------------------


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def _others_can_write(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _walk(path: Path, what: str, create: bool) -> Path:
    """Resolve ``path`` one component at a time, refusing any that another user could replace.

    Every directory on the way (symlinks followed, their targets walked too) must be
    owned by you or root, and not writable by group or others unless it is sticky
    (like /tmp: others may add entries there but not replace yours, and the next
    component must be yours or root's, which the owner rule already asks).  A
    symlink on the way must be yours or root's; the last one, which names the
    directory itself, must be yours.  The directory itself must be yours, writable
    by nobody else, and writable by you.  With ``create`` missing components are
    made (mode 0700) as the walk reaches them, so nothing is created under a
    directory that failed.  Returns the resolved path.
    """
    given = Path(path).expanduser()
    me = os.getuid()
    # Absolute without normalising "..": after a symlink, ".." is the target's parent.
    parts = Path(os.path.join(os.getcwd(), given)).parts
    pending = list(reversed(parts[1:]))
    current = Path(parts[0])
    current_st = os.lstat(current)
    _check_on_the_way(given, what, current, current_st, me)
    links_followed = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            current_st = os.lstat(current)
            continue
        is_last = all(p in ("", ".") for p in pending)
        child = current / name
        if _others_can_write(current_st) and not current_st.st_mode & stat.S_ISVTX:
            raise UsageProblem(
                f"{what} {given} lies under {current}, which is writable by group or others (mode "
                f"{_mode(current_st)}) without the sticky bit, so another user could swap what is inside it; "
                f"run 'chmod go-w {current}' or use a directory under one that only you can write"
            )
        try:
            st = os.lstat(child)
        except FileNotFoundError:
            if not create:
                raise UsageProblem(
                    f"{what} {given} cannot be read (No such file or directory); give a directory you own"
                ) from None
            _make_private_dir(child, given, what)
            pending.append(name)  # look at what is there now: ours, or a racing process's
            continue
        except OSError as exc:
            raise UsageProblem(f"{what} {given} cannot be read ({exc.strerror}); give a directory you own") from None
        if stat.S_ISLNK(st.st_mode):
            _check_symlink(given, what, child, st, me, is_last)
            links_followed += 1
            if links_followed > _MAX_SYMLINKS:
                raise UsageProblem(
                    f"{what} {given} leads through more than {_MAX_SYMLINKS} symlinks (a loop); "
                    f"give the directory's real path"
                )
            target = Path(os.readlink(child))
            if target.is_absolute():
                current = Path(target.parts[0])
                current_st = os.lstat(current)
            pending.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
            continue
        if not is_last:
            if not stat.S_ISDIR(st.st_mode):
                raise UsageProblem(
                    f"{what} {given} cannot be created ({child} is not a directory); give a writable directory"
                )
            _check_on_the_way(given, what, child, st, me)
        current, current_st = child, st
    _check_leaf(given, what, current, current_st, me)
    return current


def _check_on_the_way(given: Path, what: str, directory: Path, st: os.stat_result, me: int) -> None:
    if st.st_uid not in (0, me):
        raise UsageProblem(
            f"{what} {given} lies under {directory}, which is owned by uid {st.st_uid} (neither you, uid {me}, "
            f"nor root), so that user could swap what is inside it; use a directory whose every parent is "
            f"owned by you or root"
        )


def _check_symlink(given: Path, what: str, link: Path, st: os.stat_result, me: int, is_last: bool) -> None:
    if is_last and st.st_uid != me:
        which = "is a symlink" if link == given else f"leads through the symlink {link}, which is"
        raise UsageProblem(
            f"{what} {given} {which} owned by uid {st.st_uid}, not by you (uid {me}), so its owner decides where "
            f"the caches go; give the directory's real path or a symlink you own"
        )
    if st.st_uid not in (0, me):
        raise UsageProblem(
            f"{what} {given} leads through the symlink {link}, which is owned by uid {st.st_uid} (neither you, "
            f"uid {me}, nor root), so that user could point it elsewhere; use a path without that symlink"
        )


def _check_leaf(given: Path, what: str, path: Path, st: os.stat_result, me: int) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise UsageProblem(
            f"{what} {given} is not a directory; give a directory path, or a path that does not exist yet"
        )
    if st.st_uid != me:
        raise UsageProblem(
            f"{what} {given} is owned by uid {st.st_uid}, not by you (uid {me}); "
            f"compile caches hold code that is executed on load, so use a directory you own"
        )
    if _others_can_write(st):
        raise UsageProblem(
            f"{what} {given} is writable by group or others (mode {_mode(st)}); "
            f"compile caches hold code that is executed on load, so run 'chmod 700 {path}' or use another directory"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageProblem(f"{what} {given} is not writable by you; give a directory you can write to")


def _make_private_dir(path: Path, given: Path, what: str) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return  # another process (an xdist worker) made it first; the walk checks it
    except OSError as exc:
        raise UsageProblem(f"{what} {given} cannot be created ({exc.strerror}); give a writable directory") from None
    # mkdir's mode is filtered by the umask; set it exactly.
    os.chmod(path, 0o700)


def check_secure_dir(path: Path, what: str) -> Path:
    """Refuse a directory another user could read, write or swap; return it resolved.

    Raises UsageProblem with one sentence naming the component at fault and the fix.
    """
    if not hasattr(os, "getuid"):  # no uids to compare (Windows): the ACLs are the user's business
        return Path(path).expanduser().resolve()
    return _walk(Path(path), what, create=False)


def ensure_private_dir(path: Path, what: str) -> Path:
    """Create ``path`` and its missing parents (mode 0700) if needed, after checking the parents; return it resolved."""
    if not hasattr(os, "getuid"):
        resolved = Path(path).expanduser()
        try:
            resolved.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageProblem(f"{what} {path} cannot be created ({exc.strerror}); give a writable directory") from None
        return resolved.resolve()
    return _walk(Path(path), what, create=True)


# ----------------------------------------------------------------------------
# probe owners: one locked, tagged directory per process
# ----------------------------------------------------------------------------


class _ProbeOwner:
    """This process's directory under ``<root>/probes``, locked for the life of the process."""

    def __init__(self, probes_dir: Path):
        from filelock import FileLock

        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        while True:
            path = probes_dir / f"{worker}-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                continue
            break
        os.chmod(path, 0o700)
        self.path = path
        # Kept referenced for the life of the process: the OS drops the lock when the
        # process ends, however it ends (SIGKILL included), and not before.
        self.lock = FileLock(str(path / OWNER_LOCK))
        self.lock.acquire(timeout=0)
        # The tag comes last: a pruner considers only tagged directories, and a tagged
        # one is always already locked while its process lives.
        (path / PLUGIN_TAG).write_text(_TAG_TEXT)


# (process id, resolved root) -> owner; several CacheRoot objects on one path share it
_OWNERS: dict[tuple[int, str], _ProbeOwner] = {}


def _release_owners_at_exit() -> None:
    """Release and drop the owners' locks while the interpreter still works.

    A lock object left for the interpreter's final teardown runs filelock's
    ``__del__`` after ``os`` is gone, which prints an "Exception ignored in
    BaseFileLock.__del__" traceback at the end of every run (filelock 4.0).
    """
    for owner in list(_OWNERS.values()):
        with contextlib.suppress(Exception):
            owner.lock.release(force=True)
    _OWNERS.clear()


atexit.register(_release_owners_at_exit)


def _try_lock(path: Path):
    """The lock at ``path`` if it can be taken without waiting, else None."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return lock


class CacheRoot:
    """A private directory holding every compile cache the plugin's checks use."""

    def __init__(self, path: Path, persistent: bool):
        self.path = Path(path)
        self.persistent = persistent
        self._probe_counter = 0

    @property
    def inductor_dir(self) -> Path:
        return self.path / "inductor"

    @property
    def triton_dir(self) -> Path:
        return self.path / "triton"

    @property
    def probes_dir(self) -> Path:
        return self.path / "probes"

    def owner_dir(self) -> Path:
        """This process's locked, tagged directory of probes under the root (made on first use)."""
        key = (os.getpid(), str(self.path.resolve()))
        owner = _OWNERS.get(key)
        if owner is None or not owner.path.is_dir():
            probes = ensure_private_dir(self.probes_dir, "cache probe directory")
            owner = _OWNERS[key] = _ProbeOwner(probes)
        return owner.path

    def new_probe_dir(self, name: str) -> Path:
        """A fresh, empty, private directory for one probe; unique across processes sharing the root."""
        owner = self.owner_dir()
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or "probe"
        while True:
            self._probe_counter += 1
            candidate = owner / f"{safe}-{self._probe_counter}"
            try:
                candidate.mkdir(mode=0o700)
            except FileExistsError:
                continue
            os.chmod(candidate, 0o700)
            return candidate

    def prune_probes(self) -> list[Path]:
        """Delete the probe directories of processes that have ended; return what was deleted.

        Probes are per-test cold/warm experiments that must start empty anyway;
        pruning at the start keeps a persistent root from growing run after run.  A
        directory is deleted only if it carries the plugin's tag and its owner's lock
        can be taken at once, so a run still going (another CI job, another xdist
        worker) keeps its probes, and nothing the plugin did not make is touched.
        """
        try:
            entries = list(os.scandir(self.probes_dir))
        except OSError:
            return []  # no probes directory (yet): nothing of ours to delete
        deleted = []
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith(_DELETING_PREFIX):
                # a pruner that died half-way left it; deleting it twice is harmless
                shutil.rmtree(path, ignore_errors=True)
                continue
            if not entry.is_dir(follow_symlinks=False) or not (path / PLUGIN_TAG).is_file():
                continue
            lock = _try_lock(path / OWNER_LOCK)
            if lock is None:
                continue  # its process is alive
            try:
                trash = path.with_name(f"{_DELETING_PREFIX}{entry.name}-{secrets.token_hex(4)}")
                try:
                    os.rename(path, trash)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY):
                        continue  # another pruner took it first
                    raise
            finally:
                lock.release()
            shutil.rmtree(trash, ignore_errors=True)
            deleted.append(path)
        return deleted

    @property
    def cache_keys_dir(self) -> Path:
        return self.path / CACHE_KEYS_DIR

    def cache_keys_dir_of(self, test_directory_name: str) -> Path:
        """Where the cross-run index of one test lives (not created here: ``KeyIndex.store`` makes it, 0700)."""
        return self.cache_keys_dir / test_directory_name

    def run_cache_environment(self) -> dict[str, str]:
        """The environment that points the whole run's compile caches into the root."""
        return {INDUCTOR_ENV: str(self.inductor_dir), TRITON_ENV: str(self.triton_dir)}


# ----------------------------------------------------------------------------
# small private files that several runs read and write
# ----------------------------------------------------------------------------


@contextlib.contextmanager
def private_lock(directory: Path, timeout: float = 30.0) -> Iterator[None]:
    """Hold ``<directory>/.lock`` (a file lock, mode 0600) for the block: one run at a time reads or writes there."""
    from filelock import FileLock

    lock = FileLock(str(Path(directory) / DIRECTORY_LOCK), timeout=timeout, mode=0o600)
    with lock:
        yield


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole (a 0600 temporary sibling moved into place): a reader never sees half."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
