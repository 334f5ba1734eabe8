"""Symbolic equivalence (``reward_server.checker.symbolic``, math-verify in-process): a handful of
verdicts, with the false steps, congruences, rounded decimals and text units it decides itself."""

from __future__ import annotations

import pytest

from reward_server.checker import symbolic
from reward_server.protocol import Reason

# (canonical answer, canonical reference, (equal, reason)).
SYMBOLIC_EQUIVALENT = [
    pytest.param(
        "\\frac{\\sqrt{2}}{2}",
        "\\frac{1}{\\sqrt{2}}",
        (True, Reason.EQUIVALENT),
        id="equal_expressions:sqrt2/2|1/sqrt2",
    ),
    pytest.param("(x+1)^2", "x^2+2x+1", (True, Reason.EQUIVALENT), id="identity:(x+1)^2|x^2+2x+1"),
    pytest.param(
        "\\cot^2 x",
        "\\csc^2 x - 1",
        (True, Reason.EQUIVALENT),
        id="trig_identity:cot^2 x|csc^2 x - 1",
    ),
    pytest.param("3i(1+i)", "-3+3i", (True, Reason.EQUIVALENT), id="imaginary_unit:3i(1+i)"),
    pytest.param("0.5", "\\frac12", (True, Reason.EQUIVALENT), id="exact_decimal:0.5|1/2"),
    pytest.param(
        "0.333333",
        "\\frac{1}{3}",
        (False, Reason.NOT_EQUIVALENT),
        id="rounded_decimal:0.333333|1/3",
    ),
    pytest.param("2x+4", "2x+3", (False, Reason.NOT_EQUIVALENT), id="different:2x+4|2x+3"),
    pytest.param(
        "2^{-60}",
        "2^{-60} + 2^{-120}",
        (False, Reason.NOT_EQUIVALENT),
        id="tiny_difference:2^{-60}|2^{-60}+2^{-120}",
    ),
    pytest.param(
        "4\\sqrt{3}\\text{ cm}",
        "4\\sqrt{3}",
        (True, Reason.EQUIVALENT),
        id="text_unit_dropped:4sqrt3 cm",
    ),
    pytest.param(
        "4\\sqrt{3}\\text{ cm}^2",
        "4\\sqrt{3}",
        (True, Reason.EQUIVALENT),
        id="text_unit_dropped:4sqrt3 cm^2",
    ),
    pytest.param(
        "4\\sqrt{3}\\text{ cm}",
        "4\\sqrt{2}",
        (False, Reason.NOT_EQUIVALENT),
        id="text_unit_dropped_value_differs:4sqrt3 cm|4sqrt2",
    ),
    pytest.param("y = 2x+3", "2x+3", (True, Reason.EQUIVALENT), id="assignment:y = 2x+3"),
    pytest.param("20 - 8 = 12", "12", (True, Reason.EQUIVALENT), id="true_step:20 - 8 = 12"),
    pytest.param(
        "5 + 7 = 12\\text{ apples}",
        "12",
        (True, Reason.EQUIVALENT),
        id="true_step_unit_dropped:5 + 7 = 12 apples",
    ),
    pytest.param("20 - 7 = 12", "12", (False, Reason.FALSE_EQUATION), id="false_step:20 - 7 = 12"),
    pytest.param("13 = 12", "12", (False, Reason.FALSE_EQUATION), id="false_step:13 = 12"),
    pytest.param(
        "17 \\equiv 2 \\pmod 5", "2", (True, Reason.EQUIVALENT), id="congruence:17 = 2 mod 5"
    ),
    pytest.param(
        "x \\equiv 2 \\pmod 5", "2", (True, Reason.EQUIVALENT), id="congruence_name:x = 2 mod 5"
    ),
    pytest.param(
        "2^{10} \\equiv 4 \\pmod 5",
        "4",
        (True, Reason.EQUIVALENT),
        id="congruence_power:2^{10} = 4 mod 5",
    ),
    pytest.param(
        "7 \\equiv 2 \\pmod 5",
        "7",
        (False, Reason.NOT_EQUIVALENT),
        id="congruence_answers_residue:7 = 2 mod 5|7",
    ),
    pytest.param(
        "5 \\equiv 12 \\pmod 7",
        "5",
        (False, Reason.FALSE_EQUATION),
        id="congruence_false_step:5 = 12 mod 7",
    ),
    pytest.param(
        "17 \\equiv 7 \\pmod 5",
        "7",
        (False, Reason.FALSE_EQUATION),
        id="congruence_not_least_residue:17 = 7 mod 5",
    ),
    pytest.param(
        "\\sqrt{2} \\equiv 1 \\pmod 5",
        "1",
        (False, Reason.FALSE_EQUATION),
        id="congruence_not_integer:sqrt2 = 1 mod 5",
    ),
    pytest.param("", "12", (False, Reason.UNPARSABLE_ANSWER), id="unparsable_answer:empty"),
    pytest.param("12", "", (False, Reason.UNPARSABLE_REFERENCE), id="unparsable_reference:empty"),
]


@pytest.mark.parametrize(("answer", "reference", "expected"), SYMBOLIC_EQUIVALENT)
def test_symbolic_equivalent(answer: str, reference: str, expected: tuple[bool, Reason]) -> None:
    assert symbolic.symbolic_equivalent(answer, reference) == expected
