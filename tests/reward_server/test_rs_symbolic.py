"""Symbolic equivalence (``reward_server.checker.symbolic``, in-process): the worker's verdicts on
the typed checks the exact rules leave it (``pending.SymbolicCheck``: values and trees, sympy
objects built from them), and what ``decide`` leaves it: the two readings' values, the steps of
a calculation and a congruence's sides typed apart, no unit."""

from __future__ import annotations

import pytest
from readers import check as Check  # tests/reward_server/, on sys.path (conftest.py)
from readers import tree

from reward_server.checker import symbolic
from reward_server.checker.decide import precheck
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.values import Expression
from reward_server.protocol import Reason

EQUAL = (True, Reason.EQUIVALENT)
DIFFERENT = (False, Reason.NOT_EQUIVALENT)
FALSE_EQUATION = (False, Reason.FALSE_EQUATION)

# (check, (equal, reason)).
SYMBOLIC_EQUIVALENT = [
    pytest.param(
        Check("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"), EQUAL, id="equal_expressions:sqrt2/2"
    ),
    pytest.param(Check("(x+1)^2", "x^2+2x+1"), EQUAL, id="identity:(x+1)^2|x^2+2x+1"),
    pytest.param(Check("\\cot^2 x", "\\csc^2 x - 1"), EQUAL, id="trig_identity:cot^2 x"),
    pytest.param(Check("3i(1+i)", "-3+3i"), EQUAL, id="imaginary_unit:3i(1+i)"),
    pytest.param(Check("0.5", "\\frac12"), EQUAL, id="exact_decimal:0.5|1/2"),
    pytest.param(Check("0.333333", "\\frac{1}{3}"), DIFFERENT, id="rounded_decimal:0.333333"),
    pytest.param(Check("2x+4", "2x+3"), DIFFERENT, id="different:2x+4|2x+3"),
    pytest.param(
        Check("2^{-60}", "2^{-60} + 2^{-120}"), DIFFERENT, id="tiny_difference:2^{-60}+2^{-120}"
    ),
    pytest.param(Check("y=x", "x=y"), EQUAL, id="relation_sides_swapped:y=x|x=y"),
    pytest.param(Check("y<x", "x>y"), EQUAL, id="relation_flipped:y<x|x>y"),
    pytest.param(Check("y<x", "x<y"), DIFFERENT, id="relation_reversed:y<x|x<y"),
    pytest.param(
        Check("5", "5", steps=(("\\sqrt{9+16}", "5"),)), EQUAL, id="true_step:sqrt(9+16)=5"
    ),
    pytest.param(
        Check("6", "6", steps=(("\\sqrt{9+16}", "6"),)),
        FALSE_EQUATION,
        id="false_step:sqrt(9+16)=6",
    ),
    pytest.param(
        Check("5", "6", steps=(("\\sqrt{9+16}", "5"),)), DIFFERENT, id="true_step_other_value"
    ),
    pytest.param(
        Check("4", "4", congruence=(("2^{x}", "4"), "5")),
        FALSE_EQUATION,
        id="congruence_side_no_integer:2^x = 4 mod 5",
    ),
    pytest.param(
        Check("2", "4", congruence=(("\\frac{2^{10}}{2}", "2"), "5")),
        (False, Reason.NOT_EQUIVALENT),
        id="congruence_answers_residue:2^10/2 = 2 mod 5|4",
    ),
    pytest.param(
        Check("2", "2", congruence=(("\\frac{2^{10}}{2}", "2"), "5")),
        EQUAL,
        id="congruence_evaluated_sides:2^10/2 = 2 mod 5",
    ),
    pytest.param(
        Check("1", "1", congruence=(("\\sqrt{2}", "1"), "5")),
        FALSE_EQUATION,
        id="congruence_not_integer:sqrt2 = 1 mod 5",
    ),
    pytest.param(
        Check("(x+1)_2", "12"), (False, Reason.UNPARSABLE_ANSWER), id="no_value:subscripted sum"
    ),
    pytest.param(
        Check("12", "(x+1)_2"), (False, Reason.UNPARSABLE_REFERENCE), id="no_value:reference"
    ),
    pytest.param(Check("\\sqrt[3]{-8}", "-2"), EQUAL, id="real_cube_root:cbrt(-8)|-2"),
    pytest.param(Check("\\log x = 2", "\\ln x = 2"), DIFFERENT, id="common_vs_natural_log"),
    pytest.param(Check("\\sin(\\arcsin x)", "x"), EQUAL, id="inverse_undone"),
    pytest.param(Check("5!!!!", "5"), EQUAL, id="multifactorial:5!!!!|5"),
    pytest.param(Check("9!!!!", "45"), EQUAL, id="multifactorial:9!!!!|9*5*1"),
]


@pytest.mark.parametrize(("check", "expected"), SYMBOLIC_EQUIVALENT)
def test_symbolic_equivalent(check: Check, expected: tuple[bool, Reason]) -> None:
    assert symbolic.symbolic_equivalent(check) == expected


# (answer as written, reference, the check decide leaves the worker).
LEFT_TO_THE_WORKER = [
    pytest.param(
        "\\sqrt{9+16} = 5\\text{ cm}",
        "5",
        Check("5", "5", steps=(("\\sqrt{9+16}", "5"),)),
        id="steps_typed_unit_gone:sqrt(9+16) = 5 cm",
    ),
    pytest.param(
        "\\sqrt{2} \\equiv 1 \\pmod 5",
        "1",
        Check("1", "1", congruence=(("\\sqrt{2}", "1"), "5")),
        id="congruence_sides_typed:sqrt2 = 1 mod 5",
    ),
    pytest.param(
        "4\\sqrt{3}\\text{ cm}",
        "4\\sqrt{2}",
        Check("4\\sqrt{3}", "4\\sqrt{2}"),
        id="unit_gone:4sqrt3 cm|4sqrt2",
    ),
    pytest.param(
        "x = \\sqrt{8}", "2\\sqrt{2}", Check("\\sqrt{8}", "2\\sqrt{2}"), id="label_gone:x=sqrt8"
    ),
    pytest.param(
        "y = x",
        "x = y",
        SymbolicCheck(Expression(tree("y=x")), Expression(tree("x=y"))),
        id="whole_relations:y=x|x=y",
    ),
]


@pytest.mark.parametrize(("answer", "reference", "expected"), LEFT_TO_THE_WORKER)
def test_decide_leaves_typed_leaves(answer: str, reference: str, expected: Check) -> None:
    assert precheck(answer, reference) == expected
