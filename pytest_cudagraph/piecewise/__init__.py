"""Piecewise CUDA graphs: split the FX graph at the splitting ops, capture every other piece.

Some ops (attention, mostly) cannot live inside a CUDA graph, but everything around
them can.  vLLM's answer, which this package reproduces so that a test can check it:

1. Dynamo traces the whole forward into one FX graph (``fullgraph=True``: a Dynamo
   graph break is a bug here, not a split).
2. The graph is cut at every node whose target is a *splitting op*, a
   ``torch.library`` op such as ``"cudagraph_toy::attention"``, with
   ``torch.fx.passes.split_module.split_module(..., keep_original_order=True)`` (the
   original order matters for ops that mutate their arguments).  Each splitting op
   becomes a piece of its own that runs eagerly; every other piece is compiled
   (Inductor by default) once, with a symbolic batch dimension.
3. Each non-splitting piece is captured as one CUDA graph per capture size, largest
   size first, all sizes and all pieces in **one** memory pool.  Outputs of a piece
   feed the next piece through static buffers; after a size is captured its piece
   outputs are kept only as non-owning aliases (vLLM's weak refs), so the next,
   smaller size reuses the same pool memory.

``strategy="inductor_partition"`` does step 2 inside Inductor instead (strategy 2
in docs/concepts.md): the whole graph goes to Inductor, which partitions it at
``config.custom_should_partition_ops`` after fusion and hands each partition to a
wrapper that captures it the same way.  Both strategies must give the same numbers.

At run time a batch of ``n`` rows is padded (zeros, along ``batch_dim``) to the
next captured size and the outputs are sliced back to ``n`` rows; a batch larger
than the largest captured size runs the compiled pieces without graphs.  Without
CUDA (or with CPU inputs) nothing is captured and the split pieces run as they are,
so the split itself is validated on the CPU.

Invariants checked, and the failures they report:

- ``.stats`` (vLLM's counters): ``pieces`` (all, splitting included),
  ``capturable_pieces``, ``graphs_captured`` (sizes x capturable pieces),
  ``backend_compilations`` and ``splitting_op_calls`` (eager calls of each
  splitting op during the last call, observed at the dispatcher).
- ``.check_replay(make_inputs)`` compares every captured size, a padded size in
  each gap and one size above the largest with the original module run eagerly,
  and raises :class:`InvariantViolation` naming the size, the path (captured,
  padded, eager), the worst element and the error.
- A parameter or buffer that moved since capture raises :class:`StaleGraphError`;
  a capture that fails raises :class:`CaptureError` naming the piece and the size.

The package, one job a module:

- ``ops``: resolving splitting-op names, matching graph nodes, counting eager calls;
- ``padding``: the inputs' batch size, padding to a captured size, the traced signature;
- ``trace``: the one Dynamo trace and calling its graph again without Dynamo (step 1);
- ``split``: the two splitting strategies and compiling the pieces (step 2);
- ``pieces``: one piece run, captured per size or replayed;
- ``runtime``: capturing every size into one pool, and each call's pad, replay, slice (step 3);
- ``results``: ``PiecewiseStats``, ``PiecewiseReplayCheck``, ``PiecewiseResult``;
- ``module``: the public face, ``piecewise_compile`` and ``PiecewiseModule``.

Example::

    compiled = piecewise_compile(model, ["cudagraph_toy::attention"], [1, 2, 4, 8])
    out = compiled(x)                      # traces, splits, captures 4 sizes x (L+1) pieces
    compiled.check_replay(lambda n: torch.randn(n, 32, device="cuda"))
    assert compiled.stats.pieces == 2 * L + 1
"""

from __future__ import annotations

from .module import PiecewiseModule, piecewise_compile
from .results import PiecewiseReplayCheck, PiecewiseResult, PiecewiseStats, SizeCheck
from .split import STRATEGIES

# piecewise_compile and what it and its module return
__all__ = [
    "STRATEGIES",
    "PiecewiseModule",
    "PiecewiseReplayCheck",
    "PiecewiseResult",
    "PiecewiseStats",
    "SizeCheck",
    "piecewise_compile",
]
