"""Tools layer: the ``pytest-cudagraph`` commands.

- ``cli``: the command line (``show``, ``compare``, ``explain``, ``merge``, ``durations``, ``startup``, ``schema``);
  ``explain``: which tests and reports ``explain`` names, and its lines;
- ``compare``: two reports' verdicts, joined from ``compare_rules`` (the rules, their limits,
  ``--fail-on``), ``compare_pairing`` (which tests and graph sets meet), ``compare_verdicts`` and
  ``compare_costs`` (which rules fire), ``compare_results`` (the results, ``records.comparison``'s, with their text);
  ``compare_noise``: the noise of a figure; the text is ``render.compare_text``'s;
- ``merge``: shard reports into one;
- ``startup_cost``: what a test costs to start, cold and warm, joined from ``startup_child`` (a run's
  command, environment and process); the samples, statistics and report are ``records.startup``'s; the
  table is ``render.startup_text``'s; ``instructions``: callgrind counts.

Never imports the library or torch.
"""
