"""``@pytest.mark.cudagraph(observe=True)``: every CUDA graph the test body captures itself, recorded and judged.

The user keeps their engine test as it is and adds the marker.  The graphs the
test body captures, on any stream and through any path (raw ``CUDAGraph``,
``torch.cuda.graph``, cudagraph trees), are recorded by ``graphs/observe.py``;
the section ``observed_graphs`` goes to the test's record, and a failed check
fails the test in its call phase with the plugin's own message and no traceback.
A test body that raised keeps its own failure: the graphs are recorded, not judged.

Nothing is imported or patched for a test without ``observe=True``: this module
is loaded once the run uses the plugin, and its hook returns at once for any
other test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .items import MARKERS_KEY, record_of

if TYPE_CHECKING:
    from ..graphs.observe import GraphObservation

OBSERVE_CONTEXT = "@pytest.mark.cudagraph(observe=True)"
# the test's observation, made by the graph_observation fixture (set up before the call) or by the call's hook
OBSERVATION_KEY = pytest.StashKey["GraphObservation"]()


def observation_of(item: pytest.Item) -> GraphObservation:
    """The observation of an ``observe=True`` test: one per test, shared by the fixture and the call's hook."""
    observation = item.stash.get(OBSERVATION_KEY, None)
    if observation is None:
        from ..graphs.observe import observe_graphs

        marker: Any = item.stash[MARKERS_KEY]["cudagraph"]
        observation = observe_graphs(
            marker.observed_sizes,
            one_pool=marker.one_pool,
            pool_check=marker.pool_check,
            require_replay=marker.require_replay,
            allow_capture_failures=marker.allow_capture_failures,
            record=record_of(item),
        )
        item.stash[OBSERVATION_KEY] = observation
    return observation


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Around the call of a ``cudagraph(observe=True)`` test: record the graphs it captures, then check them."""
    marker = item.stash.get(MARKERS_KEY, {}).get("cudagraph")
    if marker is None or not marker.observe:
        return (yield)
    observation = observation_of(item)
    with observation:
        result = yield
    verdict = observation.result()
    if not verdict.passed:
        pytest.fail(verdict.message(OBSERVE_CONTEXT), pytrace=False)
    return result
