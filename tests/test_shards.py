"""A suite split with pytest-split: shard reports say which shard they are, and ``merge`` makes the whole run's report.

The library tests build shard reports by hand (``build_report`` with a ``shard``
run field, as the plugin writes them); the plugin tests run a small suite in a
subprocess with ``--splits 3 --group I`` (bounded by a timeout) and merge the
three reports back into what the unsplit run wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_reports import ENV_2_13, graph_record, recompile_record

from pytest_cudagraph.errors import ReportError
from pytest_cudagraph.records.report import build_report, load_report, summarize, write_report
from pytest_cudagraph.render.shard_text import describe_shard
from pytest_cudagraph.tools.cli import main as cli_main
from pytest_cudagraph.tools.merge import (
    BUILD_ENV_FIELDS,
    durations_file_text,
    durations_from_reports,
    merge_shard_reports,
    worst_exitstatus,
)

# ----------------------------------------------------------------------------
# shard reports written by hand
# ----------------------------------------------------------------------------

# a suite of twelve tests; the even ones used the plugin and have records, the odd ones only durations
SUITE_IDS = [f"tests/test_model.py::test_{i:02d}" for i in range(12)]
RECORDS = {
    nodeid: (graph_record() if i % 4 == 0 else recompile_record(i % 3))
    for i, nodeid in enumerate(SUITE_IDS)
    if i % 2 == 0
}
DURATIONS = {nodeid: round(0.125 * (i + 1), 3) for i, nodeid in enumerate(SUITE_IDS)}
# the suite's digest as the plugin records it (plugin/shards.py: node ids and selecting arguments)
SUITE_DIGEST = "5e1f" * 16


def shard_report(
    group: int,
    splits: int,
    ids: list[str],
    *,
    suite: int = len(SUITE_IDS),
    env: dict[str, Any] | None = None,
    run: dict[str, Any] | None = None,
    exitstatus: int | None = None,
    algorithm: str = "duration_based_chunks",
    records: dict[str, Any] | None = None,
    suite_digest: str | None = SUITE_DIGEST,
) -> dict[str, Any]:
    """The report the plugin writes for ``pytest --splits SPLITS --group GROUP`` that ran ``ids`` of ``suite`` tests."""
    shard = {
        "group": group,
        "splits": splits,
        "algorithm": algorithm,
        "durations_path": ".test_durations",
        "selected": len(ids),
        "deselected": suite - len(ids),
    }
    if suite_digest is not None:
        shard["suite_digest"] = suite_digest
    facts = {
        "complete": True,
        "incomplete_reasons": [],
        "not_run": [],
        "not_run_count": 0,
        "deselected": suite - len(ids),
        "shard": shard,
        **(run or {}),
    }
    records = RECORDS if records is None else records
    return build_report(
        env or dict(ENV_2_13),
        {nodeid: records[nodeid] for nodeid in ids if nodeid in records},
        exitstatus=(0 if ids else 5) if exitstatus is None else exitstatus,
        created=f"2025-01-31T12:0{group % 10}:00+00:00",
        run=facts,
        durations={nodeid: DURATIONS[nodeid] for nodeid in ids},
    )


def chunks(ids: list[str], splits: int) -> list[list[str]]:
    """``ids`` cut into ``splits`` consecutive groups, as duration_based_chunks does with equal durations."""
    size = -(-len(ids) // splits)
    return [ids[i * size : (i + 1) * size] for i in range(splits)]


def three_shards(**overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"shard-{group}.json", shard_report(group, 3, ids, **overrides))
        for group, ids in enumerate(chunks(SUITE_IDS, 3), start=1)
    ]


def totals(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary's figures computed from the records (what merging computes again)."""
    return {key: summary[key] for key in summarize({})}


# ----------------------------------------------------------------------------
# merging
# ----------------------------------------------------------------------------


def test_merging_every_shard_keeps_every_record_once_and_recomputes_the_summary():
    merged = merge_shard_reports(three_shards())
    assert merged["tests"] == RECORDS
    assert merged["durations"] == DURATIONS
    summary = merged["summary"]
    assert totals(summary) == summarize(RECORDS)
    assert summary["complete"] is True and summary["incomplete_reasons"] == [] and summary["not_run_count"] == 0
    assert summary["exitstatus"] == 0
    assert summary["deselected"] == 0  # pytest-split's deselection is no test left out of the whole run
    shard = summary["shard"]
    assert {key: shard[key] for key in ("splits", "merged", "algorithm", "selected")} == {
        "splits": 3,
        "merged": [1, 2, 3],
        "algorithm": "duration_based_chunks",
        "selected": 12,
    }
    assert [(s["group"], s["file"], s["selected"], s["deselected"], s["tests"]) for s in shard["sources"]] == [
        (1, "shard-1.json", 4, 8, 2),
        (2, "shard-2.json", 4, 8, 2),
        (3, "shard-3.json", 4, 8, 2),
    ]
    assert merged["env"] == ENV_2_13


def test_the_merged_report_is_a_valid_report_that_compare_and_show_read(tmp_path, capsys):
    merged = write_report(tmp_path / "all.json", merge_shard_reports(three_shards()))
    assert load_report(merged)["summary"]["shard"]["merged"] == [1, 2, 3]
    unsplit = write_report(
        tmp_path / "unsplit.json",
        build_report(
            ENV_2_13,
            RECORDS,
            exitstatus=0,
            run={"complete": True, "incomplete_reasons": [], "not_run": [], "not_run_count": 0, "deselected": 0},
            durations=DURATIONS,
        ),
    )
    assert cli_main(["compare", str(unsplit), str(merged)]) == 0
    assert "no regression: 6 tests in both reports" in capsys.readouterr().out
    assert cli_main(["show", str(merged), "--html", str(tmp_path / "all.html")]) == 0
    page = (tmp_path / "all.html").read_text()
    assert all(nodeid in page for nodeid in RECORDS)


@settings(max_examples=60, deadline=None)
@given(
    splits=st.integers(1, 4),
    data=st.data(),
)
def test_any_partition_of_a_suite_into_shards_merges_back_to_the_same_records(splits, data):
    groups = data.draw(st.lists(st.integers(1, splits), min_size=len(SUITE_IDS), max_size=len(SUITE_IDS)))
    members = {group: [nodeid for nodeid, g in zip(SUITE_IDS, groups) if g == group] for group in range(1, splits + 1)}
    reports = [(f"s{group}.json", shard_report(group, splits, ids)) for group, ids in members.items()]
    order = data.draw(st.permutations(reports))  # the command line may name the shards in any order
    merged = merge_shard_reports(order)
    assert merged["tests"] == RECORDS
    assert merged["durations"] == DURATIONS
    assert totals(merged["summary"]) == summarize(RECORDS)
    assert merged["summary"]["shard"]["merged"] == list(range(1, splits + 1))
    assert merged["summary"]["shard"]["selected"] == len(SUITE_IDS)
    assert merged["summary"]["complete"] is True
    # a shard that got no test (pytest exits 5) does not make the whole run "no tests collected"
    assert merged["summary"]["exitstatus"] == 0


@settings(max_examples=30, deadline=None)
@given(splits=st.integers(2, 4), data=st.data())
def test_leaving_out_any_shard_is_refused_naming_it(splits, data):
    reports = [
        (f"s{group}.json", shard_report(group, splits, ids))
        for group, ids in enumerate(chunks(SUITE_IDS, splits), start=1)
    ]
    left_out = data.draw(st.integers(1, splits))
    with pytest.raises(ReportError, match=rf"^shard {left_out} of {splits} is missing"):
        merge_shard_reports([report for report in reports if report[0] != f"s{left_out}.json"])


def test_an_incomplete_shard_makes_the_run_incomplete_naming_the_shard():
    first, second, third = chunks(SUITE_IDS, 3)
    reports = [
        ("shard-1.json", shard_report(1, 3, first)),
        (
            "shard-2.json",
            shard_report(
                2,
                3,
                second[:2],
                run={
                    "complete": False,
                    "incomplete_reasons": ["interrupted (SIGTERM)"],
                    "not_run": second[2:],
                    "not_run_count": 2,
                    "shard": {"group": 2, "splits": 3, "algorithm": "duration_based_chunks", "selected": 4},
                },
                exitstatus=2,
            ),
        ),
        ("shard-3.json", shard_report(3, 3, third, exitstatus=1)),
    ]
    summary = merge_shard_reports(reports)["summary"]
    assert summary["complete"] is False
    assert summary["incomplete_reasons"] == ["shard 2 of 3 (shard-2.json): interrupted (SIGTERM)"]
    assert summary["not_run"] == second[2:] and summary["not_run_count"] == 2
    assert summary["exitstatus"] == 2  # interrupted is worse than a failure


@pytest.mark.parametrize(
    ("statuses", "worst"),
    [([0, 0], 0), ([0, 1, 0], 1), ([0, 5], 0), ([5, 5], 5), ([1, 2], 2), ([2, 3], 3), ([1, 4], 4), ([None, 0], 0)],
)
def test_the_merged_exit_status_is_the_worst_shards(statuses, worst):
    assert worst_exitstatus(statuses) == worst


def test_a_run_narrowed_by_k_keeps_its_own_deselection_and_selection():
    narrowed = {"selection": {"-k": "not slow"}}
    reports = three_shards(suite=14, run=narrowed)  # 14 collected, 12 left after -k, each shard split those 12
    for _, report in reports:
        report["summary"]["shard"]["deselected"] = 8
        report["summary"]["deselected"] = 10
    summary = merge_shard_reports(reports)["summary"]
    assert summary["deselected"] == 2 and summary["selection"] == {"-k": "not slow"}


def test_env_fields_outside_the_build_may_differ_and_are_kept_per_shard():
    reports = three_shards()
    for group, (_, report) in enumerate(reports, start=1):
        report["env"]["platform"] = f"Linux-6.8.{group}-x86_64"
        report["env"]["runner"] = f"gpu-runner-{group}"
    merged = merge_shard_reports(reports)
    assert "platform" not in merged["env"] and "runner" not in merged["env"]
    assert {key: merged["env"][key] for key in BUILD_ENV_FIELDS} == {key: ENV_2_13[key] for key in BUILD_ENV_FIELDS}
    sources = merged["summary"]["shard"]["sources"]
    assert [source["env"] for source in sources] == [
        {"platform": f"Linux-6.8.{group}-x86_64", "runner": f"gpu-runner-{group}"} for group in (1, 2, 3)
    ]


def _renamed(reports, name):
    return [(name if i == 1 else file, report) for i, (file, report) in enumerate(reports)]


def _refusals() -> dict[str, tuple[list[tuple[str, dict[str, Any]]], str]]:
    """Each way a set of shard reports is not one whole run, and what the refusal must say."""
    first, second, third = chunks(SUITE_IDS, 3)
    plain = build_report(ENV_2_13, RECORDS, exitstatus=0, run={"complete": True})
    other_build = dict(ENV_2_13, torch="2.14.0+cu128")
    overlap = [*second, third[0]]
    return {
        "missing": (
            [("shard-1.json", shard_report(1, 3, first)), ("shard-3.json", shard_report(3, 3, third))],
            "shard 2 of 3 is missing (given: shard-1.json (group 1), shard-3.json (group 3)); give the report of every "
            "shard, or run pytest --splits 3 --group 2 --cudagraph-report=... to write it",
        ),
        "duplicated": (
            [*three_shards(), ("shard-2-again.json", shard_report(2, 3, second))],
            "shard-2.json and shard-2-again.json are both group 2 of 3",
        ),
        "another build": (
            [*three_shards()[:2], ("shard-3.json", shard_report(3, 3, third, env=other_build))],
            "shard-3.json (group 3 of 3) ran on torch 2.14.0+cu128 but shard-1.json (group 1 of 3) on torch "
            "2.13.0+cu128",
        ),
        "another split count": (
            [*three_shards()[:2], ("shard-3-of-4.json", shard_report(3, 4, third))],
            "shard-3-of-4.json (group 3 of 4) and shard-1.json (group 1 of 3) come from different splits",
        ),
        "not a shard": (
            [*three_shards()[:2], ("run.json", plain)],
            "run.json is not a shard report",
        ),
        "a merged report": (
            [("all.json", merge_shard_reports(three_shards()))],
            "all.json is a report merged from shards 1, 2, 3 of 3, not one shard",
        ),
        "a test in two shards": (
            [
                ("shard-1.json", shard_report(1, 3, first)),
                ("shard-2.json", shard_report(2, 3, overlap)),
                ("shard-3.json", shard_report(3, 3, third)),
            ],
            f"{third[0]} ran in shard-2.json (group 2 of 3) and in shard-3.json (group 3 of 3)",
        ),
        "tests in no shard": (
            [
                ("shard-1.json", shard_report(1, 3, first)),
                ("shard-2.json", shard_report(2, 3, second[:-1])),
                ("shard-3.json", shard_report(3, 3, third)),
            ],
            "selected 11 of the 12 tests they split, so 1 ran in no shard",
        ),
        "another algorithm": (
            [*three_shards()[:2], ("shard-3.json", shard_report(3, 3, third, algorithm="least_duration"))],
            "shard-3.json (group 3 of 3) was split by least_duration but shard-1.json (group 1 of 3) by "
            "duration_based_chunks",
        ),
        "another suite": (
            [*three_shards()[:2], ("shard-3.json", shard_report(3, 3, third, suite_digest="0bad" * 16))],
            "shard-3.json (group 3 of 3) split another suite than shard-1.json (group 1 of 3): the node ids they "
            "collected, or the test paths and -k/-m that selected them, differ (suite digest 0bad0bad0bad vs "
            "5e1f5e1f5e1f), so their groups do not partition one suite; run every shard on the same checkout with the "
            "same test arguments, and merge those reports",
        ),
        "another -k": (
            [*three_shards()[:2], ("shard-3.json", shard_report(3, 3, third, run={"selection": {"-k": "decode"}}))],
            "shard-3.json (group 3 of 3) ran with -k 'decode' but shard-1.json (group 1 of 3) without -k or -m",
        ),
    }


REFUSALS = _refusals()


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_what_is_not_one_whole_run_is_refused_in_one_sentence(case):
    reports, message = REFUSALS[case]
    with pytest.raises(ReportError) as refused:
        merge_shard_reports(reports)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_describe_shard_says_which_shard_and_what_it_selected():
    assert describe_shard(shard_report(2, 3, SUITE_IDS[4:8])["summary"]["shard"]) == (
        "shard 2 of 3 (pytest-split, duration_based_chunks, durations from .test_durations): "
        "4 tests selected, 8 deselected for the other shards"
    )
    assert describe_shard(merge_shard_reports(three_shards())["summary"]["shard"]) == (
        "merged from shards 1, 2, 3 of 3 (pytest-split, duration_based_chunks): 12 tests selected"
    )


# ----------------------------------------------------------------------------
# pytest-split's durations file
# ----------------------------------------------------------------------------


def test_durations_come_from_every_report_and_a_later_one_wins():
    reports = three_shards()
    newer = shard_report(1, 1, SUITE_IDS[:1])
    newer["durations"][SUITE_IDS[0]] = 9.5
    durations, notes = durations_from_reports([*reports, ("newer.json", newer)])
    assert durations == {**DURATIONS, SUITE_IDS[0]: 9.5}
    assert notes == []
    # pytest-split reads a JSON object node id -> seconds (its Base.__init__: json.loads, dict)
    assert json.loads(durations_file_text(durations)) == durations


def test_a_report_without_durations_gives_its_records_durations_and_says_so():
    old = build_report(ENV_2_13, RECORDS, exitstatus=0)
    durations, notes = durations_from_reports([("old.json", old)])
    assert durations == {nodeid: record["duration_s"] for nodeid, record in RECORDS.items()}
    assert len(notes) == 1 and notes[0].startswith("old.json has no 'durations'")
    with pytest.raises(ReportError, match="empty.json holds no test durations"):
        durations_from_reports([("empty.json", build_report(ENV_2_13, {}, exitstatus=5, durations={}))])


# ----------------------------------------------------------------------------
# the command: every refusal is exit 2 and one line naming the shard
# ----------------------------------------------------------------------------


def run_cli(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", *map(str, args)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_merge_refuses_with_exit_2_and_one_line_naming_the_shard(tmp_path, case):
    reports, message = REFUSALS[case]
    paths = [write_report(tmp_path / name, report) for name, report in reports]
    result = subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", "merge", *[path.name for path in paths], "-o", "merged.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("pytest-cudagraph: merge refused: ")
    assert message in result.stderr
    assert not (tmp_path / "merged.json").exists()


def test_merge_writes_the_merged_report_and_says_what_it_made(tmp_path):
    paths = [write_report(tmp_path / name, report) for name, report in three_shards()]
    result = run_cli("merge", *paths, "-o", tmp_path / "all.json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"wrote {tmp_path / 'all.json'}: merged from shards 1, 2, 3 of 3 (pytest-split, duration_based_chunks): "
        "12 tests selected; 6 records\n"
    )
    assert load_report(tmp_path / "all.json")["tests"] == RECORDS


def test_show_says_which_shards_a_merged_report_was_made_from(tmp_path):
    merged = write_report(tmp_path / "all.json", merge_shard_reports(three_shards()))
    result = run_cli("show", merged)
    assert result.returncode == 0, result.stderr
    assert "merged from shards 1, 2, 3 of 3 (pytest-split, duration_based_chunks): 12 tests selected" in result.stdout


def test_merge_never_overwrites_a_shard_even_through_a_link(tmp_path):
    paths = [write_report(tmp_path / name, report) for name, report in three_shards()]
    before = paths[1].read_bytes()
    (tmp_path / "latest.json").symlink_to(paths[1])
    for output in (paths[1], tmp_path / "latest.json", tmp_path / "." / "shard-2.json"):
        result = run_cli("merge", *paths, "-o", output)
        assert result.returncode == 2, result.stdout
        assert result.stderr == (
            f"pytest-cudagraph: -o {output} is the shard report {paths[1]}, which merging would overwrite; "
            "give another path for the merged report, such as all.json\n"
        )
    assert paths[1].read_bytes() == before


def test_merge_names_an_unreadable_shard_file(tmp_path):
    paths = [write_report(tmp_path / name, report) for name, report in three_shards()]
    paths[2].write_text('{"schema": "pytest-cudagraph/1", "tests": {')
    result = run_cli("merge", *paths, "-o", tmp_path / "all.json")
    assert result.returncode == 2
    assert f"report {paths[2]} is not valid JSON" in result.stderr


def test_durations_command_writes_pytest_splits_format(tmp_path):
    paths = [write_report(tmp_path / name, report) for name, report in three_shards()]
    out = tmp_path / ".test_durations"
    result = run_cli("durations", *paths, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {out}: durations of 12 tests")
    assert json.loads(out.read_text()) == DURATIONS
    refused = run_cli("durations", *paths, "-o", paths[0])
    assert refused.returncode == 2
    assert refused.stderr == (
        f"pytest-cudagraph: -o {paths[0]} is the report {paths[0]}, which writing the durations would overwrite; "
        "give pytest-split's durations file, such as .test_durations\n"
    )
    assert json.loads(paths[0].read_text())["summary"]["shard"]["group"] == 1


# ----------------------------------------------------------------------------
# the plugin: a real suite split in three, merged, and compared with the unsplit run
# ----------------------------------------------------------------------------

SUITE = """
import pytest


@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("i", range(5))
def test_marked(i):
    pass


@pytest.mark.max_recompiles(0)
def test_marked_skips():
    pytest.skip("skipped on purpose")


def test_plain_a():
    pass


def test_plain_b():
    pass


def test_plain_c():
    pass
"""
SUITE_SIZE = 9
TIMEOUT_S = 120


def run_pytest(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {nodeid: record["outcome"] for nodeid, record in report["tests"].items()}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.slow
def test_three_shards_merge_into_the_records_of_the_unsplit_run(suite, capsys):
    unsplit = run_pytest(suite, "--cudagraph-report=unsplit.json")
    assert unsplit.returncode == 0, unsplit.stdout
    for group in (1, 2, 3):
        result = run_pytest(suite, "--splits", "3", "--group", str(group), f"--cudagraph-report=shard-{group}.json")
        assert result.returncode == 0, result.stdout
        summary = load_report(suite.path / f"shard-{group}.json")["summary"]
        # pytest-split's deselection of the other groups' tests is no missing test: the shard ran all it selected
        assert summary["complete"] is True, summary
        # no .test_durations yet: pytest-split gave every test the same estimate, and the report says so
        assert summary["shard"] == {
            "group": group,
            "splits": 3,
            "algorithm": "duration_based_chunks",
            "selected": 3,
            "deselected": 6,
            "suite_digest": summary["shard"]["suite_digest"],
        }
        assert (
            f"shard {group} of 3 (pytest-split, duration_based_chunks, no durations file): "
            "3 tests selected, 6 deselected for the other shards"
        ) in result.stdout

    shards = [str(suite.path / f"shard-{group}.json") for group in (1, 2, 3)]
    assert cli_main(["merge", *shards, "-o", str(suite.path / "all.json")]) == 0
    merged, whole = load_report(suite.path / "all.json"), load_report(suite.path / "unsplit.json")
    assert outcomes(merged) == outcomes(whole) and len(outcomes(whole)) == 6
    assert set(merged["durations"]) == set(whole["durations"]) and len(whole["durations"]) == SUITE_SIZE
    assert totals(merged["summary"]) == totals(whole["summary"])
    assert merged["summary"]["complete"] is True and merged["summary"]["shard"]["selected"] == SUITE_SIZE

    capsys.readouterr()
    assert cli_main(["compare", str(suite.path / "unsplit.json"), str(suite.path / "all.json")]) == 0
    assert "no regression: 6 tests in both reports" in capsys.readouterr().out
    assert cli_main(["show", str(suite.path / "all.json"), "--html", str(suite.path / "all.html")]) == 0

    # and a shard left out is refused, naming it
    assert cli_main(["merge", shards[0], shards[2], "-o", str(suite.path / "partial.json")]) == 2
    assert "shard 2 of 3 is missing" in capsys.readouterr().err
    assert not (suite.path / "partial.json").exists()


@pytest.mark.slow  # a real pytest-xdist run
def test_under_xdist_the_controller_knows_the_shard(suite):
    result = run_pytest(suite, "-n", "2", "--splits", "3", "--group", "2", "--cudagraph-report=shard-2.json")
    assert result.returncode == 0, result.stdout
    report = load_report(suite.path / "shard-2.json")
    summary = report["summary"]
    assert summary["complete"] is True, summary
    assert summary["shard"] == {
        "group": 2,
        "splits": 3,
        "algorithm": "duration_based_chunks",
        "selected": 3,
        "deselected": 6,
        "suite_digest": summary["shard"]["suite_digest"],
    }
    assert len(summary["shard"]["suite_digest"]) == 64
    # the durations of every test the workers ran reached the controller, plugin or not
    assert sorted(report["durations"]) == sorted(
        f"test_suite.py::{name}" for name in ("test_marked[3]", "test_marked[4]", "test_marked_skips")
    )


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_a_durations_file_written_from_a_report_splits_the_next_run(suite):
    slow = "test_suite.py::test_marked[0]"
    ids = [f"test_suite.py::test_marked[{i}]" for i in range(5)]
    ids += [f"test_suite.py::{name}" for name in ("test_marked_skips", "test_plain_a", "test_plain_b", "test_plain_c")]
    last_run = build_report(ENV_2_13, {}, exitstatus=0, durations={nodeid: 0.01 for nodeid in ids} | {slow: 30.0})
    write_report(suite.path / "last.json", last_run)
    assert cli_main(["durations", str(suite.path / "last.json"), "-o", str(suite.path / "durations.json")]) == 0
    # the slow test fills group 1 of 2 alone; every other test goes to group 2
    result = run_pytest(
        suite, "--splits", "2", "--group", "1", "--durations-path", "durations.json", "--cudagraph-report=g1.json"
    )
    assert result.returncode == 0, result.stdout
    shard = load_report(suite.path / "g1.json")["summary"]["shard"]
    assert shard["durations_path"] == "durations.json"
    assert (shard["selected"], shard["deselected"]) == (1, SUITE_SIZE - 1)
    assert list(load_report(suite.path / "g1.json")["durations"]) == [slow]


# ----------------------------------------------------------------------------
# one suite: shards of another collection are refused (summary.shard.suite_digest)
# ----------------------------------------------------------------------------

FOUR_TESTS = "\n\n".join(f"def test_{name}():\n    pass" for name in ("w", "x", "y", "z")) + "\n"


@pytest.mark.slow
def test_shards_of_two_suites_are_refused_by_their_digest(pytester):
    """``pytest a --splits 2 --group 1`` and ``pytest b --splits 2 --group 2`` split two suites: half of each ran."""
    for package in ("a", "b"):
        pytester.mkpydir(package).joinpath(f"test_{package}.py").write_text(FOUR_TESTS)
    for group, package in ((1, "a"), (2, "b")):
        result = run_pytest(
            pytester, package, "--splits", "2", "--group", str(group), f"--cudagraph-report=s{group}.json"
        )
        assert result.returncode == 0, result.stdout
    shards = [load_report(pytester.path / f"s{group}.json")["summary"]["shard"] for group in (1, 2)]
    # the counts alone cannot tell: 2 + 2 of 4 tests, no test in both
    assert [(shard["selected"], shard["deselected"]) for shard in shards] == [(2, 2), (2, 2)]
    assert shards[0]["suite_digest"] != shards[1]["suite_digest"]
    merged = run_cli("merge", pytester.path / "s1.json", pytester.path / "s2.json", "-o", pytester.path / "all.json")
    assert merged.returncode == 2, merged.stdout
    assert merged.stderr.count("\n") == 1 and "Traceback" not in merged.stderr
    assert f"s2.json (group 2 of 2) split another suite than {pytester.path / 's1.json'} (group 1 of 2)" in (
        merged.stderr
    )
    assert "run every shard on the same checkout with the same test arguments" in merged.stderr
    assert not (pytester.path / "all.json").exists()


@pytest.mark.slow
def test_one_suite_has_one_digest_however_its_paths_are_spelled_or_ordered(pytester):
    for package in ("a", "b"):
        pytester.mkpydir(package).joinpath(f"test_{package}.py").write_text(FOUR_TESTS)
    # group 2 spells the paths otherwise; "reordered" is group 1 again with the arguments the other way round
    runs = {"s1": (1, ["a", "b"]), "s2": (2, ["./a/", str(pytester.path / "b")]), "reordered": (1, ["b", "a"])}
    for name, (group, paths) in runs.items():
        result = run_pytest(pytester, *paths, "--splits", "2", "--group", str(group), f"--cudagraph-report={name}.json")
        assert result.returncode == 0, result.stdout
    digests = {load_report(pytester.path / f"{name}.json")["summary"]["shard"]["suite_digest"] for name in runs}
    assert len(digests) == 1 and len(next(iter(digests))) == 64
    shards = [str(pytester.path / f"{name}.json") for name in ("s1", "s2")]
    assert cli_main(["merge", *shards, "-o", str(pytester.path / "m.json")]) == 0
    assert load_report(pytester.path / "m.json")["summary"]["shard"]["suite_digest"] in digests
    # -k narrows the suite: another digest (merge names the differing -k first, as before)
    narrowed = run_pytest(
        pytester, "a", "b", "-k", "not w", "--splits", "2", "--group", "1", "--cudagraph-report=k.json"
    )
    assert narrowed.returncode == 0, narrowed.stdout
    assert load_report(pytester.path / "k.json")["summary"]["shard"]["suite_digest"] not in digests


def test_the_node_ids_digest_does_not_depend_on_their_order():
    from pytest_cudagraph.plugin.pytest_split import nodeids_digest, suite_digest

    ids = [f"t.py::test_{i}" for i in range(50)]
    assert nodeids_digest(ids) == nodeids_digest(ids[::-1]) != nodeids_digest(ids[1:])
    args = {"args": ["tests"], "-k": "", "-m": ""}
    assert suite_digest(nodeids_digest(ids), args) != suite_digest(nodeids_digest(ids), {**args, "args": ["other"]})


def test_a_shard_without_a_digest_is_not_compared_and_the_merged_report_keeps_the_common_one():
    first, second, third = chunks(SUITE_IDS, 3)
    reports = [
        ("shard-1.json", shard_report(1, 3, first)),
        ("shard-2.json", shard_report(2, 3, second, suite_digest=None)),  # every xdist worker crashed
        ("shard-3.json", shard_report(3, 3, third)),
    ]
    assert "suite_digest" not in merge_shard_reports(reports)["summary"]["shard"]
    assert merge_shard_reports(three_shards())["summary"]["shard"]["suite_digest"] == SUITE_DIGEST


# ----------------------------------------------------------------------------
# a forged or corrupted splits: work and messages bounded by what was given
# ----------------------------------------------------------------------------


def _limited(limit_bytes: int):
    """preexec_fn: the child's address space capped, so that a merge that fills memory fails instead."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return limit


@pytest.mark.parametrize("splits", [10**6, 10**8, 10**12, 2**63])
def test_a_forged_splits_is_refused_at_once_naming_the_missing_groups_as_a_range(tmp_path, splits):
    forged = shard_report(1, splits, SUITE_IDS[:4])
    path = write_report(tmp_path / "shard-1.json", forged)
    result = subprocess.run(
        [sys.executable, "-m", "pytest_cudagraph", "merge", str(path), "-o", str(tmp_path / "all.json")],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=_limited(1 << 30),
    )
    assert result.returncode == 2, result.stderr[:500]
    assert len(result.stderr) < 600 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"pytest-cudagraph: merge refused: shards 2..{splits} of {splits} are missing (given: {path} (group 1)); "
    )
    assert f"--splits {splits} --group 2 " in result.stderr


def test_many_gaps_are_named_a_few_and_counted():
    splits = 10**4  # in this process: small enough that even an unbounded merge would only be slow
    reports = [(f"s{group}.json", shard_report(group, splits, [])) for group in range(1, 200, 2)]
    with pytest.raises(ReportError) as refused:
        merge_shard_reports(reports)
    message = str(refused.value)
    assert message.startswith(f"shards 2, 4, 6, 8, 10, 12, ... ({splits - 100} in all) of {splits} are missing")
    assert "(given: 100 shard reports, of groups 1, 3, 5, 7, 9, 11, ... (100 in all))" in message
    assert len(message) < 400


@pytest.mark.parametrize(
    ("missing", "named"),
    [([2], "shard 2 of 9 is"), ([2, 3], "shards 2 and 3 of 9 are"), ([2, 3, 4, 5, 8], "shards 2..5 and 8 of 9 are")],
)
def test_few_missing_groups_are_each_named(missing, named):
    reports = [(f"s{g}.json", shard_report(g, 9, [])) for g in range(1, 10) if g not in missing]
    with pytest.raises(ReportError, match=rf"^{named} missing"):
        merge_shard_reports(reports)


def test_the_success_line_of_many_shards_is_one_range(tmp_path):
    splits = 40
    paths = []
    for group in range(1, splits + 1):
        report = build_report(
            dict(ENV_2_13),
            {},
            exitstatus=0,
            run={
                "complete": True,
                "shard": {"group": group, "splits": splits, "selected": 1, "deselected": splits - 1},
            },
            durations={f"tests/test_many.py::test_{group:03d}": 0.5},
        )
        paths.append(write_report(tmp_path / f"s{group}.json", report))
    result = run_cli("merge", *paths, "-o", tmp_path / "all.json")
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout
        == f"wrote {tmp_path / 'all.json'}: merged from shards 1..40 of 40 (pytest-split): 40 tests selected; 0 records\n"
    )
    assert (
        describe_shard({"splits": 2000, "merged": list(range(1, 2001))})
        == "merged from shards 1..2000 of 2000 (pytest-split)"
    )


# ----------------------------------------------------------------------------
# durations: a negative time is refused
# ----------------------------------------------------------------------------


def test_durations_refuses_a_negative_time(tmp_path):
    forged = shard_report(1, 1, SUITE_IDS)
    forged["durations"][SUITE_IDS[3]] = -5.0
    path = write_report(tmp_path / "forged.json", forged)
    result = run_cli("durations", path, "-o", tmp_path / ".test_durations")
    assert result.returncode == 2, result.stdout
    assert result.stderr == (
        f"pytest-cudagraph: {path} records -5 s for {SUITE_IDS[3]} in its durations, a time below zero that no run "
        "takes and pytest-split would split by; give a report written by --cudagraph-report, or correct that entry\n"
    )
    assert not (tmp_path / ".test_durations").exists()
    old = build_report(ENV_2_13, {SUITE_IDS[0]: {"outcome": "passed", "duration_s": -0.5}}, exitstatus=0)
    with pytest.raises(ReportError, match=r"^old.json records -0.5 s for .* in its duration_s, a time below zero"):
        durations_from_reports([("old.json", old)])
