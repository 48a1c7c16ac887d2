"""The cache root: where the plugin keeps Inductor's, AOTAutograd's and Triton's caches.

Inductor's on-disk cache holds generated Python and shared objects that are
imported and executed on a hit, so a cache directory anyone else can write to is
a code-execution hole.  The root is therefore created with mode 0700, and a
directory given by the user must be owned by them and writable by nobody else.

Layout under the root::

    inductor/             TORCHINDUCTOR_CACHE_DIR of the run (persistent roots only)
    triton/               TRITON_CACHE_DIR of the run (persistent roots only)
    probes/<name>-<n>/    one isolated directory per cache probe (cold/warm checks)
    locks/                filelocks for the plugin's own files under the root
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from .errors import UsageProblem

INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_ENV = "TRITON_CACHE_DIR"


def check_secure_dir(path: Path, what: str) -> None:
    """Refuse a directory that is not ours alone; raise UsageProblem with one sentence."""
    try:
        st = path.stat()
    except OSError as exc:
        raise UsageProblem(f"{what} {path} cannot be read ({exc.strerror}); give a directory you own") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageProblem(f"{what} {path} is not a directory; give a directory path, or a path that does not exist yet")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UsageProblem(
            f"{what} {path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}); "
            f"compile caches hold code that is executed on load, so use a directory you own"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UsageProblem(
            f"{what} {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"compile caches hold code that is executed on load, so run 'chmod 700 {path}' or use another directory"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageProblem(f"{what} {path} is not writable by you; give a directory you can write to")


def ensure_private_dir(path: Path, what: str) -> Path:
    """Create ``path`` (mode 0700) if needed, then check it is private; return it resolved."""
    path = Path(path).expanduser()
    if path.exists() or path.is_symlink():
        check_secure_dir(path, what)
        return path.resolve()
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass  # another xdist worker created it first; the check below still applies
    except OSError as exc:
        raise UsageProblem(f"{what} {path} cannot be created ({exc.strerror}); give a writable directory") from None
    # mkdir's mode is filtered by the umask; set it exactly.
    os.chmod(path, 0o700)
    check_secure_dir(path, what)
    return path.resolve()


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
    def lock_dir(self) -> Path:
        return ensure_private_dir(self.path / "locks", "cache lock directory")

    def new_probe_dir(self, name: str) -> Path:
        """A fresh, empty, private directory for one probe; unique across xdist workers."""
        probes = ensure_private_dir(self.path / "probes", "cache probe directory")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or "probe"
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        while True:
            self._probe_counter += 1
            candidate = probes / f"{safe}-{worker}-{os.getpid()}-{self._probe_counter}"
            try:
                candidate.mkdir(mode=0o700)
            except FileExistsError:
                continue
            os.chmod(candidate, 0o700)
            return candidate

    def prune_probes(self) -> None:
        """Delete the probe directories an earlier run left under a persistent root.

        Probes are per-test cold/warm experiments that must start empty anyway;
        keeping the current run's lets a failure message's directory be inspected,
        and pruning at the start keeps a persistent root from growing run after run.
        """
        shutil.rmtree(self.path / "probes", ignore_errors=True)

    def lock(self, name: str):
        """A filelock for one of the plugin's own files under the root (shared by xdist workers)."""
        from filelock import FileLock

        return FileLock(str(self.lock_dir / f"{name}.lock"))

    def run_cache_environment(self) -> dict[str, str]:
        """The environment that points the whole run's compile caches into the root."""
        return {INDUCTOR_ENV: str(self.inductor_dir), TRITON_ENV: str(self.triton_dir)}
