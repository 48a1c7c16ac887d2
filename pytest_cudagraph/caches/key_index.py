"""The key index across runs: the components of every key a test's graphs had in an earlier run.

``KeyIndex`` keeps, under a persistent cache root, the last key stored per test,
layer, pass and graph; ``explain_across_runs`` explains this run's misses against
it (``compared with an earlier run (<time>, torch <version>): ...``).  Imports no
torch, no pytest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..records.key_diff import KEYED_LAYERS
from ..render.plain_text import count_noun
from .lookups import OUTCOMES, VALUE_LIMIT, CacheLookup, MissExplanation, clip, explain_miss


def index_directory_name(nodeid: str) -> str:
    """The index directory of one test: the first 16 hex digits of the sha256 of its node id."""
    return hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:16]


def index_file_name(lookup: CacheLookup) -> str:
    """``<layer>-<pass or 'test'>-<graph>.json``, the pass name made safe for a file name."""
    pass_name = re.sub(r"[^A-Za-z0-9_.-]", "_", lookup.pass_name or "test")[:40]
    return f"{lookup.layer}-{pass_name}-{lookup.graph}.json"


@dataclass(frozen=True)
class StoredKey:
    """A lookup an earlier run stored, read from the index, with that run's time and torch."""

    lookup: CacheLookup
    created: str
    torch_version: str
    run_id: str

    def compared_with(self) -> str:
        return f"an earlier run ({self.created}, torch {self.torch_version})"


# The largest index file read: one lookup's ~640 components of up to 1,024 characters each (about 0.7 MB),
# with room to spare.  A larger file is no file this plugin wrote.
INDEX_FILE_LIMIT = 4 * 2**20
# index entries a note names one by one before "and N more"
_IGNORED_SHOWN = 3


class _BadEntry(Exception):
    """An index file that is not read, or not used: ``str()`` says why in a few words."""


@dataclass(frozen=True)
class IndexContents:
    """What ``KeyIndex.read`` found: index file name -> what an earlier run stored, and a note on the files left out.

    ``refused``: why nothing in the index was read (a directory another user could
    write, one that could not be read), one sentence; None where it was read.
    """

    stored: Mapping[str, StoredKey] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    refused: str | None = None


class KeyIndex:
    """The components of every key a test's graphs had, kept under a persistent cache root across runs.

    ``<root>/cache-keys/<sha256(nodeid)[:16]>/<layer>-<pass or 'test'>-<graph>.json``
    holds the last key stored for that graph: the lookup (whole hashes, values up
    to 1,024 characters, functorch's config), the run's time, torch version and an
    id of the run.  Files are private (0600, in 0700 directories), written whole
    (a temporary file moved into place) under the test directory's file lock, so
    two runs sharing a root never see half a file.

    It is read as a report is (``report.read_regular_bytes``): the directory is
    checked as the cache root is (yours, writable by you alone) before anything in
    it is opened, and only regular files of yours up to INDEX_FILE_LIMIT bytes are
    read, without waiting (a FIFO) or reading for ever (a link to /dev/zero).  A
    file that is not one the plugin could have written (not JSON, nested too
    deeply, a field of the wrong type) is ignored, and ``read`` says so in a note.
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def load(self) -> dict[str, StoredKey]:
        """File name -> what an earlier run stored; unreadable, foreign or malformed files are skipped."""
        return dict(self.read().stored)

    def read(self) -> IndexContents:
        """What earlier runs stored, with a note for each file left out; never raises for what is on disk."""
        from ..errors import UsageProblem
        from .cache_root import check_secure_dir, private_lock

        if not self.directory.is_dir():
            return IndexContents()
        try:
            check_secure_dir(self.directory, "cache-key index directory")
        except UsageProblem as exc:
            return IndexContents(refused=str(exc))
        out: dict[str, StoredKey] = {}
        ignored: list[str] = []
        try:
            with private_lock(self.directory):
                for path in sorted(self.directory.glob("*.json")):
                    try:
                        out[path.name] = _read_entry(path)
                    except _BadEntry as exc:
                        ignored.append(f"{_escaped(path.name)}: {exc}")
        except OSError as exc:  # the lock (held by another run past its timeout), the directory listing
            return IndexContents(
                refused=f"cache-key index directory {self.directory} cannot be read ({exc.strerror or exc})"
            )
        notes: tuple[str, ...] = ()
        if ignored:
            shown = "; ".join(ignored[:_IGNORED_SHOWN])
            more = f"; and {len(ignored) - _IGNORED_SHOWN} more" if len(ignored) > _IGNORED_SHOWN else ""
            notes = (
                f"ignored {count_noun(len(ignored), 'entry', 'entries')} of the key index "
                f"{self.directory} that no run of this plugin wrote ({shown}{more})",
            )
        return IndexContents(out, notes)

    def store(self, lookups: Iterable[CacheLookup], created: str, torch_version: str, run_id: str) -> int:
        """Write each lookup that left an entry (a miss, which saved, or a hit); return how many were written.

        Raises OSError where a file cannot be written, UsageProblem where the directory
        is one another user could write (checked as the cache root is).
        """
        from .cache_root import ensure_private_dir, private_lock, write_private_file

        kept = [lookup for lookup in lookups if lookup.outcome in ("miss", "hit") and lookup.key]
        if not kept:
            return 0
        ensure_private_dir(self.directory, "cache-key index directory")
        written = 0
        with private_lock(self.directory):
            for lookup in kept:
                if lookup.components is None:
                    continue  # nothing to compare with later (a 2.6-2.7 FX hit inside an AOTAutograd hit)
                data = {
                    "created": created,
                    "torch_version": torch_version,
                    "run_id": run_id,
                    "lookup": lookup.to_json(full=True),
                }
                write_private_file(self.directory / index_file_name(lookup), json.dumps(data))
                written += 1
        return written


def _read_entry(path: Path) -> StoredKey:
    """One index file, read as a report is and checked field by field; _BadEntry says why it is not used."""
    from ..records.report import FileRefused, read_regular_bytes

    try:
        data = read_regular_bytes(path, limit=INDEX_FILE_LIMIT, owner=os.getuid() if hasattr(os, "getuid") else None)
    except FileRefused as exc:
        raise _BadEntry(str(exc)) from None
    except OSError as exc:
        raise _BadEntry(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise _BadEntry("not JSON: nested too deeply") from None
    except UnicodeDecodeError:
        raise _BadEntry("not UTF-8 text") from None
    except ValueError:  # JSONDecodeError, or an integer of more digits than int() converts
        raise _BadEntry("not JSON") from None
    return _stored_key(parsed)


def _escaped(name: str) -> str:
    """A name read from the index, for a note: escaped to ASCII (no control character reaches a terminal), clipped."""
    return clip(ascii(name)[1:-1], 60)


def _text(value: Any, what: str, *, null: bool = False, limit: int | None = None) -> str | None:
    """``value`` if it is text (a string without lone surrogates) of at most ``limit`` characters; else _BadEntry."""
    if value is None and null:
        return None
    if not isinstance(value, str):
        raise _BadEntry(f"{what} is not a string")
    if limit is not None and len(value) > limit:
        raise _BadEntry(f"{what} is longer than {limit:,} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _BadEntry(f"{what} is not text") from None
    return value


def _mapping(item: dict[str, Any], name: str) -> dict[Any, Any]:
    """The lookup's ``name`` field: a mapping, empty when it is absent or null; else _BadEntry."""
    value = item.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _BadEntry(f"lookup.{name} is not a mapping")
    return value


def _stored_key(data: Any) -> StoredKey:
    """What ``KeyIndex.store`` writes, checked: every field of the type and form it writes, or _BadEntry."""
    if not isinstance(data, dict) or not isinstance(data.get("lookup"), dict):
        raise _BadEntry("not an index entry (no lookup)")
    item = data["lookup"]
    if item.get("layer") not in KEYED_LAYERS or item.get("outcome") not in OUTCOMES:
        raise _BadEntry("lookup.layer or lookup.outcome is not one this plugin writes")
    graph = item.get("graph", 1)
    if type(graph) is not int or not 1 <= graph <= 2**31:
        raise _BadEntry("lookup.graph is not a graph number")
    for name in ("key", "pass", "detail", "bypass_reason", "note"):
        _text(item.get(name), f"lookup.{name}", null=True)
    for name, pair in _mapping(item, "components").items():
        _text(name, "a component name", limit=VALUE_LIMIT)
        if not isinstance(pair, list) or len(pair) != 2:
            raise _BadEntry(f"component {_escaped(name)} is not a [hash, value] pair")
        _text(pair[0], f"the hash of {_escaped(name)}", limit=VALUE_LIMIT)
        value = _text(pair[1], f"the value of {_escaped(name)}", null=True, limit=VALUE_LIMIT)
        if value is not None and not value.isprintable():  # a kept value is one printable line (readable_value)
            raise _BadEntry(f"the value of {_escaped(name)} is not one printable line")
    for name, config_value in _mapping(item, "functorch_config").items():
        _text(name, "a functorch config name", limit=VALUE_LIMIT)
        _text(config_value, "a functorch config value", limit=VALUE_LIMIT)
    created = _text(data.get("created"), "created", limit=200)
    torch_version = _text(data.get("torch_version"), "torch_version", limit=200)
    run_id = _text(data.get("run_id", ""), "run_id", limit=200)
    return StoredKey(
        lookup=CacheLookup.from_json(item),
        created=created or "",
        torch_version=torch_version or "",
        run_id=run_id or "",
    )


def explain_across_runs(
    lookups: Sequence[CacheLookup], stored: Mapping[str, StoredKey], run_id: str, *, probe_passes: bool
) -> list[MissExplanation]:
    """Explanations of this run's misses against what an earlier run stored for the same graph.

    Same test, layer, pass and graph number.  A lookup outside a pass looked in the
    run's persistent cache, where the earlier run stored its entry: a different
    key names the components, the same key means the entry was evicted or
    deleted.  A lookup in a probe's pass (``probe_passes``: a fresh directory each
    run) is expected to miss; it is compared only when its key changed, which
    says what differs from the earlier run.
    """
    out = []
    for lookup in lookups:
        if lookup.outcome != "miss" or not lookup.key or lookup.detail == "guard_miss":
            continue
        earlier = stored.get(index_file_name(lookup))
        if earlier is None or (run_id and earlier.run_id == run_id):
            continue
        in_probe = lookup.pass_name is not None and probe_passes
        if in_probe and earlier.lookup.key == lookup.key:
            continue
        theirs = replace(earlier.lookup, pass_name=lookup.pass_name, graph=lookup.graph)
        explanation = explain_miss(lookup, [theirs], earlier.compared_with())
        if explanation is not None:
            out.append(explanation)
    return out


def new_run_id() -> str:
    """An id for one run (one process), kept in the index so a run never compares with itself."""
    return f"{os.getpid()}-{os.urandom(4).hex()}"
