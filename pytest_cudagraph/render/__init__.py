"""Render layer: every text and HTML view of a report.

Reads records only (never the library or torch): the terminal section, ``show``,
the HTML page, the tables of a test's record, cache-key explanations.
"""
