"""Report files on disk: written atomically, read only when they are regular files.

A regular file is written to a temporary sibling and moved into place: a reader,
or a run killed half-way, sees either the old report or the new one, never half
a file.  Special files (``/dev/stdout``, a FIFO) are written into, and symlinks
stay links.  A file is read only when it is a regular file: a FIFO would block
and /dev/zero never ends.
"""

from __future__ import annotations

import errno
import gzip
import os
import re
import stat
import tempfile
import time
import zlib
from pathlib import Path

from ..errors import ReportError

# the first two bytes of every gzip file
GZIP_MAGIC = b"\x1f\x8b"


def write_text_atomically(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """Write ``text`` (or bytes, as they are) to ``path`` so that no reader ever sees half of it; return ``path``.

    - A regular file, or a path that does not exist yet, is replaced atomically: a
      temporary sibling, fsync, ``os.replace``.
    - A symlink stays a link, and its target is replaced that way
      (``latest.json -> runs/17.json``: ``runs/17.json`` gets the new content).
    - A path that exists and is not a regular file once links are followed
      (``/dev/null``, a FIFO, ``/dev/stdout`` on a pipe), or that reaches a file through
      an open descriptor (``/dev/stdout``, ``/dev/fd/3``), is written into, never
      replaced, as ``--junitxml`` does.  Opening a FIFO waits for its reader.

    Temporary files that a killed writer left beside the file are removed after
    a successful write (never those of a writer still running).
    """
    path = Path(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    if _written_in_place(path):
        _write_into(path, data)
    else:
        _replace_atomically(_link_target(path), data)
    return path


def _written_in_place(path: Path) -> bool:
    """True for an existing path that is no regular file (links followed), or one reached through a descriptor."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there yet, a dangling link: a new regular file is made
        return False
    if stat.S_ISDIR(mode):
        return False  # replacing fails with IsADirectoryError, as it always did
    return not stat.S_ISREG(mode) or _through_descriptor_link(path)


# /proc/<pid>/fd/N and /dev/fd/N are links to a process's open descriptors: `--cudagraph-report=/dev/stdout
# > out.json` must append to the shell's out.json, not swap a new file in under the shell's descriptor.
_DESCRIPTOR_DIRECTORY = re.compile(r"/proc/[^/]+/fd|/dev/fd")
_MAX_LINKS_FOLLOWED = 40  # the Linux kernel's own limit


def _through_descriptor_link(path: Path) -> bool:
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS_FOLLOWED):
        if _DESCRIPTOR_DIRECTORY.fullmatch(os.path.realpath(os.path.dirname(current))):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return False


def _link_target(path: Path) -> Path:
    """The file a symlink finally names (even if it does not exist yet); ``path`` itself when it is no link."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _write_into(path: Path, data: bytes) -> None:
    # O_APPEND: a descriptor's file (stdout redirected to a file) keeps what was written before;
    # devices and FIFOs ignore it.  No O_CREAT: the path exists, and a race must not make a new file.
    # O_NONBLOCK for the open only: a FIFO nobody reads would block the end of the run for ever;
    # it fails with ENXIO instead, and the write itself then blocks as a pipe's writer should.
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "no process is reading this FIFO", str(path)) from None
        raise
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _replace_atomically(target: Path, data: bytes) -> None:
    parent = target.parent
    # the writer's pid and host in the name: a later write can tell a dead writer's leftover from a live one's
    prefix = f".{target.name}.{os.getpid()}@{_HOST}."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; a report is an ordinary artefact, so honour the umask
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _remove_stale_temp_files(parent, target.name)


def _umask() -> int:
    """The process umask, read without changing it where the OS tells it (Linux), so no other thread sees 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _host_tag() -> str:
    try:
        node = os.uname().nodename
    except AttributeError:  # Windows
        node = os.environ.get("COMPUTERNAME", "")
    return re.sub(r"[^A-Za-z0-9-]", "-", node)[:32] or "host"


_HOST = _host_tag()
# A temporary file older than this, whose writer cannot be asked (another host, a name without a pid),
# is a leftover: no report takes an hour to write.
STALE_TEMP_AGE_S = 3600.0
# A dead pid on this host is a leftover only after this: two containers sharing a hostname
# and a directory have separate pid spaces, so a pid "not alive" here may be alive there.
DEAD_WRITER_AGE_S = 60.0


def _remove_stale_temp_files(directory: Path, name: str) -> None:
    """Remove ``.<name>.<pid>@<host>.XXXXXXXX.tmp`` files of dead writers (a SIGKILL skips every cleanup).

    A temporary file of a writer that is still running is never touched: on this
    host its pid is asked once the file is older than DEAD_WRITER_AGE_S; names of
    another host, and names without a pid (older versions), go only when older than
    STALE_TEMP_AGE_S.
    """
    pattern = re.compile(rf"\.{re.escape(name)}\.(?:(\d+)@([A-Za-z0-9-]+)\.)?[a-z0-9_]{{8}}\.tmp")
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None:
            continue
        pid, host = match.groups()
        try:
            age = time.time() - entry.stat(follow_symlinks=False).st_mtime
            if pid is not None and host == _HOST:
                stale = age > DEAD_WRITER_AGE_S and not _process_alive(int(pid))
            else:
                stale = age > STALE_TEMP_AGE_S
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            continue  # gone already, or not ours to remove


def _process_alive(pid: int) -> bool:
    if pid <= 0 or os.name == "nt":  # os.kill(0, 0) signals a process group; on Windows it terminates
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, another user's
        return True
    return True


def check_report_path_writable(path: str | os.PathLike[str]) -> str | None:
    """Return a one-sentence problem with writing a report to ``path``, or None.

    Accepts what write_text_atomically writes into (``/dev/null``, ``/dev/stdout``, a
    FIFO, ``/dev/fd/N``) and checks a symlink's target directory, where the new file goes.
    """
    path = Path(path)
    if path.is_dir():
        return f"--cudagraph-report={path} is a directory; give a file path such as {path / 'cudagraph.json'}"
    if _written_in_place(path):
        if os.access(path, os.W_OK):
            return None
        return f"--cudagraph-report={path} exists and is not writable; give a path you can write to"
    target = _link_target(path)
    option = f"--cudagraph-report={path}" if target == path else f"--cudagraph-report={path} (a link to {target})"
    parent = target.parent
    if not parent.is_dir():
        blocking = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if blocking is not None and not blocking.is_dir():
            return f"{option}: {blocking} is a file, not a directory; give another path, inside a directory"
        return f"{option}: directory {parent} does not exist; create it or give another path"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{option}: directory {parent} is not writable; give a path you can write to"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{option} exists and is not writable; give a path you can write to"
    return None


_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind_of_file(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    return next((words for test, words in _FILE_KINDS if test(mode)), "a special file")


class FileRefused(ReportError):
    """A path ``read_regular_bytes`` would not read; ``str()`` says why in a few words, ``mode`` is its st_mode.

    A ``ReportError``, so that code catching the plugin's errors (``CudagraphError``) catches it too.
    """

    def __init__(self, reason: str, mode: int | None = None):
        super().__init__(reason)
        self.mode = mode


def read_regular_bytes(path: str | os.PathLike[str], *, limit: int | None = None, owner: int | None = None) -> bytes:
    """The bytes of a regular file, read without waiting for a writer or reading for ever.

    A FIFO would block and /dev/zero never ends, so anything but a regular file is
    refused (FileRefused) before it is opened, and again on the open descriptor
    (opened O_NONBLOCK, in case the path changed in between).  ``owner``: a uid; a
    file owned by another is refused before a byte is read.  ``limit``: a file of
    more bytes is refused, and at most ``limit + 1`` bytes are read, so a file that
    grows meanwhile is caught too.  Other failures raise the OS's OSError.
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"{_kind_of_file(info.st_mode)}, not a regular file", info.st_mode)
    # O_NONBLOCK: if the path became a FIFO since the stat, opening it must not wait for a writer
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags), "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{_kind_of_file(info.st_mode)}, not a regular file", info.st_mode)
        if owner is not None and info.st_uid != owner:
            raise FileRefused(f"owned by uid {info.st_uid}, not by you (uid {owner})", info.st_mode)
        if limit is None:
            return fh.read()
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise FileRefused(f"larger than {limit:,} bytes", info.st_mode)
    return data


def gzip_bytes(text: str) -> bytes:
    """``text`` gzip-compressed, with no time or name in the header: the same text gives the same bytes."""
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


def _decompressed(data: bytes, path: Path) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        raise ReportError(
            f"report {path} is a gzip file that cannot be decompressed (it may be truncated); "
            f"write it again with --cudagraph-report"
        ) from None


def _not_a_regular_file(path: Path, mode: int) -> ReportError:
    if stat.S_ISDIR(mode):
        return ReportError(f"report {path} is a directory; give the path of a JSON report file")
    return ReportError(
        f"report {path} is {_kind_of_file(mode)}, not a regular file; give the path of a JSON report file "
        f"(save a stream to a file first)"
    )


def read_regular_text(path: Path) -> str:
    """The file's text; a FIFO would block and /dev/zero never ends, so only a regular file is read.

    A gzip file (told by its first bytes, whatever its name: ``--cudagraph-report=r.json.gz``) is
    decompressed first.
    """
    try:
        data = read_regular_bytes(path)
        if data[:2] == GZIP_MAGIC:
            data = _decompressed(data, path)
        return data.decode("utf-8")
    except FileRefused as exc:
        raise _not_a_regular_file(path, exc.mode or 0) from None
    except FileNotFoundError:
        raise ReportError(
            f"report {path} does not exist; give the path of a file written by --cudagraph-report"
        ) from None
    except IsADirectoryError:
        raise ReportError(f"report {path} is a directory; give the path of a JSON report file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ReportError(f"report {path} cannot be read ({reason}); give a readable JSON report file") from None
