"""Modes agree, the parts that need no GPU: argument errors, the sizes checked, padding, the failure's words.

The captures themselves are in tests/gpu/test_agree_gpu.py.
"""

from __future__ import annotations

import math

import pytest
import torch
from toy_attention import ATTENTION_OP, ToyModel, make_inputs_for

from pytest_cudagraph import InvariantViolation, MisuseError
from pytest_cudagraph.graphs.agree import (
    MODES,
    ModeAgreement,
    PairComparison,
    _padded,
    _sliced,
    agree_modes,
    check_modes,
    default_check_sizes,
)
from pytest_cudagraph.graphs.numerics import compare_tensors


def make_inputs(n):
    return torch.randn(n, 4)


@pytest.mark.parametrize(
    "modes, fragment",
    [
        (("full", "graphed"), r"'graphed' is not a CUDA-graph mode; use any of \('full', 'breakable', 'piecewise'\)"),
        ((), r"modes=\(\) names no mode"),
        (None, r"modes=None names no mode"),
    ],
)
def test_an_unknown_or_empty_mode_is_one_sentence_naming_the_modes(modes, fragment):
    with pytest.raises(MisuseError, match=fragment):
        agree_modes(lambda x: x, make_inputs, [1, 2], modes=modes, break_at=ATTENTION_OP)


def test_the_breakable_and_piecewise_modes_need_break_at():
    with pytest.raises(
        MisuseError, match=r"the breakable and piecewise modes need the ops to break at: pass break_at="
    ):
        agree_modes(lambda x: x, make_inputs, [1, 2])
    with pytest.raises(MisuseError, match=r"the piecewise mode need"):
        check_modes(("full", "piecewise"), None)
    assert check_modes(("full",), None) == ("full",)
    assert check_modes("breakable", ("a::b",)) == ("breakable",)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"trials": 0}, "trials=0: give at least one trial"),
        ({"sizes": []}, r"sizes=\[\] is empty"),
        ({"sizes": None}, "no capture sizes were given: agree_modes needs sizes"),
        ({"check_sizes": [3, 9]}, "batch size 9 is above the largest captured size 8"),
        ({"break_at": "attention"}, "'attention' is not a 'namespace::op' name"),
        ({"break_at": ("nosuchlib::op",)}, "'nosuchlib::op' is not registered with torch.library"),
    ],
)
def test_bad_arguments_are_named_before_any_capture(kwargs, fragment):
    options = {"sizes": [1, 2, 8], "break_at": ATTENTION_OP} | kwargs
    sizes = options.pop("sizes")
    with pytest.raises(MisuseError, match=fragment):
        agree_modes(lambda x: x, make_inputs, sizes, **options)


def test_the_sizes_between_captured_sizes_are_checked_padded():
    assert default_check_sizes((1, 2, 4, 8)) == (1, 2, 3, 4, 5, 8)
    assert default_check_sizes((8,)) == (8,)
    assert MODES == ("full", "breakable", "piecewise")


def test_padding_adds_zero_rows_and_slicing_takes_them_away():
    x = torch.randn(3, 4)
    padded = _padded(x, 8)
    assert padded.shape == (8, 4) and torch.equal(padded[:3], x) and not padded[3:].any()
    assert _padded(x, 3) is x
    out = _sliced(padded * 2, 8, 3)
    assert torch.equal(out, x * 2)
    scalar = torch.tensor(1.0)
    assert _sliced(scalar, 8, 3) is scalar


def _pair(size, trial, first, second, passed, path="captured", bitwise=False, failed=None):
    return PairComparison(size, trial, first, second, path, passed, 0.0 if passed else 1.0, bitwise, failed)


def test_check_names_the_first_size_trial_and_pair_with_the_worst_element():
    worst = compare_tensors(torch.tensor([1.0, 2.0, 5.0]), torch.tensor([1.0, 2.0, 3.0]), path="output")
    assert not worst.passed
    comparisons = (
        _pair(1, 0, "full", "eager", True),
        _pair(3, 0, "full", "eager", True, path="padded to 4"),
        _pair(3, 1, "breakable", "full", False, path="padded to 4", bitwise=True, failed=worst),
        _pair(3, 1, "piecewise", "full", False, path="padded to 4", failed=worst),
        _pair(4, 0, "breakable", "full", False, bitwise=True, failed=worst),
    )
    agreement = ModeAgreement(("full", "breakable", "piecewise"), (1, 2, 4), (1, 2, 3, 4), 3, comparisons)
    assert not agreement.passed and len(agreement.mismatches) == 3
    with pytest.raises(InvariantViolation) as info:
        agreement.check()
    message = str(info.value)
    assert message.startswith(
        "CUDA-graph modes disagree (modes full, breakable, piecewise, captured sizes [1, 2, 4]): first at batch "
        "size 3 (padded to 4), trial 2 of 3: breakable and full differ bit for bit (they run the same kernels), "
        "output: worst element at index (2): breakable 5, full 3"
    )
    assert "Also differing (batch size: modes): 3: piecewise vs full; 4: breakable vs full." in message
    assert "frozen in a full graph" in message and "\n" not in message
    assert agreement.max_abs_err("full", "breakable") == 1.0
    assert agreement.max_abs_err("eager", "full") == 0.0 and agreement.max_abs_err("eager", "nope") is None
    data = agreement.to_json()
    assert data["passed"] is False and data["mismatches"][0] == {
        "size": 3,
        "trial": 1,
        "modes": ["breakable", "full"],
        "path": "padded to 4",
        "passed": False,
        "max_abs_err": 1.0,
        "bitwise": True,
    }


def test_an_agreement_with_no_difference_passes_its_check():
    agreement = ModeAgreement(("full",), (1,), (1,), 1, (_pair(1, 0, "full", "eager", True),))
    assert agreement.check() is agreement and agreement.message() is None
    assert not math.isnan(agreement.to_json()["max_abs_err"]["full vs eager"])


def test_the_fixture_names_a_wrong_mode_before_it_asks_for_a_gpu():
    from pytest_cudagraph.plugin.handles import CudagraphsFixture

    handle = CudagraphsFixture(sizes=(1, 2), break_at=None)
    with pytest.raises(MisuseError, match="'graphed' is not a CUDA-graph mode"):
        handle.agree(lambda x: x, make_inputs, modes=("full", "graphed"))
    with pytest.raises(MisuseError, match="the breakable and piecewise modes need the ops to break at"):
        handle.agree(lambda x: x, make_inputs)


class RowMixing(torch.nn.Module):
    """The toy decoder, then a step that mixes rows: a zero row padded in changes the real rows."""

    def __init__(self):
        super().__init__()
        self.decoder = ToyModel(layers=1)

    def forward(self, x):
        y = self.decoder(x)
        return y - y.mean(dim=0, keepdim=True)


@pytest.mark.slow
def test_piecewise_alone_runs_on_the_cpu_and_a_row_mixing_model_fails_at_the_padded_size_only():
    """Without CUDA the piecewise pieces run uncaptured, so the comparison loop itself runs here."""
    decoder = ToyModel(layers=2).eval()
    agreement = agree_modes(
        decoder, make_inputs_for(decoder), [1, 2, 4], ("piecewise",), ATTENTION_OP, 2, piecewise_backend="eager"
    )
    agreement.check()
    assert agreement.sizes == (1, 2, 3, 4) and len(agreement.comparisons) == 4 * 2
    assert {(c.first, c.second) for c in agreement.comparisons} == {("piecewise", "eager")}

    mixing = RowMixing().eval()
    agreement = agree_modes(
        mixing, make_inputs_for(mixing.decoder), [2, 4], ("piecewise",), ATTENTION_OP, 2, piecewise_backend="eager"
    )
    assert {c.size for c in agreement.mismatches} == {3}
    with pytest.raises(
        InvariantViolation, match=r"first at batch size 3 \(padded to 4\), trial 1 of 2: piecewise and eager differ"
    ):
        agreement.check()
