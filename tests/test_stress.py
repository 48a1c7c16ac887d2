"""Hundreds of plugin tests under xdist: every record reaches the report once, as without xdist.

A suite of ten generated modules (500 tests that use the plugin: the ``recompiles``
fixture, ``max_recompiles`` markers, the ``compile_cache`` fixture without Inductor,
GPU tests that skip here, and on purpose a few failures, errors, skips, an xfail and
an xpass) runs twice in fresh interpreters, with ``-n 2`` and with ``-n 0``.  Both
reports must hold the same node ids, each once, with the same records except for
durations.  Every compile uses backend="eager", so the whole file stays within
about a minute and a half on two cores.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field

import pytest
from xdist_output import workers_by_test

from pytest_cudagraph.render.summary import summary_row

MODULES = 10
TESTS_PER_MODULE = 50  # tests that use the plugin, so get a record; plus one plain test per module


@dataclass(frozen=True)
class Expected:
    """What the report must say about one generated test."""

    outcome: str
    recompiles: int | None = None  # None: the record has no recompiles section
    limit_hits: int = 0
    caches: bool = False  # the record has a caches section (compile_cache fixture)


@dataclass
class GeneratedModule:
    name: str
    source: list[str] = field(default_factory=list)
    expected: dict[str, Expected] = field(default_factory=dict)
    unrecorded: list[str] = field(default_factory=list)  # node ids of tests that do not use the plugin
    teardown_errors: list[str] = field(default_factory=list)  # passed, then failed at teardown: counted twice

    def add(self, source: str, function: str, cases: dict[str, Expected]) -> None:
        """Add a test function and the record expected of each of its node ids (param id -> Expected)."""
        self.source.append(textwrap.dedent(source))
        for param_id, expected in cases.items():
            suffix = f"[{param_id}]" if param_id else ""
            self.expected[f"{self.name}.py::{function}{suffix}"] = expected


HEADER = """
import pytest
import torch

# enough dtypes to push one function past torch._dynamo.config.recompile_limit (8)
DTYPES = [
    torch.float32, torch.float64, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.float16, torch.bfloat16, torch.complex64,
]


def affine(x):
    return x * {scale} + {shift}


def scaled(x, k):
    return x * k + {shift}


def compiled(fn):
    return torch.compile(fn, backend="eager")


@pytest.fixture
def broken_setup():
    raise RuntimeError("this fixture fails at setup on purpose")


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("this fixture fails at teardown on purpose")
"""


def _ids(prefix: str, values) -> list[str]:
    return [f"{prefix}{v}" for v in values]


def _common_tests(module: GeneratedModule) -> None:
    """The tests every module has: recompile counts that follow from ranks, dtypes, sizes and scalars."""
    rank_dtype = [(1, 1), (1, 3), (2, 2)]
    rd_ids = [f"r{r}-d{d}" for r, d in rank_dtype]
    module.add(
        f"""
        @pytest.mark.parametrize("ranks, dtypes", {rank_dtype!r}, ids={rd_ids!r})
        def test_ranks_dtypes(recompiles, ranks, dtypes):
            fn = compiled(affine)
            for rank in range(1, ranks + 1):
                for dtype in DTYPES[:dtypes]:
                    fn(torch.ones((2,) * rank, dtype=dtype))
            # a rank or dtype is never made dynamic: each new pair is one more compile
            assert recompiles.count == ranks * dtypes - 1
            assert recompiles.limit_hits == []
        """,
        "test_ranks_dtypes",
        {i: Expected("passed", r * d - 1) for i, (r, d) in zip(rd_ids, rank_dtype)},
    )
    sizes = [1, 3]
    module.add(
        f"""
        @pytest.mark.parametrize("sizes", {sizes!r}, ids={_ids("n", sizes)!r})
        def test_automatic_dynamic(recompiles, sizes):
            fn = compiled(affine)
            for n in range(2, 2 + sizes):
                fn(torch.ones(n))
            # the second size makes the dimension dynamic; later sizes reuse that graph
            assert recompiles.count == min(sizes - 1, 1)
        """,
        "test_automatic_dynamic",
        {i: Expected("passed", min(n - 1, 1)) for i, n in zip(_ids("n", sizes), sizes)},
    )
    module.add(
        f"""
        @pytest.mark.max_recompiles(1)
        @pytest.mark.parametrize("values", {sizes!r}, ids={_ids("k", sizes)!r})
        def test_scalar_within_budget(values):
            fn = compiled(scaled)
            for k in range(2, 2 + values):
                fn(torch.ones(3), k)
        """,
        "test_scalar_within_budget",
        {i: Expected("passed", min(n - 1, 1)) for i, n in zip(_ids("k", sizes), sizes)},
    )
    gpu_sizes = [1, 8]
    module.add(
        f"""
        @pytest.mark.cudagraph(capture_sizes=[1, 2])
        @pytest.mark.parametrize("size", {gpu_sizes!r}, ids={_ids("b", gpu_sizes)!r})
        def test_gpu_only(size):
            raise AssertionError("a GPU test ran on a CPU runner")
        """,
        "test_gpu_only",
        {i: Expected("skipped") for i in _ids("b", gpu_sizes)},
    )
    module.add(
        """
        @pytest.mark.max_recompiles(2)
        def test_fixture_under_marker(recompiles):
            fn = compiled(affine)
            for dtype in DTYPES[:3]:
                fn(torch.ones(2, dtype=dtype))
            assert recompiles.count == 2
        """,
        "test_fixture_under_marker",
        {"": Expected("passed", 2)},
    )
    module.add(
        """
        def test_cache_and_recompiles(compile_cache, recompiles):
            fn = compiled(affine)
            fn(torch.ones(2))
            fn(torch.ones(2, dtype=torch.float64))
            assert recompiles.count == 1
            assert not compile_cache.stats().compiled_anything  # eager: Inductor never ran
        """,
        "test_cache_and_recompiles",
        {"": Expected("passed", 1, caches=True)},
    )
    module.source.append("\n\ndef test_plain():\n    assert torch.ones(2).sum() == 2\n")
    module.unrecorded.append(f"{module.name}.py::test_plain")


def _special_tests(module: GeneratedModule, index: int) -> None:
    """Outcomes other than "passed", each in one module, so that they travel from either worker."""
    if index == 0:
        module.add(
            """
            def test_wrong_count_fails(recompiles):
                fn = compiled(affine)
                fn(torch.ones(2))
                fn(torch.ones(2, dtype=torch.float64))
                assert recompiles.count == 0, "fails on purpose"
            """,
            "test_wrong_count_fails",
            {"": Expected("failed", 1)},
        )
    elif index == 1:
        module.add(
            """
            @pytest.mark.max_recompiles(0)
            def test_over_budget_fails():
                fn = compiled(affine)
                fn(torch.ones(2))
                fn(torch.ones(2, dtype=torch.float64))
            """,
            "test_over_budget_fails",
            {"": Expected("failed", 1)},
        )
    elif index == 2:
        module.add(
            """
            @pytest.mark.xfail(reason="on purpose", strict=False)
            def test_expected_failure(recompiles):
                fn = compiled(affine)
                fn(torch.ones(2))
                fn(torch.ones(2, 2))
                assert recompiles.count == 0

            @pytest.mark.xfail(reason="on purpose", strict=False)
            def test_unexpected_pass(recompiles):
                compiled(affine)(torch.ones(2))
                assert recompiles.count == 0
            """,
            "test_expected_failure",
            {"": Expected("xfailed", 1)},
        )
        module.expected[f"{module.name}.py::test_unexpected_pass"] = Expected("xpassed", 0)
    elif index == 3:
        module.add(
            """
            def test_setup_error(recompiles, broken_setup):
                pass

            def test_teardown_error(recompiles, broken_teardown):
                fn = compiled(affine)
                fn(torch.ones(2))
                fn(torch.ones(2, dtype=torch.float64))
            """,
            "test_setup_error",
            {"": Expected("error", 0)},
        )
        module.expected[f"{module.name}.py::test_teardown_error"] = Expected("error", 1)
        module.teardown_errors.append(f"{module.name}.py::test_teardown_error")
    elif index == 4:
        module.add(
            """
            def test_skips_midway(recompiles):
                compiled(affine)(torch.ones(2))
                pytest.skip("skips on purpose after compiling")

            @pytest.mark.skipif(True, reason="on purpose")
            @pytest.mark.max_recompiles(0)
            def test_skipif_marked():
                raise AssertionError("skipped tests do not run")
            """,
            "test_skips_midway",
            {"": Expected("skipped", 0)},
        )
        module.expected[f"{module.name}.py::test_skipif_marked"] = Expected("skipped")
    elif index == 5:
        module.add(
            """
            def test_limit_hit_is_counted(recompiles):
                fn = compiled(affine)
                for dtype in DTYPES:
                    fn(torch.ones(2, dtype=dtype))
                # compiles 1..8 fill the cache; the 9th dtype hits the limit, then Dynamo gives up
                assert recompiles.count == 7
                assert len(recompiles.limit_hits) == 1

            @pytest.mark.max_recompiles(8)
            def test_limit_hit_fails_the_marker():
                fn = compiled(affine)
                for dtype in DTYPES:
                    fn(torch.ones(2, dtype=dtype))
            """,
            "test_limit_hit_is_counted",
            {"": Expected("passed", 7, limit_hits=1)},
        )
        module.expected[f"{module.name}.py::test_limit_hit_fails_the_marker"] = Expected("failed", 7, limit_hits=1)
    elif index == 6:
        module.add(
            """
            def test_cache_hit_missing_fails(compile_cache):
                compiled(affine)(torch.ones(2))
                assert compile_cache.stats().fxgraph["hit"] == 1, "fails on purpose: eager never hits"
            """,
            "test_cache_hit_missing_fails",
            {"": Expected("failed", caches=True)},
        )


def _filler_tests(module: GeneratedModule, count: int) -> None:
    """Cheap tests that bring the module to its size: few compiles (they are most of the run time)."""
    steady, marker_only = count // 10, count // 2
    cached = count - steady - marker_only
    widths = list(range(2, 2 + steady))
    if widths:  # an empty parametrize would add a skipped test of its own
        module.add(
            f"""
            @pytest.mark.max_recompiles(0)
            @pytest.mark.parametrize("width", {widths!r}, ids={_ids("w", widths)!r})
            def test_steady_shape(width):
                fn = compiled(affine)
                x = torch.ones(width)
                for _ in range(3):
                    fn(x)
            """,
            "test_steady_shape",
            {i: Expected("passed", 0) for i in _ids("w", widths)},
        )
    budgets = list(range(marker_only))
    if budgets:
        module.add(
            f"""
            @pytest.mark.parametrize(
                "budget",
                [pytest.param(n, marks=pytest.mark.max_recompiles(n % 3), id=f"m{{n}}") for n in {budgets!r}],
            )
            def test_marker_only(budget):
                assert budget >= 0
            """,
            "test_marker_only",
            {i: Expected("passed", 0) for i in _ids("m", budgets)},
        )
    probes = list(range(cached))
    if probes:
        module.add(
            f"""
            @pytest.mark.parametrize("index", {probes!r}, ids={_ids("c", probes)!r})
            def test_cache_stats(compile_cache, index):
                if index % 8 == 1:
                    compiled(affine)(torch.ones(index + 2))  # eager: never reaches Inductor's caches
                stats = compile_cache.stats()
                assert not stats.compiled_anything
                assert stats.fxgraph["hit"] == stats.fxgraph["miss"] == stats.aot_autograd["hit"] == 0
            """,
            "test_cache_stats",
            {i: Expected("passed", caches=True) for i in _ids("c", probes)},
        )


def generate_suite(modules: int = MODULES, per_module: int = TESTS_PER_MODULE) -> list[GeneratedModule]:
    suite = []
    for index in range(modules):
        module = GeneratedModule(f"test_stress_{index}")
        module.source.append(HEADER.format(scale=index + 2, shift=index + 1))
        _common_tests(module)
        _special_tests(module, index)
        _filler_tests(module, per_module - len(module.expected))
        assert len(module.expected) == per_module, module.name
        suite.append(module)
    return suite


def write_suite(pytester: pytest.Pytester, suite: list[GeneratedModule]) -> dict[str, Expected]:
    pytester.makepyfile(**{m.name: "\n".join(m.source) for m in suite})
    expected: dict[str, Expected] = {}
    for module in suite:
        assert not expected.keys() & module.expected.keys()
        expected.update(module.expected)
    return expected


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), (
        f"duplicate keys in the report: {[k for k, n in Counter(keys).items() if n > 1]}"
    )
    return dict(pairs)


def read_report(path) -> dict:
    return json.loads(path.read_text(), object_pairs_hook=_no_duplicate_keys)


def without_durations(value):
    """``value`` without its times (``duration_s``, compile seconds, any ``*_s`` number): wall time is the
    one thing each process measures anew; what was compiled, and where, must still agree."""
    if isinstance(value, dict):
        return {
            k: without_durations(v)
            for k, v in value.items()
            if not (k.endswith("_s") and (v is None or isinstance(v, (int, float))))
        }
    if isinstance(value, list):
        return [without_durations(v) for v in value]
    return value


# "[gw1] [ 42%] PASSED test_stress_3.py::test_cache_stats[c4]" (xdist's -v line for each test phase)
def summary_rows(result: pytest.RunResult) -> list[str]:
    """The rows of the plugin's terminal table (every row: -v lifts its 40-row limit), each with its node id.

    A row is the test's name under its file's line: ``file::name`` is put back together.
    """
    table = result.stdout.str().split("= cudagraph =", 1)[1]
    rows, file = [], ""
    for line in table.splitlines():
        if line.startswith("test_stress_") and line.endswith(".py"):
            file = line
        elif line.startswith("  test_") and file:
            rows.append(f"{file}::{line.strip()}")
    # the compile column is seconds, measured anew by each process (and its width with them)
    return [" ".join(re.sub(r"\b\d+(?:\.\d+)?(?:ms|s)\b", "T", row).split()) for row in rows]


def run_with_report(pytester: pytest.Pytester, name: str, *args: str) -> tuple[pytest.RunResult, dict]:
    report_path = pytester.path / f"{name}.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", f"--cudagraph-report={report_path}", *args)
    return result, read_report(report_path)


def check_expected_records(report: dict, expected: dict[str, Expected]) -> None:
    tests = report["tests"]
    mismatched = {}
    for nodeid, want in expected.items():
        record = tests[nodeid]
        recompiles = record.get("recompiles")
        got = Expected(
            record["outcome"],
            None if recompiles is None else recompiles["count"],
            0 if recompiles is None else len(recompiles["limit_hits"]),
            "caches" in record,
        )
        if got != want:
            mismatched[nodeid] = (want, got)
    assert not mismatched, f"records unlike the generated expectations (expected, obtained): {mismatched}"


@pytest.mark.slow
def test_500_tests_on_two_workers_report_like_one_process(pytester):
    suite = generate_suite()
    expected = write_suite(pytester, suite)
    unrecorded = [nodeid for module in suite for nodeid in module.unrecorded]
    teardown_errors = [nodeid for module in suite for nodeid in module.teardown_errors]
    assert len(expected) == MODULES * TESTS_PER_MODULE == 500

    parallel, parallel_report = run_with_report(pytester, "parallel", "-n", "2")
    serial, serial_report = run_with_report(pytester, "serial", "-n", "0")

    outcomes = Counter(e.outcome for e in expected.values())
    for result in (parallel, serial):
        # every test ran once (the plain ones too); the failures on purpose make the exit code 1.
        # pytest counts a test that passed and then failed at teardown as passed and as an error.
        result.assert_outcomes(
            passed=outcomes["passed"] + len(unrecorded) + len(teardown_errors),
            failed=outcomes["failed"],
            errors=outcomes["error"],
            skipped=outcomes["skipped"],
            xfailed=outcomes["xfailed"],
            xpassed=outcomes["xpassed"],
        )
        assert result.ret == pytest.ExitCode.TESTS_FAILED

    # the -n 2 run really ran in two worker processes, each test in exactly one
    where = workers_by_test(parallel.outlines)
    assert set(where) == set(expected) | set(unrecorded)
    assert {nodeid for nodeid, workers in where.items() if len(workers) != 1} == set()
    per_worker = Counter(next(iter(workers)) for workers in where.values())
    assert set(per_worker) == {"gw0", "gw1"}, per_worker
    assert workers_by_test(serial.outlines) == {}

    # the same records, each once (read_report refuses duplicate keys), none lost, none from plain tests
    assert list(parallel_report["tests"]) == sorted(expected)
    assert list(serial_report["tests"]) == sorted(expected)
    check_expected_records(serial_report, expected)
    differing = {
        nodeid: (serial_report["tests"][nodeid], record)
        for nodeid, record in parallel_report["tests"].items()
        if without_durations(record) != without_durations(serial_report["tests"][nodeid])
    }
    assert differing == {}, f"records that differ between -n 0 and -n 2 (-n 0, -n 2): {differing}"
    assert parallel_report["summary"] == serial_report["summary"]
    assert parallel_report["summary"]["tests"] == 500
    assert parallel_report["summary"]["exitstatus"] == serial_report["summary"]["exitstatus"] == 1
    assert parallel_report["env"] == serial_report["env"]
    # the controller's table shows every worker's records too, row for row as without xdist
    rows = summary_rows(parallel)
    # a skipped test that measured nothing is counted under the table, not a row
    listed = [
        nodeid
        for nodeid, record in parallel_report["tests"].items()
        if record["outcome"] != "skipped" or any(cell not in ("-", "") for cell in summary_row(nodeid, record)[2:])
    ]
    assert sorted(row.split()[0] for row in rows) == sorted(listed)
    assert rows == summary_rows(serial)


@pytest.mark.slow
def test_xdist_group_suffix_never_reaches_the_report(pytester):
    # --dist loadgroup makes each worker append "@<group>" to the node ids of grouped
    # tests; the report must key them by the node id as collected, as -n 0 does.
    suite = generate_suite(modules=2, per_module=16)
    for module in suite:
        module.source.append(
            textwrap.dedent(
                """
                @pytest.mark.xdist_group("g")
                @pytest.mark.parametrize("host", ["user@host", "plain"])
                @pytest.mark.max_recompiles(0)
                def test_grouped(host):
                    compiled(affine)(torch.ones(2))

                @pytest.mark.xdist_group(name="h")
                @pytest.mark.xdist_group("g")
                def test_two_groups(recompiles):
                    compiled(affine)(torch.ones(2))

                @pytest.mark.parametrize("host", ["user@host"])
                def test_ungrouped_with_at_sign(recompiles, host):
                    assert recompiles.count == 0
                """
            )
        )
        for nodeid in ("test_grouped[user@host]", "test_grouped[plain]", "test_two_groups"):
            module.expected[f"{module.name}.py::{nodeid}"] = Expected("passed", 0)
        module.expected[f"{module.name}.py::test_ungrouped_with_at_sign[user@host]"] = Expected("passed", 0)
    expected = write_suite(pytester, suite)

    grouped, grouped_report = run_with_report(pytester, "grouped", "-n", "2", "--dist", "loadgroup")
    serial, serial_report = run_with_report(pytester, "serial", "-n", "0")
    assert "created: 2/2 workers" in grouped.stdout.str()
    # xdist did group them: the worker's node ids carry the suffix in its -v lines.  From
    # pytest 9.2 a node id can no longer be renamed after collection, xdist 3.8's suffix
    # has no effect, and only the comparison below remains to be checked.
    if pytest.version_tuple[:2] < (9, 2):
        assert any(nodeid.endswith("test_two_groups@g_h") for nodeid in workers_by_test(grouped.outlines))

    assert list(serial_report["tests"]) == sorted(expected)
    assert list(grouped_report["tests"]) == sorted(expected)
    check_expected_records(serial_report, expected)
    assert {n: without_durations(r) for n, r in grouped_report["tests"].items()} == {
        n: without_durations(r) for n, r in serial_report["tests"].items()
    }
    assert grouped_report["summary"] == serial_report["summary"]
