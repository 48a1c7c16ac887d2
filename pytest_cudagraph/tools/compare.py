"""Compare two run reports: what changed per test, and which changes are regressions.

This is the offline half of "upgrading PyTorch": run the same suite under two
torch versions with ``--cudagraph-report``, then::

    pytest-cudagraph compare torch-2.13.json torch-2.14.json

or, at the end of a run, ``--cudagraph-baseline=torch-2.13.json``.  It reads only
JSON and never imports torch, so it runs anywhere.

A regression is a change that a rule flags (``--fail-on`` selects the rules):

==================  =========================================================================
rule                regressed when, for a test in both reports
==================  =========================================================================
``outcome``         it passed (or xfailed) and now fails or errors
``skipped``         it passed (or xfailed) and now skips: it validated nothing (a CPU-only wheel
                    skips every GPU test); the message names the skip reason, and leaving the
                    rule out of ``--fail-on`` accepts it
``recompiles``      Dynamo recompiled more often (``recompiles.count`` went up)
``recompile-limit`` it hit the recompile limit more often (Dynamo then silently runs eager)
``cache-miss``      an FX-graph or AOTAutograd cache layer bypasses more; between caches that
                    both started empty (``caches.start``: the compile_cache passes), it misses
                    more (a layer that hit now misses) or Triton compiles more kernels; on the
                    caches a run shares (``start`` ``shared``: torch's own location,
                    ``--cudagraph-cache-dir``), whose contents at a test's start depend on
                    earlier runs and tests, only a lookup that hit and now misses with a key
                    changed in a component of its own counts (a note counts the rest); a
                    ``bundle_cycle`` bundle holds fewer artifacts of a layer than the base run's,
                    or its second bundle lost more of the first's
``graphs``          more CUDA graphs were captured (``graphs.captured``, piecewise too)
``pool``            the graph pool grew by more than ``pool_threshold`` (default 10 %) and by
                    more than one 2 MiB allocator segment
``numerics``        the replay error grew past ``base * (1 + numerics_growth) + numerics_floor``
                    (defaults: doubled plus 1e-6), or became NaN
``graph-breaks``    more graph breaks (off by default)
``vanished``        a test of the base report is missing from the new one (off by default;
                    vanished tests are always listed)
``compile-time``    the median compile time of its cold or warm startup runs grew by more
                    than the noise allows (see below; off by default)
``capture-time``    the same for the CUDA graph capture time (off by default)
``startup-time``    the same for the wall time of the whole run (off by default)
``graph-memory``    a graph memory figure other than the pool (``graphs.largest_graph_bytes``,
                    the cuBLAS workspace, what the graphs hold behind the allocator, the
                    piecewise and reduce-overhead pools) grew by more than
                    ``memory_threshold`` (default 10 %) and by more than ``memory_floor``
                    (default 2 MiB) (off by default).  First use and the allocator's
                    growth outside the pool are not compared: they depend on what ran
                    before in the process
==================  =========================================================================

The time rules read the ``startup`` section that ``pytest-cudagraph startup --runs N``
writes: per kind of run (cold, warm), the median of N runs and their median absolute
deviation (``mad``).  A figure regressed when::

    new.median - base.median > max(time_threshold * base.median, time_floor,
                                   NOISE_MADS * (base.mad + new.mad))

(defaults: 20 % and 1 s, ``NOISE_MADS`` 3; ``noisy_growth``).  Fewer than half the
runs cannot widen the MAD, so two slow runs of five (a fresh machine's first cold
runs) cannot hide a tripled median, as they widen the range; the message names the
runs farther than the noise from their median, set aside.  A report written before
``mad`` has it worked out from its ``samples``, else is read by its ``trimmed_spread``,
else its ``spread``.  A growth within the two runs' own noise is noise, however
large; a growth past it but below the relative
threshold or the floor is too small to act on.  A report of single runs
(``compile_time.total_s``, ``capture_s`` of one run, or a startup section of one
run per kind) has no spread, so the rule is not checked there and a note says
why; so is a rule no test of both reports gives figures for.  Where compile-time
is off (the default) and tests of both reports have compile times, a note says
they were not compared, and why.

Where both reports record cache lookups (``cache_keys``), each test whose cache
behaviour changed (counters, a lookup's outcome, a lookup without a partner) also
gets the components in which its lookups' keys differ, a few per test
(``key_diff``), and a line names the components every lookup's key differs in
(``torch_version``, ``system_info[...]``).  Between caches that both started empty
no rule reads them (a key that differs is why a counter moved, and the counter's
rule decides); on a shared cache, ``cache-miss`` counts a lookup that hit and now
misses only where its key changed in a component of its own.

Whatever ``--fail-on`` selects, a new report whose run did not run to its end
(``summary.complete`` false; for an older report without it, exit status 2, 3 or 4)
is a regression, ``incomplete``: ``compare`` never says "no regression" about tests
it has no record of.  So is a comparison in which no test of the base is in the new
report (``nothing-compared``, the verdict ``NOTHING COMPARED``: a wrong path, another
suite); where more than half the base's tests vanished, the verdict says so and a
warning names the fix, without failing unless ``vanished`` is selected.  An incomplete base is a warning.  ``crashed`` (a test whose
xdist worker died under it) counts as failing.

Example::

    comparison = compare_reports(load_report("old.json"), load_report("new.json"))
    print(comparison.format_text())
    sys.exit(1 if comparison.regressed else 0)

The work is split by job: ``compare_rules`` (the rules, their limits, ``--fail-on``),
``compare_pairing`` (which tests and graph sets meet, the table's figures),
``compare_verdicts`` and ``compare_costs`` (which rules fire), ``compare_results``
(the results and their JSON); their text is ``render.compare_text``'s.  This module
joins them; each name is imported from the module that defines it (``compare_rules.DEFAULT_RULES``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..records.key_diff import ReportKeyDiff, diff_reports, records_cache_keys
from ..records.loaded import LoadedReport, given, typed_report
from .compare_costs import (
    compile_time_off_notes,
    instruction_rule_notes,
    memory_rule_notes,
    time_rule_notes,
)
from .compare_pairing import env_diff, paired_tests
from .compare_results import Comparison, TestComparison, run_completeness
from .compare_rules import (
    DEFAULT_INSTRUCTIONS_THRESHOLD,
    DEFAULT_MEMORY_FLOOR_BYTES,
    DEFAULT_MEMORY_THRESHOLD,
    DEFAULT_NUMERICS_FLOOR,
    DEFAULT_NUMERICS_GROWTH,
    DEFAULT_POOL_THRESHOLD,
    DEFAULT_TIME_FLOOR_S,
    DEFAULT_TIME_THRESHOLD,
    Limits,
    parse_rules,
)
from .compare_verdicts import compare_test, run_regressions, shared_cache_notes

__all__ = [
    "compare_reports",
]


def compare_reports(
    base: LoadedReport | Mapping[str, Any],
    new: LoadedReport | Mapping[str, Any],
    *,
    rules: Iterable[str] | None = None,
    pool_threshold: float = DEFAULT_POOL_THRESHOLD,
    numerics_growth: float = DEFAULT_NUMERICS_GROWTH,
    numerics_floor: float = DEFAULT_NUMERICS_FLOOR,
    include_timings: bool = False,
    labels: tuple[str, str] = ("base", "new"),
    sources: tuple[str, str] | None = None,
    time_threshold: float = DEFAULT_TIME_THRESHOLD,
    time_floor: float = DEFAULT_TIME_FLOOR_S,
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD,
    memory_floor: float = DEFAULT_MEMORY_FLOOR_BYTES,
    instructions_threshold: float = DEFAULT_INSTRUCTIONS_THRESHOLD,
) -> Comparison:
    """Compare two reports: ``read_report``'s, or mappings (``load_report``'s, a live run's ``build_report``).

    A mapping is checked against the types first (``typed_report``): ReportError naming its label and the field.

    ``rules`` selects the regression rules (default: DEFAULT_RULES; see the module
    docstring).  Timings (``duration_s``, ``capture_s``) change on every run, so
    they are left out of the tables unless ``include_timings``; no rule reads them.
    ``sources``: the reports' paths as the user gave them, for the ``explain``
    command the text suggests (default: the labels).  ``time_threshold`` and
    ``time_floor`` (seconds) are the time rules' limits, ``memory_threshold`` and
    ``memory_floor`` (bytes) graph-memory's, ``instructions_threshold``
    compile-instructions' (see the module docstring).
    """
    selected = parse_rules(rules)
    limits = Limits(
        pool_threshold,
        numerics_growth,
        numerics_floor,
        time_threshold,
        time_floor,
        memory_threshold,
        memory_floor,
        instructions_threshold,
    )
    base_read, new_read = typed_report(base, labels[0]), typed_report(new, labels[1])
    env_changes, env_same = env_diff(given(base_read.report.env) or {}, given(new_read.report.env) or {})
    base_tests, new_tests = base_read.tests, new_read.tests
    both, new_ids, vanished = paired_tests(base_tests, new_tests)
    # only where both runs record lookups: against an earlier plugin's report, compare as before
    keys = diff_reports(base_read, new_read) if records_cache_keys(base_read) and records_cache_keys(new_read) else None
    tests = _compared_tests(base_read, new_read, both, selected, limits, include_timings, keys)
    new_run = run_completeness(new_read)
    return Comparison(
        env_changes=env_changes,
        env_same=env_same,
        tests=tests,
        new_tests=new_ids,
        vanished_tests=vanished,
        rules=tuple(selected),
        run_regressions=run_regressions(selected, vanished, new_run, len(both), new_ids),
        labels=labels,
        settings=limits.settings(),
        base_run=run_completeness(base_read),
        new_run=new_run,
        cache_keys=keys,
        sources=sources,
        rule_notes=shared_cache_notes(selected, base_tests, new_tests, tests)
        + time_rule_notes(selected, tests)
        + compile_time_off_notes(selected, base_tests, new_tests, both)
        + memory_rule_notes(selected, base_tests, new_tests, both)
        + instruction_rule_notes(selected, tests),
    )


def _compared_tests(
    base_read: LoadedReport,
    new_read: LoadedReport,
    both: list[str],
    selected: tuple[str, ...],
    limits: Limits,
    include_timings: bool,
    keys: ReportKeyDiff | None,
) -> tuple[TestComparison, ...]:
    """Each test of both runs compared, in node-id order, with its cache keys' diff where both runs record keys."""
    tests = tuple(
        compare_test(
            n,
            base_read.record(n),
            new_read.record(n),
            selected,
            limits,
            include_timings,
            keys.tests.get(n) if keys is not None else None,
        )
        for n in sorted(both)
    )
    if keys is not None:
        tests = tuple(replace(t, cache_keys=keys.tests.get(t.nodeid)) for t in tests)
    return tests
