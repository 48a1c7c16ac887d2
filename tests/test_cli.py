"""The ``pytest-cudagraph`` command seen from a shell: exit codes, stderr, --json, show."""

from __future__ import annotations

import copy
import gc
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cache_key_samples import DECODE as KEY_DECODE
from cache_key_samples import DYNAMIC as KEY_DYNAMIC
from cache_key_samples import WARM as KEY_WARM
from cache_key_samples import key_report_pair, without_cache_keys
from sample_reports import ENV_2_13, MiB, modified, sample_report

from pytest_cudagraph.records.report import write_report
from pytest_cudagraph.tools.cli import main

DECODE = "tests/test_model.py::test_decode_graphs"
WARM_FILE = "tests/test_model.py"


def run_cli(*args: str, console_script: bool = False) -> subprocess.CompletedProcess:
    command = ["pytest-cudagraph"] if console_script else [sys.executable, "-m", "pytest_cudagraph"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture
def reports(tmp_path):
    base = write_report(tmp_path / "torch-2.13.json", sample_report())
    new_report = modified(
        sample_report(env={**ENV_2_13, "torch": "2.14.1+cu128"}), DECODE, "graphs.pool_bytes", 90 * MiB
    )
    new = write_report(tmp_path / "torch-2.14.json", new_report)
    same = write_report(tmp_path / "same.json", sample_report())
    return base, new, same


def test_identical_reports_exit_0(reports):
    base, _, same = reports
    result = run_cli("compare", base, same)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("no regression: 5 tests in both reports")
    assert result.stderr == ""


def test_regression_exits_1_naming_rule_and_env_change(reports):
    base, new, _ = reports
    result = run_cli("compare", base, new, console_script=True)
    assert result.returncode == 1
    out = result.stdout
    assert out.splitlines()[1].split() == ["torch", "2.13.0+cu128", "→", "2.14.1+cu128"]
    assert f"{DECODE}  REGRESSED (pool)" in out
    assert out.splitlines()[-1].startswith("REGRESSION:") and "pool 1" in out


def test_fail_on_selects_rules(reports):
    base, new, _ = reports
    assert run_cli("compare", base, new, "--fail-on", "recompiles,outcome").returncode == 0
    assert run_cli("compare", base, new, "--fail-on", "none", "--fail-on", "pool").returncode == 1
    assert run_cli("compare", base, new, "--pool-threshold", "60%").returncode == 0
    bad = run_cli("compare", base, new, "--fail-on", "poool")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "pytest-cudagraph: unknown rule 'poool' for --fail-on; choose from outcome, skipped, recompiles, recompile-limit, "
        "cache-miss, graphs, pool, numerics, graph-breaks, vanished, compile-time, capture-time, startup-time, "
        "graph-memory, compile-instructions, all, default or none"
    ]


def test_json_output_for_machines(reports):
    base, new, _ = reports
    result = run_cli("compare", base, new, "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["regressed"] is True
    assert data["env"] == {"torch": {"base": "2.13.0+cu128", "new": "2.14.1+cu128"}}
    assert data["regressions"][0]["nodeid"] == DECODE
    assert data["regressions"][0]["rule"] == "pool"


def _bad_inputs(tmp_path):
    good = sample_report()
    text = json.dumps(good)
    (tmp_path / "truncated.json").write_text(text[: len(text) // 2])
    (tmp_path / "schema4.json").write_text(json.dumps({**good, "schema": "pytest-cudagraph/4"}))
    (tmp_path / "junit.xml").write_text('<?xml version="1.0"?><testsuites/>')
    return {
        "truncated": (tmp_path / "truncated.json", "is not valid JSON"),
        "wrong schema": (tmp_path / "schema4.json", "has schema 'pytest-cudagraph/4'"),
        "not json": (tmp_path / "junit.xml", "is not valid JSON"),
        "missing": (tmp_path / "nowhere.json", "does not exist"),
        "directory": (tmp_path, "is a directory"),
    }


@pytest.mark.parametrize("kind", ["truncated", "wrong schema", "not json", "missing", "directory"])
@pytest.mark.parametrize("side", ["base", "new"])
def test_unreadable_input_exits_2_with_one_line_and_no_traceback(reports, tmp_path, kind, side):
    good = reports[0]
    bad, fragment = _bad_inputs(tmp_path)[kind]
    args = ("compare", bad, good) if side == "base" else ("compare", good, bad)
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"pytest-cudagraph: report {bad} ")
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr


def test_compare_needs_no_torch(reports, tmp_path):
    base, new, _ = reports
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        from pytest_cudagraph.tools.cli import main
        code = main(["compare", {str(base)!r}, {str(new)!r}])
        main(["show", {str(base)!r}, "--html", {str(tmp_path / "page.html")!r}])
        sys.exit(code)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "REGRESSED (pool)" in result.stdout
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")


def test_show_prints_the_table_and_writes_html(reports, tmp_path):
    base, _, _ = reports
    result = run_cli("show", base)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["test", "graphs"]  # every row passed: no outcome column
    # one line per test, under a line naming its file
    at = next(i for i, line in enumerate(lines) if line.startswith("  " + DECODE.partition("::")[2] + " "))
    assert DECODE.partition("::")[0] in lines[:at]  # under its file's line
    assert lines[at].split() == [
        DECODE.partition("::")[2],
        "4",
        "(1-8)",
        "60.0M",
        "/",
        "42.0M",
        "1.43x",
        "0",
        # no compile column: the sample report has no compile time, and an empty column is left out
        "h=1",
        "h=1",
        "l=3",
    ]
    out = tmp_path / "page.html"
    result = run_cli("show", base, "--html", out)
    assert result.returncode == 0 and result.stdout == f"wrote {out}\n"
    assert "<svg" in out.read_text()


def test_show_reports_an_unwritable_output_in_one_line(reports, tmp_path):
    base, _, _ = reports
    result = run_cli("show", base, "--html", tmp_path / "no" / "such" / "dir" / "page.html")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "cannot write" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("compare", "--help"),
        ("explain", "--help"),
        ("show", "--help"),
        ("merge", "--help"),
        ("durations", "--help"),
    ],
)
def test_help_of_every_command(args):
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: pytest-cudagraph")


def test_numerics_limits_are_options(tmp_path):
    base = write_report(tmp_path / "a.json", sample_report())
    new = write_report(tmp_path / "b.json", modified(sample_report(), DECODE, "graphs.max_abs_err", 1.0e-6))
    assert run_cli("compare", base, new).returncode == 0  # 2.4e-7 -> 1e-6 is within doubled plus 1e-6
    strict = run_cli("compare", base, new, "--numerics-floor", "0", "--numerics-growth", "50")
    assert strict.returncode == 1 and "REGRESSED (numerics)" in strict.stdout


@pytest.mark.parametrize("which", ["compare", "show", "missing"])
def test_the_command_gives_the_garbage_collector_back(reports, which):
    """compare and show run with the cyclic collector paused (two reports are millions of objects), then resume it."""
    base, new, _ = reports
    args = {"compare": ["compare", base, new], "show": ["show", base], "missing": ["show", base.parent / "nope.json"]}
    assert gc.isenabled()
    code = main([str(a) for a in args[which]], stdout=io.StringIO(), stderr=io.StringIO())
    assert code == {"compare": 1, "show": 0, "missing": 2}[which]
    assert gc.isenabled()


def test_merge_and_durations_need_no_torch(tmp_path):
    from test_shards import three_shards

    shards = [str(write_report(tmp_path / name, report)) for name, report in three_shards()]
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        from pytest_cudagraph.tools.cli import main
        merged = main(["merge", *{shards!r}, "-o", {str(tmp_path / "all.json")!r}])
        durations = main(["durations", {str(tmp_path / "all.json")!r}, "-o", {str(tmp_path / "durations.json")!r}])
        sys.exit(merged or durations)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "all.json").read_text())["summary"]["shard"]["merged"] == [1, 2, 3]
    assert len(json.loads((tmp_path / "durations.json").read_text())) == 12


# ----------------------------------------------------------------------------
# explain: why cache keys differ
# ----------------------------------------------------------------------------


@pytest.fixture
def key_reports(tmp_path):
    base, new = key_report_pair()
    return write_report(tmp_path / "torch-2.13.json", base), write_report(tmp_path / "torch-2.14.json", new)


def test_explain_prints_every_differing_component_of_every_test_whose_keys_differ(key_reports):
    base, new = key_reports
    result = run_cli("explain", base, new, console_script=True)
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "cache keys of torch-2.13.json -> torch-2.14.json",
        "run-wide (7 components, shared by every lookup of a layer):",
        "  [fxgraph, aot_autograd] torch_version: 2.13.0+cu128 -> 2.14.1+cu128",
    ]
    assert "  [fxgraph] inductor_config[compile_on_one_rank]: (absent) -> False" in lines
    for nodeid in (KEY_DECODE, KEY_DYNAMIC, KEY_WARM):
        assert nodeid in lines
    warm = lines[lines.index(KEY_WARM) :]
    head = warm.index("  fxgraph graph 1 (warm): hit -> miss")
    assert warm[head + 1].startswith("    key f") and " -> f" in warm[head + 1]
    assert warm[head + 2 :][:3] == [
        "    torch-2.14.json explained its miss against the cold pass: inductor_config[max_autotune]: False -> True",
        "    inductor_config[max_autotune]: False -> True",
        "    and the 6 run-wide components above",
    ]
    dynamic = lines[lines.index(KEY_DYNAMIC) :]
    assert any(
        line.startswith("      base: TensorMetadata(dtype=torch.float32, shape=torch.Size([4, 64])") for line in dynamic
    )
    assert any(line.startswith("  only in torch-2.14.json: fxgraph graph 2: miss, key f") for line in dynamic)
    # the test whose lookups did not change is not explained
    assert "tests/test_model.py::test_prefill_no_recompile" not in result.stdout


def test_explain_one_test_by_a_part_of_its_node_id(key_reports):
    base, new = key_reports
    result = run_cli("explain", base, new, "dynamic")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[lines.index("") + 1] == KEY_DYNAMIC
    assert KEY_WARM not in result.stdout and KEY_DECODE not in result.stdout
    assert run_cli("explain", base, new, KEY_DYNAMIC).stdout == result.stdout


def test_explain_one_report_lists_its_misses_with_what_the_plugin_found(key_reports):
    _, new = key_reports
    result = run_cli("explain", new)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "cache lookups of torch-2.14.json"
    warm = lines[lines.index(KEY_WARM) :]
    at = next(i for i, line in enumerate(warm) if line.startswith("  fxgraph graph 1 (warm): miss, key f"))
    assert warm[at + 1 : at + 3] == [
        "    compared with the cold pass:",
        "      inductor_config[max_autotune]: False -> True",
    ]
    assert "  note: torch 2.14.1 records no AOTAutograd components without DEBUG logging" in warm
    one = run_cli("explain", new, "warm_start")
    assert one.returncode == 0 and KEY_DECODE not in one.stdout and KEY_WARM in one.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("{base}", "{new}", "nothing_like_it"),
            "no test in {base} and {new} matches 'nothing_like_it'; give its node "
            "id or a part of it that only it holds",
        ),
        (("{base}", "{new}", "test_model"), "'test_model' matches 4 tests in {base} and {new} ("),
        (
            ("{base}", "{missing}"),
            "report {missing} does not exist; give the path of a file written by --cudagraph-report",
        ),
        (("{missing}", "{new}", "decode"), "report {missing} does not exist"),
        (("{base}", "{new}", "a", "b"), "explain takes at most three arguments (BASE.json NEW.json TEST), got 4; "),
        (("{new}", "nothing_like_it"), "no test in {new} matches 'nothing_like_it'"),
    ],
    ids=["no match", "several", "missing new", "missing base", "four", "one report, no match"],
)
def test_explain_refuses_bad_input_in_one_line(key_reports, tmp_path, args, message):
    base, new = key_reports
    names = {"base": base, "new": new, "missing": tmp_path / "nowhere.json"}
    result = run_cli("explain", *(a.format(**names) for a in args))
    assert result.returncode == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("pytest-cudagraph: " + message.format(**names))


def test_explain_refuses_a_test_only_one_report_holds(key_reports, tmp_path):
    base, _ = key_reports
    other = key_report_pair()[1]
    del other["tests"][KEY_WARM]
    new = write_report(tmp_path / "fewer.json", other)
    result = run_cli("explain", base, new, KEY_WARM)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"pytest-cudagraph: test {KEY_WARM} is in {base} only, so there is nothing to pair its lookups with; "
        f"explain it alone with pytest-cudagraph explain {base} TEST"
    ]


def test_explain_says_so_when_no_report_records_cache_keys(reports):
    base, new, _ = reports
    result = run_cli("explain", base, new)
    assert result.returncode == 0
    assert (
        result.stdout == "no test in torch-2.13.json or torch-2.14.json recorded a cache lookup (cache_keys): "
        "nothing to explain\n"
    )
    one = run_cli("explain", base, new, "decode")
    assert one.returncode == 0
    assert one.stdout == f"{DECODE}: no cache lookups recorded (no cache_keys) in torch-2.13.json or torch-2.14.json\n"


def test_explain_notes_a_report_of_an_earlier_plugin(key_reports, tmp_path):
    _, new = key_reports
    older = write_report(tmp_path / "older.json", without_cache_keys(key_report_pair()[0]))
    result = run_cli("explain", older, new, "decode")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == (
        "note: older.json records no cache lookups (an earlier plugin version wrote it, or nothing compiled with "
        "Inductor), so every lookup of torch-2.14.json shows as unpaired"
    )
    assert "  only in torch-2.14.json: fxgraph graph 1: miss, key f" in result.stdout


def test_compare_points_at_explain_and_shows_the_key_diff(key_reports):
    base, new = key_reports
    result = run_cli("compare", base, new)
    assert result.returncode == 1  # the cache-miss rule, as without cache keys
    # the command the line ends with stays whole, on a line of its own where the line is too long
    line = f"  ... and 2 more components: pytest-cudagraph explain {base} {new}"
    if len(line) <= 120:
        assert line in result.stdout.splitlines()
    else:
        at = result.stdout.splitlines().index("  ... and 2 more components:")
        assert result.stdout.splitlines()[at + 1] == f"    pytest-cudagraph explain {base} {new}"
    assert "    fxgraph graph 1 (warm): hit -> miss; inductor_config[max_autotune]: False -> True" in result.stdout
    data = json.loads(run_cli("compare", base, new, "--json").stdout)
    assert data["cache_keys"]["run_wide"][0]["name"] == "torch_version"


def test_show_prints_each_tests_lookups_explained_misses_first(key_reports):
    _, new = key_reports
    result = run_cli("show", new)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(
        "cache lookups (a miss or bypass with a reason under why is in capitals (MISS, BYPASS); "
        "key: its first 12 characters)"
    )
    assert lines[start + 1] == f"  {KEY_WARM}"  # the test with an explained miss comes first
    assert lines[start + 2].split() == ["layer", "pass", "graph", "outcome", "key", "why"]
    warm_row = lines[start + 5].split()
    assert warm_row[:4] == ["fxgraph", "warm", "1", "MISS"] and len(warm_row[4]) == 12
    assert " ".join(warm_row[5:]) == "inductor_config[max_autotune]: False -> True (vs the cold pass)"
    assert lines[start + 7] == "    note: torch 2.14.1 records no AOTAutograd components without DEBUG logging"


def test_show_speaks_of_capitals_only_where_its_tables_show_some(key_reports):
    base, _ = key_reports  # every lookup a hit or a cold miss with nothing to explain: all in lowercase
    lines = run_cli("show", base).stdout.splitlines()
    assert "cache lookups (key: its first 12 characters)" in lines
    assert not [line for line in lines if "capitals" in line or "MISS" in line or "BYPASS" in line]


def test_explain_needs_no_torch(key_reports):
    base, new = key_reports
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        from pytest_cudagraph.tools.cli import main
        sys.exit(main(["explain", {str(base)!r}, {str(new)!r}]) or main(["explain", {str(new)!r}]))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "run-wide (7 components" in result.stdout


def test_show_prints_where_and_why_under_the_table(tmp_path):
    """`show` prints each test's recompile call sites and guards, cudagraph share, uncaptured pieces and ranks."""
    from sample_reports import where_and_why_report

    path = tmp_path / "report.json"
    path.write_text(json.dumps(where_and_why_report()))
    result = run_cli("show", path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "called from tests/test_x.py:10 `out = model(x)`" in out
    assert "2/3 regions ran as CUDA graphs" in out
    # the table comes first, the details after it
    assert out.index("test ") < out.index("called from")


# ----------------------------------------------------------------------------
# what a report holds cannot drive the terminal; the page never replaces the report
# ----------------------------------------------------------------------------

HIDDEN = "\x1b[8m"  # SGR 8: what follows is invisible in a terminal


def _with_nodeid(report: dict, old: str, new: str) -> dict:
    report = copy.deepcopy(report)
    report["tests"] = {new if nodeid == old else nodeid: record for nodeid, record in report["tests"].items()}
    return report


def test_no_command_prints_a_control_character_from_a_report(tmp_path):
    sneaky = f"tests/test_model.py::test_decode{HIDDEN}\r\x9b2J\u202e"
    env = {**ENV_2_13, "torch": f"2.14.1{HIDDEN}"}
    base = write_report(tmp_path / "base.json", _with_nodeid(sample_report(), DECODE, sneaky))
    grown = modified(sample_report(env=env), DECODE, "graphs.pool_bytes", 90 * MiB)
    grown = modified(grown, DECODE, "failure", {"when": "call", "message": f"boom{HIDDEN}\rAll fine"})
    new = write_report(tmp_path / "new.json", _with_nodeid(grown, DECODE, sneaky))
    keys_base, keys_new = key_report_pair()
    key_base = write_report(tmp_path / "kb.json", _with_nodeid(keys_base, KEY_WARM, KEY_WARM + HIDDEN))
    key_new = write_report(tmp_path / "kn.json", _with_nodeid(keys_new, KEY_WARM, KEY_WARM + HIDDEN))
    runs = {
        "compare": run_cli("compare", base, new, "--fail-on", "all"),
        "compare --timings": run_cli("compare", base, new, "--timings"),
        "show": run_cli("show", new),
        "explain": run_cli("explain", key_base, key_new),
        "explain one": run_cli("explain", key_new),
    }
    for name, result in runs.items():
        for stream in (result.stdout, result.stderr):
            assert not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in stream), name
            assert "\u202e" not in stream, name
    assert runs["compare"].returncode == 1
    assert "test_decode\\x1b[8m\\x0d\\x9b2J\\u202e" in runs["compare"].stdout
    assert runs["compare"].stdout.splitlines()[-1].startswith("REGRESSION:")
    assert "2.14.1\\x1b[8m" in runs["compare"].stdout
    assert "test_decode\\x1b[8m" in runs["show"].stdout
    assert f"{KEY_WARM}\\x1b[8m" in runs["explain"].stdout and f"{KEY_WARM}\\x1b[8m" in runs["explain one"].stdout


def test_an_error_line_naming_a_test_from_a_report_is_escaped_too(tmp_path):
    from test_shards import SUITE_IDS, chunks, shard_report

    first, second, third = chunks(SUITE_IDS, 3)
    shards = [shard_report(1, 3, first), shard_report(2, 3, second), shard_report(3, 3, third)]
    for shard in shards[1:]:  # one test, named with an escape sequence, ran in two shards
        shard["durations"][f"{third[0]}{HIDDEN}"] = 1.0
    paths = [write_report(tmp_path / f"s{group}.json", shard) for group, shard in enumerate(shards, start=1)]
    refused = run_cli("merge", *paths, "-o", tmp_path / "all.json")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(f"pytest-cudagraph: merge refused: {third[0]}\\x1b[8m ran in {paths[1]}")
    assert "\x1b" not in refused.stderr


def test_show_never_writes_the_page_over_the_report(reports, tmp_path):
    base, _, _ = reports
    before = base.read_bytes()
    (tmp_path / "link.json").symlink_to(base)
    os.link(base, tmp_path / "hard.json")
    for page in (base, tmp_path / "link.json", tmp_path / "." / base.name, tmp_path / "hard.json"):
        result = run_cli("show", base, "--html", page)
        assert result.returncode == 2, result.stdout
        assert result.stdout == "" and result.stderr.count("\n") == 1
        assert result.stderr == (
            f"pytest-cudagraph: --html {page} is the report {base}, which writing the page would overwrite; "
            f"give another path for the page, such as {base.with_suffix('.html').name}\n"
        )
    linked = run_cli("show", tmp_path / "link.json", "--html", base)
    assert linked.returncode == 2 and "is the report" in linked.stderr
    assert base.read_bytes() == before


# ----------------------------------------------------------------------------
# small refusals: one line, exit 2
# ----------------------------------------------------------------------------


def test_startup_refuses_a_keep_directory_that_is_not_there_before_any_run(tmp_path):
    (tmp_path / "a_file").write_text("")
    cases = {
        tmp_path / "missing": "does not exist; give an existing directory to keep the runs in",
        tmp_path / "a_file": "is not a directory; give an existing directory to keep the runs in",
    }
    for keep, words in cases.items():
        result = run_cli("startup", "test_x.py::t", "--runs", "1", "--report", tmp_path / "r.json", "--keep", keep)
        assert result.returncode == 2, result.stdout
        assert result.stderr == f"pytest-cudagraph: --keep {keep} {words}\n"
        assert result.stdout == "" and not (tmp_path / "r.json").exists()


def test_explain_takes_a_test_file_for_a_test_not_a_report(key_reports, tmp_path):
    _, new = key_reports
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_model.py").write_text("def test_x():\n    pass\n")

    def explain(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "pytest_cudagraph", "explain", new.name, *args]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)

    several = explain("tests/test_model.py")
    assert several.returncode == 2 and several.stdout == ""
    assert several.stderr.startswith(f"pytest-cudagraph: 'tests/test_model.py' matches 4 tests in {new.name} ("), (
        several.stderr
    )
    assert several.stderr.endswith("); give more of the node id\n") and "not valid JSON" not in several.stderr
    one = explain(f"{WARM_FILE}::test_warm_start")
    assert one.returncode == 0, one.stderr
    assert KEY_WARM in one.stdout and KEY_DECODE not in one.stdout


LIMIT_OPTIONS = (
    "--pool-threshold",
    "--numerics-growth",
    "--numerics-floor",
    "--time-threshold",
    "--time-floor",
    "--memory-threshold",
    "--memory-floor",
    "--instructions-threshold",
)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
@pytest.mark.parametrize("option", LIMIT_OPTIONS)
def test_a_limit_that_is_not_finite_is_refused_with_exit_2(reports, option, value, capsys):
    base, new, _ = reports
    with pytest.raises(SystemExit) as stopped:
        main(["compare", str(base), str(new), f"{option}={value}"])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"argument {option}: '{value}' is " in err
    assert "is not a finite number, so no growth could exceed it" in err


@pytest.mark.parametrize("limit", ["pool_threshold", "numerics_growth", "numerics_floor", "time_threshold"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_compare_reports_refuses_a_limit_that_turns_its_rule_off(limit, value):
    from pytest_cudagraph.errors import MisuseError
    from pytest_cudagraph.tools.compare import compare_reports

    with pytest.raises(MisuseError, match=f"compare_reports\\({limit}=.*a limit must be a finite number >= 0"):
        compare_reports(sample_report(), sample_report(), **{limit: value})


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_schema_to_a_directory_or_a_full_device_is_one_line_not_a_bug(tmp_path):
    """Exit 2 naming the path and the OS's words; never "a bug in pytest-cudagraph"."""
    cases = {
        ("-o", str(tmp_path)): f"pytest-cudagraph: -o {tmp_path} is a directory; give a file to write the schema to",
        ("-o", "/dev/full"): "pytest-cudagraph: cannot write /dev/full (No space left on device [ENOSPC])",
    }
    for args, words in cases.items():
        result = run_cli("schema", *args)
        assert result.returncode == 2, result.stdout
        assert result.stderr.startswith(words) and result.stderr.count("\n") == 1, result.stderr
        assert "bug" not in result.stderr and result.stdout == ""
    assert list(tmp_path.iterdir()) == []
    for command in (["schema"], ["show", str(write_report(tmp_path / "r.json", sample_report()))]):
        with open("/dev/full", "w") as full:
            result = subprocess.run(
                [sys.executable, "-m", "pytest_cudagraph", *command],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        assert result.returncode == 2
        assert result.stderr == "pytest-cudagraph: cannot write to standard output (No space left on device [ENOSPC])\n"


def test_startup_refuses_an_output_that_is_an_input_or_the_other_output_before_any_run(tmp_path):
    test_file = tmp_path / "test_fast.py"
    test_file.write_text("def test_x():\n    pass\n")
    (tmp_path / "link.py").symlink_to(test_file)
    node = "test_fast.py::test_x"
    cases = {
        ("--report", "test_fast.py"): "--report test_fast.py is the test file test_fast.py the benchmark measures",
        ("--report", "./link.py"): "--report ./link.py is the test file test_fast.py the benchmark measures",
        ("--instructions", "--write-expected", "test_fast.py", "--report", "r.json"): (
            "--write-expected test_fast.py is the test file test_fast.py the benchmark measures"
        ),
        ("--instructions", "--write-expected", "same.out", "--report", "./same.out"): (
            "--write-expected same.out is the --report path ./same.out: one file cannot hold both"
        ),
    }
    for args, words in cases.items():
        result = subprocess.run(
            [sys.executable, "-m", "pytest_cudagraph", "startup", node, "--runs", "1", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.startswith(f"pytest-cudagraph: {words}") and result.stderr.count("\n") == 1
        assert result.stdout == ""
    assert test_file.read_text() == "def test_x():\n    pass\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.py", "test_fast.py"]


# ----------------------------------------------------------------------------
# the command's own conventions
# ----------------------------------------------------------------------------


def test_version_prints_the_plugins_version_and_exits_0(capsys):
    from pytest_cudagraph import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"pytest-cudagraph {__version__}\n"


def test_the_help_says_what_every_command_does_and_each_usage_line_what_it_takes(capsys):
    from pytest_cudagraph.tools.cli_arguments import build_parser

    top = build_parser().format_help()
    assert "Compare or show" not in top and "start-up benchmark, which runs tests" in " ".join(top.split())
    for command, usage in (
        ("explain", "usage: pytest-cudagraph explain [-h] BASE.json [NEW.json] [TEST]\n"),
        ("compare", "BASE.json|BASE.csv NEW.json\n"),
    ):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert text.split("\n\n")[0].endswith(usage.rstrip("\n")) or usage in text, text


def test_the_schema_id_is_a_name_the_reference_gives():
    from pytest_cudagraph.records.json_schema import report_json_schema

    schema_id = report_json_schema()["$id"]
    assert schema_id == "urn:pytest-cudagraph:report:3"
    assert schema_id in (Path(__file__).parent.parent / "docs" / "reference.md").read_text()


# ----------------------------------------------------------------------------
# wording: compare's rows and help, explain's misses
# ----------------------------------------------------------------------------


def test_compare_counts_one_item_in_the_singular_and_names_the_outcome_once():
    from pytest_cudagraph.tools.compare import compare_reports

    base = sample_report()
    nodeid = next(iter(base["tests"]))
    new = copy.deepcopy(base)
    base["tests"][nodeid]["extra"] = {"notes": [{"a": 1}, {"a": 2}]}
    new["tests"][nodeid]["extra"] = {"notes": [{"a": 1}]}
    new["tests"][nodeid]["outcome"] = "failed"
    base["tests"][nodeid]["outcome"] = "passed"
    text = compare_reports(base, new).format_text()
    assert "[2 items]" in text and "[1 item]" in text and "[1 items]" not in text
    assert "outcome: passed -> failed" in text and "outcome passed -> failed" not in text


def test_compare_help_keeps_every_rule_name_whole_at_80_columns(monkeypatch, capsys):
    from pytest_cudagraph.tools.compare_rules import ALL_RULES

    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if line.rstrip().endswith("-") and line.strip() != "-"]
    words = set(out.replace(",", " ").split())
    assert set(ALL_RULES) <= words


def test_explain_calls_a_cold_pass_miss_expected_not_unexplained():
    from pytest_cudagraph.records.report import build_report
    from pytest_cudagraph.render.key_text import one_run_lines

    lookups = [
        {"layer": "fxgraph", "outcome": "miss", "key": "k1", "pass": "cold", "graph": 1},
        {"layer": "fxgraph", "outcome": "miss", "key": "k2", "graph": 1},
        {"layer": "fxgraph", "outcome": "miss", "key": "k3", "pass": "warm", "graph": 1},
    ]
    record = {"outcome": "passed", "cache_keys": {"lookups": lookups}}
    report = build_report(dict(ENV_2_13), {"t.py::test": record}, exitstatus=0)
    lines = one_run_lines(report, "r.json", "t.py::test")
    assert "    expected: the cold pass starts from an empty cache" in lines
    assert "    a first compile of this graph: no earlier lookup to compare it with" in lines
    assert "    nothing explained it: no lookup before the warm pass to compare it with" in lines
