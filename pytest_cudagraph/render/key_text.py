"""Cache keys for people: compare's few lines, explain's whole diff, show's table of lookups.

``key_diff`` pairs two runs' lookups and finds the components their keys differ
in; this module words it:

- ``compare``: a line per component every lookup's key differs in (at most five,
  then the ``explain`` command), and under each test whose cache behaviour
  changed, its lookups whose outcome changed or whose components differ beyond
  those, at most five components, with both values::

      fxgraph graph 1 (warm): hit -> miss; inductor_config[max_autotune]: False -> True

- ``pytest-cudagraph explain BASE NEW [TEST]``: every differing component, the
  keys, the outcomes, the lookups without a partner; ``explain REPORT [TEST]``: one
  run's misses with what the plugin found against the cold pass or an earlier run;
- ``pytest-cudagraph show``: per test, its lookups as a table.

Nothing here imports torch.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..records.key_diff import (
    KEYED_LAYERS,
    ComponentChange,
    Lookup,
    LookupPair,
    ReportKeyDiff,
    RunWideChange,
    TestKeyDiff,
    bracket_depths,
    call_focus,
    has_cache_keys,
    lookups_of,
    missing_sides,
    records_of,
    shared_components,
)
from ..records.loaded import LoadedReport, given
from .plain_text import clip, clip_middle, clip_nodeid, count_noun, fit_table, format_table, wrap_line

if TYPE_CHECKING:
    from ..records.schema import TestRecord

__all__ = [
    "lookups_legend",
    "SHORT_VALUE",
    "compare_lines",
    "component_change_text",
    "explain_command",
    "explain_lines",
    "fixed_value_text",
    "lookup_table_lines",
    "lookup_why",
    "one_run_lines",
    "one_test_lines",
    "prominent",
    "run_wide_lines",
    "show_lines",
    "value_pair_text",
]

# explain shows a value whole up to this length, and a graph's code as a diff of at most this many lines
WHOLE_VALUE = 400
DIFF_LINES = 60


# ----------------------------------------------------------------------------
# compare's lines
# ----------------------------------------------------------------------------

# at most this many components (and lookups) per test in compare's text; a longer line is split
COMPARE_COMPONENTS = 5
COMPARE_WIDTH = 160


def explain_command(base: str, new: str, nodeid: str | None = None) -> str:
    """``pytest-cudagraph explain base.json new.json 'tests/t.py::test[x]'``, quoted for a shell."""
    words = ["pytest-cudagraph", "explain", base, new] + ([nodeid] if nodeid else [])
    return " ".join(shlex.quote(w) for w in words)


def _layers_text(layers: Sequence[str]) -> str:
    return " and ".join(layers)


def run_wide_lines(run_wide: Sequence[RunWideChange], command: str, limit: int = COMPARE_COMPONENTS) -> list[str]:
    """compare's lines for the components every lookup's key differs in: at most ``limit``, then ``command``.

    A component that differs for one layer's lookups only names the layer.
    """
    if not run_wide:
        return []
    layers = [layer for layer in KEYED_LAYERS if any(layer in c.layers for c in run_wide)]
    lines = [f"cache keys: every {_layers_text(layers)} lookup's key differs between the runs in:"]
    for change in run_wide[:limit]:
        only = f" ({_layers_text(change.layers)})" if len(change.layers) < len(layers) else ""
        lines.append(f"  {component_change_text(change.change)}{only}")
    if len(run_wide) > limit:
        lines.append(f"  ... and {count_noun(len(run_wide) - limit, 'more component')}: {command}")
    return lines


def _detail(lookup: Lookup) -> str | None:
    """torch's ``cache_status_detailed`` where it says more than the outcome (``guard_miss``)."""
    return lookup.detail if lookup.detail not in (None, "hit", "full_miss", lookup.outcome) else None


def _pair_head(pair: LookupPair) -> str:
    outcome = f"{pair.base.outcome} -> {pair.new.outcome}" if pair.outcome_changed else pair.new.outcome
    if _detail(pair.new):
        outcome += f" ({_detail(pair.new)})"
    how = ", paired by its graph's code" if pair.paired_by == "gm" else ""
    return f"{pair.label}{how}: {outcome}"


def _pair_reason(pair: LookupPair, labels: tuple[str, str] = ("base", "new")) -> str:
    """What a pair without its own differing components says instead."""
    if pair.new.outcome == "bypass":
        return f"bypassed: {pair.new.bypass_reason}" if pair.new.bypass_reason else "bypassed, no reason recorded"
    if pair.new.detail == "guard_miss":
        return "same key, its shape guards failed"
    if pair.changes is None:
        missing = missing_sides(pair, labels)
        return f"no components recorded in {missing}" if missing else "no components recorded"
    if pair.run_wide:
        return "only the run-wide components above differ"
    if pair.key_changed:
        return "keys differ in no recorded component"
    return "same key"


def compare_lines(
    diff: TestKeyDiff, command: str, labels: tuple[str, str] = ("base", "new"), limit: int = COMPARE_COMPONENTS
) -> list[str]:
    """A test's key differences in a few lines for ``compare``: at most ``limit`` components and lookups.

    The lookups whose outcome changed come first, then those whose components
    differ beyond the run-wide ones; the rest is left to ``command`` (explain).
    """
    lines = ["  cache keys:"]
    budget, hidden_components, hidden_lookups, shown_lookups = limit, 0, 0, 0
    pairs = sorted((p for p in diff.pairs if p.outcome_changed or p.changes), key=lambda p: not p.outcome_changed)
    for pair in pairs:
        changes = pair.changes or ()
        if shown_lookups >= limit or (budget <= 0 and changes):
            hidden_lookups += 1
            hidden_components += len(changes)
            continue
        shown = changes[:budget]
        budget -= len(shown)
        hidden_components += len(changes) - len(shown)
        shown_lookups += 1
        items = [component_change_text(c) for c in shown] or [_pair_reason(pair, labels)]
        line = f"    {_pair_head(pair)}; " + "; ".join(items)
        if len(line) > COMPARE_WIDTH and len(items) > 1:
            lines.append(f"    {_pair_head(pair)}:")
            lines += [f"      {item}" for item in items]
        else:
            lines.append(line)
    for label, lookups in zip(labels, (diff.only_base, diff.only_new)):
        if lookups:
            listed = ", ".join(f"{x.label} {x.outcome}" for x in lookups[:limit])
            more = f" ... and {len(lookups) - limit} more" if len(lookups) > limit else ""
            lines.append(f"    only in {label}: {listed}{more}")
    hidden = [count_noun(hidden_components, "more differing component")] if hidden_components else []
    hidden += [count_noun(hidden_lookups, "more lookup")] if hidden_lookups else []
    if hidden:
        lines.append(f"    ... and {', '.join(hidden)}: {command}")
    return lines if len(lines) > 1 else []


# ----------------------------------------------------------------------------
# explain's lines
# ----------------------------------------------------------------------------


def _change_lines(change: ComponentChange, indent: str) -> list[str]:
    """Every differing component whole: short ones on a line, long ones around the difference then both values."""
    fixed_base, fixed_new = fixed_value_text(change.base), fixed_value_text(change.new)
    if fixed_base is not None or fixed_new is not None:
        return [indent + component_change_text(change, WHOLE_VALUE)]
    a, b = str(change.base and change.base[1]), str(change.new and change.new[1])
    if a == b:
        return [indent + component_change_text(change, WHOLE_VALUE), f"{indent}  {SAME_PRINT_HINT}"]
    if "\n" in a or "\n" in b:
        diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "base", "new", n=1, lineterm=""))[2:]
        shown = diff[:DIFF_LINES]
        lines = [f"{indent}{change.name}: its code differs ({count_noun(len(diff), 'diff line')}):"]
        lines += [f"{indent}  {line}" for line in shown]
        if len(diff) > len(shown):
            lines.append(f"{indent}  ... and {len(diff) - len(shown)} more lines")
        return lines
    if len(a) <= 100 and len(b) <= 100:
        return [f"{indent}{change.name}: {a} -> {b}"]
    lines = [indent + component_change_text(change, 100)]
    shown_a, shown_b = clip_around_difference(a, b, WHOLE_VALUE)
    lines += [f"{indent}  base: {shown_a}", f"{indent}  new:  {shown_b}"]
    return lines


def clip_around_difference(a: str, b: str, width: int) -> tuple[str, str]:
    """``a`` and ``b`` each cut to about ``width`` characters around where they first differ, "..." at each cut.

    Both are cut at the same offsets, chosen so that the first difference is shown
    with a third of the width before it: two values that differ after ``width``
    characters never print as two equal lines.
    """
    if len(a) <= width and len(b) <= width:
        return a, b
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, min(first - width // 3, max(len(a), len(b)) - width))

    def window(text: str) -> str:
        end = start + width
        return ("..." if start > 0 else "") + text[start:end] + ("..." if end < len(text) else "")

    return window(a), window(b)


def _key_text(key: str | None) -> str:
    return key if key else "-"


def one_test_lines(diff: TestKeyDiff, labels: tuple[str, str]) -> list[str]:
    """A test's whole key diff: per pair its outcomes, keys and every differing component; then the unpaired."""
    base_label, new_label = labels
    lines = [diff.nodeid]
    for pair in diff.pairs:
        lines.append(f"  {_pair_head(pair)}")
        if pair.key_changed:
            lines.append(f"    key {_key_text(pair.base.key)} -> {_key_text(pair.new.key)}")
        else:
            lines.append(f"    key {_key_text(pair.new.key)} (the same)")
        for label, lookup in ((base_label, pair.base), (new_label, pair.new)):
            if lookup.outcome == "bypass":
                lines.append(f"    bypassed in {label}: {lookup.bypass_reason or 'no reason recorded'}")
            if lookup.explained:
                against = f" against {lookup.compared_with}" if lookup.compared_with else ""
                lines.append(f"    {label} explained its {lookup.outcome}{against}: {'; '.join(lookup.explained)}")
        if pair.changes:
            for change in pair.changes:
                lines += _change_lines(change, "    ")
            if pair.run_wide:
                lines.append(f"    and the {count_noun(pair.run_wide, 'run-wide component')} above")
        elif pair.new.outcome != "bypass" and (pair.key_changed or pair.changes is None):
            lines.append(f"    {_pair_reason(pair, labels)}")
    for label, lookups in ((base_label, diff.only_base), (new_label, diff.only_new)):
        for lookup in lookups:
            lines.append(f"  only in {label}: {lookup.label}: {lookup.outcome}, key {_key_text(lookup.key)}")
    if not diff.pairs and not diff.only_base and not diff.only_new:
        lines.append("  no cache lookups recorded in either run")
    return lines


def explain_lines(diff: ReportKeyDiff, labels: tuple[str, str], nodeid: str | None = None) -> list[str]:
    """``pytest-cudagraph explain BASE NEW [TEST]``: run-wide differences, then each test's (or one test's) diff."""
    base_label, new_label = labels
    lines = [f"cache keys of {base_label} -> {new_label}"]
    if diff.run_wide:
        lines.append(f"run-wide ({count_noun(len(diff.run_wide), 'component')}, shared by every lookup of a layer):")
        for change in diff.run_wide:
            lines += _change_lines(change.change, f"  [{', '.join(change.layers)}] ")
    else:
        lines.append("run-wide: no component differs for every lookup")
    if nodeid is not None:
        return [*lines, "", *one_test_lines(diff.tests[nodeid], labels)]
    detailed = [d for d in diff.tests.values() if d.behaviour_changed or d.own_changes]
    only_wide = [d.nodeid for d in diff.tests.values() if d not in detailed and d.keys_differ]
    for test in detailed:
        lines += ["", *one_test_lines(test, labels)]
    if only_wide:
        lines += [
            "",
            f"{count_noun(len(only_wide), 'more test')} whose keys differ only in the run-wide components:",
            *(f"  {n}" for n in only_wide),
        ]
    if not detailed and not only_wide:
        lines += ["", "no test's cache keys differ"]
    return lines


# ----------------------------------------------------------------------------
# one run: the lookups of a test, what the plugin explained
# ----------------------------------------------------------------------------


def lookup_why(lookup: Lookup) -> list[str]:
    """What a lookup's row says besides its figures: a bypass reason, a guard miss, the explained differences."""
    parts = []
    if lookup.bypass_reason:
        parts.append(f"bypass: {lookup.bypass_reason}")
    if lookup.detail == "guard_miss":
        parts.append("same key, its shape guards failed")
    elif _detail(lookup):
        parts.append(str(_detail(lookup)))
    return parts + list(lookup.explained)


def _why(lookup: Lookup) -> str:
    against = f" (vs {lookup.compared_with})" if lookup.explained and lookup.compared_with else ""
    return "; ".join(lookup_why(lookup)) + against


def prominent(lookup: Lookup) -> bool:
    """A miss or bypass the plugin explained (or one with a reason): what a reader looks for first."""
    return lookup.outcome != "hit" and bool(lookup.explained or lookup.bypass_reason or _detail(lookup))


def lookup_table_lines(
    record: TestRecord | Mapping[str, Any], indent: str = "  ", why_width: int = 100, width: int | None = None
) -> list[str]:
    """A test's lookups as a table: layer, pass, graph, outcome, key prefix, and why (explained differences).

    With ``width`` the table is fitted to it, the why column broken at its spaces, not clipped.
    """
    lookups = lookups_of(record)
    if not lookups:
        return []
    rows = [["layer", "pass", "graph", "outcome", "key", "why"]]
    for lookup in lookups:
        outcome = lookup.outcome.upper() if prominent(lookup) else lookup.outcome
        rows.append(
            [
                lookup.layer,
                lookup.pass_name or "-",
                str(lookup.graph) if lookup.graph is not None else "-",
                outcome,
                (lookup.key or "-")[:12],
                (clip(_why(lookup), why_width) if width is None else _why(lookup)) if _why(lookup) else "",
            ]
        )
    if width is None:
        lines = format_table(rows, align="<<><<<", indent=indent)
    else:
        lines = [indent + line for line in fit_table(rows, width - len(indent), wrap={5: 24})]
    note = _note(record)
    if note:
        lines += wrap_line(f"{indent}note: {note}", width) if width is not None else [f"{indent}note: {note}"]
    return lines


def _note(record: TestRecord | Mapping[str, Any]) -> str | None:
    """Why the record's lookups lack what they lack (``cache_keys.note``)."""
    if isinstance(record, Mapping):
        keys = record.get("cache_keys")
        note = keys.get("note") if isinstance(keys, Mapping) else None
        return note if isinstance(note, str) else None
    keys = given(record.cache_keys)
    return given(keys.note) if keys is not None else None


# what show's table of lookups marks
def lookups_legend(capitals: bool) -> str:
    """What a lookup table's notation means; the words for capitals only where a table shows some."""
    said = "a miss or bypass with a reason under why is in capitals (MISS, BYPASS); " if capitals else ""
    return f"{said}key: its first 12 characters"


def show_lines(report: LoadedReport | Mapping[str, Any], width: int = 120) -> list[str]:
    """``pytest-cudagraph show``'s section of cache lookups: a table per test that records them, in ``width``.

    Tests with an explained miss or a bypass come first; the rest in the report's order.
    """
    records = records_of(report)
    chosen = [n for n in records if lookups_of(records[n])]
    if not chosen:
        return []
    chosen.sort(key=lambda n: not any(prominent(x) for x in lookups_of(records[n])))
    capitals = any(prominent(x) for n in chosen for x in lookups_of(records[n]))
    lines = ["", f"cache lookups ({lookups_legend(capitals)})"]
    for nodeid in chosen:
        lines += [f"  {clip_nodeid(nodeid)}", *lookup_table_lines(records[nodeid], indent="    ", width=width)]
    return lines


def one_run_lines(report: LoadedReport | Mapping[str, Any], label: str, nodeid: str | None = None) -> list[str]:
    """``explain REPORT [TEST]``: one run's lookups, with what the plugin found against an earlier lookup.

    With a test, every lookup of it; without, the misses and bypasses of every test.
    """
    records = records_of(report)
    shared = shared_components(report)
    chosen = [nodeid] if nodeid is not None else [n for n in records if has_cache_keys(records[n])]
    lines = [f"cache lookups of {label}"]
    quiet = 0
    for name in chosen:
        lookups = lookups_of(records[name], shared)
        shown = lookups if nodeid is not None else [x for x in lookups if x.outcome != "hit"]
        if not shown:
            quiet += 1
            continue
        lines += ["", name]
        for lookup in shown:
            lines.append(f"  {lookup.label}: {lookup.outcome}, key {_key_text(lookup.key)}")
            if lookup.bypass_reason:
                lines.append(f"    bypass: {lookup.bypass_reason}")
            if lookup.detail == "guard_miss":
                lines.append("    same key as an entry on disk; its shape guards failed (guard_miss)")
            elif _detail(lookup):
                lines.append(f"    {_detail(lookup)}")
            if lookup.explained:
                against = f" with {lookup.compared_with}" if lookup.compared_with else ""
                lines.append(f"    compared{against}:")
                lines += [f"      {item}" for item in lookup.explained]
            elif lookup.outcome == "miss" and lookup.detail != "guard_miss":
                lines.append(f"    {_unexplained_miss(lookup)}")
        note = _note(records[name])
        if note:
            lines.append(f"  note: {note}")
    if nodeid is None and quiet:
        lines += ["", f"{count_noun(quiet, 'more test')} hit on every lookup"]
    if len(lines) == 1:
        lines += ["", "no test recorded a cache lookup"]
    return lines


def _unexplained_miss(lookup: Lookup) -> str:
    """A miss the plugin compared with nothing: expected in a cold pass and in a first compile; else said so."""
    if lookup.pass_name == "cold":
        return "expected: the cold pass starts from an empty cache"
    if lookup.pass_name is None:
        return "a first compile of this graph: no earlier lookup to compare it with"
    return f"nothing explained it: no lookup before the {lookup.pass_name} pass to compare it with"


# ----------------------------------------------------------------------------
# a component's values for people
# ----------------------------------------------------------------------------

# a value longer than this is shown around its difference in compare's lines
SHORT_VALUE = 48


# what to look at where two values print the same and torch's hashes of them differ
SAME_PRINT_HINT = (
    "torch hashed something its printed value does not show: under --import-mode=importlib, how torch "
    "pickles values such as torch.contiguous_format depends on which module imported torch first "
    "(docs/troubleshooting.md, Cache keys)"
)


def component_change_text(change: ComponentChange, width: int = SHORT_VALUE) -> str:
    """``inductor_config[max_autotune]: False -> True``, long values shown around where they differ.

    Where both values print the same, it says so instead of showing an arrow between
    two equal texts: only torch's hashes differ (``prints the same ...``).
    """
    same = _same_print_text(change, width)
    if same is not None:
        return same
    before, after = value_pair_text(change.base, change.new, width)
    return f"{change.name}: {before} -> {after}"


def _same_print_text(change: ComponentChange, width: int) -> str | None:
    """``name: prints the same in both runs (value), but torch's hash of it differs (a -> b)``; None otherwise."""
    if change.base is None or change.new is None or fixed_value_text(change.base) or fixed_value_text(change.new):
        return None
    (hash_a, a), (hash_b, b) = change.base, change.new
    if a != b:
        return None
    # the report keeps REPORT_VALUE_LIMIT characters of a value and marks the cut with "…"
    kept = " as far as the report keeps it" if str(a).endswith("…") else ""
    return (
        f"{change.name}: prints the same in both runs{kept} ({_one_line(str(a), width)}), "
        f"but torch's hash of it differs ({hash_a} -> {hash_b})"
    )


def _opaque(value: str) -> bool:
    """Bytes torch printed as ``<bytes>`` or as decoded garbage (a pickled config): only the hash says anything."""
    return value == "<bytes>" or "\ufffd" in value or any(ord(ch) < 32 and ch not in "\n\t" for ch in value)


def fixed_value_text(entry: tuple[str | None, str | None] | None) -> str | None:
    """What to show when the value cannot be: absent, unrecorded or opaque; None when the value can be shown."""
    if entry is None:
        return "(absent)"
    digest, value = entry
    if value is None:
        return f"(hash {digest})" if digest else "(not recorded)"
    if _opaque(value):
        return f"(opaque, hash {digest})" if digest else "(opaque)"
    if not value.strip():
        return repr(value)
    return None


def value_pair_text(
    base: tuple[str | None, str | None] | None, new: tuple[str | None, str | None] | None, width: int
) -> tuple[str, str]:
    fixed_base, fixed_new = fixed_value_text(base), fixed_value_text(new)
    a = fixed_base if fixed_base is not None else base[1]  # type: ignore[index]
    b = fixed_new if fixed_new is not None else new[1]  # type: ignore[index]
    if fixed_base is None and fixed_new is None and a == b:
        # the same readable value, other hashes: the difference lies past the report's clip of the value
        return f"{_one_line(str(a), width)} [{base[0]}]", f"{_one_line(str(b), width)} [{new[0]}]"  # type: ignore[index]
    if fixed_base is None and fixed_new is None:
        return _focus(str(a), str(b), width)
    return (_one_line(str(a), width) if fixed_base is None else str(a)), (
        _one_line(str(b), width) if fixed_new is None else str(b)
    )


def _one_line(value: str, width: int) -> str:
    first = value.strip().splitlines()
    text = first[0] if first else ""
    more = " ..." if len(first) > 1 else ""
    return clip(text, width) + more


def _focus(a: str, b: str, width: int) -> tuple[str, str]:
    """Two values shown around where they differ: the item (between ``, ``) that holds the difference.

    ``TensorMetadata(dtype=torch.float32, shape=torch.Size([3, 8]), ...)`` against
    ``[4, 8]`` reads ``...shape=torch.Size([3, 8])...`` -> ``...shape=torch.Size([4, 8])...``;
    a graph's code, the first line that differs.
    """
    if len(a) <= width and len(b) <= width and "\n" not in a and "\n" not in b:
        return a, b
    if "\n" in a or "\n" in b:
        lines_a, lines_b = a.splitlines(), b.splitlines()
        index = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
        line_a = lines_a[index].strip() if index < len(lines_a) else "(no line)"
        line_b = lines_b[index].strip() if index < len(lines_b) else "(no line)"
        prefix = f"line {index + 1}: "
        shown_a, shown_b = _focus(line_a, line_b, max(width - len(prefix), 12))
        return prefix + shown_a, prefix + shown_b
    called = call_focus(a, b)
    if called is not None:
        return clip_middle(called[0], width, 0.6), clip_middle(called[1], width, 0.6)
    same_head = 0
    while same_head < min(len(a), len(b)) and a[same_head] == b[same_head]:
        same_head += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - same_head and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    start = _item_start(a, same_head)
    shown_a = _item_text(a, start, len(a) - suffix)
    shown_b = _item_text(b, start, len(b) - suffix)
    return clip_middle(shown_a, width, 0.6), clip_middle(shown_b, width, 0.6)


def _separators(text: str) -> tuple[list[tuple[int, int]], int | None]:
    depths = bracket_depths(text)
    seps = [(i, depths[i]) for i in range(len(text) - 1) if text[i : i + 2] == ", "]
    return seps, min((d for _, d in seps), default=None)


def _item_start(text: str, position: int) -> int:
    seps, level = _separators(text)
    if level is None:
        return max(position - 12, 0)
    before = [i for i, d in seps if d == level and i < position]
    if before:
        return before[-1] + 2
    depths = bracket_depths(text)
    return next((i for i, d in enumerate(depths) if d >= level), 0)


def _item_text(text: str, start: int, end_of_difference: int) -> str:
    seps, level = _separators(text)
    if level is None:
        end = min(end_of_difference + 12, len(text))
    else:
        after = [i for i, d in seps if d == level and i >= end_of_difference]
        end = after[0] if after else len(text)
        if not after:
            depths = bracket_depths(text)
            # close before the bracket that ends the level the items are in
            end = next((i for i in range(max(end_of_difference, start), len(text)) if depths[i] < level), len(text))
    shown = text[start:end]
    return ("..." if start > 0 else "") + shown + ("..." if end < len(text) else "")
