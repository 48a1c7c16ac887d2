"""Reading pytest-xdist's verbose output in the plugin's own tests."""

from __future__ import annotations

import re

# "[gw1] [ 42%] PASSED test_a.py::test_x[3]": the worker and the node id it reported
WORKER_LINE = re.compile(r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) (\S+)")


def workers_by_test(lines: list[str]) -> dict[str, set[str]]:
    """``{node id as xdist printed it: {workers that reported it}}`` from ``-v`` lines."""
    seen: dict[str, set[str]] = {}
    for line in lines:
        match = WORKER_LINE.match(line)
        if match:
            seen.setdefault(match[2], set()).add(match[1])
    return seen
