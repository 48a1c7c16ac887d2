"""The markers that check a test's call: ``max_recompiles``, ``compile_cache`` and ``cudagraph(trees="all", max_rerecords=N)``.

A violated invariant fails the test in its call phase (FAILED, not a teardown
ERROR), with the plugin's own sentence and table and no traceback.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..errors import InvariantViolation
from .failure_site import CHECK_FAILURE_KEY, note_check_failure, site_of_location
from .items import MARKERS_KEY, RECOMPILE_WATCH_KEY, STATE_KEY, record_of


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Around a test's call: with ``max_recompiles(n)``, watch Dynamo and fail past ``n`` recompiles."""
    marker = item.stash.get(MARKERS_KEY, {}).get("max_recompiles")
    if marker is None:
        return (yield)
    from ..compile.recompiles import start_from_empty_dynamo_cache, watch_recompiles

    # the recompiles fixture's watch when the test has one; else our own, which
    # reports into the test's record as it exits
    watch = item.stash.get(RECOMPILE_WATCH_KEY, None)
    watch_in_test = watch is not None
    if watch is None:
        start_from_empty_dynamo_cache()
        with watch_recompiles() as watch:
            result = yield
    else:
        result = yield
    try:
        watch.assert_at_most(marker.n, context=f"@pytest.mark.max_recompiles({marker.n})", watch_in_test=watch_in_test)
    except InvariantViolation as exc:
        failure = str(exc)
        note_check_failure(item, "max_recompiles", exc.site)
    else:
        return result
    # Failed outside the except block: pytest would print the InvariantViolation
    # again as the "During handling ..." context.
    pytest.fail(failure, pytrace=False)


# pytest reads only attributes named pytest_*: a second wrapper of one hook needs its own such name
@pytest.hookimpl(wrapper=True, specname="pytest_runtest_call")
def pytest_runtest_call_fully_cudagraphed(item: pytest.Item) -> Iterator[None]:
    """Around the call of a ``cudagraph(trees="all")`` test: every reduce-overhead region must run as a graph;
    with ``max_rerecords=N`` no function may be recorded again at a new shape more than N times."""
    marker = item.stash.get(MARKERS_KEY, {}).get("cudagraph")
    if marker is None or not marker.watches_trees:
        return (yield)
    from .. import _compat

    if not _compat.cuda_available():  # the test skips; there are no trees to watch
        return (yield)
    from ..graphs.reduce_overhead import not_fully_cudagraphed, watch_trees
    from ..graphs.rerecords import rerecord_failure

    with watch_trees(record=record_of(item)) as trees:
        result = yield
    failures = []
    if marker.trees == "all":
        failures.append(not_fully_cudagraphed(trees.result(), context="@pytest.mark.cudagraph(trees='all')"))
        if failures[-1] is not None:
            skipped = trees.result().skipped
            note_check_failure(item, "trees", site_of_location(skipped[0].location) if skipped else None)
    if marker.max_rerecords is not None:
        context = f"@pytest.mark.cudagraph(max_rerecords={marker.max_rerecords})"
        watched = trees.result()
        failures.append(rerecord_failure(watched.rerecords, marker.max_rerecords, context, watched.lost_sight))
        if failures[-1] is not None and CHECK_FAILURE_KEY not in item.stash:
            note_check_failure(item, "max_rerecords", None)
    failure = "\n\n".join(f for f in failures if f is not None)
    if failure:
        pytest.fail(failure, pytrace=False)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """In place of calling a ``compile_cache`` test once: run it cold, then warm, and check the warm pass."""
    marker = pyfuncitem.stash.get(MARKERS_KEY, {}).get("compile_cache")
    if marker is None:
        return None
    from .compile_cache_marker import run_marked_test

    state = pyfuncitem.config.stash[STATE_KEY]
    failure = None
    try:
        run_marked_test(pyfuncitem, marker, state.cache_root(), record_of(pyfuncitem))
    except InvariantViolation as exc:
        failure = str(exc)
        note_check_failure(pyfuncitem, "compile_cache", exc.site)
    if failure is not None:
        # outside the except block, so that pytest does not print the message twice
        pytest.fail(failure, pytrace=False)
    return True
