"""The HTML page's compile time and run-wide cache counters, as a new user reads them (issue 27).

A test's ``compile_time`` is drawn per phase (a table of seconds and shares, a
stacked bar per pass), cold -> warm for a test with passes, and not at all for a
test that compiled nothing; ``kernel_compile_s`` says what it timed on a run without
Triton; the run's summary shows its cache counters cold -> warm where tests ran
passes, not added up.  The pages are read with ``re`` and ``html``, as
``test_html_page.py`` reads them.
"""

from __future__ import annotations

import html
import re

from sample_reports import ENV_2_13

from pytest_cudagraph.records.report import build_report
from pytest_cudagraph.render.show import render_html

ENV_CPU = {**ENV_2_13, "torch": "2.13.0+cpu", "triton": None, "cuda": None, "gpu": None}
PHASE_KEYS = ("dynamo_s", "aot_autograd_s", "inductor_s", "inductor_codegen_s", "kernel_compile_s", "cache_saved_s")


def _compile_time(total: float, phases: dict, frames: int = 1) -> dict:
    """A ``compile_time`` section as the plugin writes it: every phase present, ``frames`` frames."""
    phases = {key: phases.get(key, 0.0) for key in PHASE_KEYS}
    return {
        "total_s": total,
        "phases": phases,
        "frames": [
            {
                "compile_id": f"0/{index}",
                "function": "forward (tests/model.py:12)",
                "total_s": total / frames,
                "phases": phases,
            }
            for index in range(frames)
        ],
    }


COLD = _compile_time(
    26.3,
    {
        "dynamo_s": 0.24,
        "aot_autograd_s": 1.16,
        "inductor_s": 24.9,
        "inductor_codegen_s": 24.56,
        "kernel_compile_s": 4.98,
    },
)
WARM = _compile_time(0.2, {"dynamo_s": 0.15, "aot_autograd_s": 0.05, "kernel_compile_s": 0.002, "cache_saved_s": 24.87})


def _stats(**counts: int) -> dict:
    one = {"hit": 0, "miss": 0, "bypass": 0, "saved": 0, **counts}
    return {"fxgraph": dict(one), "aot_autograd": {**one, "guard_miss": 0}, "triton": {"compiled": 0, "loaded": 0}}


def warm_start_record() -> dict:
    """A passing in-process compile_cache test: the cold pass misses and saves, the warm one hits."""
    both = _compile_time(26.5, {key: COLD["phases"][key] + WARM["phases"][key] for key in PHASE_KEYS})
    both["passes"] = [
        {
            "label": "@pytest.mark.compile_cache(mode='inprocess')",
            "cold_s": 26.3,
            "warm_s": 0.2,
            "warm_cold_ratio": 0.0076,
        }
    ]
    return {
        "outcome": "passed",
        "duration_s": 27.0,
        "caches": _stats(hit=1, miss=1, saved=1),
        "compile_time": both,
        "extra": {
            "compile_cache": {
                "mode": "inprocess",
                "cold": {"stats": _stats(miss=1, saved=1), "duration_s": 26.3, "compile_time": COLD},
                "warm": {"stats": _stats(hit=1), "duration_s": 0.2, "compile_time": WARM},
            }
        },
    }


def recompile_record() -> dict:
    """A test that compiled one frame twice (a recompile), Dynamo only."""
    return {"outcome": "passed", "compile_time": _compile_time(0.4, {"dynamo_s": 0.3, "aot_autograd_s": 0.1}, 2)}


def skipped_record() -> dict:
    """A skipped GPU test: the plugin still writes its compile_time, all zeros."""
    return {"outcome": "skipped", "skip_reason": "no CUDA device", "compile_time": _compile_time(0, {}, frames=0)}


def _section(page: str, nodeid: str) -> str:
    section = page[page.index(f'<h2 title="{nodeid}"') :]
    return section[: section.index("</section>")]


def _rows(part: str, css: str) -> list[list[str]]:
    """The cell texts of each row of the first ``<table class=css>`` in ``part``, its header's too."""
    table = part[part.index(f'<table class="{css}">') :]
    table = table[: table.index("</table>")]
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table)
    ]


def _summary(page: str) -> str:
    part = page[page.index("<h2>Summary</h2>") :]
    return part[: part.index("<h2>Tests</h2>")]


# ----------------------------------------------------------------------------
# the run's summary: cold -> warm, not the passes added up
# ----------------------------------------------------------------------------


def test_the_run_summary_shows_a_warm_start_cold_to_warm_not_hit_1_miss_1():
    page = render_html(build_report(ENV_CPU, {"a::test_warm": warm_start_record()}))
    summary = _summary(page)
    row = re.search(r"<th>cache fxgraph</th><td[^>]*>(.*?)</td>", summary, re.S)
    assert row, summary
    assert html.unescape(re.sub(r"<[^>]+>", "", row.group(1))) == "miss 1, saved 1 -> hit 1"
    assert "hit 1, miss 1" not in summary  # the whole-life counters, cold and warm added up
    assert "cold pass -&gt; warm pass" in summary


def test_the_run_summary_keeps_the_other_tests_counters_beside_the_passes():
    plain = {"outcome": "passed", "caches": _stats(miss=2, saved=2)}
    page = render_html(build_report(ENV_CPU, {"a::test_warm": warm_start_record(), "b::test_plain": plain}))
    row = re.search(r"<th>cache fxgraph</th><td[^>]*>(.*?)</td>", _summary(page), re.S).group(1)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
    assert text == "miss 1, saved 1 -> hit 1 other tests: miss 2, saved 2"


def test_a_run_without_passes_shows_its_counters_added_up_as_before():
    plain = {"outcome": "passed", "caches": _stats(hit=3, miss=1)}
    summary = _summary(render_html(build_report(ENV_CPU, {"b::test_plain": plain})))
    assert re.search(r"<th>cache fxgraph</th><td[^>]*>hit 3, miss 1</td>", summary)
    assert "-&gt;" not in summary


# ----------------------------------------------------------------------------
# a test's compile time per phase
# ----------------------------------------------------------------------------


def test_compile_time_is_a_table_of_phases_with_seconds_and_share_not_json():
    page = render_html(build_report(ENV_2_13, {"a::test_recompiles": recompile_record()}))
    section = _section(page, "a::test_recompiles")
    assert "<h3>Compile time: 0.4 s</h3>" in section
    rows = _rows(section, "phases")
    assert rows[0] == ["phase", "seconds", "share", "what it is"]
    assert [row[:3] for row in rows[1:3]] == [["Dynamo", "0.3", "75%"], ["AOTAutograd", "0.1", "25%"]]
    assert rows[-1][:3] == ["total", "0.4", "100%"]
    # the frames as a table, not the section as JSON
    assert _rows(section, "frames")[1:] == [
        ["0/0", "forward (tests/model.py:12)", "0.2"],
        ["0/1", "forward (tests/model.py:12)", "0.2"],
    ]
    assert '<pre class="json">' not in section and "&quot;phases&quot;" not in section
    assert "dynamo_s 0.3" not in section  # the raw key-value lines


def test_the_bar_stacks_the_phases_by_their_share_with_css_widths():
    section = _section(render_html(build_report(ENV_2_13, {"a::t": recompile_record()})), "a::t")
    bar = re.search(r'<span class="ct-bar" style="width:([\d.]+)%">(.*?)</span></span>', section, re.S)
    assert bar and bar.group(1) == "100.00"
    assert re.findall(r'class="(ph-[a-z]+)" style="width:([\d.]+)%"', bar.group(2)) == [
        ("ph-dynamo", "75.00"),
        ("ph-aot", "25.00"),
    ]
    assert "<script" not in section.lower()


def test_a_test_with_passes_shows_each_phase_cold_to_warm_and_the_warm_bar_to_scale():
    page = render_html(build_report(ENV_CPU, {"a::test_warm": warm_start_record()}))
    section = _section(page, "a::test_warm")
    assert "<h3>Compile time: cold and warm passes</h3>" in section
    assert 'cold 26.3 s <span class="arrow">-&gt;</span> warm 0.2 s' in section
    rows = _rows(section, "phases")
    assert rows[0] == ["phase", "cold s", "cold share", "warm s", "warm share", "what it is"]
    by_phase = {row[0]: row[1:5] for row in rows[1:]}
    assert by_phase["Inductor"] == ["24.9", "95%", "0", "0%"]
    assert by_phase["Dynamo"] == ["0.24", "1%", "0.15", "75%"]
    assert by_phase["saved by cache hits"] == ["0", "", "24.9", ""]  # not spent: no share of the compile
    assert by_phase["total"] == ["26.3", "100%", "0.2", "100%"]
    widths = re.findall(r'<span class="ct-bar" style="width:([\d.]+)%">', section)
    assert widths == ["100.00", f"{100 * 0.2 / 26.3:.2f}"]  # the warm bar against the cold one
    assert "The whole test: 26.5 s of compile in this interpreter." in section
    assert '<pre class="json">' not in section


def test_a_test_that_compiled_nothing_gets_no_compile_time_block():
    page = render_html(build_report(ENV_CPU, {"a::test_gpu": skipped_record(), "b::t": recompile_record()}))
    section = _section(page, "a::test_gpu")
    assert "Compile time" not in section and "compile_time" not in section
    assert "dynamo_s" not in section and "total_s" not in section  # no block of zeros
    assert "Compile time" in _section(page, "b::t")


# ----------------------------------------------------------------------------
# kernel_compile_s on a machine without Triton
# ----------------------------------------------------------------------------


def test_kernel_compile_s_says_it_timed_cpp_kernels_where_the_run_had_no_triton():
    page = render_html(build_report(ENV_CPU, {"a::test_warm": warm_start_record()}))
    rows = _rows(_section(page, "a::test_warm"), "phases")
    kernel = next(row for row in rows if row[0].startswith("kernel compile"))
    assert kernel[0] == "kernel compile (C++, no Triton)"
    assert kernel[1] == "4.98" and "C++ kernels" in kernel[-1]
    assert "kernel_compile_s 4.98" not in page and ">kernel_compile_s<" not in page


def test_kernel_compile_s_keeps_triton_in_its_name_where_the_run_had_triton():
    page = render_html(build_report(ENV_2_13, {"a::test_warm": warm_start_record()}))
    kernel = next(row for row in _rows(_section(page, "a::test_warm"), "phases") if row[0].startswith("kernel"))
    assert kernel[0] == "kernel compile (Triton; C++ for CPU tensors)"
    assert "no Triton" not in page
