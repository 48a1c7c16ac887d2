"""Records layer: the report, its types and its files.

Imports nothing of the library or of torch, so ``compare``, ``show`` and ``merge``
run on a machine without torch.

- ``schema``: the report's types, and the JSON Schema generated from them;
- ``record``: the record of one test, filled while it runs; ``running``: the running test, as the
  plugin marks it (the record is made from it on first use);
- ``report``: building the report; ``files``, ``load`` and ``validate``: writing it
  atomically, loading it, checking it against its types;
- ``progress``: how far a run got;
- ``cold_warm``: cold and warm passes as a report holds them;
- ``key_diff``: the components of recorded cache keys and what differs between two;
- ``comparison`` and ``startup``: ``compare``'s and the start-up benchmark's results, as data;
- ``json_values``, ``worker_records``: strict JSON values; records sent by xdist workers.
"""
