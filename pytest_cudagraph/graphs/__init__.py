"""Library layer: CUDA graphs.

- ``capture``: ``capture_graphs`` / ``GraphSet``, one graph per batch size in a shared pool;
- ``breakable``, ``break_ops``: ``capture_graphs(..., break_at=...)``, each size a chain of graphs
  with the break ops run eagerly between them;
- ``agree``: ``agree_modes``, full, breakable and piecewise graphs against eager and each other;
- ``rerecords``: reduce-overhead's re-recordings at new input shapes, counted from the events;
- ``capture_cost``: what each capture cost in time and in device memory, first use apart;
- ``memory``: pool figures, the high-water-mark rule, ``check_pool``'s table;
- ``numerics``: dtype-aware comparison of tensor trees, worst element;
- ``sizes``: capture-size lists (vLLM's default and its padding);
- ``reduce_overhead``: ``watch_trees``, torch.compile's ``mode="reduce-overhead"`` graphs;
- ``observe``, ``observe_verdict``: ``observe_graphs``, the graphs the code under test captures itself,
  recorded per capture, and the verdict on them;
- ``open_objects``: graph sets a test opened and did not close.
"""
