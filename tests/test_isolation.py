"""Global torch state is put back after every test that uses the plugin (isolation.py).

Each generated suite has a test that changes one kind of state through a plugin
feature, then a plain test that checks the state is as it was before.  The
generated suite compares the state with what it was in the same run (its first
test remembers it), so a leak shows whichever process it runs in.  The slow runs,
which compile and change every kind of state at once, are subprocesses, so that
no state leaks into this process either way.  The quick ones run in this process
(each would cost a fresh interpreter importing torch otherwise), under
``this_process_state_kept``, which puts back afterwards whatever a suite left
changed here: the plain test's leak on purpose, or any leak of a plugin that
stopped restoring (which the suite's own check reports first).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import torch
import torch._dynamo.config
import torch._functorch.config
import torch._inductor.config
from torch._dynamo import eval_frame

# Runs first in every generated module: remembers the state the later check compares with.
STATE_PROBE = """
import os
import pytest
import torch
import torch._dynamo
import torch._functorch.config
import torch._inductor.config
from torch._dynamo import eval_frame

BEFORE = {}


def square_plus_one(x):
    return x * x + 1


def current_state():
    return {
        "dynamo.suppress_errors": torch._dynamo.config.suppress_errors,
        "dynamo.assume_static_by_default": torch._dynamo.config.assume_static_by_default,
        "inductor.fx_graph_cache": torch._inductor.config.fx_graph_cache,
        "inductor.max_autotune": torch._inductor.config.max_autotune,
        "functorch.enable_autograd_cache": torch._functorch.config.enable_autograd_cache,
        "stance": eval_frame._stance,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("TORCHINDUCTOR_", "TRITON_"))},
        "default_dtype": torch.get_default_dtype(),
        "default_device": getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None),
        "cpu_rng": torch.get_rng_state(),
        "entries": len(eval_frame._debug_get_cache_entry_list(square_plus_one.__code__)),
    }


def test_0_remember_state():
    torch.manual_seed(7)
    BEFORE.update(current_state())
"""

CHECKS = """

def test_9_state_is_back():
    now = current_state()
    changed = sorted(
        key for key in BEFORE
        if not (torch.equal(now[key], BEFORE[key]) if key == "cpu_rng" else now[key] == BEFORE[key])
    )
    assert changed == [], f"not restored: {changed}"
"""

# One body per kind of state; each runs inside a test that uses the `recompiles`
# fixture, the `compile_cache` fixture, or the `max_recompiles` marker.
CHANGES = {
    "dynamo_config": "torch._dynamo.config.suppress_errors = True\n"
    "    torch._dynamo.config.assume_static_by_default = False",
    "inductor_config": "torch._inductor.config.fx_graph_cache = False\n    torch._inductor.config.max_autotune = True",
    "functorch_config": "torch._functorch.config.enable_autograd_cache = "
    "not torch._functorch.config.enable_autograd_cache",
    "stance": 'torch.compiler.set_stance("force_eager")',
    "environment": 'os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/nonexistent/inductor"\n'
    '    os.environ["TRITON_CACHE_DIR"] = "/nonexistent/triton"\n'
    '    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"',
    "default_dtype": "torch.set_default_dtype(torch.float64)",
    "default_device": 'torch.set_default_device("cpu")',
    "cpu_rng": "torch.manual_seed(1234); torch.rand(10)",
    "dynamo_cache": "compiled = torch.compile(square_plus_one, backend='eager')\n"
    "    compiled(torch.ones(3)); compiled(torch.ones(3, 2))\n"
    "    assert len(eval_frame._debug_get_cache_entry_list(square_plus_one.__code__)) >= 1",
}

FEATURES = {
    "recompiles_fixture": ("", "def test_5_changes(recompiles):"),
    "compile_cache_fixture": ("", "def test_5_changes(compile_cache):"),
    "max_recompiles_marker": ("@pytest.mark.max_recompiles(5)\n", "def test_5_changes():"),
}


# what the quick suites below may change in this interpreter, each put back after their in-process run
CONFIGS = (torch._dynamo.config, torch._inductor.config, torch._functorch.config)
ENVIRONMENT_PREFIXES = ("TORCHINDUCTOR_", "TRITON_")


@pytest.fixture
def this_process_state_kept() -> Iterator[None]:
    """Put back the torch state an in-process run of a generated suite left changed in this interpreter.

    Written here rather than taken from the plugin, which is what the runs test.
    """
    configs = [config.get_config_copy() for config in CONFIGS]
    stance, dtype, rng = eval_frame._stance, torch.get_default_dtype(), torch.get_rng_state()
    environment = {name: value for name, value in os.environ.items() if name.startswith(ENVIRONMENT_PREFIXES)}
    yield
    for config, before in zip(CONFIGS, configs):
        for key, value in config.get_config_copy().items():
            if key in before and value != before[key]:
                setattr(config, key, before[key])
    if eval_frame._stance is not stance:
        eval_frame._set_stance(stance)
    torch.set_default_dtype(dtype)
    torch.set_rng_state(rng)
    for name in [name for name in os.environ if name.startswith(ENVIRONMENT_PREFIXES)]:
        if name not in environment:
            del os.environ[name]
    os.environ.update(environment)


def _suite(change: str, feature: str) -> str:
    decorator, signature = FEATURES[feature]
    return STATE_PROBE + f"\n\n{decorator}{signature}\n    {CHANGES[change]}\n" + CHECKS


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_each_kind_of_state_changed_by_a_plugin_test_is_back_for_the_next_test(pytester: pytest.Pytester) -> None:
    # one module per kind, so that a failure names the kind that leaked
    pytester.makepyfile(**{f"test_{change}": _suite(change, "recompiles_fixture") for change in CHANGES})
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3 * len(CHANGES))


@pytest.mark.slow  # a subprocess-heavy run: the README's test command stays under 5 minutes
def test_every_plugin_feature_restores_all_state_even_when_the_test_fails(pytester: pytest.Pytester) -> None:
    # all kinds at once, in a test that fails after changing them; one module per feature
    body = "\n    ".join(CHANGES[change] for change in ("dynamo_cache", *sorted(set(CHANGES) - {"dynamo_cache"})))
    sources = {}
    for feature, (decorator, signature) in FEATURES.items():
        sources[f"test_{feature}"] = (
            STATE_PROBE
            + f"\n\n{decorator}{signature}\n    {body}\n    assert False, 'fails after the changes'\n"
            + CHECKS
        )
    pytester.makepyfile(**sources)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2 * len(FEATURES), failed=len(FEATURES))
    assert "not restored" not in result.stdout.str()


@pytest.mark.usefixtures("this_process_state_kept")
def test_state_changed_by_a_fixture_of_a_plugin_test_is_back(pytester: pytest.Pytester) -> None:
    source = (
        STATE_PROBE
        + (
            "\n\n@pytest.fixture\n"
            "def float64_everywhere():\n"
            "    torch.set_default_dtype(torch.float64)\n"
            "    torch._inductor.config.max_autotune = True\n"
            "    yield  # and never undone\n\n\n"
            "def test_5_changes(float64_everywhere, recompiles):\n"
            "    assert torch.get_default_dtype() == torch.float64\n"
        )
        + CHECKS
    )
    pytester.makepyfile(test_fixture=source)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


@pytest.mark.usefixtures("this_process_state_kept")
def test_plain_tests_are_not_touched(pytester: pytest.Pytester) -> None:
    # The plugin restores only around its own tests: a plain test's leak stays a leak
    # (the check fails), which shows that the restoring is not done for everyone.
    source = STATE_PROBE + "\n\ndef test_5_changes():\n    torch.set_default_dtype(torch.float64)\n" + CHECKS
    pytester.makepyfile(test_plain=source)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    assert "not restored: ['default_dtype']" in result.stdout.str()


@pytest.mark.usefixtures("this_process_state_kept")
def test_the_report_names_the_settings_a_test_left_changed(pytester: pytest.Pytester) -> None:
    source = (
        STATE_PROBE
        + (
            "\n\ndef test_5_changes(recompiles):\n"
            "    torch._inductor.config.max_autotune = True\n"
            '    torch.compiler.set_stance("force_eager")\n'
            "    torch.set_default_dtype(torch.float64)\n"
            '    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"\n'
        )
        + CHECKS
    )
    pytester.makepyfile(test_left_changed=source)
    report = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", f"--cudagraph-report={report}")
    result.assert_outcomes(passed=3)
    record = json.loads(report.read_text())["tests"]["test_left_changed.py::test_5_changes"]
    assert sorted(record["extra"]["restored_after_test"]) == [
        "$TORCHINDUCTOR_FX_GRAPH_CACHE",
        "compile stance",
        "default dtype",
        "torch._inductor.config.max_autotune",
    ]


WIDER_FIXTURES = """
import os
import pytest
import torch
import torch._dynamo.config


@pytest.fixture(scope="session", autouse=True)
def run_wide_settings():
    torch._dynamo.config.cache_size_limit = 64
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    yield
    torch._dynamo.config.cache_size_limit = 8
    del os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"]


@pytest.fixture(scope="module")
def float64_module():
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("n", range(3))
def test_plugin_test_sees_the_wider_settings(n, float64_module, recompiles):
    assert torch._dynamo.config.cache_size_limit == 64
    assert os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0"
    assert torch.get_default_dtype() == torch.float64
    torch.set_default_dtype(torch.float16)  # the test's own change, undone after it


@pytest.mark.max_recompiles(0)
def test_marker_test_sees_the_wider_settings_too(float64_module):
    assert torch._dynamo.config.cache_size_limit == 64
    assert torch.get_default_dtype() == torch.float64
"""


@pytest.mark.usefixtures("this_process_state_kept")
def test_settings_of_wider_scoped_fixtures_survive_and_are_not_blamed_on_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_wide=WIDER_FIXTURES)
    result = pytester.runpytest("--cudagraph-report=report.json")
    result.assert_outcomes(passed=4)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    restored = {nodeid: record.get("extra", {}).get("restored_after_test") for nodeid, record in tests.items()}
    # each parametrized test changed the dtype itself and only that is named; the marker test changed nothing
    assert restored == {
        **{f"test_wide.py::test_plugin_test_sees_the_wider_settings[{n}]": ["default dtype"] for n in range(3)},
        "test_wide.py::test_marker_test_sees_the_wider_settings_too": None,
    }
