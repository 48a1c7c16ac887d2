"""The objects the ``cudagraphs`` and ``piecewise`` fixtures hand to a test.

Each is a thin handle on the plain API (``capture_graphs``, ``piecewise_compile``)
that adds what only a test has: the defaults of its ``cudagraph`` marker and the ini
options, its report record, a skip where it needs a GPU the machine lacks, and the
release of everything at teardown.  They live in the plugin layer because a skip is
pytest's; the library raises, the handle skips.  Importing this module imports no
torch: the library is loaded on the first call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..graphs.agree import ModeAgreement
    from ..graphs.capture import GraphSet
    from ..graphs.reduce_overhead import TreeWatch
    from ..piecewise import PiecewiseModule
    from ..records.record import TestRecord


def _require_cuda() -> None:
    """Skip the running test, with the one no-GPU reason, when torch sees no CUDA device."""
    from .. import _compat  # not at import: pytest loads the plugin in every run

    if not _compat.cuda_available():
        pytest.skip(_compat.no_cuda_skip_reason())


@dataclass(eq=False)
class _TestDefaults:
    """What a handle takes from its test: the record, the marker's or ini's sizes and tolerances, the marker's break ops."""

    record: TestRecord | None = None
    sizes: Sequence[int] | None = None
    rtol: float | None = None
    atol: float | None = None
    break_at: Sequence[str] | None = None

    def __post_init__(self) -> None:
        self.sizes = tuple(self.sizes) if self.sizes else None

    def _sizes(self, given: Sequence[int] | None, caller: str) -> tuple[int, ...]:
        """``given``, else the test's default sizes; the library's MisuseError where there are neither."""
        from ..graphs.sizes import capture_sizes_in_order

        return capture_sizes_in_order(given if given is not None else self.sizes, "sizes", caller=caller)


@dataclass(eq=False)
class CudagraphsFixture(_TestDefaults):
    """The ``cudagraphs`` fixture: ``capture_graphs`` with the test's defaults and record.

    Defaults for ``sizes``, ``rtol`` and ``atol`` come from the test's
    ``@pytest.mark.cudagraph(...)`` and the ini options.  Skips the test when no
    CUDA device is visible.  At tear-down every GraphSet is released and its
    result added to the test's report record.
    """

    graph_sets: list[GraphSet] = field(default_factory=list)
    _tree_watches: list[TreeWatch] = field(default_factory=list, repr=False)

    def capture(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[int], Any],
        sizes: Sequence[int] | None = None,
        **options: Any,
    ) -> GraphSet:
        """``capture_graphs(fn, make_inputs, sizes or the test's default sizes, ...)``; see ``capture_graphs``."""
        __tracebackhide__ = True
        _require_cuda()
        from ..graphs.capture import capture_graphs

        options.setdefault("rtol", self.rtol)
        options.setdefault("atol", self.atol)
        options.setdefault("record", self.record)
        if self.break_at:
            options.setdefault("break_at", self.break_at)
        graph_set = capture_graphs(fn, make_inputs, self._sizes(sizes, "capture_graphs"), **options)
        self.graph_sets.append(graph_set)
        return graph_set

    def agree(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[int], Any],
        sizes: Sequence[int] | None = None,
        modes: Sequence[str] = ("full", "breakable", "piecewise"),
        break_at: Sequence[Any] | None = None,
        trials: int = 3,
        **options: Any,
    ) -> ModeAgreement:
        """``agree_modes(fn, make_inputs, sizes, modes, break_at, trials)`` with the test's defaults; see ``agree_modes``.

        Sizes, tolerances and ``break_at`` default to the test's
        ``@pytest.mark.cudagraph(...)`` and the ini options.  Returns the
        ``ModeAgreement``; call ``.check()`` on it to fail on the first difference.
        """
        __tracebackhide__ = True
        from ..graphs.agree import check_modes

        break_at = break_at if break_at is not None else self.break_at
        check_modes(modes, break_at)  # a wrong argument is named before the GPU is asked for
        _require_cuda()
        from ..graphs.agree import agree_modes

        options.setdefault("rtol", self.rtol)
        options.setdefault("atol", self.atol)
        options.setdefault("record", self.record)
        chosen = self._sizes(sizes, "agree_modes")
        return agree_modes(fn, make_inputs, chosen, modes, break_at, trials, **options)

    def watch_trees(self, device: int | None = None) -> TreeWatch:
        """Count ``torch.compile(mode="reduce-overhead")`` recordings and skip reasons in a block.

        The figures go to the test's report section ``reduce_overhead``; see ``trees.watch_trees``.
        """
        _require_cuda()
        from ..graphs.reduce_overhead import watch_trees

        watch = watch_trees(device=device, record=self.record)
        self._tree_watches.append(watch)
        return watch

    def close(self) -> None:
        """Release every GraphSet (adding its result to the record) and stop tree watches."""
        errors = []
        for watch in self._tree_watches:
            if watch.active:
                watch.__exit__(None, None, None)
        for graph_set in self.graph_sets:
            try:
                graph_set.close()
            except Exception as exc:  # release the others before reporting
                errors.append(exc)
        self.graph_sets.clear()
        if errors:
            raise errors[0]


@dataclass(eq=False)
class PiecewiseFixture(_TestDefaults):
    """The ``piecewise`` fixture: ``piecewise(module, splitting_ops, capture_sizes=None, **options)``.

    Sizes and tolerances default to the test's ``cudagraph`` marker and the ini
    options.  At teardown every module it compiled is recorded into the test's report
    (``piecewise`` section) and its graphs are released.  Without CUDA the module
    runs its split pieces uncaptured, so nothing here skips.
    """

    modules: list[PiecewiseModule] = field(default_factory=list)

    def __call__(
        self, module: Any, splitting_ops: Iterable[Any], capture_sizes: Any = None, **options: Any
    ) -> PiecewiseModule:
        """``piecewise_compile(module, splitting_ops, capture_sizes or the test's default sizes, ...)``."""
        __tracebackhide__ = True
        from ..piecewise import PiecewiseModule

        options.setdefault("rtol", self.rtol)
        options.setdefault("atol", self.atol)
        compiled = PiecewiseModule(
            module,
            splitting_ops,
            capture_sizes if capture_sizes is not None else self.sizes,
            record=self.record,
            **options,
        )
        self.modules.append(compiled)
        return compiled

    def close(self) -> None:
        """Record and release every module this fixture compiled."""
        for compiled in self.modules:
            compiled.close()
        self.modules.clear()
