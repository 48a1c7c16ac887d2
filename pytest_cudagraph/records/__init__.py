"""Records layer: the report, its types and its files.

Imports nothing of the library or of torch, so ``compare``, ``show`` and ``merge``
run on a machine without torch.

- ``record``: the record of one test, filled while it runs;
- ``report``: building, writing (atomically), loading and validating the report;
- ``progress``: how far a run got;
- ``cold_warm``: cold and warm passes as a report holds them;
- ``key_diff``: the components of recorded cache keys and what differs between two.
"""
