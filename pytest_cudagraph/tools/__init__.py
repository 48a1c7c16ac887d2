"""Tools layer: the ``pytest-cudagraph`` commands.

- ``cli``: the command line (``show``, ``compare``, ``explain``, ``merge``, ``startup``, ``schema``);
- ``compare``: two reports' verdicts, figures and rules; ``compare_noise``: the noise of a figure;
- ``merge``: shard reports into one;
- ``startup_cost``: what the plugin costs a run's start-up; ``instructions``: callgrind counts.

Never imports the library or torch.
"""
