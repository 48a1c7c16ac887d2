"""Bad input, as one matrix: every option, ini value, marker argument, report, baseline and cache root given
something wrong, seen from outside.

Each case checks the same three things:

1. the exact exit status: 4 (usage error) for a bad option or ini value, which stops the run before any test;
   2 (interrupted by a collection error) for a bad marker argument; 2 for ``pytest-cudagraph compare``/``show``
   given a report it cannot read;
2. one sentence on one line that names the option, marker or path, the value, and the fix; no traceback;
3. nothing half-written: no report and no temporary sibling at the report path, and the baseline, the cache root
   and any existing report byte- and mode-identical to what they were before the run.

pytest runs are in-process (``pytester.runpytest``): a run stopped by a bad value imports nothing heavy, and the
repository's conftest has imported torch once already.  ``-p no:hypothesispytest`` keeps each run at a fraction
of a second: hypothesis' plugin imports hypothesis anew (assertion-rewritten) in every in-process run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sample_reports import sample_report

from pytest_cudagraph.records.report import load_report

IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0
AS_NON_ROOT = pytest.mark.skipif(IS_ROOT, reason="root writes through permission bits; run as a normal user")
AS_ROOT = pytest.mark.skipif(not IS_ROOT, reason="giving a directory to another user (os.chown) needs root")
CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
PATH_OPTIONS = ("--cudagraph-report", "--cudagraph-baseline", "--cudagraph-cache-dir")
FAST = ("-p", "no:hypothesispytest")

# Two sentences: a full stop, then a capital.  Values such as 1.5, 1e-5 and 2.13.0+cpu never match.
SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")
# Every message of the plugin is "<what is wrong>; <what to do>": the part after the first ';' says the fix.
FIX_CLAUSE = re.compile(
    r";.*\b(give|write|use|set|run|create|drop|choose|free|leave|the signature is)\b", flags=re.IGNORECASE
)


def _cuda_visible() -> bool:
    import torch  # already imported by the conftest

    return torch.cuda.is_available()


NO_GPU_HERE = pytest.mark.skipif(_cuda_visible(), reason="a CUDA device is visible; this checks the no-GPU error")


# ----------------------------------------------------------------------------
# what the checks look at
# ----------------------------------------------------------------------------


def tree(path: Path) -> dict[str, tuple]:
    """Everything at and under ``path``: name -> (mode, owner, bytes of a regular file); {} if absent."""
    if not os.path.lexists(path):
        return {}
    entries = {}
    for entry in [path, *(sorted(path.rglob("*")) if path.is_dir() else ())]:
        st = entry.lstat()
        content = entry.read_bytes() if stat.S_ISREG(st.st_mode) else None
        entries[str(entry.relative_to(path))] = (stat.filemode(st.st_mode), st.st_uid, content)
    return entries


def assert_one_sentence(line: str, names: list[str], fix: str | None, false_claims: tuple[str, ...] = ()) -> None:
    """``line`` names every one of ``names``, says the fix, and is a single sentence."""
    __tracebackhide__ = True
    for name in names:
        assert name in line, f"the message does not name {name!r}: {line}"
    assert FIX_CLAUSE.search(line), f"the message says no fix ('...; give/use/write ...'): {line}"
    if fix is not None:
        assert fix in line, f"the message does not say the fix {fix!r}: {line}"
    for claim in false_claims:
        assert claim not in line, f"the message says {claim!r}, which is not true here: {line}"
    assert not SENTENCE_BREAK.search(line), f"more than one sentence: {line}"


def assert_no_traceback(text: str) -> None:
    __tracebackhide__ = True
    assert "Traceback" not in text, text
    assert "site-packages/torch" not in text, text
    assert "INTERNALERROR" not in text, text


def assert_no_temporary_files(directory: Path) -> None:
    __tracebackhide__ = True
    leftovers = sorted(p.name for p in directory.glob("*.tmp")) + sorted(p.name for p in directory.glob(".*.tmp"))
    assert leftovers == [], f"temporary files left in {directory}: {leftovers}"


# ----------------------------------------------------------------------------
# bad reports and baselines (shared by --cudagraph-baseline and the pytest-cudagraph command)
# ----------------------------------------------------------------------------


def _report_text() -> str:
    return json.dumps(sample_report(), indent=2)


# kind -> (content: text, bytes, None for a missing file, or "<directory>"; what is wrong; the fix as worded)
BAD_REPORTS: dict[str, tuple[object, str, str | None]] = {
    "truncated": (
        lambda: _report_text()[: len(_report_text()) // 2],
        "is not valid JSON",
        "it may be truncated, so write it again with --cudagraph-report",
    ),
    "other-schema": (
        lambda: json.dumps({**sample_report(), "schema": "pytest-cudagraph/4"}),
        "has schema 'pytest-cudagraph/4', but this pytest-cudagraph reads 'pytest-cudagraph/3'",
        "write both reports with the same plugin version",
    ),
    "not-json": (lambda: '<?xml version="1.0"?><testsuites/>\n', "is not valid JSON", "write it again"),
    "empty": (lambda: "", "is empty", "write it again with --cudagraph-report"),
    # what `jq -s . run.json` gives: the report inside a list
    "json-list": (lambda: json.dumps([sample_report()]), "has no 'schema' field", None),
    "binary": (lambda: b"\x80\xff\xfe\x00" * 16, "cannot be read", "give a readable JSON report file"),
    "missing": (lambda: None, "does not exist", "give the path of a file written by --cudagraph-report"),
    "directory": (lambda: "<directory>", "is a directory", "give the path of a JSON report file"),
}


def make_bad_report(directory: Path, kind: str) -> Path:
    content = BAD_REPORTS[kind][0]()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kind}.json"
    if content == "<directory>":
        path.mkdir()
        (path / "inside.json").write_text(_report_text())
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    return path


# ----------------------------------------------------------------------------
# options and ini values: the run stops at start with a usage error (exit 4)
# ----------------------------------------------------------------------------


@dataclass
class BadStart:
    """A run that must stop at start: its arguments, what the one sentence must say, what must stay untouched."""

    args: list[str]
    names: list[str]
    fix: str | None
    ini: str = ""
    watched: list[Path] = field(default_factory=list)
    false_claims: tuple[str, ...] = ()


def _report_in_missing_directory(tmp: Path) -> BadStart:
    target = tmp / "missing" / "run.json"
    return BadStart(
        [f"--cudagraph-report={target}"],
        ["--cudagraph-report", str(target), f"directory {target.parent} does not exist"],
        "create it or give another path",
        watched=[target.parent],
    )


def _report_under_a_regular_file(tmp: Path) -> BadStart:
    # unwritable even for root: the "directory" is a file
    blocker = tmp / "reports.txt"
    blocker.write_text("a file where a directory was expected\n")
    target = blocker / "run.json"
    return BadStart(
        [f"--cudagraph-report={target}"],
        ["--cudagraph-report", str(target), str(blocker)],
        "give another path",
        watched=[blocker],
        false_claims=("does not exist",),  # it exists; it is a file, not a directory
    )


def _report_is_a_directory(tmp: Path) -> BadStart:
    target = tmp / "out"
    target.mkdir()
    (target / "earlier.json").write_text(_report_text())
    return BadStart(
        [f"--cudagraph-report={target}"],
        ["--cudagraph-report", str(target), "is a directory"],
        f"give a file path such as {target / 'cudagraph.json'}",
        watched=[target],
    )


def _report_in_read_only_directory(tmp: Path) -> BadStart:
    parent = tmp / "read-only"
    parent.mkdir(mode=0o500)
    target = parent / "run.json"
    return BadStart(
        [f"--cudagraph-report={target}"],
        ["--cudagraph-report", str(target), "is not writable"],
        "give a path you can write to",
        watched=[parent],
    )


def _report_file_read_only(tmp: Path) -> BadStart:
    parent = tmp / "earlier"
    parent.mkdir()
    target = parent / "run.json"
    target.write_text(_report_text())
    target.chmod(0o444)
    return BadStart(
        [f"--cudagraph-report={target}"],
        ["--cudagraph-report", str(target), "exists and is not writable"],
        "give a path you can write to",
        watched=[parent],
    )


def _baseline(kind: str) -> Callable[[Path], BadStart]:
    def build(tmp: Path) -> BadStart:
        path = make_bad_report(tmp / "baselines", kind)
        _, wrong, fix = BAD_REPORTS[kind]
        return BadStart(
            [f"--cudagraph-baseline={path}"],
            ["--cudagraph-baseline", str(path), wrong],
            fix,
            watched=[path],
        )

    return build


def _cache_dir_is_a_file(tmp: Path) -> BadStart:
    target = tmp / "cache-file"
    target.write_text("not a directory\n")
    return BadStart(
        [f"--cudagraph-cache-dir={target}"],
        ["--cudagraph-cache-dir", str(target), "is not a directory"],
        "give a directory path, or a path that does not exist yet",
        watched=[target],
    )


def _cache_dir_under_a_file(tmp: Path) -> BadStart:
    # unwritable even for root: the parent is a file
    blocker = tmp / "cache-file"
    blocker.write_text("not a directory\n")
    target = blocker / "root"
    return BadStart(
        [f"--cudagraph-cache-dir={target}"],
        ["--cudagraph-cache-dir", str(target), "cannot be created"],
        "give a writable directory",
        watched=[blocker],
    )


def _cache_dir_read_only(tmp: Path) -> BadStart:
    target = tmp / "read-only-root"
    target.mkdir(mode=0o500)
    return BadStart(
        [f"--cudagraph-cache-dir={target}"],
        ["--cudagraph-cache-dir", str(target), "is not writable"],
        "give a directory you can write to",
        watched=[target],
    )


def _cache_dir_open(bits: int) -> Callable[[Path], BadStart]:
    def build(tmp: Path) -> BadStart:
        target = tmp / f"open-{bits:o}"
        (target / "inductor").mkdir(parents=True)
        (target / "inductor" / "entry.py").write_text("# someone else's cached code\n")
        target.chmod(bits)
        return BadStart(
            [f"--cudagraph-cache-dir={target}"],
            ["--cudagraph-cache-dir", str(target), f"is writable by group or others (mode {bits:04o})"],
            f"run 'chmod 700 {target}' or use another directory",
            watched=[target],
        )

    return build


def _cache_dir_symlink_to_open_dir(tmp: Path) -> BadStart:
    real = tmp / "shared"
    real.mkdir()
    real.chmod(0o777)
    link = tmp / "my-cache"
    link.symlink_to(real)
    return BadStart(
        [f"--cudagraph-cache-dir={link}"],
        ["--cudagraph-cache-dir", str(link), "(mode 0777)"],
        "or use another directory",
        watched=[real, link],
    )


def _cache_dir_owned_by_another_user(tmp: Path) -> BadStart:
    target = tmp / "foreign"
    target.mkdir(mode=0o700)
    (target / "entry.py").write_text("# another user's cached code\n")
    os.chown(target / "entry.py", 12345, 12345)
    os.chown(target, 12345, 12345)
    return BadStart(
        [f"--cudagraph-cache-dir={target}"],
        ["--cudagraph-cache-dir", str(target), "is owned by uid 12345, not by you (uid 0)"],
        "use a directory you own",
        watched=[target],
    )


def _require_gpu_without_gpu(tmp: Path) -> BadStart:
    return BadStart(
        ["--cudagraph-require-gpu"],
        ["--cudagraph-require-gpu", "no CUDA device is visible"],
        "run on a GPU runner or drop the flag",
    )


def _empty(option: str) -> Callable[[Path], BadStart]:
    # `--cudagraph-report=$REPORT` with REPORT unset: the user asked for a file and must not silently get none
    return lambda tmp: BadStart([f"{option}="], [option], None)


def _ini(line: str, names: list[str], fix: str) -> Callable[[Path], BadStart]:
    return lambda tmp: BadStart([], names, fix, ini=line)


def _earlier_probes(root: Path) -> None:
    (root / "probes" / "test_x-main-1-1").mkdir(parents=True)
    (root / "probes" / "test_x-main-1-1" / "fxgraph.bin").write_bytes(b"kept for inspection")
    (root / "inductor").mkdir()
    (root / "inductor" / "entry.py").write_text("# a warm cache\n")
    for directory in (root, root / "probes", root / "probes" / "test_x-main-1-1", root / "inductor"):
        directory.chmod(0o700)


def _good_new_cache_dir_with_bad_baseline(tmp: Path) -> BadStart:
    # A usage error must change nothing on disk, a cache root given with it included.
    root = tmp / "new-cache-root"
    baseline = make_bad_report(tmp / "baselines", "truncated")
    return BadStart(
        [f"--cudagraph-cache-dir={root}", f"--cudagraph-baseline={baseline}"],
        ["--cudagraph-baseline", str(baseline)],
        BAD_REPORTS["truncated"][2],
        watched=[root, baseline],
    )


def _good_existing_cache_dir_with_bad_report(tmp: Path) -> BadStart:
    root = tmp / "warm-cache-root"
    root.mkdir(mode=0o700)
    _earlier_probes(root)
    target = tmp / "missing" / "run.json"
    return BadStart(
        [f"--cudagraph-cache-dir={root}", f"--cudagraph-report={target}"],
        ["--cudagraph-report", str(target)],
        "create it or give another path",
        watched=[root, target.parent],
    )


BAD_STARTS = [
    # --cudagraph-report
    pytest.param(_report_in_missing_directory, id="report-in-missing-directory"),
    pytest.param(_report_under_a_regular_file, id="report-under-a-regular-file"),
    pytest.param(_report_is_a_directory, id="report-is-a-directory"),
    pytest.param(_report_in_read_only_directory, id="report-in-read-only-directory", marks=AS_NON_ROOT),
    pytest.param(_report_file_read_only, id="report-file-read-only", marks=AS_NON_ROOT),
    # --cudagraph-baseline
    *(pytest.param(_baseline(kind), id=f"baseline-{kind}") for kind in BAD_REPORTS),
    # --cudagraph-cache-dir
    pytest.param(_cache_dir_is_a_file, id="cache-dir-is-a-file"),
    pytest.param(_cache_dir_under_a_file, id="cache-dir-under-a-file"),
    pytest.param(_cache_dir_read_only, id="cache-dir-read-only", marks=AS_NON_ROOT),
    pytest.param(_cache_dir_open(0o777), id="cache-dir-world-writable"),
    pytest.param(_cache_dir_open(0o770), id="cache-dir-group-writable"),
    pytest.param(_cache_dir_open(0o702), id="cache-dir-others-writable-only"),
    pytest.param(_cache_dir_symlink_to_open_dir, id="cache-dir-symlink-to-world-writable"),
    pytest.param(_cache_dir_owned_by_another_user, id="cache-dir-owned-by-another-user", marks=AS_ROOT),
    # an empty path
    *(pytest.param(_empty(option), id=f"{option[2:]}-empty-value") for option in PATH_OPTIONS),
    # --cudagraph-require-gpu
    pytest.param(_require_gpu_without_gpu, id="require-gpu-without-gpu", marks=NO_GPU_HERE),
    # ini options: wrong type, then out of range
    pytest.param(
        _ini("cudagraph_capture_sizes = 1,two", ["ini option cudagraph_capture_sizes", "'two'"], "give sizes such as"),
        id="ini-capture_sizes-type-word",
    ),
    pytest.param(
        _ini("cudagraph_capture_sizes = 2.5", ["ini option cudagraph_capture_sizes", "'2.5'"], "give sizes such as"),
        id="ini-capture_sizes-type-float",
    ),
    pytest.param(
        _ini(
            "cudagraph_capture_sizes = 1 0 4",
            ["ini option cudagraph_capture_sizes", "capture size 0 is not a positive integer"],
            "give sizes",
        ),
        id="ini-capture_sizes-range-zero",
    ),
    pytest.param(
        _ini(
            "cudagraph_capture_sizes = -8",
            ["ini option cudagraph_capture_sizes", "capture size -8 is not a positive integer"],
            "give sizes",
        ),
        id="ini-capture_sizes-range-negative",
    ),
    pytest.param(
        _ini("cudagraph_capture_sizes = , ,", ["ini option cudagraph_capture_sizes", "is empty"], "give at least one"),
        id="ini-capture_sizes-range-only-separators",
    ),
    pytest.param(
        _ini("cudagraph_rtol = loose", ["ini option cudagraph_rtol", "'loose'"], "set it to a float such as 1e-5"),
        id="ini-rtol-type",
    ),
    pytest.param(
        _ini("cudagraph_rtol = -1", ["ini option cudagraph_rtol", "'-1'"], "set it to a float such as 1e-5"),
        id="ini-rtol-range-negative",
    ),
    pytest.param(
        _ini("cudagraph_rtol = nan", ["ini option cudagraph_rtol", "'nan'"], "set it to a float such as 1e-5"),
        id="ini-rtol-range-nan",
    ),
    pytest.param(
        _ini("cudagraph_atol = tight", ["ini option cudagraph_atol", "'tight'"], "set it to a float such as 1e-5"),
        id="ini-atol-type",
    ),
    pytest.param(
        _ini("cudagraph_atol = -1e-3", ["ini option cudagraph_atol", "'-1e-3'"], "set it to a float such as 1e-5"),
        id="ini-atol-range-negative",
    ),
    pytest.param(
        _ini(
            "cudagraph_baseline_fail_on = default,poool",
            ["ini option cudagraph_baseline_fail_on", "unknown rule 'poool'"],
            "choose from outcome, skipped, recompiles",
        ),
        id="ini-baseline_fail_on-unknown-rule",
    ),
    # a usage error leaves a good --cudagraph-cache-dir given with it alone too
    pytest.param(_good_new_cache_dir_with_bad_baseline, id="good-new-cache-dir-not-created-by-a-usage-error"),
    pytest.param(_good_existing_cache_dir_with_bad_report, id="good-cache-dir-not-pruned-by-a-usage-error"),
]


@pytest.mark.parametrize("build", BAD_STARTS)
def test_bad_option_or_ini_value_stops_the_run_with_one_sentence_and_writes_nothing(pytester, build):
    case = build(pytester.path)
    args = list(case.args)
    reports = pytester.path / "reports"
    reports.mkdir(exist_ok=True)
    if not any(arg.startswith("--cudagraph-report=") for arg in args):
        # a good report path beside the bad value: the run must not write it
        args.append(f"--cudagraph-report={reports / 'run.json'}")
    watched = [*case.watched, reports]
    before = {path: tree(path) for path in watched}
    environ = {name: os.environ.get(name) for name in CACHE_ENV}
    if case.ini:
        pytester.makeini(f"[pytest]\n{case.ini}\n")
    pytester.makepyfile("def test_plain():\n    pass\n")

    result = pytester.runpytest(*FAST, *args)

    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert_no_traceback(result.stdout.str() + result.stderr.str())
    assert "test session starts" not in result.stdout.str()
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, result.stderr.str()
    assert lines[0].startswith("ERROR: "), lines[0]
    assert_one_sentence(lines[0].removeprefix("ERROR: "), case.names, case.fix, case.false_claims)
    for path in watched:
        assert tree(path) == before[path], f"{path} was changed by a run that stopped with a usage error"
    assert_no_temporary_files(reports)
    assert {name: os.environ.get(name) for name in CACHE_ENV} == environ


# ----------------------------------------------------------------------------
# marker arguments: a collection error naming the test (exit 2)
# ----------------------------------------------------------------------------

SIZES_FIX = "give sizes such as [1, 2, 4, 8]"
CUDAGRAPH_SIGNATURE = (
    "the signature is cudagraph(capture_sizes=None, rtol=None, atol=None, *, trees=None, world_size=None, timeout=None, break_at=None, "
    "max_rerecords=None, align_collectives=True, observe=False, expect_sizes=None, check_sizes=True, one_pool=True, "
    "pool_check=True, require_replay=False, allow_capture_failures=False)"
)

# (marker call, what the sentence must name besides the test and the marker, the fix as worded)
BAD_MARKERS = [
    # cudagraph(capture_sizes=...)
    pytest.param("cudagraph(capture_sizes='8')", "capture_sizes='8' is not a list", "give positive integers such as",
                 id="cudagraph-capture_sizes-type-str"),
    pytest.param("cudagraph(capture_sizes=8)", "capture_sizes=8 is not a list", "give positive integers such as",
                 id="cudagraph-capture_sizes-type-int"),
    pytest.param("cudagraph(capture_sizes=[1.5])", "capture size 1.5 is not a positive integer", SIZES_FIX, id="cudagraph-capture_sizes-type-float"),
    pytest.param("cudagraph(capture_sizes=['2'])", "capture size '2' is not a positive integer", SIZES_FIX, id="cudagraph-capture_sizes-type-str-item"),
    pytest.param("cudagraph(capture_sizes=[True])", "capture size True is not a positive integer", SIZES_FIX, id="cudagraph-capture_sizes-type-bool"),
    pytest.param("cudagraph(capture_sizes=[0, 8])",
                 "capture_sizes=[0, 8] must be a non-empty list of positive ints, but capture size 0 is not", SIZES_FIX,
                 id="cudagraph-capture_sizes-range-zero"),
    pytest.param("cudagraph(capture_sizes=[-4])", "capture size -4 is not a positive integer", SIZES_FIX, id="cudagraph-capture_sizes-range-negative"),
    pytest.param("cudagraph(capture_sizes=[])", "capture_sizes=[] is empty", "give at least one positive batch size",
                 id="cudagraph-capture_sizes-range-empty"),
    # cudagraph(rtol=..., atol=...)
    pytest.param("cudagraph(rtol='x')", "rtol='x' is not a non-negative number", "give a float such as rtol=1e-5",
                 id="cudagraph-rtol-type-str"),
    pytest.param("cudagraph(rtol=True)", "rtol=True is not a non-negative number", "give a float such as rtol=1e-5",
                 id="cudagraph-rtol-type-bool"),
    pytest.param("cudagraph(rtol=[1e-5])", "rtol=[1e-05] is not a non-negative number", "give a float such as",
                 id="cudagraph-rtol-type-list"),
    pytest.param("cudagraph(rtol=-1)", "rtol=-1 is not a non-negative number", "give a float such as rtol=1e-5",
                 id="cudagraph-rtol-range-negative"),
    pytest.param("cudagraph(rtol=float('nan'))", "rtol=nan is not a non-negative number", "give a float such as",
                 id="cudagraph-rtol-range-nan"),
    pytest.param("cudagraph(atol='tight')", "atol='tight' is not a non-negative number",
                 "give a float such as atol=1e-5", id="cudagraph-atol-type"),
    pytest.param("cudagraph(atol=-1e-3)", "atol=-0.001 is not a non-negative number", "give a float such as atol=1e-5",
                 id="cudagraph-atol-range-negative"),
    pytest.param("cudagraph(sizes=[1])", "unexpected keyword argument 'sizes'", CUDAGRAPH_SIGNATURE,
                 id="cudagraph-unknown-argument"),
    pytest.param("cudagraph(capture_size=[1, 2])", "unexpected keyword argument 'capture_size'; "
                 "did you mean capture_sizes=[1, 2]? " + CUDAGRAPH_SIGNATURE, CUDAGRAPH_SIGNATURE,
                 id="cudagraph-near-argument"),
    pytest.param("cudagraph([1], 1e-5, 1e-5, 0)", "too many positional arguments", CUDAGRAPH_SIGNATURE,
                 id="cudagraph-too-many-arguments"),
    pytest.param("cudagraph(align_collectives='no')", "align_collectives='no' is not True or False",
                 "give align_collectives=False to let the ranks replay", id="cudagraph-align_collectives-type"),
    # max_recompiles(n)
    pytest.param("max_recompiles(n='0')", "n='0' is not a non-negative integer", "such as n=0",
                 id="max_recompiles-type-str"),
    pytest.param("max_recompiles(1.0)", "n=1.0 is not a non-negative integer", "such as n=0",
                 id="max_recompiles-type-float"),
    pytest.param("max_recompiles(True)", "n=True is not a non-negative integer", "such as n=0",
                 id="max_recompiles-type-bool"),
    pytest.param("max_recompiles(None)", "n=None is not a non-negative integer", "such as n=0",
                 id="max_recompiles-type-none"),
    pytest.param("max_recompiles(-1)", "n=-1 is not a non-negative integer", "such as n=0",
                 id="max_recompiles-range-negative"),
    pytest.param("max_recompiles(count=1)", "unexpected keyword argument 'count'", "the signature is max_recompiles(n=0)",
                 id="max_recompiles-unknown-argument"),
    pytest.param("max_recompiles(m=1)", "unexpected keyword argument 'm'; the signature is max_recompiles(n=0)",
                 "the signature is max_recompiles(n=0)", id="max_recompiles-unknown-argument-no-near-name"),
    pytest.param("max_recompiles(1, 2)", "too many positional arguments", "the signature is max_recompiles(n=0)",
                 id="max_recompiles-too-many-arguments"),
    # compile_cache(mode=..., rtol=..., atol=...)
    pytest.param("compile_cache(mode=1)", "mode=1 is not a known mode", "use mode='inprocess' or mode='subprocess'",
                 id="compile_cache-mode-type-int"),
    pytest.param("compile_cache(mode=None)", "mode=None is not a known mode", "use mode='inprocess' or",
                 id="compile_cache-mode-type-none"),
    pytest.param("compile_cache(mode='warm')", "mode='warm' is not a known mode", "use mode='inprocess' or",
                 id="compile_cache-mode-range-unknown"),
    pytest.param("compile_cache(mode='SUBPROCESS')", "mode='SUBPROCESS' is not a known mode", "use mode='inprocess'",
                 id="compile_cache-mode-range-case"),
    pytest.param("compile_cache(rtol='x')", "rtol='x' is not a non-negative number", "give a float such as rtol=1e-5",
                 id="compile_cache-rtol-type"),
    pytest.param("compile_cache(rtol=-1)", "rtol=-1 is not a non-negative number", "give a float such as rtol=1e-5",
                 id="compile_cache-rtol-range"),
    pytest.param("compile_cache('inprocess', atol='x')", "atol='x' is not a non-negative number",
                 "give a float such as atol=1e-5", id="compile_cache-atol-type"),
    pytest.param("compile_cache(atol=-0.5)", "atol=-0.5 is not a non-negative number", "give a float such as atol=1e-5",
                 id="compile_cache-atol-range"),
    pytest.param("compile_cache(bitwise=True)", "unexpected keyword argument 'bitwise'",
                 "the signature is compile_cache(mode='inprocess'|'subprocess', rtol=None, atol=None)",
                 id="compile_cache-unknown-argument"),
    pytest.param("compile_cache(mdoe='subprocess')", "unexpected keyword argument 'mdoe'; did you mean mode='subprocess'? "
                 "the signature is compile_cache(", "the signature is compile_cache(", id="compile_cache-near-argument"),
]  # fmt: skip


def _assert_collection_error(result: pytest.RunResult, nodeid: str, marker: str, named: str, fix: str) -> None:
    __tracebackhide__ = True
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors") == 1 and "passed" not in outcomes and "failed" not in outcomes, outcomes
    assert_no_traceback(result.stdout.str() + result.stderr.str())
    lines = result.stdout.lines
    # the error section's sentence; the short summary's "ERROR file - <the sentence, clipped>" repeats it
    said = [i for i, line in enumerate(lines) if "@pytest.mark." in line and not line.startswith("ERROR ")]
    assert len(said) == 1, result.stdout.str()
    line = lines[said[0]]
    assert line.startswith(f"{nodeid}: @pytest.mark.{marker}: "), line
    assert_one_sentence(line.removeprefix(f"{nodeid}: "), [named], fix)
    # the sentence is the whole error: the next line starts the next section
    assert lines[said[0] + 1][:1] in ("=", "_"), lines[said[0] + 1]


@pytest.mark.parametrize("call, named, fix", BAD_MARKERS)
def test_bad_marker_argument_is_a_one_sentence_collection_error(pytester, call, named, fix):
    pytester.makepyfile(
        test_marked=f"""
        import pytest

        @pytest.mark.{call}
        def test_bad():
            raise AssertionError("a test with a bad marker argument must not run")
        """
    )
    reports = pytester.path / "reports"
    reports.mkdir()
    result = pytester.runpytest(*FAST, f"--cudagraph-report={reports / 'run.json'}")
    _assert_collection_error(result, "test_marked.py::test_bad", call.split("(")[0], named, fix)
    # The interrupted session still writes a whole report: the refused test as an error
    # (so that a comparison does not call it vanished), and the exit status.
    report = load_report(reports / "run.json")
    assert list(report["tests"]) == ["test_marked.py::test_bad"]
    refused = report["tests"]["test_marked.py::test_bad"]
    assert refused["outcome"] == "error" and named in refused["extra"]["collection_error"]
    assert report["summary"]["exitstatus"] == pytest.ExitCode.INTERRUPTED
    assert_no_temporary_files(reports)


@pytest.mark.parametrize(
    "source, nodeid",
    [
        pytest.param(
            """
            import pytest

            @pytest.mark.max_recompiles(-2)
            class TestGroup:
                def test_one(self):
                    pass
            """,
            "test_marked.py::TestGroup::test_one",
            id="on-a-class",
        ),
        pytest.param(
            """
            import pytest

            pytestmark = pytest.mark.max_recompiles(-2)

            def test_one():
                pass
            """,
            "test_marked.py::test_one",
            id="on-the-module",
        ),
        pytest.param(
            """
            import pytest

            @pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.max_recompiles(-2))])
            def test_case(n):
                pass
            """,
            "test_marked.py::test_case[2]",
            id="on-one-parametrized-case",
        ),
    ],
)
def test_bad_marker_error_names_the_test_wherever_the_marker_is(pytester, source, nodeid):
    pytester.makepyfile(test_marked=source)
    result = pytester.runpytest(*FAST)
    _assert_collection_error(result, nodeid, "max_recompiles", "n=-2 is not a non-negative integer", "such as n=0")


# ----------------------------------------------------------------------------
# the rest of the session keeps working
# ----------------------------------------------------------------------------

GOOD_FILES = {
    "test_good_a": """
        import pytest

        @pytest.mark.max_recompiles(0)
        def test_watched():
            pass

        def test_plain():
            pass
        """,
    "test_good_b": """
        import pytest

        @pytest.mark.max_recompiles(1)
        def test_also_watched():
            pass
        """,
}
BAD_FILE = """
    import pytest

    @pytest.mark.cudagraph(capture_sizes=[0, 8])
    def test_bad():
        pass
    """
GOOD_RECORDS = ["test_good_a.py::test_watched", "test_good_b.py::test_also_watched"]


def test_bad_marker_in_one_file_leaves_the_other_files_run_and_reported(pytester):
    pytester.makepyfile(**GOOD_FILES, test_bad=BAD_FILE)
    reports = pytester.path / "reports"
    reports.mkdir()
    target = reports / "run.json"

    # pytest's own rule: a collection error stops the session before any test runs ...
    stopped = pytester.runpytest(*FAST, f"--cudagraph-report={target}")
    _assert_collection_error(
        stopped,
        "test_bad.py::test_bad",
        "cudagraph",
        "capture_sizes=[0, 8] must be a non-empty list of positive ints, but capture size 0 is not",
        "give sizes such as",
    )
    assert load_report(target)["summary"]["exitstatus"] == pytest.ExitCode.INTERRUPTED

    # ... and with --continue-on-collection-errors the good files run and are reported as usual.
    result = pytester.runpytest(*FAST, f"--cudagraph-report={target}", "--continue-on-collection-errors")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, errors=1)
    assert_no_traceback(result.stdout.str() + result.stderr.str())
    errors = [line for line in result.stdout.lines if "@pytest.mark." in line and not line.startswith("ERROR ")]
    assert errors == [
        "test_bad.py::test_bad: @pytest.mark.cudagraph: capture_sizes=[0, 8] must be a non-empty list of positive "
        "ints, but capture size 0 is not a positive integer; give sizes such as [1, 2, 4, 8]"
    ]
    report = load_report(target)
    assert sorted(report["tests"]) == sorted([*GOOD_RECORDS, "test_bad.py::test_bad"])
    assert {report["tests"][nodeid]["outcome"] for nodeid in GOOD_RECORDS} == {"passed"}
    assert report["tests"]["test_bad.py::test_bad"]["outcome"] == "error"
    assert report["summary"]["outcomes"] == {"passed": 2, "error": 1}
    assert report["summary"]["exitstatus"] == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"report written to {target}"])
    assert_no_temporary_files(reports)


def test_bad_marker_added_after_collection_errors_only_that_test(pytester):
    # Markers added by a conftest hook never went through collection: checked at setup instead.
    pytester.makeconftest(
        """
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                if item.name == "test_late":
                    item.add_marker(pytest.mark.max_recompiles(-1))
        """
    )
    pytester.makepyfile(
        test_mixed="""
        import pytest

        @pytest.mark.max_recompiles(0)
        def test_watched():
            pass

        def test_late():
            raise AssertionError("a test with a bad marker argument must not run")
        """
    )
    target = pytester.path / "run.json"
    result = pytester.runpytest(*FAST, f"--cudagraph-report={target}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    assert_no_traceback(result.stdout.str() + result.stderr.str())
    lines = result.stdout.lines
    said = [i for i, line in enumerate(lines) if line.startswith("test_mixed.py::test_late: @pytest.mark.")]
    assert len(said) == 1, result.stdout.str()
    assert_one_sentence(lines[said[0]], ["max_recompiles", "n=-1 is not a non-negative integer"], "such as n=0")
    assert lines[said[0] + 1][:1] in ("=", "_"), lines[said[0] + 1]
    report = load_report(target)
    assert report["tests"]["test_mixed.py::test_watched"]["outcome"] == "passed"


def test_report_path_taken_by_a_directory_during_the_run_leaves_no_temporary_file(pytester):
    # Writable at start; a test puts a directory at the path, so the rename at the end fails.
    reports = pytester.path / "reports"
    reports.mkdir()
    target = reports / "run.json"
    pytester.makepyfile(
        f"""
        import os

        def test_takes_the_report_path():
            os.mkdir({str(target)!r})
        """
    )
    result = pytester.runpytest(*FAST, f"--cudagraph-report={target}")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert_no_traceback(result.stdout.str() + result.stderr.str())
    said = [line for line in result.stdout.lines if "NOT written" in line]
    assert len(said) == 1, result.stdout.str()
    assert_one_sentence(said[0], ["cudagraph: the report was NOT written to", str(target)], "give another")
    assert sorted(p.name for p in reports.iterdir()) == ["run.json"]
    assert target.is_dir() and not any(target.iterdir())


# ----------------------------------------------------------------------------
# the pytest-cudagraph command given the same bad reports (exit 2)
# ----------------------------------------------------------------------------


def run_cli(*args: object) -> subprocess.CompletedProcess:
    script = shutil.which("pytest-cudagraph")
    command = [script] if script else [sys.executable, "-m", "pytest_cudagraph"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("command", ["compare-base", "compare-new", "show", "show-html"])
@pytest.mark.parametrize("kind", list(BAD_REPORTS))
def test_cli_refuses_a_bad_report_in_one_sentence_and_writes_nothing(tmp_path, kind, command):
    bad = make_bad_report(tmp_path / "in", kind)
    good = tmp_path / "good.json"
    good.write_text(_report_text())
    out = tmp_path / "out"
    out.mkdir()
    page = out / "page.html"
    args = {
        "compare-base": ("compare", bad, good),
        "compare-new": ("compare", good, bad),
        "show": ("show", bad),
        "show-html": ("show", bad, "--html", page),
    }[command]
    before = {path: tree(path) for path in (tmp_path / "in", good, out)}

    result = run_cli(*args)

    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert_no_traceback(result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"pytest-cudagraph: report {bad} "), lines[0]
    _, wrong, fix = BAD_REPORTS[kind]
    assert_one_sentence(lines[0].removeprefix("pytest-cudagraph: "), [str(bad), wrong], fix)
    for path, entries in before.items():
        assert tree(path) == entries, f"{path} was changed by a refused command"
