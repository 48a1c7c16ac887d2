"""Compile cost in instructions: callgrind's count of torch.compile's work in one run, and the expected counts.

Wall time swings on a shared CI machine; the instructions a compile executes do
not.  ``pytest-cudagraph startup NODEID --instructions`` runs each cold and warm
run under callgrind with collection off, and the plugin in the run (it sees
``INSTRUCTIONS_ENV``) switches collection on only while a frame compiles
(``_compat.count_compile_instructions``).  What the run's callgrind file totals is
the compile's instructions: Dynamo, AOTAutograd and Inductor in the test's own
process.  Not counted: Inductor's compile workers and the C++ compiler (other
processes, ``--trace-children=no``), and a backward AOTAutograd compiles lazily at
its first ``.backward()``.

The gate (``compare --fail-on compile-instructions``) flags a median that grew by
more than a threshold, 2.5 % by default: PyTorch keeps its own compile benchmarks'
expected counts with a noise margin of 1.5-2.5 %.  The PyTorch habit of committing
the expected counts is ``startup --write-expected FILE``: a CSV of one row per node
id and pass, ``compare FILE NEW.json`` fails on a count that moved beyond its margin
either way (a win too: the file is then out of date) and prints the rows to paste.

Reads files and runs nothing itself; never imports torch.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..envvars import INSTRUCTIONS_ENV
from ..errors import ReportError

__all__ = [
    "DEFAULT_INSTRUCTIONS_THRESHOLD",
    "EXPECTED_HEADER",
    "INSTRUCTIONS_ENV",
    "INSTRUCTIONS_NOTE",
    "ExpectedCount",
    "expected_text",
    "callgrind_command",
    "callgrind_total",
    "check_expected",
    "expected_rows",
    "read_expected",
    "valgrind_missing",
]

DEFAULT_INSTRUCTIONS_THRESHOLD = 0.025
EXPECTED_HEADER = ("nodeid", "pass", "compile_instructions", "noise_margin")
# the report's words for what the count holds
INSTRUCTIONS_NOTE = (
    "compile_instructions: callgrind's count of the instructions torch.compile executed in the test's own "
    "process (every frame compile: Dynamo, AOTAutograd, Inductor, or their cache hits); Inductor's compile "
    "workers and the C++ compiler run in other processes and are not counted, nor is a backward compiled "
    "lazily at its first .backward()"
)
# a callgrind file's totals line is near its end; a file larger than this is not one
_CALLGRIND_FILE_LIMIT = 512 * 2**20


def valgrind_missing() -> str | None:
    """One sentence when valgrind is not on PATH (what to install), else None."""
    if shutil.which("valgrind"):
        return None
    return (
        "--instructions needs valgrind, which is not installed (not on PATH): install it (apt-get install "
        "valgrind, dnf install valgrind) and run again"
    )


def callgrind_command(command: Sequence[str], out_file: Path) -> list[str]:
    """``command`` under callgrind: collection off until the run toggles it, child processes not traced."""
    valgrind = shutil.which("valgrind") or "valgrind"
    return [
        valgrind,
        "--tool=callgrind",
        "--collect-atstart=no",
        "--trace-children=no",
        f"--callgrind-out-file={out_file}",
        *command,
    ]


def callgrind_total(path: Path) -> int | None:
    """The instructions (``Ir``) a callgrind output file totals; None when it has no totals line.

    ``totals:`` ends a file written at exit; ``summary:`` heads older files.  A file
    with several event columns counts ``Ir``, the first, which is callgrind's default.
    """
    try:
        if path.stat().st_size > _CALLGRIND_FILE_LIMIT:
            return None
        text = path.read_text(errors="replace")
    except OSError:
        return None
    found: int | None = None
    for line in text.splitlines():
        if line.startswith(("totals:", "summary:")):
            fields = line.split(":", 1)[1].split()
            if fields and fields[0].isdigit():
                found = int(fields[0])
                if line.startswith("totals:"):
                    return found
    return found


@dataclass(frozen=True)
class ExpectedCount:
    """One row of an expected-values file: a node id's median compile instructions in one pass, and its margin."""

    nodeid: str
    kind: str
    compile_instructions: int
    noise_margin: float

    def row(self) -> str:
        """The CSV line, as ``expected_rows`` writes it."""
        import csv
        import io

        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(
            [self.nodeid, self.kind, self.compile_instructions, f"{self.noise_margin:g}"]
        )
        return out.getvalue()


def _median(stats: Any) -> float | None:
    """A finite number from a report's ``median`` (the plugin loads this module: no text helpers here)."""
    value = stats.get("median") if isinstance(stats, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        return None
    return float(value)


def _counts(report: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """(node id, pass) -> the median of its runs' compile instructions, for every record that has one."""
    out = {}
    found = report.get("tests")
    tests: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    for nodeid, record in tests.items():
        startup = record.get("startup") if isinstance(record, Mapping) else None
        if not isinstance(startup, Mapping):
            continue
        for kind in ("cold", "warm"):
            found = startup.get(kind)
            part: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            median = _median(part.get("compile_instructions"))
            if median is not None:
                out[(str(nodeid), kind)] = int(round(median))
    return out


def expected_rows(report: Mapping[str, Any], margin: float = DEFAULT_INSTRUCTIONS_THRESHOLD) -> list[ExpectedCount]:
    """The expected-values rows of a startup report measured with ``--instructions``."""
    return [ExpectedCount(nodeid, kind, count, margin) for (nodeid, kind), count in sorted(_counts(report).items())]


def expected_text(rows: Sequence[ExpectedCount]) -> str:
    """An expected-values file: the header and one row per node id and pass."""
    return ",".join(EXPECTED_HEADER) + "\n" + "".join(row.row() + "\n" for row in rows)


def read_expected(path: str | Path) -> list[ExpectedCount]:
    """An expected-values file's rows; ReportError in one sentence when it is not one."""
    import csv
    import io

    from ..records.report import read_regular_bytes

    try:
        text = read_regular_bytes(path, limit=16 * 2**20).decode("utf-8")
    except (OSError, ValueError, Exception) as exc:  # FileRefused, UnicodeDecodeError, OSError
        raise ReportError(f"cannot read the expected instruction counts {path}: {exc}") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(cell.strip() for cell in header) != EXPECTED_HEADER:
        raise ReportError(
            f"{path} is not an expected instruction counts file: its first line must be {','.join(EXPECTED_HEADER)} "
            f"(write one with pytest-cudagraph startup --instructions --write-expected)"
        )
    rows = []
    for line_number, cells in enumerate(reader, start=2):
        if not cells:
            continue
        try:
            nodeid, kind, count, margin = cells
            row = ExpectedCount(nodeid, kind, int(count), float(margin))
        except ValueError:
            raise ReportError(
                f"{path}, line {line_number}: give nodeid,pass,compile_instructions,noise_margin "
                f"(an integer count and a fraction such as 0.025)"
            ) from None
        if kind not in ("cold", "warm") or row.compile_instructions < 0 or not 0 <= row.noise_margin < 1:
            raise ReportError(
                f"{path}, line {line_number}: the pass is cold or warm, the count at least 0 and the margin a "
                f"fraction below 1 (0.025 for 2.5 %)"
            )
        rows.append(row)
    if not rows:  # nothing checked is no evidence: "no regression" would vouch for counts nobody wrote
        raise ReportError(
            f"{path} holds its header and no row, so there is no expected instruction count to check; write the "
            f"counts with pytest-cudagraph startup --instructions --write-expected"
        )
    return rows


def check_expected(rows: Sequence[ExpectedCount], report: Mapping[str, Any]) -> tuple[list[str], bool]:
    """(lines to print, failed): each expected count against the report's, beyond its margin either way.

    A count that grew is a regression; one that fell is an unexpected win: the file
    is out of date, and that fails too, as PyTorch's check does, so that the next
    regression is measured from the new level.  The rows to paste close the output.
    """
    counts = _counts(report)
    lines, fresh, failed = [], [], False
    for row in rows:
        new = counts.get((row.nodeid, row.kind))
        if new is None:
            lines.append(f"MISSING {row.nodeid} ({row.kind}): the report has no instruction count for it")
            failed = True
            continue
        change = (new - row.compile_instructions) / row.compile_instructions if row.compile_instructions else 0.0
        words = (
            f"{row.nodeid} ({row.kind}): {row.compile_instructions:,} -> {new:,} instructions "
            f"({change:+.2%}, margin {row.noise_margin:.1%})"
        )
        if change > row.noise_margin:
            lines.append(f"REGRESSION {words}")
        elif change < -row.noise_margin:
            lines.append(f"WIN {words}: update the expected value")
        else:
            lines.append(f"ok {words}")
            continue
        failed = True
        fresh.append(ExpectedCount(row.nodeid, row.kind, new, row.noise_margin))
    if fresh:
        lines += ["", "paste these rows into the expected-values file:", *(row.row() for row in fresh)]
    return lines, failed
