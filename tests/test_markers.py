"""Marker argument parsing: the library part behind the collection errors."""

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pytest_cudagraph.errors import CudagraphError
from pytest_cudagraph.plugin.markers import (
    MARKER_DOCS,
    CompileCacheMarker,
    MarkerArgumentError,
    misspelled_marker_message,
    parse_capture_sizes,
    parse_compile_cache,
    parse_cudagraph,
    parse_max_recompiles,
)


@given(st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=60))
def test_valid_capture_sizes_come_back_sorted_and_unique(sizes):
    parsed = parse_capture_sizes(sizes, "capture_sizes")
    assert list(parsed) == sorted(set(sizes))


@given(
    st.lists(st.integers(min_value=1, max_value=512), max_size=10),
    st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.none()),
    st.integers(min_value=0, max_value=10),
)
def test_any_invalid_size_is_rejected_and_named(good, bad, position):
    sizes = list(good)
    sizes.insert(min(position, len(sizes)), bad)
    with pytest.raises(MarkerArgumentError) as info:
        parse_capture_sizes(sizes, "capture_sizes")
    assert repr(bad) in str(info.value)
    assert "positive integer" in str(info.value)


@pytest.mark.parametrize(
    "sizes, sentence",
    [
        (
            [0, 8],
            "@pytest.mark.cudagraph: capture_sizes=[0, 8] must be a non-empty list of positive ints, "
            "but capture size 0 is not a positive integer; give sizes such as [1, 2, 4, 8]",
        ),
        (
            [],
            "@pytest.mark.cudagraph: capture_sizes=[] is empty; give at least one positive batch size "
            "such as [1, 2, 4, 8]",
        ),
        (
            8,
            "@pytest.mark.cudagraph: capture_sizes=8 is not a list of batch sizes; give positive integers "
            "such as [1, 2, 4, 8]",
        ),
    ],
)
def test_capture_sizes_read_as_the_one_validator_says_and_a_marker_wants_a_list(sizes, sentence):
    with pytest.raises(MarkerArgumentError) as info:
        parse_capture_sizes(sizes, "@pytest.mark.cudagraph: capture_sizes")
    assert str(info.value) == sentence


def test_a_marker_argument_error_is_a_cudagraph_error_and_a_value_error():
    with pytest.raises(CudagraphError):
        parse_max_recompiles((-1,), {})
    with pytest.raises(ValueError):
        parse_max_recompiles((-1,), {})


def test_cudagraph_accepts_positional_sizes_and_tolerances():
    marker = parse_cudagraph(([8, 1, 4],), {"rtol": 1e-3, "atol": 0})
    assert marker.capture_sizes == (1, 4, 8)
    assert (marker.rtol, marker.atol) == (1e-3, 0.0)
    assert parse_cudagraph((), {}).capture_sizes is None


@pytest.mark.parametrize("n", [0, 1, 7])
def test_max_recompiles_accepts_non_negative_ints(n):
    assert parse_max_recompiles((n,), {}).n == n
    assert parse_max_recompiles((), {"n": n}).n == n


def test_max_recompiles_defaults_to_zero():
    assert parse_max_recompiles((), {}).n == 0


@pytest.mark.parametrize("n", [-1, 1.0, "1", None, True])
def test_max_recompiles_rejects(n):
    with pytest.raises(MarkerArgumentError, match="is not a non-negative integer"):
        parse_max_recompiles((n,), {})


@pytest.mark.parametrize(
    "parse, kwargs, sentence",
    [
        (
            parse_cudagraph,
            {"world_size": 0},
            "@pytest.mark.cudagraph: world_size=0 is not a positive integer; "
            "give the number of ranks (one GPU each), such as world_size=2",
        ),
        (
            parse_cudagraph,
            {"max_rerecords": -2},
            "@pytest.mark.cudagraph: max_rerecords=-2 is not a non-negative integer; give how many times a "
            "reduce-overhead function may be recorded again at a new input shape, such as max_rerecords=4",
        ),
        (
            parse_max_recompiles,
            {"n": 1.0},
            "@pytest.mark.max_recompiles: n=1.0 is not a non-negative integer; "
            "give the number of recompiles the test may cause, such as n=0",
        ),
    ],
)
def test_a_count_argument_out_of_range_is_one_sentence_naming_it_and_the_fix(parse, kwargs, sentence):
    with pytest.raises(MarkerArgumentError) as info:
        parse((), kwargs)
    assert str(info.value) == sentence


@given(st.integers(min_value=1, max_value=64), st.integers(min_value=0, max_value=64))
def test_cudagraph_counts_come_back_as_ints_and_none_when_left_out(world_size, max_rerecords):
    marker = parse_cudagraph((), {"world_size": world_size, "max_rerecords": max_rerecords})
    assert (marker.world_size, marker.max_rerecords) == (world_size, max_rerecords)
    assert (parse_cudagraph((), {}).world_size, parse_cudagraph((), {}).max_rerecords) == (None, None)


def test_max_recompiles_rejects_extra_arguments():
    with pytest.raises(MarkerArgumentError, match="too many positional arguments"):
        parse_max_recompiles((1, 2), {})


def test_compile_cache_modes():
    assert parse_compile_cache((), {}) == CompileCacheMarker(mode="inprocess")
    assert parse_compile_cache(("subprocess",), {}).mode == "subprocess"
    assert parse_compile_cache((), {"rtol": 1e-6}).bitwise is False
    assert parse_compile_cache((), {}).bitwise is True
    with pytest.raises(MarkerArgumentError, match="use mode='inprocess' or mode='subprocess'"):
        parse_compile_cache(("cold",), {})


# ----------------------------------------------------------------------------
# marks one edit away from the plugin's
# ----------------------------------------------------------------------------

OURS = sorted(MARKER_DOCS)


def _one_edit_variants(name: str) -> set[str]:
    letters = "abcdefghijklmnopqrstuvwxyz_"
    deletions = {name[:i] + name[i + 1 :] for i in range(len(name))}
    swaps = {name[:i] + name[i + 1] + name[i] + name[i + 2 :] for i in range(len(name) - 1)}
    substitutions = {name[:i] + c + name[i + 1 :] for i in range(len(name)) for c in letters}
    insertions = {name[:i] + c + name[i:] for i in range(len(name) + 1) for c in letters}
    return (deletions | swaps | substitutions | insertions) - {name}


@pytest.mark.parametrize("ours", OURS)
def test_every_one_edit_misspelling_of_a_plugin_marker_is_named_with_the_fix(ours):
    for variant in _one_edit_variants(ours):
        if variant in MARKER_DOCS:
            continue
        message = misspelled_marker_message(variant, registered=set())
        assert message is not None, variant
        assert f"@pytest.mark.{variant} is not a marker of pytest-cudagraph" in message
        assert "did you mean @pytest.mark." in message and "--strict-markers" in message


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20))
@example("cudagraph")
@example("max_recompile")
def test_only_a_name_one_edit_from_a_plugin_marker_is_flagged(name):
    # a plugin marker's own name is zero edits away and is never flagged
    near = name not in OURS and any(name in _one_edit_variants(ours) for ours in OURS)
    assert (misspelled_marker_message(name, registered=set()) is not None) == near


def test_a_registered_mark_and_the_plugin_marks_themselves_are_never_flagged():
    assert misspelled_marker_message("max_recompile", registered={"max_recompile"}) is None
    for ours in OURS:
        assert misspelled_marker_message(ours, registered=set()) is None
    assert misspelled_marker_message("slow", registered=set()) is None
