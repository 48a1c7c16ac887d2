"""The reports of one run split by pytest-split, merged into the report of the whole run; its durations file.

A suite too big for one runner is split with pytest-split (``pytest --splits N
--group I``) into N jobs, often on N machines; each writes its own report, whose
``summary.shard`` says which group of how many it ran and how many tests it
selected and deselected.  ``merge_shard_reports`` makes the report of the whole
run from them: every record once, the summary computed again, ``complete`` only
if every shard was.  It refuses, in one sentence naming the file and the fix,
whatever would make that report a false record of the run: a missing or repeated
group, shards of different ``--splits``, algorithms, ``-k``/``-m``, builds or
suites (``suite_digest``: the node ids collected and the arguments that selected
them), a file that is no shard report, a test that ran in two shards, or tests
that ran in none.  Its work and its messages are bounded by the files given, not
by the ``splits`` they claim: groups are named as ranges (``shards 2..1000000 of
1000000 are missing``), and at most a few of them.

``durations_from_reports`` reads the ``durations`` every report carries (every
test that finished, plugin or not) into pytest-split's ``.test_durations`` format, so
that the next run is split by the last one's times.

JSON in, JSON out: nothing here imports torch or pytest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ReportError
from ..records.cache_components import expand_cache_components
from ..records.loaded import LoadedReport, given, section_or_empty, typed_report
from ..records.report import build_report
from ..records.schema import Shard as ShardSection
from ..records.schema import Summary
from ..render.plain_text import clip_nodeid
from ..render.shard_text import NAMED_LIMIT as _NAMED_LIMIT
from ..render.shard_text import groups_text, ranges_text

# The env fields that make a build: shards that differ in one of them ran different software or
# hardware, and their merged report would claim one build ran the whole suite.  Others (the platform
# string with a runner's kernel release, fields a conftest adds such as the host name) may differ;
# the merged report keeps each shard's own values of those under summary.shard.sources[].env.
BUILD_ENV_FIELDS = ("torch", "triton", "cuda", "gpu", "python", "plugin", "git_commit")

# pytest's exit statuses, from best to worst for a merged run: a shard that collected nothing (5)
# hides no failure, a failure (1) is worse than that, a stopped run (usage error 4, interrupted 2,
# internal error 3) worse than a failure.  A status pytest does not define ranks with failures.
_EXIT_RANK = {0: 0, 5: 1, 1: 2, 4: 4, 2: 5, 3: 6}
_EXIT_RANK_UNKNOWN = 3
_NO_TESTS_COLLECTED = 5


# how a shard is run: said in the fixes
_SPLIT_ADVICE = (
    "give every shard the same test order and durations file (with pytest-randomly, "
    "the same --randomly-seed, or -p no:randomly)"
)


@dataclass(frozen=True)
class Shard:
    """One shard report: the file it came from, the report (typed, and every field as read), its ``summary.shard``."""

    name: str
    read: LoadedReport
    shard: ShardSection
    group: int
    splits: int

    @property
    def summary(self) -> Summary:
        return section_or_empty(self.read.report.summary, Summary)

    @property
    def label(self) -> str:
        """``shard-2.json (group 2 of 3)``"""
        return f"{self.name} (group {self.group} of {self.splits})"

    def test_ids(self) -> set[str]:
        """Every test this shard ran: its records and its durations (a test without a record has a duration)."""
        return set(self.read.tests) | set(given(self.read.report.durations) or {})


def shard_of_report(name: str, report: LoadedReport | Mapping[str, Any]) -> Shard:
    """``report`` as a Shard; ReportError when it is no shard report (an unsplit run, or a merged report)."""
    read = typed_report(report, name)
    shard = given(section_or_empty(read.report.summary, Summary).shard)
    if shard is not None and given(shard.merged) is not None:
        raise ReportError(
            f"{name} is a report merged from shards {groups_text(list(shard.merged or ()))} of "
            f"{given(shard.splits)}, not one shard; give the shard reports it was merged from"
        )
    group, splits = (given(shard.group), given(shard.splits)) if shard is not None else (None, None)
    if shard is None or group is None or splits is None:
        raise ReportError(
            f"{name} is not a shard report: its summary has no 'shard', so its run was not split by pytest-split; "
            f"give the reports of the runs made with --splits N --group I --cudagraph-report=..."
        )
    return Shard(name, read, shard, group, splits)


def merge_shard_reports(
    reports: Sequence[tuple[str, LoadedReport | Mapping[str, Any]]], created: str | None = None
) -> dict[str, Any]:
    """The report of the whole run from the reports of its shards, given as ``(file name, report)`` pairs.

    Every record is kept exactly once, ``durations`` joined, the summary computed
    again from the records (report.summarize).  ``complete`` is true only if every
    shard's run was; each shard's ``incomplete_reasons`` are kept with the shard
    named, its ``not_run`` ids joined; the exit status is the worst shard's (a
    shard that collected nothing counts only if every shard did).  The env block
    holds what every shard agrees on; ``summary.shard`` says which shards the
    report was made from::

        {"splits": 3, "merged": [1, 2, 3], "algorithm": "duration_based_chunks", "selected": 123,
         "sources": [{"group": 1, "file": "shard-1.json", "created": "...", "complete": true,
                      "exitstatus": 0, "selected": 41, "deselected": 82, "tests": 12}, ...]}

    Raises ReportError, naming the file and the fix, for a file that is no shard
    report, shards of different ``--splits``, a group given twice or missing,
    shards split by different algorithms or narrowed by different ``-k``/``-m``,
    shards of different builds (BUILD_ENV_FIELDS), shards of different suites
    (their ``suite_digest`` differ), a test that ran in two shards, and tests that
    ran in no shard (the shards' selected counts do not add up to the suite they
    split).  Its time and memory grow with the reports given, never with the
    ``splits`` they claim (a forged ``2**63`` is refused at once).
    """
    if not reports:
        raise ReportError("no shard reports given; give the report of every shard of the run")
    shards = sorted((shard_of_report(name, report) for name, report in reports), key=lambda shard: shard.group)
    _check_one_split(shards)
    _check_same_way_of_splitting(shards)
    _check_one_build(shards)
    _check_one_suite(shards)
    tests, durations = _join_tests(shards)
    _check_every_test_selected_once(shards)

    env, own_env = _common_env(shards)
    run = _run_facts(shards, own_env)
    exitstatus = worst_exitstatus([given(shard.summary.exitstatus) for shard in shards])
    return build_report(
        env,
        tests,
        exitstatus=exitstatus,
        created=created,
        run=run,
        durations=durations if any(given(shard.read.report.durations) is not None for shard in shards) else None,
        # each shard's, as read: every shard set its wider-scoped fixtures up for itself
        fixture_setups=[setup for shard in shards for setup in shard.read.data.get("fixture_setups") or ()],
    )


def _check_one_split(shards: list[Shard]) -> None:
    """One --splits, each group once, none missing."""
    first = shards[0]
    for shard in shards[1:]:
        if shard.splits != first.splits:
            raise ReportError(
                f"{shard.label} and {first.label} come from different splits; the shards of one run share one "
                f"--splits, so give the reports of one split run"
            )
    seen: dict[int, Shard] = {}
    for shard in shards:
        if shard.group in seen:
            raise ReportError(
                f"{seen[shard.group].name} and {shard.name} are both group {shard.group} of {shard.splits}; "
                f"give each group's report once (the later one, if that shard ran again)"
            )
        if not 1 <= shard.group <= shard.splits:
            raise ReportError(
                f"{shard.label} names a group outside 1..{shard.splits}; give a report written by pytest-split's "
                f"--splits {shard.splits} --group I"
            )
        seen[shard.group] = shard
    # the gaps between the groups given: as many as the shards, whatever --splits claims
    gaps, previous = [], 0
    for group in sorted(seen):
        if group > previous + 1:
            gaps.append((previous + 1, group - 1))
        previous = group
    if first.splits > previous:
        gaps.append((previous + 1, first.splits))
    if gaps:
        missing = sum(last - start + 1 for start, last in gaps)
        if len(shards) <= _NAMED_LIMIT:
            given = ", ".join(f"{shard.name} (group {shard.group})" for shard in shards)
        else:
            given = f"{len(shards)} shard reports, of groups {groups_text(sorted(seen))}"
        which = ranges_text(gaps, missing, last="and")
        raise ReportError(
            f"{'shard' if missing == 1 else 'shards'} {which} of {first.splits} {'is' if missing == 1 else 'are'} "
            f"missing (given: {given}); give the report of every shard, or run pytest --splits {first.splits} "
            f"--group {gaps[0][0]} --cudagraph-report=... to write it"
        )


def _names(shards: Sequence[Shard]) -> str:
    """``shard-1.json, shard-2.json, shard-3.json``; past _NAMED_LIMIT files, the first few and how many more."""
    names = [shard.name for shard in shards]
    if len(names) <= _NAMED_LIMIT:
        return ", ".join(names)
    return ", ".join(names[: _NAMED_LIMIT - 1]) + f" and {len(names) - _NAMED_LIMIT + 1} more"


def _check_same_way_of_splitting(shards: list[Shard]) -> None:
    """One algorithm and one -k/-m: otherwise the groups do not partition one suite."""
    first = shards[0]
    for shard in shards[1:]:
        algorithm, first_algorithm = given(shard.shard.algorithm), given(first.shard.algorithm)
        if algorithm != first_algorithm:
            raise ReportError(
                f"{shard.label} was split by {algorithm or 'an unrecorded algorithm'} but {first.label} by "
                f"{first_algorithm or 'an unrecorded algorithm'}, so their groups do not partition one suite; "
                f"run every shard with the same --splitting-algorithm"
            )
        selection, first_selection = _selection(shard), _selection(first)
        if selection != first_selection:
            raise ReportError(
                f"{shard.label} ran {_selection_text(selection)} but {first.label} {_selection_text(first_selection)}, "
                f"so they split different suites; run every shard with the same -k and -m"
            )


def _selection(shard: Shard) -> dict[str, str]:
    return dict(given(shard.summary.selection) or {})


def _selection_text(selection: Mapping[str, str]) -> str:
    if not selection:
        return "without -k or -m"
    return "with " + " ".join(f"{flag} {expression!r}" for flag, expression in sorted(selection.items()))


def _env(shard: Shard) -> Mapping[str, Any]:
    return given(shard.read.report.env) or {}


def _check_one_build(shards: list[Shard]) -> None:
    first = shards[0]
    for shard in shards[1:]:
        differ = [name for name in BUILD_ENV_FIELDS if _env(shard).get(name) != _env(first).get(name)]
        if differ:
            name = differ[0]
            also = f" (and {', '.join(differ[1:])} differ too)" if differ[1:] else ""
            raise ReportError(
                f"{shard.label} ran on {name} {_env_value(_env(shard).get(name))} but {first.label} on "
                f"{name} {_env_value(_env(first).get(name))}{also}; the shards of one run must come from one build "
                f"({', '.join(BUILD_ENV_FIELDS)}), so run every shard on the same build and merge those reports"
            )


def _check_one_suite(shards: list[Shard]) -> None:
    """One collection split: the shards' ``suite_digest`` agree (one that has none, from a shard whose every
    xdist worker crashed or an older plugin, is not compared)."""
    digests = [(shard, digest) for shard in shards if (digest := given(shard.shard.suite_digest)) is not None]
    for shard, digest in digests[1:]:
        first_digest = digests[0][1]
        if digest != first_digest:
            raise ReportError(
                f"{shard.label} split another suite than {digests[0][0].label}: the node ids they collected, or the "
                f"test paths and -k/-m that selected them, differ (suite digest {digest[:12]} vs "
                f"{first_digest[:12]}), so their groups do not partition one suite; run every shard on the same "
                f"checkout with the same test arguments, and merge those reports"
            )


def _env_value(value: Any) -> str:
    return "unknown" if value is None else repr(value) if isinstance(value, str) and not value.strip() else str(value)


def _join_tests(shards: list[Shard]) -> tuple[dict[str, Any], dict[str, float]]:
    """Every shard's records and durations in one mapping each; ReportError for a test that ran in two shards."""
    tests: dict[str, Any] = {}
    durations: dict[str, float] = {}
    ran_in: dict[str, Shard] = {}
    for shard in shards:
        for nodeid in sorted(shard.test_ids()):
            earlier = ran_in.setdefault(nodeid, shard)
            if earlier is not shard:
                raise ReportError(
                    f"{nodeid} ran in {earlier.label} and in {shard.label}, so the shards did not split one suite "
                    f"the same way; {_SPLIT_ADVICE}"
                )
        # every record as read (fields no type names kept), its cache-key components whole again:
        # build_report factors them over every shard's records
        tests.update(expand_cache_components(shard.read.data))
        # null: a record's test that did not finish (a file stores it so; reading it leaves none)
        durations.update(
            {nodeid: s for nodeid, s in (given(shard.read.report.durations) or {}).items() if s is not None}
        )
    return tests, durations


def _counts(shard: Shard) -> tuple[int, int] | None:
    """(selected, deselected by pytest-split) where the shard recorded both."""
    selected, deselected = given(shard.shard.selected), given(shard.shard.deselected)
    if selected is not None and deselected is not None:
        return selected, deselected
    return None


def _check_every_test_selected_once(shards: list[Shard]) -> None:
    """Each shard split the same number of tests, and the groups' selections add up to it.

    Shards that read different durations files or collected in different orders
    draw different group boundaries: tests then run in two shards (caught by
    their ids) or in none, which only the counts show.
    """
    counted = [(shard, counts) for shard in shards if (counts := _counts(shard)) is not None]
    if len(counted) != len(shards):
        return  # a shard whose xdist workers all crashed has no deselected count: nothing to add up
    first, (first_selected, first_deselected) = counted[0]
    suite = first_selected + first_deselected
    for shard, (selected, deselected) in counted[1:]:
        if selected + deselected != suite:
            raise ReportError(
                f"{shard.label} split {selected + deselected} tests but {first.label} split {suite}, so the shards "
                f"collected different suites; run every shard on the same checkout with the same options"
            )
    total = sum(selected for _, (selected, _) in counted)
    if total < suite:
        raise ReportError(
            f"the shards {_names(shards)} selected {total} of the {suite} tests they "
            f"split, so {suite - total} ran in no shard; {_SPLIT_ADVICE}"
        )
    if total > suite:
        raise ReportError(
            f"the shards {_names(shards)} selected {total} of the {suite} tests they "
            f"split, so {total - suite} were selected by two shards; {_SPLIT_ADVICE}"
        )


def _common_env(shards: list[Shard]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The env fields every shard agrees on, and per shard the fields where it differs from the others."""
    names: list[str] = []
    for shard in shards:
        names += [name for name in _env(shard) if name not in names]
    common: dict[str, Any] = {}
    for name in names:
        values = [_env(shard).get(name, _ABSENT) for shard in shards]
        if all(value == values[0] for value in values) and values[0] is not _ABSENT:
            common[name] = values[0]
    own = [{name: value for name, value in _env(shard).items() if name not in common} for shard in shards]
    return common, own


_ABSENT = object()


def _run_facts(shards: list[Shard], own_env: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged run's summary facts (report.RUN_FIELDS), with every shard named where it matters."""
    reasons: list[str] = []
    not_run: list[str] = []
    not_run_count = 0
    complete = True
    for shard in shards:
        summary = shard.summary
        shard_complete = given(summary.complete)
        if shard_complete is not True:
            complete = False
            shard_reasons = given(summary.incomplete_reasons) or []
            if shard_complete is None:
                shard_reasons = ["the shard's report does not say whether its run was complete"]
            elif not shard_reasons:
                shard_reasons = ["the report says so, without a reason"]
            reasons += [f"shard {shard.group} of {shard.splits} ({shard.name}): {reason}" for reason in shard_reasons]
        listed = list(given(summary.not_run) or [])
        not_run += listed
        not_run_count += max(given(summary.not_run_count) or 0, len(listed))
    facts: dict[str, Any] = {
        "complete": complete,
        "incomplete_reasons": reasons,
        "not_run": not_run,
        "not_run_count": not_run_count,
    }
    deselected = _run_deselected(shards[0])
    if deselected is not None:
        facts["deselected"] = deselected
    if _selection(shards[0]):
        facts["selection"] = _selection(shards[0])
    facts["shard"] = _merged_shard(shards, own_env)
    return facts


def _run_deselected(shard: Shard) -> int | None:
    """The tests -k/-m deselected (the same in every shard): the shard's deselected minus pytest-split's."""
    deselected, by_split = given(shard.summary.deselected), given(shard.shard.deselected)
    if deselected is not None and by_split is not None:
        return max(deselected - by_split, 0)
    return None


def _merged_shard(shards: list[Shard], own_env: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"splits": shards[0].splits, "merged": [shard.group for shard in shards]}
    algorithm = given(shards[0].shard.algorithm)
    if algorithm:
        merged["algorithm"] = algorithm
    selected = [given(shard.shard.selected) for shard in shards]
    if all(count is not None for count in selected):
        merged["selected"] = sum(count or 0 for count in selected)
    digests = {given(shard.shard.suite_digest) for shard in shards}
    if len(digests) == 1 and isinstance(next(iter(digests)), str):
        merged["suite_digest"] = next(iter(digests))
    sources = []
    for shard, env in zip(shards, own_env):
        source: dict[str, Any] = {"group": shard.group, "file": shard.name}
        created = given(shard.read.report.created)
        if created is not None:
            source["created"] = created
        summary, split = shard.summary, shard.shard
        for key, value in (("complete", summary.complete), ("exitstatus", summary.exitstatus)):
            if given(value) is not None:
                source[key] = value
        for split_key, split_value in (
            ("selected", split.selected),
            ("deselected", split.deselected),
            ("durations_path", split.durations_path),
        ):
            if given(split_value) is not None:
                source[split_key] = split_value
        source["tests"] = len(shard.read.tests)
        if env:
            source["env"] = env
        sources.append(source)
    merged["sources"] = sources
    return merged


def worst_exitstatus(statuses: Sequence[Any]) -> int | None:
    """The merged run's exit status: the worst shard's; 5 (no tests collected) only if every shard had none."""
    known = [status for status in statuses if isinstance(status, int) and not isinstance(status, bool)]
    ran = [status for status in known if status != _NO_TESTS_COLLECTED] or known
    if not ran:
        return None
    return max(ran, key=lambda status: _EXIT_RANK.get(status, _EXIT_RANK_UNKNOWN))


# ----------------------------------------------------------------------------
# pytest-split's durations file
# ----------------------------------------------------------------------------


def durations_from_reports(
    reports: Sequence[tuple[str, LoadedReport | Mapping[str, Any]]],
) -> tuple[dict[str, float], list[str]]:
    """Seconds per node id from the reports' ``durations``, in pytest-split's format, and notes for the user.

    A later report's duration of a test replaces an earlier one's (the newer run's
    time).  A report written before reports carried ``durations`` gives the
    ``duration_s`` of its records instead (only tests that used the plugin have
    one), and a note says so.  ReportError when no report holds any duration, or
    when one gives a test a negative time (pytest-split would split by it).
    """
    durations: dict[str, float] = {}
    notes: list[str] = []
    for name, report in reports:
        typed = typed_report(report, name).report
        carried = given(typed.durations)
        if carried is not None:
            read = {nodeid: float(seconds) for nodeid, seconds in carried.items() if seconds is not None}
            _check_not_negative(name, read, "durations")
            durations.update(read)
            continue
        from_records = {
            nodeid: round(float(seconds), 3)
            for nodeid, record in typed.tests.items()
            if isinstance(seconds := record.duration_s, (int, float)) and record.outcome != "crashed"
        }
        _check_not_negative(name, from_records, "duration_s")
        durations.update(from_records)
        notes.append(
            f"{name} has no 'durations' (an older pytest-cudagraph wrote it): took the duration_s of its "
            f"{len(from_records)} records, so tests that used no plugin feature have no duration"
        )
    if not durations:
        names = ", ".join(name for name, _ in reports)
        raise ReportError(
            f"{names} hold{'s' if len(reports) == 1 else ''} no test durations; give a report of a run that ran "
            f"tests, written with --cudagraph-report"
        )
    return dict(sorted(durations.items())), notes


def _check_not_negative(name: str, durations: Mapping[str, float], field: str) -> None:
    """ReportError naming the first test that took less than no time (a forged or corrupted report)."""
    negative = next(((nodeid, s) for nodeid, s in durations.items() if not s >= 0), None)
    if negative is not None:
        nodeid, seconds = negative
        raise ReportError(
            f"{name} records {seconds:g} s for {clip_nodeid(nodeid)} in its {field}, a time below zero that no run "
            f"takes and pytest-split would split by; give a report written by --cudagraph-report, or correct that entry"
        )


def durations_file_text(durations: Mapping[str, float]) -> str:
    """pytest-split's ``.test_durations``: a JSON object node id -> seconds, sorted, indented as pytest-split writes it."""
    return json.dumps(dict(durations), sort_keys=True, indent=4) + "\n"
