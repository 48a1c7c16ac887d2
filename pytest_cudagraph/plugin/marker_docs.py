"""The plugin's markers as pytest registers them: their documentation, and the near misses of their names.

pytest needs the markers registered before the first test module is imported
(``--strict-markers``, ``pytest --markers``), in every run, so this module is
loaded at start-up and holds nothing else: the markers' argument types and their
validation are ``markers``', loaded once a run uses the plugin.  Imports nothing.
"""

from __future__ import annotations

# how long ranks of a multi-rank test may wait on each other before the watchdog aborts them
DEFAULT_RANK_TIMEOUT_S = 120.0

MARKER_DOCS = {
    "cudagraph": (
        "cudagraph(capture_sizes=None, rtol=None, atol=None, *, trees=None, world_size=None, timeout=None, "
        "break_at=None, max_rerecords=None, align_collectives=True, observe=False, expect_sizes=None, "
        "check_sizes=True, one_pool=True, pool_check=True, require_replay=False, allow_capture_failures=False): "
        "a CUDA graph test; runs only with --cudagraph, and its arguments become the defaults of the "
        "cudagraphs fixture. trees='all' fails the test when any region compiled with "
        "mode='reduce-overhead' ran without a CUDA graph. world_size=N runs the cudagraph_ranks "
        "fixture's bodies on N ranks, one process per GPU; timeout (seconds, default "
        f"{DEFAULT_RANK_TIMEOUT_S:g}) bounds how long ranks may wait on each other; the ranks compare the "
        "collectives their graphs captured before the first replay (align_collectives=False turns that off). "
        "break_at=('ns::op', ...) makes cudagraphs.capture and cudagraphs.agree breakable: each graph ends at "
        "those ops, which run eagerly between graphs. max_rerecords=N fails the test when reduce-overhead "
        "re-records a function at a new input shape more than N times. observe=True records every CUDA "
        "graph the test body captures itself (an engine's own graphs) and fails on graphs of one call site in "
        "several pools (one_pool=False), on blocks kept across captures (pool_check=False), on sizes of "
        "expect_sizes or capture_sizes never captured (check_sizes=False), and on failed captures "
        "(allow_capture_failures=True); require_replay=True also fails on a graph never replayed."
    ),
    "max_recompiles": (
        "max_recompiles(n=0): fail the test if torch.compile (Dynamo) recompiles "
        "more than n times or hits the recompile limit while it runs."
    ),
    "compile_cache": (
        "compile_cache(mode='inprocess'|'subprocess', rtol=None, atol=None): run the "
        "test body cold against an empty compile cache, then warm; the warm pass must "
        "hit the FX-graph and AOTAutograd caches with no miss, save or bypass, compile "
        "no Triton kernel, and record the same tensors."
    ),
}


def misspelled_marker_message(name: str, registered: set[str]) -> str | None:
    """The sentence for a mark that is not registered but is one edit away from one of this plugin's, else None.

    Without ``--strict-markers`` pytest only warns about an unknown mark, and the
    test passes with nothing checked: ``@pytest.mark.max_recompile(0)`` looks like
    a recompile check and is none.
    """
    if name in registered or name in MARKER_DOCS:
        return None
    meant = next((ours for ours in MARKER_DOCS if _one_edit_apart(name, ours)), None)
    if meant is None:
        return None
    return (
        f"@pytest.mark.{name} is not a marker of pytest-cudagraph, so it checks nothing; "
        f"did you mean @pytest.mark.{meant}? (pytest --strict-markers makes every unknown marker an error)"
    )


def _one_edit_apart(a: str, b: str) -> bool:
    """True when one insertion, deletion, substitution or swap of neighbours turns ``a`` into ``b`` (a != b)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        differ = [i for i in range(len(a)) if a[i] != b[i]]
        if len(differ) == 1:
            return True
        first, second = (differ + [0, 0])[:2]
        return len(differ) == 2 and second == first + 1 and a[first] == b[second] and a[second] == b[first]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    index = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    return short[index:] == long[index + 1 :]
