"""The plugin's markers: their arguments, as types, and the validation of them (their documentation: marker_docs).

Arguments are validated at collection, so a typo such as ``capture_sizes=[0, 8]``
is reported once, before any GPU time is spent, as one sentence that names the
test, the marker, the argument and the value given.  Nothing here imports torch.
"""

from __future__ import annotations

import difflib
import inspect
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CudagraphError
from .marker_docs import DEFAULT_RANK_TIMEOUT_S, MARKER_DOCS, misspelled_marker_message

COMPILE_CACHE_MODES = ("inprocess", "subprocess")
TREES_POLICIES = ("all",)
# The markers' documentation and the near-miss check are marker_docs' (registered in every run, while this
# module's dataclasses are built only once a run uses the plugin); imported above for the existing import paths.
__all__ = ["DEFAULT_RANK_TIMEOUT_S", "MARKER_DOCS", "MarkerArgumentError", "misspelled_marker_message"]


class MarkerArgumentError(CudagraphError, ValueError):
    """A marker was given an argument it cannot use; found at collection.

    ``str()`` of the error is the sentence shown to the user; the plugin prefixes
    the test's node id.  A ValueError too, as it always was.
    """


@dataclass(frozen=True)
class CudagraphMarker:
    capture_sizes: tuple[int, ...] | None = None
    rtol: float | None = None
    atol: float | None = None
    # "all": every reduce-overhead region must run as a CUDA graph (TreeWatch.assert_fully_cudagraphed)
    trees: str | None = None
    # ranks of the cudagraph_ranks fixture (None: the fixture's own argument or 1 rank)
    world_size: int | None = None
    timeout: float | None = None
    # the ops a breakable capture ends its graphs at ("ns::op" names; graphs/break_ops.py)
    break_at: tuple[str, ...] | None = None
    # the re-recordings at new shapes a reduce-overhead function may make (graphs/rerecords.py)
    max_rerecords: int | None = None
    # the cudagraph_ranks handle compares the ranks' captured collectives before the first replay
    align_collectives: bool = True
    # record every CUDA graph the test body captures itself and judge them (plugin/observe.py)
    observe: bool = False
    expect_sizes: tuple[int, ...] | None = None
    check_sizes: bool = True
    one_pool: bool = True
    pool_check: bool = True
    require_replay: bool = False
    allow_capture_failures: bool = False

    @property
    def observed_sizes(self) -> tuple[int, ...] | None:
        """The sizes the observed graphs must cover: ``expect_sizes``, else ``capture_sizes``; None when unchecked."""
        if not self.check_sizes:
            return None
        return self.expect_sizes if self.expect_sizes is not None else self.capture_sizes

    @property
    def watches_trees(self) -> bool:
        """Whether the test's reduce-overhead graphs are watched (``trees='all'`` or ``max_rerecords``)."""
        return self.trees == "all" or self.max_rerecords is not None


@dataclass(frozen=True)
class MaxRecompilesMarker:
    n: int = 0


@dataclass(frozen=True)
class CompileCacheMarker:
    mode: str = "inprocess"
    rtol: float | None = None
    atol: float | None = None

    @property
    def bitwise(self) -> bool:
        return self.rtol is None and self.atol is None


def _bind(name: str, signature: Callable[..., Any], args: tuple, kwargs: dict) -> dict:
    parameters = inspect.signature(signature).parameters
    try:
        bound = inspect.signature(signature).bind(*args, **kwargs)
    except TypeError as exc:
        # a mistyped keyword (capture_size=) gets the near name, as a mistyped marker name does
        meant = [
            f"{match}={kwargs[key]!r}" if len(repr(kwargs[key])) <= 40 else match
            for key in kwargs
            if key not in parameters
            for match in difflib.get_close_matches(key, list(parameters), n=1)
        ]
        guess = f"did you mean {meant[0]}? " if meant else ""
        raise MarkerArgumentError(
            f"@pytest.mark.{name}: {exc}; {guess}the signature is {MARKER_DOCS[name].split(':')[0]}"
        ) from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _count(marker: str, arg: str, value: Any, least: int, fix: str) -> int:
    """A whole-number argument of at least ``least`` (0 or 1); ``fix`` says what to give instead."""
    if not _is_int(value) or value < least:
        kind = "positive" if least == 1 else "non-negative"
        raise MarkerArgumentError(f"@pytest.mark.{marker}: {arg}={value!r} is not a {kind} integer; give {fix}")
    return int(value)


def _tolerance(marker: str, arg: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) >= 0:
        raise MarkerArgumentError(
            f"@pytest.mark.{marker}: {arg}={value!r} is not a non-negative number; "
            f"give a float such as {arg}=1e-5, or leave it out for the dtype's default"
        )
    return float(value)


def parse_capture_sizes(value: Any, where: str) -> tuple[int, ...]:
    """Validate a list of batch sizes; ``where`` names the marker argument or ini option.

    The one capture-size validator (``sizes.validate_capture_sizes``), raising
    MarkerArgumentError; an int alone is refused here (a marker takes a list).
    """
    from ..graphs.sizes import validate_capture_sizes  # at the first marker or ini option that gives sizes

    return validate_capture_sizes(value, where, error=MarkerArgumentError, one_int=False)


def _cudagraph(
    capture_sizes=None, rtol=None, atol=None, *, trees=None, world_size=None, timeout=None, break_at=None,
    max_rerecords=None, align_collectives=True, observe=False, expect_sizes=None, check_sizes=True, one_pool=True,
    pool_check=True, require_replay=False, allow_capture_failures=False,
):  # pragma: no cover  # fmt: skip
    pass


# observe=True's switches: what each turns on or off, for the sentence of a bad value
OBSERVE_SWITCHES = {
    "observe": "observe=True records every CUDA graph the test body captures and checks them",
    "check_sizes": "check_sizes=False leaves the capture sizes unchecked",
    "one_pool": "one_pool=False lets the graphs of one call site use several pools",
    "pool_check": "pool_check=False leaves blocks kept across captures unchecked",
    "require_replay": "require_replay=True fails on a graph captured and never replayed",
    "allow_capture_failures": "allow_capture_failures=True lets a capture fail while the test goes on",
}


def _max_recompiles(n=0):  # pragma: no cover - signature only
    pass


def _compile_cache(mode="inprocess", rtol=None, atol=None):  # pragma: no cover - signature only
    pass


def parse_cudagraph(args: tuple, kwargs: dict) -> CudagraphMarker:
    bound = _bind("cudagraph", _cudagraph, args, kwargs)
    sizes = bound["capture_sizes"]
    trees = bound["trees"]
    if trees is not None and trees not in TREES_POLICIES:
        raise MarkerArgumentError(
            f"@pytest.mark.cudagraph: trees={trees!r} is not a known policy; use trees='all' to fail the test "
            "when any reduce-overhead region ran without a CUDA graph, or leave it out"
        )
    world_size = bound["world_size"]
    if world_size is not None:
        world_size = _count(
            "cudagraph", "world_size", world_size, 1, "the number of ranks (one GPU each), such as world_size=2"
        )
    timeout = bound["timeout"]
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not 0 < float(timeout) < float("inf")
    ):
        raise MarkerArgumentError(
            f"@pytest.mark.cudagraph: timeout={timeout!r} is not a positive number of seconds; "
            f"give how long ranks may wait on each other, such as timeout=60 (default {DEFAULT_RANK_TIMEOUT_S:g})"
        )
    max_rerecords = bound["max_rerecords"]
    if max_rerecords is not None:
        fix = (
            "how many times a reduce-overhead function may be recorded again at a new input shape, "
            "such as max_rerecords=4"
        )
        max_rerecords = _count("cudagraph", "max_rerecords", max_rerecords, 0, fix)
    align_collectives = bound["align_collectives"]
    if not isinstance(align_collectives, bool):
        raise MarkerArgumentError(
            f"@pytest.mark.cudagraph: align_collectives={align_collectives!r} is not True or False; give "
            "align_collectives=False to let the ranks replay without comparing their captured collectives first"
        )
    observed = _observe_arguments(bound, kwargs)
    return CudagraphMarker(
        **observed,
        align_collectives=align_collectives,
        break_at=_break_at(bound["break_at"]),
        max_rerecords=max_rerecords,
        capture_sizes=None if sizes is None else parse_capture_sizes(sizes, "@pytest.mark.cudagraph: capture_sizes"),
        rtol=_tolerance("cudagraph", "rtol", bound["rtol"]),
        atol=_tolerance("cudagraph", "atol", bound["atol"]),
        trees=trees,
        world_size=world_size,
        timeout=None if timeout is None else float(timeout),
    )


def _observe_arguments(bound: dict, given: dict) -> dict[str, Any]:
    """``observe=True`` and its switches, checked: each a bool, and none of them without ``observe=True``."""
    for name, meaning in OBSERVE_SWITCHES.items():
        if not isinstance(bound[name], bool):
            raise MarkerArgumentError(f"@pytest.mark.cudagraph: {name}={bound[name]!r} is not True or False; {meaning}")
    if not bound["observe"]:
        stray = [name for name in (*OBSERVE_SWITCHES, "expect_sizes") if name != "observe" and name in given]
        if stray:
            raise MarkerArgumentError(
                f"@pytest.mark.cudagraph: {stray[0]}={given[stray[0]]!r} applies only to observed graphs; "
                "add observe=True, or leave it out"
            )
    sizes = bound["expect_sizes"]
    return {
        "observe": bound["observe"],
        "expect_sizes": None if sizes is None else parse_capture_sizes(sizes, "@pytest.mark.cudagraph: expect_sizes"),
        **{name: bound[name] for name in OBSERVE_SWITCHES if name != "observe"},
    }


def _break_at(value: Any) -> tuple[str, ...] | None:
    """The marker's break ops, their form checked (whether they are registered is checked at capture)."""
    if value is None:
        return None
    from ..graphs.break_ops import break_at_entries  # no torch

    names = break_at_entries(value, "@pytest.mark.cudagraph: break_at", error=MarkerArgumentError, names_only=True)
    return names or None


def parse_max_recompiles(args: tuple, kwargs: dict) -> MaxRecompilesMarker:
    n = _bind("max_recompiles", _max_recompiles, args, kwargs)["n"]
    return MaxRecompilesMarker(
        n=_count("max_recompiles", "n", n, 0, "the number of recompiles the test may cause, such as n=0")
    )


def parse_compile_cache(args: tuple, kwargs: dict) -> CompileCacheMarker:
    bound = _bind("compile_cache", _compile_cache, args, kwargs)
    mode = bound["mode"]
    if mode not in COMPILE_CACHE_MODES:
        raise MarkerArgumentError(
            f"@pytest.mark.compile_cache: mode={mode!r} is not a known mode; use mode='inprocess' or mode='subprocess'"
        )
    return CompileCacheMarker(
        mode=mode,
        rtol=_tolerance("compile_cache", "rtol", bound["rtol"]),
        atol=_tolerance("compile_cache", "atol", bound["atol"]),
    )


PARSERS: dict[str, Callable[[tuple, dict], Any]] = {
    "cudagraph": parse_cudagraph,
    "max_recompiles": parse_max_recompiles,
    "compile_cache": parse_compile_cache,
}


def parse_item_markers(item: Any) -> dict[str, Any]:
    """Parse the closest of each plugin marker on ``item``; raises MarkerArgumentError."""
    parsed = {}
    for name, parse in PARSERS.items():
        mark = item.get_closest_marker(name)
        if mark is not None:
            parsed[name] = parse(tuple(mark.args), dict(mark.kwargs))
    return parsed
