"""The parent's command-line options, passed on to a child pytest that runs one of its tests again.

The warm pass of ``@pytest.mark.compile_cache(mode="subprocess")`` is a fresh
``python -m pytest <nodeid>``.  A suite's own options (``pytest_addoption``:
``--dtype``, ``--model``) choose what its tests build: a child without them warms
another configuration, and a sound cache fails.  So the child gets the options of
the parent's command line (``config.invocation_params.args``, which an xdist worker
has from its controller), as ``pytest-cudagraph startup NODEID -- PYTEST_ARGS``
gives them to its runs, less:

- the selection: the paths and node ids, and the options that choose tests (``-k``,
  ``-m``, ``--deselect``, ``--ignore``, ``--lf``, ``--sw``, pytest-split's
  ``--splits``/``--group``, ...): the child runs its one node id;
- the reports (``--junitxml``, ``--cudagraph-report``, ``--cudagraph-baseline``,
  pytest-html's, pytest-json-report's, pytest-cov's, ``--report-log``): they are
  the parent's to write;
- xdist's (``-n``, ``--dist``, ``--tx``, ...): the child is one interpreter;
- what the child sets itself: ``-c``, ``--rootdir``, ``--basetemp``, the cache
  provider's options (the child runs without it), ``--cudagraph-devices`` and
  ``--cudagraph-group`` (the child inherits the parent's pinned device).

Options from the ini file's ``addopts`` and ``PYTEST_ADDOPTS`` reach the child
through the same ini file and environment.  The child starts where the parent was
started (``compile_cache_marker``), so that a relative path among them names the
same file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from .. import _compat

# the dests of the options left out (argparse's names: "--deselect" is "deselect")
SELECTION = {
    "keyword",
    "markexpr",
    "deselect",
    "ignore",
    "ignore_glob",
    "pyargs",
    "collectonly",
    "lf",
    "failedfirst",
    "newfirst",
    "last_failed_no_failures",
    "cacheshow",
    "cacheclear",
    "stepwise",
    "stepwise_skip",
    "stepwise_reset",
    "splits",
    "group",
    "splitting_algorithm",
    "store_durations",
    "durations_path",
    "clean_durations",
}
REPORTS = {"xmlpath", "junitprefix", "cudagraph_report", "cudagraph_baseline", "reportlog", "htmlpath", "css"}
REPORT_PREFIXES = ("json_report", "cov", "no_cov", "self_contained_html")
XDIST = {
    "numprocesses",
    "maxprocesses",
    "maxworkerrestart",
    "dist",
    "distload",
    "tx",
    "px",
    "rsyncdir",
    "rsyncignore",
    "testrunuid",
    "maxschedchunk",
    "looponfail",
}
CHILD_SETS = {"inifilename", "rootdir", "basetemp", "cudagraph_devices", "cudagraph_group"}


def left_out(dest: str) -> bool:
    """Whether the option of ``dest`` stays with the parent."""
    return (
        dest in SELECTION or dest in REPORTS or dest in XDIST or dest in CHILD_SETS or dest.startswith(REPORT_PREFIXES)
    )


def parent_options(config: pytest.Config) -> list[str]:
    """The options of this run's command line a child pytest running one of its tests must be given."""
    args = [str(arg) for arg in config.invocation_params.args]
    return options_for_child(args, _compat.pytest_option_arities(config))


def options_for_child(args: Sequence[str], arities: Mapping[str, tuple[str, Any]]) -> list[str]:
    """``args`` (a pytest command line) without its positional arguments and the options ``left_out`` names.

    ``arities``: option string -> ``(dest, nargs)`` (``_compat.pytest_option_arities``).
    ``--name=value`` and ``-kVALUE`` are read as argparse reads them; combined short
    flags (``-xvs``) are taken apart.  An option pytest does not know is passed on
    as it is.
    """
    out: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            break  # the rest is positional
        if not arg.startswith("-") or arg == "-":
            continue  # a path or node id: the selection
        if arg.startswith("--") or arg in arities:
            name, equals, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            values, index = _values(name, [value] if equals else [], args, index, arities)
            if name not in arities or not left_out(arities[name][0]):
                out += [arg] if equals else [name, *values]
            continue
        index = _short_flags(arg, args, index, arities, out)
    return out


def _short_flags(arg: str, args: Sequence[str], index: int, arities: Mapping[str, Any], out: list[str]) -> int:
    """``-xvs`` or ``-kEXPR``: each short option apart, its value attached or the next argument; the next index."""
    kept: list[str] = []
    for position in range(1, len(arg)):
        name = f"-{arg[position]}"
        if name not in arities:
            out.append(arg)  # not read as pytest would: passed on whole
            return index
        attached = arg[position + 1 :]
        takes_value = arities[name][1] != 0
        values, next_index = _values(name, [attached] if takes_value and attached else [], args, index, arities)
        if not left_out(arities[name][0]):
            kept += [name, *values]
        if takes_value:
            index = next_index
            break
    out += kept
    return index


def _values(
    name: str, given: list[str], args: Sequence[str], index: int, arities: Mapping[str, Any]
) -> tuple[list[str], int]:
    """The values of option ``name`` (``given`` when attached, else read from ``args[index:]``) and the next index."""
    if given or name not in arities:
        return given, index
    nargs = arities[name][1]
    if nargs == 0:
        return [], index
    if nargs is None or isinstance(nargs, int):
        count = 1 if nargs is None else nargs
        return list(args[index : index + count]), index + count
    values: list[str] = []
    while index < len(args) and not args[index].startswith("-") and (nargs != "?" or not values):
        values.append(args[index])
        index += 1
    return values, index
