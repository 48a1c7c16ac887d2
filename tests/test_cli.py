"""The ``pytest-cudagraph`` command seen from a shell: exit codes, stderr, --json, show."""

from __future__ import annotations

import gc
import io
import json
import subprocess
import sys
import textwrap

import pytest
from cache_key_samples import DECODE as KEY_DECODE
from cache_key_samples import DYNAMIC as KEY_DYNAMIC
from cache_key_samples import WARM as KEY_WARM
from cache_key_samples import key_report_pair, without_cache_keys
from sample_reports import ENV_2_13, MiB, modified, sample_report

from pytest_cudagraph.cli import main
from pytest_cudagraph.report import write_report

DECODE = "tests/test_model.py::test_decode_graphs"


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
        "pytest-cudagraph: unknown rule 'poool' for --fail-on; choose from outcome, recompiles, recompile-limit, "
        "cache-miss, graphs, pool, numerics, graph-breaks, vanished, compile-time, capture-time, startup-time, "
        "graph-memory, all, default or none"
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
    (tmp_path / "schema2.json").write_text(json.dumps({**good, "schema": "pytest-cudagraph/2"}))
    (tmp_path / "junit.xml").write_text('<?xml version="1.0"?><testsuites/>')
    return {
        "truncated": (tmp_path / "truncated.json", "is not valid JSON"),
        "wrong schema": (tmp_path / "schema2.json", "has schema 'pytest-cudagraph/2'"),
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
        from pytest_cudagraph.cli import main
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
    assert lines[0].split()[:3] == ["test", "outcome", "graphs"]
    decode = next(line for line in lines if line.startswith(DECODE))
    assert decode.split() == [
        DECODE,
        "passed",
        "4",
        "(1-8)",
        "60.0M",
        "/",
        "42.0M",
        "1.43x",
        "0",
        "-",  # compile time: the sample report has none
        "1h/0m",
        "1h/0m",
        "0c/3l",
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
        from pytest_cudagraph.cli import main
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
    assert f"  ... and 2 more components: pytest-cudagraph explain {base} {new}" in result.stdout
    assert "    fxgraph graph 1 (warm): hit -> miss; inductor_config[max_autotune]: False -> True" in result.stdout
    data = json.loads(run_cli("compare", base, new, "--json").stdout)
    assert data["cache_keys"]["run_wide"][0]["name"] == "torch_version"


def test_show_prints_each_tests_lookups_explained_misses_first(key_reports):
    _, new = key_reports
    result = run_cli("show", new)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(
        "cache lookups (MISS, BYPASS in capitals: one with a reason under why; key: its first 12 characters)"
    )
    assert lines[start + 1] == f"  {KEY_WARM}"  # the test with an explained miss comes first
    assert lines[start + 2].split() == ["layer", "pass", "graph", "outcome", "key", "why"]
    warm_row = lines[start + 5].split()
    assert warm_row[:4] == ["fxgraph", "warm", "1", "MISS"] and len(warm_row[4]) == 12
    assert " ".join(warm_row[5:]) == "inductor_config[max_autotune]: False -> True (vs the cold pass)"
    assert lines[start + 7] == "    note: torch 2.14.1 records no AOTAutograd components without DEBUG logging"


def test_explain_needs_no_torch(key_reports):
    base, new = key_reports
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        from pytest_cudagraph.cli import main
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
