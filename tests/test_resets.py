"""What the plugin installs survives the test body's own ``torch._dynamo.reset()``, ``torch.compiler.reset()``
and ``torch._logging.set_logs()``, is gone after the block, and a watch that lost sight says so.

On the CPU: Dynamo only (backend="eager"/"aot_eager").  A recording of the cudagraph
trees is what ``CUDAGraphTreeManager.record_function`` does around it: torch's own
callback handler runs its start callbacks with the CUDAGRAPH_RECORDING trigger
(``record_a_graph``), so the tree watch's callback is exercised without a GPU; the
whole path with real trees is tests/gpu/test_resets_gpu.py.
"""

from __future__ import annotations

import functools
import logging

import pytest
import torch
import torch._dynamo
import torch._logging
from test_wrapped_function_names import Block

from pytest_cudagraph import _compat, watch_recompiles
from pytest_cudagraph.compile.compile_time import watch_compile_time
from pytest_cudagraph.errors import InvariantViolation
from pytest_cudagraph.graphs.reduce_overhead import not_fully_cudagraphed, watch_trees
from pytest_cudagraph.graphs.rerecords import rerecord_failure
from pytest_cudagraph.graphs.tree_recordings import RecordingCount

try:
    from torch._dynamo.callback import CallbackTrigger, callback_handler

    RECORDING = getattr(CallbackTrigger, "CUDAGRAPH_RECORDING", None)
except ImportError:  # a torch without Dynamo's callback handler
    callback_handler, RECORDING = None, None

needs_recording_trigger = pytest.mark.skipif(
    RECORDING is None, reason="this torch has no CUDAGRAPH_RECORDING callback trigger (2.8+)"
)


def record_a_graph():
    """What the cudagraph trees do around one recording, as far as Dynamo's callbacks see it."""
    with callback_handler.install_callbacks(RECORDING, "0/0"):
        pass


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _scale(tokens):
    return tokens * 2


# ----------------------------------------------------------------------------
# the tree watch's recording callback
# ----------------------------------------------------------------------------


@needs_recording_trigger
def test_a_tree_watch_counts_the_recordings_after_each_reset_and_leaves_nothing_behind():
    reset_before = torch._dynamo.reset
    callbacks_before = list(callback_handler.start_callbacks)
    with watch_trees(device=0) as trees:
        record_a_graph()
        torch._dynamo.reset()  # took the watch's callback off Dynamo: undoing it raised ValueError
        record_a_graph()
        record_a_graph()
        torch.compiler.reset()
        record_a_graph()
    assert trees.result().lost_sight is None
    assert trees.recordings == 4
    assert callback_handler.start_callbacks == callbacks_before
    assert torch._dynamo.reset is reset_before


@needs_recording_trigger
def test_a_callback_the_body_registers_is_its_own_and_the_watch_counts_on():
    seen = []

    def mine(args):
        seen.append(args.callback_trigger)

    with watch_trees(device=0) as trees:
        callback_handler.register_start_callback(mine)
        record_a_graph()
        callback_handler.remove_start_callback(mine)
        record_a_graph()
    assert trees.recordings == 2
    assert seen == [RECORDING]
    assert mine not in callback_handler.start_callbacks


@needs_recording_trigger
def test_a_tree_watch_that_lost_sight_says_so_and_no_verdict_passes():
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

    torch_record_function = CUDAGraphTreeManager.__dict__["record_function"]

    def own_record_function(self, new_inputs, function_id):  # the body's own patch, calling nothing of ours
        raise AssertionError("not called on the CPU")

    try:
        with watch_trees(device=0) as trees:
            record_a_graph()
            CUDAGraphTreeManager.record_function = own_record_function
            callback_handler.clear()  # a reset the plugin does not see
            record_a_graph()  # missed
        # the body's patch stays the body's: the watch put back only what is still its own
        assert CUDAGraphTreeManager.__dict__["record_function"] is own_record_function
    finally:
        CUDAGraphTreeManager.record_function = torch_record_function
    lost = trees.result().lost_sight
    assert lost is not None and lost.startswith("recordings after Dynamo's callbacks were cleared somewhere")
    with pytest.raises(InvariantViolation, match="so its count of recordings is not given"):
        _ = trees.recordings
    assert trees.result().to_json()["lost_sight"] == lost
    trees_verdict = not_fully_cudagraphed(trees.result(), "@pytest.mark.cudagraph(trees='all')")
    assert trees_verdict == f"@pytest.mark.cudagraph(trees='all'): {lost}, so this check vouches for nothing after it."
    rerecords_verdict = rerecord_failure(trees.result().rerecords, 4, "ctx", trees.result().lost_sight)
    assert rerecords_verdict == f"ctx: {lost}, so max_rerecords=4 is not vouched for after it."


@needs_recording_trigger
def test_a_count_without_the_meter_loses_sight_at_a_clear_it_did_not_see_and_names_the_last_reset():
    count = RecordingCount(nodes=lambda: 0, meter=None).start()
    try:
        record_a_graph()
        torch._dynamo.reset()  # seen: registered again
        record_a_graph()
        callback_handler.clear()  # not seen
        record_a_graph()
        assert count.value() == 2
        lost = count.lost_sight()
    finally:
        count.stop()
    assert lost.startswith(
        "recordings after Dynamo's callbacks were cleared somewhere after the reset at tests/test_resets.py:"
    ), lost
    assert "`torch._dynamo.reset()  # seen: registered again`" in lost
    assert count.resets and count.resets[0].startswith("tests/test_resets.py:")


@needs_recording_trigger
def test_the_recording_callback_closes_after_a_reset_took_it_off():
    callback = _compat.watch_cudagraph_recordings(lambda: None)
    torch._dynamo.reset()
    assert not callback.registered()
    callback.close()  # list.remove(x): x not in list, before
    assert callback.ensure() is True and callback.registered()
    callback.close()
    assert not callback.registered()


# ----------------------------------------------------------------------------
# the gateway's wrapper of torch._dynamo.reset
# ----------------------------------------------------------------------------


def test_a_callback_that_raises_never_breaks_the_users_reset_and_is_kept_as_an_error():
    original = torch._dynamo.reset

    def broken(frame):
        raise RuntimeError("cannot answer")

    subscription = _compat.on_dynamo_reset(after=broken)
    try:
        torch._dynamo.reset()
    finally:
        subscription.close()
    assert subscription.errors == ["RuntimeError: cannot answer"]
    assert subscription.calls == 1
    assert torch._dynamo.reset is original


def test_a_reset_wrapped_again_by_the_body_keeps_its_wrapper_and_ours_goes_once_it_is_back(monkeypatch):
    original = torch._dynamo.reset
    frames = []
    subscription = _compat.on_dynamo_reset(after=frames.append)
    ours = torch._dynamo.reset

    @functools.wraps(ours)
    def theirs():
        return ours()

    monkeypatch.setattr(torch._dynamo, "reset", theirs)
    torch.compiler.reset()
    assert len(frames) == 1  # seen through their wrapper
    subscription.close()
    assert torch._dynamo.reset is theirs  # theirs is not undone by the plugin
    monkeypatch.undo()  # puts ours back, as they found it
    assert torch._dynamo.reset is ours
    torch._dynamo.reset()  # nobody listens: it takes itself off
    assert torch._dynamo.reset is original


# ----------------------------------------------------------------------------
# the recompile watch's log tap
# ----------------------------------------------------------------------------

LOGGERS = (
    "torch._dynamo.guards.__recompiles",
    "torch._dynamo.guards.__recompiles_verbose",
    "torch._dynamo.convert_frame",
    "torch._dynamo",
    "torch",
)


def _logging_state():
    from torch._logging._internal import log_state

    loggers = {}
    for name in LOGGERS:
        logger = logging.getLogger(name)
        # each set_logs() gives torch's loggers new handlers of its own: compared by kind
        handlers = sorted(type(handler).__name__ for handler in logger.handlers)
        loggers[name] = (logger.level, logger.propagate, handlers, list(logger.filters))
    return loggers, sorted(log_state.artifact_names)


@pytest.mark.parametrize("body_asks_for_recompiles", [False, True])
def test_recompiles_after_a_set_logs_in_the_body_are_counted_and_its_settings_stay(body_asks_for_recompiles):
    try:
        # what the body's set_logs leaves when no watch is on
        torch._logging.set_logs(dynamo=logging.ERROR, recompiles=body_asks_for_recompiles)
        expected = _logging_state()
        torch._logging.set_logs()
        f = torch.compile(_scale, backend="eager", dynamic=False)
        with watch_recompiles() as w:
            f(torch.ones(2))
            f(torch.ones(3))
            torch._logging.set_logs(dynamo=logging.ERROR, recompiles=body_asks_for_recompiles)
            f(torch.ones(4))  # its artifact was off: not counted, before
            f(torch.ones(5))
        assert w.count == 3
        assert w.lost_sight is None
        assert _logging_state() == expected
    finally:
        torch._logging.set_logs()


def test_recompiles_are_counted_across_a_reset_and_a_set_logs_together():
    try:
        f = torch.compile(_scale, backend="eager", dynamic=False)
        with watch_recompiles() as w:
            f(torch.ones(2))
            f(torch.ones(3))
            torch.compiler.reset()
            torch._logging.set_logs(inductor=logging.ERROR)
            f(torch.ones(3))  # a first compile again
            f(torch.ones(4))
        assert w.count == 2
        w.assert_at_most(2)
    finally:
        torch._logging.set_logs()


def test_a_recompile_watch_whose_log_was_cut_off_says_so_and_vouches_for_nothing():
    f = torch.compile(_scale, backend="eager", dynamic=False)
    try:
        with watch_recompiles() as w:
            f(torch.ones(2))
            f(torch.ones(3))
            logging.disable(logging.CRITICAL)  # every record dropped, Dynamo's recompile log too
            f(torch.ones(4))
    finally:
        logging.disable(logging.NOTSET)
    assert w.count == 1
    assert w.lost_sight == (
        "recompiles after a handler of the watch was taken off Dynamo's loggers (or their records disabled) "
        "in the block could not be counted"
    )
    with pytest.raises(InvariantViolation) as info:
        w.assert_at_most(5)
    assert str(info.value) == f"{w.lost_sight}, so at most 5 recompiles is not vouched for (1 counted before)."
    assert w.result().to_json()["lost_sight"] == w.lost_sight


# ----------------------------------------------------------------------------
# the tree watch's skip handlers
# ----------------------------------------------------------------------------


def test_a_skip_logged_after_the_bodys_set_logs_is_still_read_and_its_settings_stay():
    name = _compat.cudagraph_skip_logger_names()[0]
    _compat.load_cudagraph_trees()
    logger = logging.getLogger(name)
    try:
        torch._logging.set_logs(inductor=logging.ERROR)
        expected = (logger.level, logger.propagate, list(logger.handlers))
        torch._logging.set_logs()
        with watch_trees(device=0) as trees:
            torch._logging.set_logs(inductor=logging.ERROR)  # puts the logger back to torch's level
            logger.warning("skipping cudagraphs due to mutated inputs (1 instances)")
        assert trees.skip_reasons == ["skipping cudagraphs due to mutated inputs (1 instances)"]
        assert (logger.level, logger.propagate, list(logger.handlers)) == expected
    finally:
        torch._logging.set_logs()


# ----------------------------------------------------------------------------
# compile time: a frame compiled before the body's reset keeps its name
# ----------------------------------------------------------------------------


def test_a_frame_compiled_before_the_bodys_reset_is_still_named_after_the_decorated_function():
    # a forward under transformers' kind of decorator: one functools.wraps wrapper
    line = Block.forward.__wrapped__.__code__.co_firstlineno
    compiled = torch.compile(Block(), backend="aot_eager", dynamic=False)
    with watch_compile_time(report=False) as watch:
        compiled(torch.ones(2))
        torch._dynamo.reset()  # Dynamo forgets the code it compiled
    functions = {frame.function for frame in watch.result.frames}
    assert functions == {f"Block.forward (tests/test_wrapped_function_names.py:{line})"}, functions


# ----------------------------------------------------------------------------
# refusing compiles: a stance or flag the body sets inside the block
# ----------------------------------------------------------------------------


def test_a_compile_stance_the_body_sets_inside_no_compiles_fails_the_block_instead_of_passing_it():
    f = torch.compile(_scale, backend="eager", dynamic=False)
    with watch_recompiles() as w:
        f(torch.ones(2))
        with pytest.raises(InvariantViolation) as info:
            with w.no_compiles():
                torch.compiler.set_stance("default")  # the body's own, left set
                torch._dynamo.config.error_on_recompile = False
                f(torch.ones(3))  # compiled, not refused
    assert str(info.value) == (
        "inside `with w.no_compiles():` the body set its own compile stance or "
        "torch._dynamo.config.error_on_recompile, so compiles after that were not refused; set them outside the block"
    )
    assert w.count == 1
    assert _compat.compile_refusal_state() == (_compat.compile_stance(), False)


def test_error_on_recompile_the_body_turns_off_fails_a_raise_on_recompile_watch():
    f = torch.compile(_scale, backend="eager", dynamic=False)
    with pytest.raises(InvariantViolation) as info:
        with watch_recompiles(raise_on_recompile=True):
            f(torch.ones(2))
            torch._dynamo.config.error_on_recompile = False  # the body's own
            f(torch.ones(3))  # recompiled, not refused
    assert str(info.value).startswith(
        "watch_recompiles(raise_on_recompile=True): the body set its own compile stance or "
        "torch._dynamo.config.error_on_recompile inside the watch, so recompiles after that were not refused "
        "(1 counted)"
    )
    assert torch._dynamo.config.error_on_recompile is False


# ----------------------------------------------------------------------------
# the cache probe's bypass-reason filters
# ----------------------------------------------------------------------------


def test_a_bypass_reason_logged_after_the_bodys_set_logs_is_still_collected_and_its_settings_stay():
    from pytest_cudagraph.caches.probe import cache_probe

    logger = logging.getLogger("torch._inductor.codecache")
    try:
        torch._logging.set_logs(inductor=logging.ERROR)
        expected = (logger.level, logger.propagate, list(logger.filters))
        torch._logging.set_logs()
        with cache_probe() as probe:
            torch._logging.set_logs(inductor=logging.ERROR)  # puts the logger back to torch's level
            logger.info("Bypassing FX Graph Cache because '%s'", "a reason logged after set_logs")
            reasons = list(probe._meter.reasons)
        assert reasons == [("fxgraph", "a reason logged after set_logs")]
        assert (logger.level, logger.propagate, list(logger.filters)) == expected
    finally:
        torch._logging.set_logs()
