"""The run report: schema, atomic writing, loading, validation and the xdist merge.

The report is JSON with a versioned schema (``"schema": "pytest-cudagraph/1"``) so
that ``pytest-cudagraph compare`` can refuse a file it does not understand instead
of comparing the wrong fields::

    {"schema": "pytest-cudagraph/1",
     "created": "2025-01-31T12:00:00+00:00",
     "env": {"torch": "2.13.0", "triton": "3.5.0", "cuda": "12.8", "gpu": "NVIDIA H200",
             "python": "3.11.9", "platform": "Linux-...", "plugin": "0.1.0",
             "git_commit": "1a2b3c..."},
     "tests": {"tests/test_model.py::test_decode": {"outcome": "passed", "recompiles": {...},
                                                    "caches": {...}, "graphs": {...},
                                                    "cache_keys": {"lookups": [...], "note": "..."}}},
     "cache_components": {"fxgraph": {"inductor_config[max_autotune]": ["esstihe2xq4a", "False"], ...},
                          "aot_autograd": {...}},
     "summary": {"tests": 1, "outcomes": {"passed": 1}, "recompiles": 0, ...,
                 "exitstatus": 0, "complete": true, "incomplete_reasons": [], "not_run": [],
                 "not_run_count": 0, "deselected": 0, "selection": {"-k": "decode"},
                 "shard": {"group": 2, "splits": 3, "algorithm": "duration_based_chunks",
                           "durations_path": ".test_durations", "selected": 41, "deselected": 82}},
     "durations": {"tests/test_model.py::test_decode": 4.217, "tests/test_model.py::test_plain": 0.002}}

A test's ``cache_keys`` lists every FX-graph and AOTAutograd cache lookup it made
(``cache_keys.py``)::

    {"lookups": [{"layer": "fxgraph", "outcome": "miss", "key": "f...", "pass": "warm", "graph": 2,
                  "components": {"inductor_config[fallback_random]": ["hd2xw2jzgzqs", "True"], ...},
                  "detail": "full_miss", "bypass_reason": "...",
                  "explained": ["inductor_config[fallback_random]: False -> True"],
                  "compared_with": "the cold pass"}],
     "note": "..."}

``pass`` is null outside a pass and ``graph`` the 1-based order of the layer's
lookups within the pass (or test); a component is ``[first 12 characters of its
hash, readable value or null]``, and ``components`` is null where torch gave none
(``note`` says why).  ``detail``, ``bypass_reason``, ``explained`` (why a miss
missed) and ``compared_with`` (``"the cold pass"``, ``"an earlier run (<time>,
torch <version>)"``) are there when they apply.  The components every lookup of
a layer shares (same name and hash; some 600 ``inductor_config`` entries) are
stored once, in the top-level ``cache_components``, and each lookup keeps only
the rest: ``full_components(report, lookup)`` gives the whole set.

``summary.shard`` is there when pytest-split ran one group of a split suite; a
report merged from such shards (``shards.merge_shard_reports``) has ``merged`` and
``sources`` there instead of ``group``.  ``durations`` holds every test that
finished, plugin or not, in seconds (setup + call + teardown), as pytest-split's
``.test_durations`` file does.

Every per-test section but ``outcome`` is optional and unknown keys are kept, so a
report written by a newer plugin (same schema) still loads; the fields this plugin
knows are type-checked on loading, so a malformed report is one clear error, not a
traceback half-way through a comparison.  A regular file is written to a temporary
sibling and moved into place: a reader, or a run killed half-way, sees either the
old report or the new one, never half a file.  Special files (``/dev/stdout``, a
FIFO) are written into, and symlinks stay links.  This module never imports
torch: ``compare`` must run on a machine without it.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import gc
import json
import math
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..text import clip_middle
from .progress import NOT_RUN_LIMIT

SCHEMA = "pytest-cudagraph/1"

# Per-test sections the plugin writes; anything else is kept and compared generically.
SECTIONS = ("recompiles", "caches", "cache_keys", "graphs", "piecewise", "reduce_overhead", "extra")

# Facts about the run as a whole that the plugin hands to build_report(run=...):
# whether it ran to its end, and what it selected.  See docs/reliability.md, "What a
# report guarantees".
RUN_FIELDS = ("complete", "incomplete_reasons", "not_run", "not_run_count", "deselected", "selection", "shard")
# The report lists at most this many ids of selected tests that never finished; the count is exact.
# pytest exit statuses that mean the run did not get through its tests (for reports without "complete")
INCOMPLETE_EXIT_STATUSES = {2: "interrupted", 3: "internal error", 4: "usage error"}


# ----------------------------------------------------------------------------
# building
# ----------------------------------------------------------------------------


def build_report(
    env: Mapping[str, Any],
    tests: Mapping[str, Mapping[str, Any]],
    *,
    exitstatus: int | None = None,
    created: str | None = None,
    run: Mapping[str, Any] | None = None,
    durations: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The report dictionary for one run: schema, env, one record per test (sorted by node id), summary, durations.

    ``run`` holds the run's own facts (RUN_FIELDS: ``complete``, ``incomplete_reasons``,
    ``not_run``, ``not_run_count``, ``deselected``, ``selection``, ``shard``); they go
    into ``summary`` as given, type-checked (TypeError), with ``not_run`` cut to
    NOT_RUN_LIMIT ids.  ``shard`` is pytest-split's group of a split run:
    ``{"group", "splits", "algorithm", "durations_path", "selected", "deselected",
    "suite_digest"}`` (a merged report: ``{"splits", "merged": [1, 2, 3], "algorithm",
    "selected", "suite_digest", "sources": [...]}``).  Keys beyond RUN_FIELDS pass through unchecked.

    ``durations`` is seconds per node id of every test that finished, plugin or not
    (what pytest-split needs to split the next run); written sorted, to the
    millisecond, and left out when None.
    """
    summary = summarize(tests, run=run)
    if exitstatus is not None:
        summary["exitstatus"] = int(exitstatus)
    records = {nodeid: dict(tests[nodeid]) for nodeid in sorted(tests)}
    shared = factor_cache_components(records)
    report = {
        "schema": SCHEMA,
        "created": created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "env": dict(env),
        "tests": records,
    }
    if shared:
        report["cache_components"] = shared
    report["summary"] = summary
    if durations is not None:
        report["durations"] = _durations(durations)
    return report


# ----------------------------------------------------------------------------
# cache keys: the components every lookup of a run shares are stored once
# ----------------------------------------------------------------------------


def factor_cache_components(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """Move the cache-key components every lookup of a layer shares out of ``records``; return them per layer.

    A lookup's ``components`` (``{name: [hash12, value-or-null]}``) is either a
    mapping or null (torch gave none: a bypass, or a version that leaves them out).
    Per layer, the names whose hash is the same in every lookup with components
    (some 600 ``inductor_config[...]`` entries) go into the returned table, which
    build_report writes as the report's ``cache_components``; each lookup keeps only
    the rest, so a lookup that shares everything keeps ``{}``.  full_components puts
    a lookup's whole set back together.  An empty mapping is turned into null first
    (it holds nothing, and after factoring ``{}`` means "all shared").

    ``records`` is changed in place: the records whose ``cache_keys`` section is
    rewritten get their own copies of that section, never a caller's dicts.
    Records that are already factored must be expanded first (see expand_cache_components).
    """
    sections = {}
    by_layer: dict[str, list[dict[str, Any]]] = {}
    for nodeid, record in records.items():
        section = record.get("cache_keys")
        if not isinstance(section, Mapping) or not isinstance(section.get("lookups"), list):
            continue
        lookups = []
        for lookup in section["lookups"]:
            if isinstance(lookup, Mapping):
                lookup = dict(lookup)
                components = lookup.get("components")
                if isinstance(components, Mapping) and components:
                    by_layer.setdefault(str(lookup.get("layer")), []).append(lookup)
                elif isinstance(components, Mapping):
                    lookup["components"] = None
            lookups.append(lookup)
        sections[nodeid] = {**section, "lookups": lookups}
    shared: dict[str, dict[str, list[Any]]] = {}
    for layer, lookups in by_layer.items():
        first, *rest = lookups
        common = {name: list(pair) for name, pair in first["components"].items() if _component_hash(pair) is not None}
        for lookup in rest:
            components = lookup["components"]
            common = {
                name: pair
                for name, pair in common.items()
                if name in components and _component_hash(components[name]) == pair[0]
            }
            if not common:
                break
        if not common:
            continue
        shared[layer] = dict(sorted(common.items()))
        for lookup in lookups:
            lookup["components"] = {name: pair for name, pair in lookup["components"].items() if name not in common}
    for nodeid, section in sections.items():
        records[nodeid]["cache_keys"] = section
    return shared


def _component_hash(pair: Any) -> str | None:
    return pair[0] if isinstance(pair, (list, tuple)) and pair and isinstance(pair[0], str) else None


def full_components(report: Mapping[str, Any], lookup: Mapping[str, Any]) -> dict[str, list[Any]] | None:
    """A lookup's whole set of components, ``{name: [hash12, value-or-null]}``: the run's shared ones and its own.

    None when the lookup has none (a bypass, or a torch that gives none: see the
    record's ``note``).  ``report`` is the report the lookup comes from (its
    ``cache_components``); a report without that table (an older plugin, or a report
    built before factoring) gives the lookup's own components.  Example::

        for lookup in report["tests"][nodeid]["cache_keys"]["lookups"]:
            components = full_components(report, lookup)
    """
    own = lookup.get("components")
    if not isinstance(own, Mapping):
        return None
    tables = report.get("cache_components")
    shared = tables.get(str(lookup.get("layer"))) if isinstance(tables, Mapping) else None
    return {**(shared if isinstance(shared, Mapping) else {}), **own}


def expand_cache_components(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The report's test records with every lookup's components whole again (the report is not changed).

    For building a new report out of old ones (merging shard reports): build_report
    factors the records again, over all of them.
    """
    tests = report.get("tests")
    if not isinstance(tests, Mapping):
        return {}
    out = {}
    for nodeid, record in tests.items():
        section = record.get("cache_keys") if isinstance(record, Mapping) else None
        if isinstance(section, Mapping) and isinstance(section.get("lookups"), list):
            lookups = [
                {**lookup, "components": full_components(report, lookup)}
                if isinstance(lookup, Mapping) and isinstance(lookup.get("components"), Mapping)
                else lookup
                for lookup in section["lookups"]
            ]
            record = {**record, "cache_keys": {**section, "lookups": lookups}}
        out[nodeid] = record
    return out


def _durations(durations: Mapping[str, float]) -> dict[str, float]:
    """Seconds per node id, sorted, to the millisecond; TypeError for a value that is no finite number."""
    rounded = {}
    for nodeid in sorted(durations):
        seconds = durations[nodeid]
        if not _is_count(seconds) or not math.isfinite(seconds):
            raise TypeError(f"build_report got durations[{nodeid!r}] = {seconds!r}; give seconds as a finite number")
        rounded[str(nodeid)] = round(float(seconds), 3)
    return rounded


def as_int(value: Any) -> int:
    """A count from a record: ints, floats and numeric strings count; anything else is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return int(number) if math.isfinite(number) else 0


def limit_hit_count(recompiles: Mapping[str, Any] | None) -> int:
    """How many recompile-limit hits a ``recompiles`` section records (a list, or a count)."""
    hits = (recompiles or {}).get("limit_hits")
    if isinstance(hits, (list, tuple)):
        return len(hits)
    return as_int(hits)


def summarize(tests: Mapping[str, Mapping[str, Any]], run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run totals (outcomes, recompiles, limit hits, graphs captured, cache counters per layer), then ``run``'s facts.

    See build_report for ``run``.
    """
    totals = _totals(tests)
    if run:
        totals.update(_run_facts(run, totals))
    return totals


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _totals(tests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    recompiles = limit_hits = graph_breaks = captured = 0
    cache_totals: dict[str, dict[str, int]] = {}
    for record in tests.values():
        outcome = str(record.get("outcome", "unknown"))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        rec = record.get("recompiles")
        if isinstance(rec, Mapping):
            recompiles += as_int(rec.get("count"))
            limit_hits += limit_hit_count(rec)
            breaks = rec.get("graph_breaks")
            if isinstance(breaks, Mapping):
                graph_breaks += as_int(breaks.get("count"))
        graphs = record.get("graphs")
        if isinstance(graphs, Mapping):
            captured += as_int(graphs.get("captured"))
        piecewise = record.get("piecewise")
        if isinstance(piecewise, Mapping):
            captured += as_int(piecewise.get("graphs_captured"))
        caches = record.get("caches")
        for layer, counts in caches.items() if isinstance(caches, Mapping) else ():
            # only the counter layers add up; "disabled" and "bypass_reasons" are words, not counts
            if not isinstance(counts, Mapping) or not any(_is_count(value) for value in counts.values()):
                continue
            total = cache_totals.setdefault(layer, {})
            for key, value in counts.items():
                if _is_count(value):
                    total[key] = total.get(key, 0) + as_int(value)
    return {
        "tests": len(tests),
        "outcomes": dict(sorted(outcomes.items())),
        "recompiles": recompiles,
        "recompile_limit_hits": limit_hits,
        "graph_breaks": graph_breaks,
        "graphs_captured": captured,
        "caches": {layer: cache_totals[layer] for layer in sorted(cache_totals)},
    }


def _run_facts(run: Mapping[str, Any], totals: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` checked for the report: lists as lists, ``not_run`` cut, nothing that overwrites a total."""
    clash = sorted(set(run) & set(totals))
    if clash:
        raise ValueError(f"build_report(run=...) may not set the computed totals {clash}; leave them out of run")
    facts = dict(run)
    for key in ("incomplete_reasons", "not_run"):
        if isinstance(facts.get(key), (tuple, list)):
            facts[key] = list(facts[key])
    if isinstance(facts.get("not_run"), list):
        listed = facts["not_run"]
        facts.setdefault("not_run_count", len(listed))
        if isinstance(facts["not_run_count"], int):
            facts["not_run_count"] = max(facts["not_run_count"], len(listed))
        facts["not_run"] = listed[:NOT_RUN_LIMIT]
    if isinstance(facts.get("selection"), Mapping):
        facts["selection"] = dict(facts["selection"])
    if isinstance(facts.get("shard"), Mapping):
        shard = facts["shard"] = dict(facts["shard"])
        if isinstance(shard.get("merged"), (tuple, list)):
            shard["merged"] = list(shard["merged"])
        if isinstance(shard.get("sources"), (tuple, list)):
            shard["sources"] = [dict(source) if isinstance(source, Mapping) else source for source in shard["sources"]]
    try:
        _check(facts, _RUN_RULE, ("run",))
    except _Malformed as problem:
        raise TypeError(f"build_report got {problem.describe()}; pass the types the report schema documents") from None
    return facts


# ----------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as the strings "nan", "inf", "-inf".

    Strict JSON has no NaN (``jq`` and browsers reject it), yet a NaN replay error is
    exactly what a numerics report must keep; ``float("nan")`` reads it back.
    Objects that are not JSON (a ``torch.Size``, a path) become their ``str()``, and
    a lone surrogate in a string (not text; no reader could print it) its ``\\udXXX`` escape.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, str):
        return value if _is_text(value) else value.encode("utf-8", "backslashreplace").decode("utf-8")
    if value is None or isinstance(value, (int, bool)):
        return value
    if isinstance(value, Mapping):
        return {json_safe(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return json_safe(to_json())
    return json_safe(str(value))


def _is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (what "\\ud800" in JSON decodes to)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dumps_report(report: Mapping[str, Any]) -> str:
    return json.dumps(json_safe(report), indent=2, allow_nan=False) + "\n"


def write_report(path: str | os.PathLike, report: Mapping[str, Any]) -> Path:
    """Write ``report`` to ``path`` as write_text_atomically does.

    If anything fails (serialising, a full disk), an existing report at ``path`` is
    left as it was, no temporary file stays behind, and the error propagates.
    """
    # serialise first: a value that cannot be written must not even create a file
    return write_text_atomically(Path(path), dumps_report(report))


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` so that no reader ever sees half of it; return ``path``.

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
    if _written_in_place(path):
        _write_into(path, text)
    else:
        _replace_atomically(_link_target(path), text)
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


def _write_into(path: Path, text: str) -> None:
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
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _replace_atomically(target: Path, text: str) -> None:
    parent = target.parent
    # the writer's pid and host in the name: a later write can tell a dead writer's leftover from a live one's
    prefix = f".{target.name}.{os.getpid()}@{_HOST}."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
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


def check_report_path_writable(path: str | os.PathLike) -> str | None:
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


# ----------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------


def load_report(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a report written by ``--cudagraph-report``.

    Raises ReportError, with one sentence naming the file, the problem and the fix,
    when the file is missing, not a regular file (a FIFO or a device is refused at
    once, never read), unreadable, not JSON (often: truncated), of another schema,
    or has a field of the wrong type.  Example::

        report = load_report("torch-2.13.json")
        report["tests"]["tests/test_model.py::test_decode"]["recompiles"]["count"]
    """
    path = Path(path)
    text = _read_regular_file(path)
    if not text or text.isspace():
        raise ReportError(f"report {path} is empty; write it again with --cudagraph-report")
    with collector_paused():
        return validate_report(_parse_json(text, path), str(path), text=text)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block (and on again after it, if it was on).

    A 10,000-test report is some 75,000 new mappings and lists (300,000 objects in
    all) and not one reference cycle: the collections that parsing and checking it
    trigger walk them all and find nothing (measured with two such reports in
    memory: up to half the parse, and about 70 ms of a ``compare``).  Reference
    counting still frees every object.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


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


class FileRefused(Exception):
    """A path ``read_regular_bytes`` would not read; ``str()`` says why in a few words, ``mode`` is its st_mode."""

    def __init__(self, reason: str, mode: int | None = None):
        super().__init__(reason)
        self.mode = mode


def read_regular_bytes(path: str | os.PathLike, *, limit: int | None = None, owner: int | None = None) -> bytes:
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


def _not_a_regular_file(path: Path, mode: int) -> ReportError:
    if stat.S_ISDIR(mode):
        return ReportError(f"report {path} is a directory; give the path of a JSON report file")
    return ReportError(
        f"report {path} is {_kind_of_file(mode)}, not a regular file; give the path of a JSON report file "
        f"(save a stream to a file first)"
    )


def _read_regular_file(path: Path) -> str:
    """The file's text; a FIFO would block and /dev/zero never ends, so only a regular file is read."""
    try:
        return read_regular_bytes(path).decode("utf-8")
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


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a repeated key raises (json.loads would keep the last value silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


# What the writer stores for non-finite floats; another tool's NaN / Infinity literal reads the same.
_NON_FINITE = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_NON_FINITE.__getitem__)
    except _DuplicateKey as exc:
        raise ReportError(
            f"report {path} repeats the key {_short(exc.args[0])} in one object, so one of its values would be "
            f"lost; write it again with --cudagraph-report"
        ) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise ReportError(
            f"report {path} is not valid JSON ({where}); it may be truncated, so write it again with --cudagraph-report"
        ) from None
    except ValueError:  # an integer of more digits than int() converts (4300 since Python 3.11)
        raise ReportError(
            f"report {path} holds an integer too long to read, which no report field holds; "
            f"write it again with --cudagraph-report"
        ) from None


def validate_report(data: Any, name: str = "report", *, text: str | None = None) -> dict[str, Any]:
    """Check a parsed report; return it unchanged, or raise ReportError naming the file, the field and the fix.

    Checked: the schema; the type of every field this plugin writes
    (``tests.*.recompiles``, ``caches``, ``graphs`` with its ``sets`` and
    ``graph_bytes``, ``piecewise``, ``reduce_overhead``, ``placement``, ``env``,
    ``summary``); every number fits a float; every string is text (no lone
    surrogate: with ``text``, the JSON it was parsed from, only when it has a
    ``\\udXXX`` escape); sections it does not know nest less than MAX_DEPTH
    deep and are otherwise kept as they are, so a newer plugin's report still loads.
    """
    if not isinstance(data, dict) or "schema" not in data:
        raise ReportError(
            f"report {name} has no 'schema' field, so it is not a pytest-cudagraph report; "
            f"give a file written by --cudagraph-report"
        )
    if data["schema"] != SCHEMA:
        raise ReportError(
            f"report {name} has schema {_short(data['schema'])}, but this pytest-cudagraph reads {SCHEMA!r}; "
            f"write both reports with the same plugin version"
        )
    if not isinstance(data.get("tests"), dict):
        raise ReportError(
            f"report {name} has no 'tests' mapping, so it is truncated or not a pytest-cudagraph report; "
            f"write it again with --cudagraph-report"
        )
    if not isinstance(data.get("env", {}), dict):
        raise ReportError(f"report {name} has an 'env' that is not a mapping; write the report again")
    for nodeid, record in data["tests"].items():
        if not isinstance(record, dict) or "outcome" not in record:
            raise ReportError(
                f"report {name} has a malformed record for {_short(nodeid)} (no 'outcome'); write the report again"
            )
    try:
        if text is None or _SURROGATE_ESCAPE.search(text):
            _check_text(data)
        _check(data, _REPORT_RULE, ())
    except _Malformed as problem:
        raise ReportError(
            f"report {name} has {problem.describe()}; write it again with --cudagraph-report, or correct that field"
        ) from None
    return data


# ----------------------------------------------------------------------------
# validation: the types of the fields this plugin writes
# ----------------------------------------------------------------------------


class _Malformed(Exception):
    """A field that does not hold what the schema says: where it is, and what is wrong with its value."""

    def __init__(self, path: tuple[Any, ...], value: Any, complaint: str):
        super().__init__(path, value, complaint)
        self.path, self.value, self.complaint = path, value, complaint

    def describe(self) -> str:
        """``tests['a::t'].graphs.sizes = 5, which is not a list of integers``"""
        return f"{_field_path(self.path)} = {_short(self.value)}, {self.complaint}"


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut in the middle to ``limit`` characters (a node id can be 3000 long)."""
    return clip_middle(repr(value), limit)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _field_path(path: tuple[Any, ...]) -> str:
    """``("tests", "a::t", "graphs", "sets", 1)`` -> ``tests['a::t'].graphs.sets[1]``."""
    text = ""
    for key in path:
        if isinstance(key, str) and _IDENTIFIER.fullmatch(key):
            text += f".{key}" if text else key
        else:
            text += f"[{_short(key)}]"
    return text or "the top level"


# How the validator reads the schema.  Every rule carries a table of what a field may hold
# that needs at most a look at the value itself (``plain``), so the loop over a mapping's
# fields passes a valid scalar, or an empty list or mapping, without a call: a report has
# 10,000 records and most of their fields are such.  A rule whose values are lists or
# mappings of scalars (``each``) has their items checked in one loop (_all_accepted).
# Anything else, and any field that fails, goes to _check, which also words the error.
_NONE = type(None)
_JSON_SCALARS = frozenset((str, int, float, bool, _NONE))
_NOTHING: frozenset[type] = frozenset()
# compare and show do their arithmetic in floats: a larger integer is no measurement
_FLOAT_MAX = int(sys.float_info.max)
_isfinite = math.isfinite


class _Rule:
    """The tables every rule carries (see above).

    - ``plain``: types a field may hold with at most a look at its value: an integer
      must fit a float, a float be finite, a string be one of ``words`` when that is
      set, a list or mapping be empty;
    - ``each``: list or dict when the rule's values are containers of scalars of
      ``types`` (strings among them one of ``words``), which _all_accepted checks in one loop.
    """

    __slots__ = ("each", "plain", "types", "words")

    def __init__(
        self,
        plain: frozenset[type],
        each: type | None = None,
        types: frozenset[type] = _NOTHING,
        words: frozenset[str] | None = None,
    ):
        self.plain, self.each, self.types, self.words = plain, each, types, words


class _Kind(_Rule):
    """A field's kind: a scalar of ``types``, or (``each``) a list or mapping of them; ``description`` words it."""

    __slots__ = ("description",)

    def __init__(
        self, description: str, types: frozenset[type], words: frozenset[str] | None = None, each: type | None = None
    ):
        super().__init__(frozenset((each,)) if each else types, each, types, words)
        self.description = description


class _Each(_Rule):
    """A list (with ``mapping``: a mapping's values) whose every item follows ``rule``."""

    __slots__ = ("mapping", "rule")

    def __init__(self, rule: _Rule | dict[str, Any], mapping: bool = False):
        rule = _as_rule(rule)
        container = dict if mapping else list
        scalar = type(rule) is _Kind and rule.each is None
        items = (container, rule.types, rule.words) if scalar else (None, _NOTHING, None)
        super().__init__(frozenset((container,)), *items)
        self.rule, self.mapping = rule, mapping


class _AnyOf(_Rule):
    """A field that follows one of ``rules`` (an older plugin wrote another shape)."""

    __slots__ = ("rules",)

    def __init__(self, rules: tuple[_Rule | dict[str, Any], ...]):
        rules = tuple(map(_as_rule, rules))
        plain = frozenset().union(*(rule.plain for rule in rules))
        if any(rule.words is not None for rule in rules):  # which strings pass depends on the alternative
            plain -= {str}
        super().__init__(plain)
        self.rules = rules


class _Spec(_Rule):
    """A mapping of known fields (a spec: field -> rule); a field it does not name is _FREE."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]):
        super().__init__(frozenset((dict,)))
        self.fields = {key: _as_rule(rule) for key, rule in fields.items()}


def _as_rule(rule: _Rule | dict[str, Any]) -> _Rule:
    """A spec written as a plain dict (as the schema below is) becomes a _Spec."""
    return _Spec(rule) if type(rule) is dict else rule


# A JSON value this plugin does not describe (``extra``, a newer plugin's section): any content,
# but every number must fit a float and the nesting stay under MAX_DEPTH.
_FREE = _Rule(_JSON_SCALARS | {dict, list})
# Deeper than this, a report is not one this plugin wrote (its deepest field is 7 levels down).
MAX_DEPTH = 64


def _fits_float(value: Any) -> bool:
    """False for an integer beyond a float's range and for a float that is not finite (1e400 reads as inf)."""
    if type(value) is int:
        return -_FLOAT_MAX <= value <= _FLOAT_MAX
    return type(value) is not float or _isfinite(value)


def _accepts(kind: _Kind, value: Any) -> bool:
    if kind.each is None:
        return (
            type(value) in kind.types
            and _fits_float(value)
            and (type(value) is not str or kind.words is None or value in kind.words)
        )
    return type(value) is kind.each and _all_accepted(kind, value.values() if kind.each is dict else value)


def _all_accepted(rule: _Rule, items: Any) -> bool:
    """Every item (of a list, or a mapping's values) is a scalar of ``rule.types``, read from the tables."""
    types, words = rule.types, rule.words
    for item in items:
        kind = type(item)
        if kind not in types:
            return False
        if kind is int:
            if not -_FLOAT_MAX <= item <= _FLOAT_MAX:
                return False
        elif kind is float:
            if not _isfinite(item):
                return False
        elif kind is str and words is not None and item not in words:
            return False
    return True


_COUNT = _Kind("an integer", frozenset((int,)))
# bytes, seconds, errors: a number, what json_safe writes for NaN and infinities, or null when not measured
_MEASURE = _Kind(
    'a number, "nan", "inf" or null', frozenset((int, float, str, _NONE)), frozenset(("nan", "inf", "-inf"))
)
_TEXT = _Kind("a string", frozenset((str,)))
_FLAG = _Kind("true or false", frozenset((bool,)))
_TEXTS = _Kind("a list of strings", frozenset((str,)), each=list)
_SIZES = _Kind("a list of integers", frozenset((int,)), each=list)
_COUNTS = _Kind("a mapping of integers", frozenset((int,)), each=dict)
_SCALAR = _Kind("a string, number, boolean or null", _JSON_SCALARS)
_SECONDS = _Kind("a number of seconds", frozenset((int, float)))

_TEXT_OR_NULL = _Kind("a string or null", frozenset((str, _NONE)))
_NULL = _Kind("null", frozenset((_NONE,)))
_RECOMPILES = {
    "count": _COUNT,
    "reasons": _TEXTS,
    "limit_hits": _AnyOf((_TEXTS, _COUNT)),
    # {"count", "reasons", "limit_hits"} per function; older records held the reasons list
    "by_function": _Each(
        _AnyOf((_TEXTS, {"count": _COUNT, "reasons": _TEXTS, "limit_hits": _AnyOf((_TEXTS, _COUNT))})), mapping=True
    ),
    "graph_breaks": {"count": _COUNT, "reasons": _TEXTS, "sites": _Each(_FREE)},
    # one per recompile or limit hit (recompiles.RecompileEvent): call site, failing guards, torch's text
    "events": _Each(
        {
            "function": _TEXT,
            "call_site": _AnyOf((_NULL, {"file": _TEXT, "line": _COUNT, "code": _TEXT, "function": _TEXT})),
            "reasons": _TEXTS,
            "verbatim": _TEXTS,
            "guards": _Each(
                {
                    **dict.fromkeys(("entry", "source", "expected", "actual", "origin"), _TEXT_OR_NULL),
                    "kind": _TEXT,
                    "guard": _TEXT,
                    "reported_by_torch": _FLAG,
                }
            ),
            "limit_hit": _TEXT_OR_NULL,
        }
    ),
}
# the counters compare and the summary read; a layer may hold more
_CACHE_LAYER = dict.fromkeys(
    ("hit", "miss", "bypass", "saved", "compiled", "loaded", "bundler_saved_files", "bundler_loaded_files"), _COUNT
)
_CACHES = {
    "fxgraph": _CACHE_LAYER,
    "aot_autograd": _CACHE_LAYER,
    "triton": _CACHE_LAYER,
    "bypass_reasons": _Each(_TEXTS, mapping=True),
}
# the capture-cost figures read from cudaMemGetInfo: other processes on the GPU move them, so
# where "outside_unreliable" says the GPU was shared no reader vouches for them
OUTSIDE_DEVICE_FIGURES = (
    "outside_pool_bytes",
    "behind_allocator_bytes",
    "first_use_bytes",
    "held_behind_allocator_bytes",
)
# capture_cost.py: each size's warm-up and capture, and the memory outside the pool by where it went
_CAPTURE_COST = {
    "warmup_s": _MEASURE,
    "per_size": _Each(
        {
            **dict.fromkeys(("size", "order"), _COUNT),
            **dict.fromkeys(
                (
                    "warmup_s",
                    "capture_s",
                    "pool_bytes",
                    "allocator_outside_pool_bytes",
                    "first_use_bytes",
                    "behind_allocator_bytes",
                ),
                _MEASURE,
            ),
        }
    ),
    **dict.fromkeys(
        (
            "outside_pool_bytes",
            "allocator_outside_pool_bytes",
            "first_use_bytes",
            "behind_allocator_bytes",
            "held_behind_allocator_bytes",
        ),
        _MEASURE,
    ),
    "release": dict.fromkeys(("device_bytes", "allocator_bytes", "behind_allocator_bytes"), _MEASURE),
    "outside_unreliable": _TEXT,
}
_GRAPH_SET = {
    **_CAPTURE_COST,
    "sizes": _SIZES,
    "captured": _COUNT,
    "pool_bytes": _MEASURE,
    "largest_graph_bytes": _MEASURE,
    "cublas_workspace_bytes": _MEASURE,
    "static_input_bytes": _MEASURE,
    "graph_bytes": _Each(_MEASURE, mapping=True),
    "max_abs_err": _MEASURE,
    "capture_s": _MEASURE,
    "order": _TEXT,
    "pool": _TEXT,
    "keep_outputs": _FLAG,
    "pool_check_passed": _FLAG,
    "replay_checks": _COUNT,
}
_PIECEWISE_SET = {
    **_CAPTURE_COST,
    **dict.fromkeys(
        ("pieces", "capturable_pieces", "graphs_captured", "backend_compilations", "splitting_op_calls_total"), _COUNT
    ),
    "splitting_op_calls": _COUNTS,
    "sizes": _SIZES,
    "pool_bytes": _MEASURE,
    "max_abs_err": _MEASURE,
    "capture_s": _MEASURE,
    "strategy": _TEXT,
    "backend": _TEXT,
    # every piece that runs without a graph, and why; calls that replayed none, by reason
    "uncaptured": _Each({"piece": _TEXT, "reason": _TEXT}),
    "uncaptured_calls": _COUNTS,
}
_REDUCE_OVERHEAD = {
    **dict.fromkeys(("recordings", "skips", "recorded_non_static_inputs", "partitions", "tree_nodes"), _COUNT),
    "skip_reasons": _TEXTS,
    "pool_bytes": _MEASURE,
    # trees.CudagraphSkip per skip; per region, its calls by what they did (trees.py)
    "skipped": _Each(
        {
            **dict.fromkeys(("function", "location"), _TEXT_OR_NULL),
            "reason": _TEXT,
            "code": _TEXT,
            "arguments": _TEXTS,
            "named_by": _TEXT,
        }
    ),
    "regions": _Each(_COUNTS, mapping=True),
    "regions_total": _COUNT,
    "regions_cudagraphed": _COUNT,
    "calls": _COUNTS,
    "fraction_of_calls": _MEASURE,
}
# cache keys (cache_keys.py): a component is [hash12, readable value or null]; a lookup's
# components are null where torch gave none (a bypass, or a torch without them: "note" says)
_COMPONENTS = _Each(_Kind("a [hash, value] pair of strings or nulls", frozenset((str, _NONE)), each=list), mapping=True)
_LOOKUP = {
    "layer": _TEXT,
    "outcome": _TEXT,
    "key": _TEXT_OR_NULL,
    "pass": _TEXT_OR_NULL,
    "graph": _COUNT,
    "components": _AnyOf((_COMPONENTS, _NULL)),
    "detail": _TEXT,
    "bypass_reason": _TEXT,
    "explained": _TEXTS,
    "compared_with": _TEXT,
}
_CACHE_KEYS = {"lookups": _Each(_LOOKUP), "note": _TEXT}
# compile time (compile_time.py): per phase, per compiled frame; a phase this torch does not record is absent
_COMPILE_PHASES = _Each(_MEASURE, mapping=True)
_COMPILE_TIME = {
    "total_s": _MEASURE,
    "phases": _COMPILE_PHASES,
    "frames": _Each(
        {"compile_id": _TEXT, "function": _TEXT, "total_s": _MEASURE, "phases": _COMPILE_PHASES, "failed": _TEXT}
    ),
    "unavailable": _TEXTS,
    "note": _TEXT,
    "passes": _Each({"label": _TEXT, "cold_s": _MEASURE, "warm_s": _MEASURE, "warm_cold_ratio": _MEASURE}),
}
# a multi-rank run (ranks/results.py): the run, then each rank with its own GraphSets; a test that ran
# several bodies keeps each run under "runs"
_RANK = {
    "rank": _COUNT,
    "device": _TEXT,
    "outcome": _TEXT,
    "stage": _TEXT_OR_NULL,
    "error": _AnyOf(({"type": _TEXT, "message": _TEXT, "where": _TEXT_OR_NULL}, _NULL)),
    "waiting_at": _TEXT_OR_NULL,
    "agreement_checks": _COUNT,
    "placement": _Each(_SCALAR, mapping=True),
    "duration_s": _MEASURE,
    "exitcode": _AnyOf((_COUNT, _NULL)),
    "graphs": {**_GRAPH_SET, "sets": _Each(_GRAPH_SET)},
}
_RANKS_RUN = {
    "world_size": _COUNT,
    "backend": _TEXT,
    "timeout_s": _MEASURE,
    "outcome": _TEXT,
    "duration_s": _MEASURE,
    "first_failure": _AnyOf((_COUNT, _NULL)),
    "message": _TEXT_OR_NULL,
    "per_rank": _Each(_RANK),
}
_RANKS = {**_RANKS_RUN, "runs": _Each(_RANKS_RUN)}
# pytest-cudagraph startup (startup_bench.py): per kind of run, the median and spread (max - min) of each figure
_STARTUP_STATS = {**dict.fromkeys(("median", "min", "max", "spread", "trimmed_spread"), _MEASURE), "n": _COUNT}
_STARTUP_SAMPLE = {
    "pass": _TEXT,
    "index": _COUNT,
    "exitcode": _AnyOf((_COUNT, _NULL)),
    "outcome": _TEXT_OR_NULL,
    **dict.fromkeys(("wall_s", "duration_s", "compile_s", "capture_s"), _MEASURE),
    "phases": _Each(_MEASURE, mapping=True),
    "error": _TEXT_OR_NULL,
}
_STARTUP_PASS = {
    "runs": _COUNT,
    **dict.fromkeys(("wall_s", "duration_s", "compile_s", "capture_s"), _STARTUP_STATS),
    "phases": _Each(_STARTUP_STATS, mapping=True),
    "samples": _Each(_STARTUP_SAMPLE),
}
_STARTUP = {
    "runs": _COUNT,
    "complete": _FLAG,
    **dict.fromkeys(("statistic", "spread", "trimmed_spread", "order"), _TEXT),
    "command": _TEXTS,
    "cold": _STARTUP_PASS,
    "warm": _STARTUP_PASS,
    "warm_over_cold": _Each(_MEASURE, mapping=True),
    "errors": _TEXTS,
    "notes": _TEXTS,
}
_RECORD = {
    "outcome": _TEXT,
    "duration_s": _MEASURE,
    "recompiles": _RECOMPILES,
    "caches": _CACHES,
    "cache_keys": _CACHE_KEYS,
    "graphs": {**_GRAPH_SET, "sets": _Each(_GRAPH_SET)},
    "piecewise": {**_PIECEWISE_SET, "sets": _Each(_PIECEWISE_SET)},
    "reduce_overhead": _REDUCE_OVERHEAD,
    "compile_time": _COMPILE_TIME,
    "ranks": _RANKS,
    "placement": _Each(_SCALAR, mapping=True),
    "failure": {"when": _TEXT, "message": _TEXT},
    "skip_reason": _TEXT,
    "startup": _STARTUP,
    "extra": _FREE,
}
# pytest-split's shard of a run; a merged report names the shards it was made from instead of a group
_SHARD_SOURCE = {
    **dict.fromkeys(("group", "exitstatus", "selected", "deselected", "tests"), _COUNT),
    "file": _TEXT,
    "created": _TEXT,
    "complete": _FLAG,
    "durations_path": _TEXT,
    "env": _Each(_SCALAR, mapping=True),
}
_SHARD = {
    **dict.fromkeys(("group", "splits", "selected", "deselected"), _COUNT),
    "algorithm": _TEXT,
    "durations_path": _TEXT,
    # sha256 of the node ids pytest-split split and the arguments that selected them (plugin/shards.py)
    "suite_digest": _TEXT,
    "merged": _SIZES,
    "sources": _Each(_SHARD_SOURCE),
}
_RUN_SPEC = {
    "complete": _FLAG,
    "incomplete_reasons": _TEXTS,
    "not_run": _TEXTS,
    "not_run_count": _COUNT,
    "deselected": _COUNT,
    "selection": _Each(_TEXT, mapping=True),
    "shard": _SHARD,
}
_SUMMARY = {
    **dict.fromkeys(("tests", "recompiles", "recompile_limit_hits", "graph_breaks", "graphs_captured"), _COUNT),
    "outcomes": _COUNTS,
    "caches": _Each(_COUNTS, mapping=True),
    "exitstatus": _COUNT,
    **_RUN_SPEC,
}
_REPORT_SPEC = {
    "created": _TEXT,
    "env": _Each(_SCALAR, mapping=True),
    "tests": _Each(_RECORD, mapping=True),
    # per layer, the cache-key components every lookup of the run shares (factor_cache_components).
    # Still schema pytest-cudagraph/1: an older plugin's tables know neither this key nor a
    # record's "cache_keys", so its load_report keeps both as free JSON (_FREE) and reads
    # nothing else differently; its compare flattens "cache_keys" like any unknown section
    # (the lookups list as "[n items]", so no figure of it is mistaken for a known one).  A
    # lookup's own "components" then lack the shared ones: full_components puts them back.
    "cache_components": _Each(_COMPONENTS, mapping=True),
    "summary": _SUMMARY,
    # seconds per node id of every test that finished, for pytest-split (``pytest-cudagraph durations``)
    "durations": _Each(_SECONDS, mapping=True),
}
# the tables _check reads
_REPORT_RULE = _Spec(_REPORT_SPEC)
_RUN_RULE = _Spec(_RUN_SPEC)


def _check(value: Any, rule: _Rule, path: tuple[Any, ...]) -> None:
    """Raise _Malformed at the first field of ``value`` that does not follow ``rule``.

    ``rule``: a _Kind, a _Spec, an _Each, an _AnyOf or _FREE.
    """
    if type(rule) is _Spec:
        if type(value) is not dict:
            raise _malformed(path, value, "a mapping")
        fields = rule.fields
        for key, item in value.items():
            sub = fields.get(key, _FREE)
            kind = type(item)
            if kind in sub.plain:  # the table says this type may be here: a look at the value is left
                if kind is int:
                    if -_FLOAT_MAX <= item <= _FLOAT_MAX:
                        continue
                elif kind is float:
                    if _isfinite(item):
                        continue
                elif kind is str:
                    if sub.words is None or item in sub.words:
                        continue
                elif (kind is not dict and kind is not list) or not item:  # true, false, null; [] and {}
                    continue
            if kind is sub.each and _all_accepted(sub, item.values() if kind is dict else item):
                continue
            _check(item, sub, (*path, key))  # a nested rule, or a field that is wrong: raises with its path
    elif type(rule) is _Kind:
        if not _accepts(rule, value):
            raise _malformed(path, value, rule.description)
    elif rule is _FREE:
        if isinstance(value, (dict, list)):
            _check_free(value, path)
        elif not _fits_float(value):
            raise _malformed(path, value, "a number")
    elif type(rule) is _Each:
        if type(value) is not (dict if rule.mapping else list):
            raise _malformed(path, value, "a mapping" if rule.mapping else "a list")
        if rule.each is not None and _all_accepted(rule, value.values() if rule.mapping else value):
            return
        for key, item in value.items() if rule.mapping else enumerate(value):
            _check(item, rule.rule, (*path, key))
    else:
        _check_any_of(value, rule, path)


def _check_any_of(value: Any, rule: _AnyOf, path: tuple[Any, ...]) -> None:
    problems = []
    for alternative in rule.rules:
        try:
            _check(value, alternative, path)
            return
        except _Malformed as problem:
            problems.append(problem)
    # the alternative that got furthest into the value names the field best
    raise max(problems, key=lambda problem: len(problem.path))


def _malformed(path: tuple[Any, ...], value: Any, description: str) -> _Malformed:
    if type(value) in (int, float) and not _fits_float(value):
        return _Malformed(path, value, "a number too large for a float")
    return _Malformed(path, value, f"which is not {description}")


def _check_free(value: dict | list, path: tuple[Any, ...]) -> None:
    """Every number in ``value`` fits a float, and it nests less than MAX_DEPTH levels from the top."""
    stack = [(value, path)]
    while stack:
        container, where = stack.pop()
        if len(where) >= MAX_DEPTH:
            raise _Malformed(where, "...", f"which is nested deeper than {MAX_DEPTH} levels")
        for key, item in container.items() if type(container) is dict else enumerate(container):
            kind = type(item)
            if kind is int:
                if not -_FLOAT_MAX <= item <= _FLOAT_MAX:
                    raise _Malformed((*where, key), item, "a number too large for a float")
            elif kind is float:
                if not _isfinite(item):
                    raise _Malformed((*where, key), item, "a number too large for a float")
            elif isinstance(item, (dict, list)):
                stack.append((item, (*where, key)))
            elif not _fits_float(item):  # a subclass of int or float (a live record, not parsed JSON)
                raise _Malformed((*where, key), item, "a number too large for a float")


# JSON text reaches a lone surrogate only through a \\udXXX escape: without one, no string needs a look.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_text(value: Any, path: tuple[Any, ...] = ()) -> None:
    """Raise _Malformed at a key or string holding a lone surrogate (not text: printing it fails)."""
    stack = [(value, path)]
    while stack:
        container, where = stack.pop()
        for key, item in container.items() if type(container) is dict else enumerate(container):
            if type(key) is str and not _is_text(key):
                raise _Malformed((*where, key), item, "whose key is not text (a lone surrogate)")
            if isinstance(item, (dict, list)):
                stack.append((item, (*where, key)))
            elif type(item) is str and not _is_text(item):
                raise _Malformed((*where, key), item, "which is not text (a lone surrogate)")


# ----------------------------------------------------------------------------
# xdist: records travel from the workers to the controller
# ----------------------------------------------------------------------------


def encode_worker_records(records: Mapping[str, Mapping[str, Any]]) -> str:
    """A worker's records as one JSON string (``workeroutput`` values must be plain data)."""
    return json.dumps(json_safe(dict(records)), allow_nan=False)


def merge_worker_records(into: dict[str, dict[str, Any]], payload: str | Mapping[str, Any] | None) -> int:
    """Add one worker's records to the controller's; return how many arrived.

    These are the records of tests refused at collection, the same on every worker:
    one copy is kept.
    """
    if not payload:
        return 0
    records = json.loads(payload) if isinstance(payload, str) else payload
    for nodeid, record in records.items():
        into[nodeid] = record
    return len(records)


# worst first: the outcome a test run on several workers (--dist each) is reported with
_OUTCOME_SEVERITY = ("crashed", "error", "failed", "xpassed", "passed", "xfailed", "skipped")


def merge_runs_of_one_test(
    earlier: Mapping[str, Any], later: Mapping[str, Any], earlier_worker: str, later_worker: str
) -> dict[str, Any]:
    """One record for a test that ran on several xdist workers (``--dist each``).

    The record of the worst outcome is kept whole (a failure on one GPU is never
    hidden by a pass on another), and ``extra.runs`` lists every worker's outcome.
    """
    runs = list(
        (earlier.get("extra") or {}).get("runs") or [{"worker": earlier_worker, "outcome": earlier.get("outcome")}]
    )
    runs.append({"worker": later_worker, "outcome": later.get("outcome")})

    def severity(record: Mapping[str, Any]) -> int:
        outcome = record.get("outcome")
        return _OUTCOME_SEVERITY.index(outcome) if outcome in _OUTCOME_SEVERITY else len(_OUTCOME_SEVERITY)

    kept = dict(later if severity(later) < severity(earlier) else earlier)
    kept["extra"] = {**(kept.get("extra") or {}), "runs": runs}
    return kept
