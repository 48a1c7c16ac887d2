"""Library layer: Dynamo and Inductor compiles.

- ``recompiles``: ``watch_recompiles``, recompile and graph-break limits;
- ``guard_failures``: a failed guard read into what changed;
- ``dynamo_log``: Dynamo's recompile and graph-break log records;
- ``call_site``: the user's line behind a frame;
- ``compile_time``: compile time per phase;
- ``expect``: the ``expect=`` blocks shared by the watches.
"""
