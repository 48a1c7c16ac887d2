"""The warm-start invariant: ``ColdWarm``, its problems and the failure message that explains them.

The invariant::

    warm pass: at least one hit, no miss, no save, no bypass, no Triton compile,
    and outputs equal to the cold pass's (bitwise unless rtol/atol are given)

``warm_pass_problems`` lists what falls short, each warm miss explained by the
components that differ from the cold pass's same graph (``keys``);
``failure_story`` tells them from their cause (a warm miss, and the counters and
outputs that follow from it), and ``format_failure`` leads with that cause, then
adds the counter table, the bypass reasons and hints.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from .. import _compat as compat
from ..errors import InvariantViolation
from ..records.cold_warm import warm_cold_ratio
from ..render.plain_text import count_noun, format_table
from . import keys as cache_keys
from .graph_code import graph_change
from .keys import KEYED_LAYERS, MissExplanation
from .lookups import GRAPH_CODE
from .outputs import cold_warm_differences, compare_recorded
from .results import CACHE_LAYERS, PassResult


@dataclass(frozen=True)
class ColdWarm:
    """The two passes of ``cold_warm()``: unpacks as ``cold, warm = result``."""

    cold: PassResult
    warm: PassResult
    mode: str
    cache_dir: str
    # the passes shared arguments that could not be copied, and one changed them: the line that says so
    # (``arguments.PassArguments.changed_problem``); the outputs are then not compared
    arguments_problem: str = ""
    # the call a failure message names when check() is given no context (None: cold_warm(mode=...))
    call_name: ClassVar[str | None] = None

    def __iter__(self) -> Iterator[PassResult]:
        return iter((self.cold, self.warm))

    def problems(self, rtol: float | None = None, atol: float | None = None) -> list[str]:
        """Every way the warm pass falls short of a pure cache hit (empty: none)."""
        if self.arguments_problem:
            return [self.arguments_problem] + warm_pass_problems(
                self.cold, self.warm, rtol=rtol, atol=atol, compare_outputs=False
            )
        return warm_pass_problems(self.cold, self.warm, rtol=rtol, atol=atol)

    def explanations(self) -> list[MissExplanation]:
        """Why each lookup of the warm pass that missed did (``cache_keys.explain_misses`` against the cold pass)."""
        return cache_keys.explain_misses(self.cold.lookups, self.warm.lookups, "the cold pass")

    def check(
        self,
        rtol: float | None = None,
        atol: float | None = None,
        context: str | None = None,
        across_runs: tuple[MissExplanation, ...] = (),
    ) -> None:
        """Raise InvariantViolation naming layer, counters, the components that changed, bypass reasons and a hint.

        The invariant: the warm pass has at least one FX-graph hit (and AOTAutograd
        hit), no miss, no save, no bypass, no Triton kernel compiled, and its outputs
        equal the cold pass's (bitwise, or within rtol/atol when given).  Each warm
        miss is explained by the components that differ from the cold pass's same
        graph; ``across_runs`` adds what differs from an earlier run.
        """
        __tracebackhide__ = True
        problems = self.problems(rtol=rtol, atol=atol)
        if problems:
            raise InvariantViolation(
                format_failure(
                    self, problems, rtol=rtol, atol=atol, context=context or self.call_name, across_runs=across_runs
                )
            )

    @property
    def compile_time_ratio(self) -> float | None:
        """Warm compile time over cold (0.03: the warm start took 3% of the cold one); None when not measured."""
        if self.cold.compile_time is None or self.warm.compile_time is None:
            return None
        return warm_cold_ratio(self.cold.compile_time.total_s, self.warm.compile_time.total_s)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "cold": self.cold.to_json(), "warm": self.warm.to_json()}
        if self.arguments_problem:
            out["arguments_changed"] = self.arguments_problem
        if self.compile_time_ratio is not None:
            out["compile_time_ratio"] = self.compile_time_ratio
        return out


# ----------------------------------------------------------------------------
# the invariant and its message
# ----------------------------------------------------------------------------


# a start-up part in words (the record's names are in docs/reference.md)
STARTUP_PART_WORDS = {
    "interpreter_s": "interpreter start",
    "imports_s": "imports",
    "cpu_isa_s": "Inductor's CPU capability probe",
}


def startup_text(result: ColdWarm) -> str | None:
    """One line: each pass's compile time and, apart, its process's start-up; None when neither pass measured both.

    ``compile 0.9s -> 0.2s; start-up, not counted in it: warm pass 6.9s (interpreter start 5.2s, imports 1.2s, ...)``.
    A pass that started nothing (an in-process warm pass: its process had started the
    compiler already) is left out of it, not shown as 0.00s.
    """
    cold, warm = result.cold, result.warm
    if cold.compile_time is None or warm.compile_time is None or not (cold.startup or warm.startup):
        return None

    def parts(which: str, one: PassResult) -> str:
        named = [
            f"{STARTUP_PART_WORDS.get(part, part.removesuffix('_s'))} {seconds(value)}"
            for part, value in one.startup.items()
        ]
        return f"{which} pass {seconds(one.startup_s)} ({', '.join(named)})"

    started = [parts(which, one) for which, one in (("cold", cold), ("warm", warm)) if one.startup]
    return (
        f"compile {seconds(cold.compile_time.total_s)} -> {seconds(warm.compile_time.total_s)}; "
        f"start-up, not counted in it: {', '.join(started)}"
    )


def seconds(value: float) -> str:
    return f"{value:.2f}s" if value < 10 else f"{value:.0f}s"


def refuse_if_caches_disabled(what: str) -> None:
    """Fail before compiling anything when no warm pass could hit: every disk cache layer is off.

    A single layer turned off (AOTAutograd's, as some projects do on some torch
    versions) leaves the others to check: the passes report it as ``disabled``.
    AOTAutograd's cache stores its entries through the FX-graph cache, so with that
    one off (or ``force_disable_caches``) nothing is left.
    """
    __tracebackhide__ = True
    off = compat.cache_layers_off_by_user()
    reasons = [reason for reason in compat.cache_disabled_reasons() if reason not in off.values()]
    if "fxgraph" in off:
        reasons.append(off["fxgraph"])
    if reasons:
        raise InvariantViolation(
            f"compile_cache: {what} cannot show a warm start because the compile caches are disabled: "
            f"{'; '.join(reasons)}; unset that variable (or config) for this test"
        )


def warm_pass_problems(
    cold: PassResult,
    warm: PassResult,
    rtol: float | None = None,
    atol: float | None = None,
    compare_outputs: bool = True,
) -> list[str]:
    """The violated parts of the warm-start invariant, one short line each.

    ``compare_outputs=False``: the passes ran on other inputs (their arguments
    changed), so what they returned and recorded is not compared.

    A layer the user turned off during a pass (before it, or inside the body, as
    torch's compile records show) cannot hit on the warm pass whatever the cache
    holds: it is ``disabled``, its counters are not read as misses (which would point
    at cache keys), and the other layers are checked.  AOTAutograd's cache stores its
    entries through the FX-graph cache, so with that one off nothing is left: that
    fails, naming the setting.
    """
    problems = []
    off = {**cold.stats.disabled, **warm.stats.disabled}
    if "fxgraph" in off:  # AOTAutograd's entries live in the FX-graph cache: nothing is left to check
        problems.append(
            f"every compile cache layer was off during the passes ({off['fxgraph']}), so the warm pass cannot hit any"
        )
    checked = [layer for layer in ("fxgraph", "aot_autograd") if layer not in off and "fxgraph" not in off]
    if "fxgraph" in checked and not cold.stats.compiled_anything:
        problems.append("the cold pass compiled nothing with Inductor (no FX-graph cache lookup at all)")
    # first, why: one line per warm lookup that missed, naming the components that differ from the
    # cold pass's same graph (FX-graph lookups before AOTAutograd's, whose key holds the graph's too)
    explanations = [
        explanation
        for explanation in cache_keys.explain_misses(cold.lookups, warm.lookups, "the cold pass")
        if explanation.lookup.layer in checked
    ]
    explanations.sort(key=lambda explanation: KEYED_LAYERS.index(explanation.lookup.layer))
    problems += [explanation.text() for explanation in explanations]
    w = warm.stats
    if "fxgraph" in checked and w.fxgraph.get("hit", 0) < 1:
        problems.append("fxgraph: no hit on the warm pass")
    if "aot_autograd" in checked and cold.stats.aot_autograd.get("miss", 0) + cold.stats.aot_autograd.get("hit", 0) > 0:
        if w.aot_autograd.get("hit", 0) < 1:
            problems.append("aot_autograd: no hit on the warm pass")
    for layer in checked:
        for key in ("miss", "guard_miss", "saved", "bypass"):
            if getattr(w, layer).get(key, 0):
                problems.append(f"{layer}: {key} {getattr(w, layer)[key]} on the warm pass")
    if w.triton.get("compiled", 0):
        problems.append(f"triton: {count_noun(w.triton['compiled'], 'kernel')} compiled on the warm pass")
    if compare_outputs:
        problems += cold_warm_differences("returned", cold.outputs, warm.outputs, rtol=rtol, atol=atol)
        problems += compare_recorded(cold.recorded, warm.recorded, rtol=rtol, atol=atol)
    return problems


def _hints(result: ColdWarm, graph_differs: bool = False) -> list[str]:
    cold, warm = result.cold.stats, result.warm.stats
    reasons = warm.reasons() or cold.reasons()
    hints = []
    off = {**result.cold.stats.disabled, **result.warm.stats.disabled}
    if off:
        hints.append(
            "a cache layer you turn off cannot show a warm start: unset its environment variable, or drop "
            "the config change that turns it off (in the test, a fixture or a conftest), for this test; "
            "the plugin turns on only layers this torch leaves off by default"
        )
    disabled = [reason for reason in compat.cache_disabled_reasons() if reason not in off.values()]
    if disabled:
        hints.append(f"the compile caches are disabled now: {'; '.join(disabled)}; unset that variable or config")
    if any("custom" in r.lower() for r in reasons):
        hints.append(
            "a custom Inductor pass (post_grad_custom_*_pass, joint_custom_*_pass, pre_grad_custom_pass) is not a "
            f"{compat.CUSTOM_GRAPH_PASS_CLASS} with a stable uuid(), so no graph using it can be "
            "cached; subclass CustomGraphPass and return a uuid() that changes only when the pass changes"
        )
    elif reasons:
        hints.append(
            "the bypass reason above names what makes the graph uncacheable (freezing, an unpicklable "
            "constant, a non-cacheable higher-order op, a custom pass without uuid())"
        )
    if not cold.compiled_anything and "fxgraph" not in off:
        hints.append(
            "compile with the Inductor backend inside the test body; backend='eager'/'aot_eager' do not use "
            "the FX-graph cache, and a function compiled before the cold pass is not compiled again; "
            "a body that sets force_disable_caches=True or fx_graph_cache=False turns the caches off too"
        )
    missed = [
        layer
        for layer in ("fxgraph", "aot_autograd")
        if layer not in off and (getattr(warm, layer).get("miss", 0) or getattr(warm, layer).get("guard_miss", 0))
    ]
    if missed and not reasons and "fxgraph" not in off and not graph_differs:
        hint = (
            "the warm pass computed other cache keys than the cold pass: a config that differs between passes "
            f"({' / '.join(compat.CACHE_KEY_CONFIG_MODULES)} patched in one pass only, or an environment variable), "
            "or inputs of another shape, dtype or device"
        )
        if result.mode == "subprocess":
            hint += "; in subprocess mode also config set outside the test body or the test module (a conftest hook)"
        hints.append(hint)
    if (warm.fxgraph.get("saved", 0) or warm.aot_autograd.get("saved", 0)) and not (
        warm.fxgraph.get("miss", 0) or warm.aot_autograd.get("miss", 0)
    ):
        hints.append(
            "the warm pass saved entries although nothing missed: something re-saves what it loaded "
            "(vLLM PR #35921 was this bug)"
        )
    if warm.triton.get("compiled", 0):
        hints.append(
            "Triton compiled kernels on the warm pass: the FX-graph cache missed, TRITON_ALWAYS_COMPILE "
            "(knobs.compilation.always_compile) is set, or Triton's cache directory was not shared"
        )
    if cold.compiled_anything and not warm.compiled_anything:
        hints.append(
            "nothing reached the FX-graph cache on the warm pass: the body did not call the compiled "
            "function again, or it was compiled outside the body (a fixture) and answered from memory"
        )
    return hints


def _counter_rows(result: ColdWarm) -> list[list[str]]:
    """Each layer's counters in the cold and the warm pass: this test's own counts, never the process's totals."""
    rows = [["layer", "counter", "cold", "warm", "expected on warm"]]
    expected = {
        "hit": ">= 1",
        "miss": "0",
        "guard_miss": "0",
        "saved": "0",
        "bypass": "0",
        "compiled": "0",
        "loaded": "any",
    }
    off = {**result.cold.stats.disabled, **result.warm.stats.disabled}
    for layer in CACHE_LAYERS:
        cold_layer = getattr(result.cold.stats, layer)
        warm_layer = getattr(result.warm.stats, layer)
        for key in ("hit", "miss", "guard_miss", "bypass", "saved", "compiled", "loaded"):
            if key not in warm_layer and key not in cold_layer:
                continue
            rows.append(
                [
                    layer,
                    key,
                    str(cold_layer.get(key, 0)),
                    str(warm_layer.get(key, 0)),
                    "- (disabled)" if layer in off else expected[key],
                ]
            )
    return rows


# a problem the warm pass's counters state: a consequence wherever a miss was explained
_COUNTER_PROBLEM = re.compile(
    r"^(fxgraph|aot_autograd): (no hit|(miss|guard_miss|saved|bypass) (\d+)) on the warm pass$"
)
_TRITON_PROBLEM = re.compile(r"^triton: \d+ kernels? compiled on the warm pass$")
_OUTPUT_PROBLEM = ("returned", "recorded")


@dataclass(frozen=True)
class FailureStory:
    """A warm-start failure told from its cause: the verdict, the causes (with what they show), what follows.

    ``verdict``: the head's words (``the traced graph differs between the cold and
    the warm pass``); ``causes``: bullets, each with lines shown under it (a code
    diff); ``follows``: the problems the causes explain (no hit, a miss, a save,
    other outputs), folded per layer.  ``graph_differs``: the cause is the traced
    graph, not a setting.
    """

    verdict: str
    causes: tuple[tuple[str, tuple[str, ...]], ...]
    follows: tuple[str, ...]
    graph_differs: bool = False


def _explained_misses(result: ColdWarm, problems: list[str]) -> list[MissExplanation]:
    texts = set(problems)
    return [explanation for explanation in result.explanations() if explanation.text() in texts]


def _graph_only(explanation: MissExplanation) -> bool:
    """The miss's key differs in the graph's code alone (``gm``): the passes traced different graphs."""
    return bool(explanation.explained) and all(line.startswith(f"{GRAPH_CODE}: ") for line in explanation.explained)


def _component_names(explanations: list[MissExplanation]) -> list[str]:
    names: list[str] = []
    for explanation in explanations:
        for line in explanation.explained:
            name, colon, _ = line.partition(": ")
            if colon and " " not in name and name not in names:
                names.append(name)
    return names


def _folded(counter_problems: list[str]) -> list[str]:
    """``fxgraph: no hit, miss 1, saved 1 on the warm pass``: one line per layer."""
    parts: dict[str, list[str]] = {}
    for problem in counter_problems:
        match = _COUNTER_PROBLEM.match(problem)
        if match is not None:
            parts.setdefault(match.group(1), []).append(match.group(2))
    return [f"{layer}: {', '.join(said)} on the warm pass" for layer, said in parts.items()]


def _verdict_of(problem: str) -> str:
    """The head's words for a failure whose first problem is ``problem`` (a problem that is its own cause)."""
    if problem.startswith(_OUTPUT_PROBLEM):
        return "the warm pass's outputs differ from the cold pass's"
    match = _COUNTER_PROBLEM.match(problem)
    if match is not None:
        layer, what = match.group(1), match.group(3) or "no hit"
        return {
            "no hit": f"the warm pass did not hit the {layer} cache",
            "miss": f"the warm pass missed the {layer} cache",
            "guard_miss": f"the warm pass missed the {layer} cache (guards)",
            "saved": f"the warm pass saved {layer} entries",
            "bypass": f"a graph bypassed the {layer} cache on the warm pass",
        }[what]
    if _TRITON_PROBLEM.match(problem):
        return "Triton compiled kernels on the warm pass"
    return problem


def _cause_rank(problem: str) -> int:
    """Which problem names the failure best: a sentence of its own, a bypass, Triton, a save, a miss, outputs."""
    if problem.startswith(_OUTPUT_PROBLEM):
        return 6
    if _TRITON_PROBLEM.match(problem):
        return 2
    match = _COUNTER_PROBLEM.match(problem)
    if match is None:
        return 0
    return {"bypass": 1, "saved": 3, "miss": 4, "guard_miss": 4}.get(match.group(3) or "", 5)


def failure_story(result: ColdWarm, problems: list[str]) -> FailureStory:
    """``problems`` (``result.problems()``, a subclass's included) grouped by cause.

    A warm miss explained by the cold pass's same graph is a cause, and the
    counters it moves (no hit, the miss, the save, Triton's compiles) follow from
    it.  Where every explained miss differs in the graph's code alone, the cause is
    the traced graph, shown as the lines of code that differ, and the outputs
    differing follows from it too.
    """
    explanations = _explained_misses(result, problems)
    explained = {explanation.text() for explanation in explanations}
    graph = bool(explanations) and all(map(_graph_only, explanations))
    counters = [p for p in problems if _COUNTER_PROBLEM.match(p) and "bypass" not in p]
    follows: list[str] = []
    folded: set[str] = set()
    if explanations:
        follows += _folded(counters) + [p for p in problems if _TRITON_PROBLEM.match(p)]
        folded |= set(counters)
    elif any(not p.endswith(": no hit on the warm pass") for p in problems):
        # a bypass, a layer off, a save: "no hit" follows from it
        follows += [p for p in problems if p.endswith(": no hit on the warm pass")]
    if graph:
        follows += [p for p in problems if p.startswith(_OUTPUT_PROBLEM)]
    folded |= set(follows)
    others = [p for p in problems if p not in explained and p not in folded]
    # the causes in the order the problems name them (a subclass's own first)
    causes: list[tuple[str, tuple[str, ...]]] = [(p, ()) for p in problems if p in explained or p in others]
    if graph:
        change = graph_change([(e.matched, e.lookup) for e in explanations if e.matched is not None])
        if change is not None:  # the code says it better than the hashes: it replaces them
            at = next(i for i, (text, _) in enumerate(causes) if text in explained)
            causes = [cause for cause in causes if cause[0] not in explained]
            where = f"{change.layer} graph {change.graph}"
            causes.insert(at, (f"the code the body traced, cold pass -> warm pass ({where}):", tuple(change.lines())))
        verdict = "the traced graph differs between the cold and the warm pass"
    elif explanations:
        names = _component_names(explanations)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        verdict = f"the cache key differs between the passes in {shown}" if names else "the warm pass missed the cache"
    else:
        verdict = _verdict_of(min(others, key=_cause_rank)) if others else "the warm pass was not a pure cache hit"
    return FailureStory(verdict, tuple(causes), tuple(follows), graph_differs=graph)


def format_failure(
    result: ColdWarm,
    problems: list[str],
    rtol: float | None = None,
    atol: float | None = None,
    context: str | None = None,
    across_runs: tuple[MissExplanation, ...] = (),
) -> str:
    """The failure report: the verdict first, its causes, what follows from them, the counters, bypasses, hints.

    The head names the cause in its first words (pytest's one-line summary keeps
    only those), then the check (``context``).  Each warm miss is explained by the
    components that changed (or the code, where the graph itself changed);
    ``across_runs`` adds what differs from an earlier run of the same test.
    """
    head = context or f"compile_cache.cold_warm(mode={result.mode!r})"
    story = failure_story(result, problems)
    lines = [f"{story.verdict} ({head})"]
    for cause, shown in story.causes:
        if cause == story.verdict and not shown:  # the head says it already
            continue
        lines.append(f"  - {cause}")
        lines += [f"      {line}" for line in shown]
    if story.follows:
        lines.append("  what follows from it:" if len(story.causes) == 1 else "  what follows from them:")
        lines += [f"    - {line}" for line in story.follows]
    lines.append("")
    lines += format_table(_counter_rows(result), indent="  ")
    for name, stats in (("cold", result.cold.stats), ("warm", result.warm.stats)):
        for layer in ("fxgraph", "aot_autograd"):
            for reason in stats.reasons(layer):
                lines.append(f"  bypass reason ({layer}, {name} pass): {reason}")
            if getattr(stats, layer).get("bypass", 0) and not stats.reasons(layer):
                # a torch may count a bypass without logging why (compat.cache_bypass_loggers): say so, not nothing
                unlogged = "none: this torch counted the bypass but logged no reason"
                if layer == "aot_autograd" and stats.reasons("fxgraph"):
                    unlogged += " (the FX-graph cache's reason in this pass is the line above)"
                lines.append(f"  bypass reason ({layer}, {name} pass): {unlogged}")
    for explanation in across_runs:
        lines.append(f"  compared with {explanation.compared_with}: {explanation.text()}")
    lines.append(
        f"  warm pass ran in {result.warm.process}; outputs compared "
        f"{'bitwise' if rtol is None and atol is None else f'with rtol={rtol}, atol={atol}'}; "
        f"cache dir {result.cache_dir}"
    )
    startup = startup_text(result)
    if startup:
        lines.append(f"  {startup}")
    if story.graph_differs:
        lines.append(
            "  hint: the body traced other code in each pass: a Python value it computes anew (a counter, the time, "
            "a random number not drawn from the seeded RNGs, a global the cold pass changed) is baked into the "
            "graph as a constant; make it the same in both passes, or pass it in as a tensor"
        )
    elif any(p.startswith(_OUTPUT_PROBLEM) for p in problems):
        lines.append(
            "  hint: a hit that loads the wrong artifact gives other outputs; so does a body that is not "
            "deterministic (inputs not drawn from the seeded Python/torch/CUDA RNGs, nondeterministic "
            "kernels: give rtol/atol to the marker)"
        )
    for hint in _hints(result, graph_differs=story.graph_differs):
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)
