"""The decision on two read answers (``reward_server.checker.decide.decide``): its rules in their
order, each row the exact verdict or the exact (answer, reference) pair left for the symbolic pool.
"""

from __future__ import annotations

import pytest
from readers import check as Check  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker.compare import Verdict, same_value
from reward_server.checker.decide import decide
from reward_server.checker.grade import equivalent
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.reading import Refused, Statement, read_statement
from reward_server.protocol import Reason

EQUAL = Verdict(True, Reason.EQUIVALENT)
NOT_EQUAL = Verdict(False, Reason.NOT_EQUIVALENT)


def _refused(reason: Reason) -> Verdict:
    return Verdict(False, reason)


# (answer, reference, whether the answer is read as written, the verdict or the pool's pair).
DECIDE = [
    # the same canonical text, before any other rule
    pytest.param("18", "18", False, EQUAL, id="equal_text:18|18"),
    pytest.param("\\boxed{18}", "18", False, EQUAL, id="equal_text:\\boxed{18}|18"),
    pytest.param("maybe 18", "maybe 18", False, EQUAL, id="equal_text_before_policy:maybe 18"),
    # a worded reference is compared as words, its answer's refusal overridden
    pytest.param("No Solution", "no solution", True, EQUAL, id="worded_reference:No Solution"),
    pytest.param("None", "none", True, EQUAL, id="worded_reference_overrides_refusal:None"),
    pytest.param(
        "\\text{No solution}", "no solution", True, EQUAL, id="worded_reference:\\text{...}"
    ),
    pytest.param("no solutions", "no solution", True, NOT_EQUAL, id="worded_reference:plural"),
    pytest.param("5", "no solution", True, NOT_EQUAL, id="worded_reference:number answer"),
    # the answer policy's refusal
    pytest.param("maybe 18", "18", False, _refused(Reason.HEDGED_ANSWER), id="policy:maybe 18"),
    pytest.param("not 18", "18", False, _refused(Reason.NEGATED_ANSWER), id="policy:not 18"),
    pytest.param("9 squared", "81", False, _refused(Reason.MULTIPLIER_WORD), id="policy:9 squared"),
    pytest.param("12 result", "12", False, _refused(Reason.PROSE_IN_ANSWER), id="policy:result"),
    pytest.param(
        "3 (or four)", "3", False, _refused(Reason.SEVERAL_CANDIDATES), id="policy:3 (or four)"
    ),
    pytest.param(
        "maybe 5 cm",
        "5 kg",
        False,
        _refused(Reason.HEDGED_ANSWER),
        id="policy_before_units:maybe 5 cm|5 kg",
    ),
    # a congruence answers its least residue when every step holds
    pytest.param("17 \\equiv 2 \\pmod 5", "2", False, EQUAL, id="congruence_residue:17 = 2 mod 5"),
    pytest.param("x \\equiv 2 \\pmod 5", "2", False, EQUAL, id="congruence_residue:x = 2 mod 5"),
    pytest.param(
        "x \\equiv 2 \\pmod 5", "3", False, NOT_EQUAL, id="congruence_residue:other value"
    ),
    pytest.param(
        "17 \\equiv 3 \\pmod 5",
        "3",
        False,
        _refused(Reason.FALSE_EQUATION),
        id="congruence_false_step:17 = 3 mod 5",
    ),
    pytest.param(
        "17 \\equiv 7 \\pmod 5",
        "7",
        False,
        _refused(Reason.FALSE_EQUATION),
        id="congruence_not_least_residue:17 = 7 mod 5",
    ),
    pytest.param(
        "13 \\equiv 12",
        "12",
        False,
        _refused(Reason.FALSE_EQUATION),
        id="congruence_without_modulus_is_equation:13 = 12",
    ),
    pytest.param(
        "12 \\equiv 12", "12", False, EQUAL, id="congruence_without_modulus_is_equation:12 = 12"
    ),
    pytest.param(
        "x \\equiv y \\pmod 5",
        "2",
        False,
        Check("y", "2", congruence=(("y",), "5")),
        id="congruence_not_integers_to_pool:x = y mod 5",
    ),
    # an equation against an equation: the sides, when both name the same quantity
    pytest.param("x = 5", "y = 5", False, EQUAL, id="equations_same_quantity:x = 5|y = 5"),
    pytest.param("x = 5", "y = 6", False, NOT_EQUAL, id="equations_same_quantity:x = 5|y = 6"),
    pytest.param(
        "x = 0.5", "y = \\frac{1}{2}", False, EQUAL, id="equations_sides_exact:0.5|\\frac{1}{2}"
    ),
    pytest.param("f(x) = 2x+1", "y = 2x+1", False, EQUAL, id="equations_labels_interchange:f(x)|y"),
    pytest.param(
        "x = \\sqrt{2}",
        "y = 2^{1/2}",
        False,
        Check("\\sqrt{2}", "2^{1/2}"),
        id="equations_sides_to_pool:\\sqrt{2}|2^{1/2}",
    ),
    pytest.param(
        "\\cos x = \\frac12",
        "\\sin x = \\frac12",
        False,
        Check("\\cos x=\\frac{1}{2}", "\\sin x=\\frac{1}{2}"),
        id="equations_different_quantity_to_pool:\\cos x|\\sin x",
    ),
    pytest.param(
        "x = 5 cm",
        "y = 5 kg",
        False,
        _refused(Reason.UNIT_MISMATCH),
        id="equations_sides_units:5 cm|5 kg",
    ),
    # an equation against a value: every step holds, the last side is the value
    pytest.param("x = 5", "5", False, EQUAL, id="equation_vs_value:x = 5|5"),
    pytest.param("x + y = 5", "5", False, EQUAL, id="equation_vs_value:x + y = 5|5"),
    pytest.param("20 - 8 = 12", "12", False, EQUAL, id="calculation_holds:20 - 8 = 12|12"),
    pytest.param(
        "20 - 8 = 12", "13", False, NOT_EQUAL, id="calculation_holds_other_value:20 - 8 = 12|13"
    ),
    pytest.param(
        "20 - 7 = 12",
        "12",
        False,
        _refused(Reason.FALSE_EQUATION),
        id="calculation_false_step:20 - 7 = 12",
    ),
    pytest.param(
        "1 = 1 = 2", "2", False, _refused(Reason.FALSE_EQUATION), id="calculation_false_step:1=2"
    ),
    pytest.param(
        "20 - 7 = 12",
        "12 kg",
        False,
        _refused(Reason.FALSE_EQUATION),
        id="false_step_before_unit:20 - 7 = 12|12 kg",
    ),
    pytest.param(
        "2x = 14", "7", False, NOT_EQUAL, id="formula_not_checked_last_side_is_value:2x = 14|7"
    ),
    pytest.param(
        "5 + 7 = 12 apples", "12", False, EQUAL, id="calculation_unit_on_last_side:12 apples|12"
    ),
    pytest.param(
        "5 + 7 = 12 apples",
        "12 pears",
        False,
        _refused(Reason.UNIT_MISMATCH),
        id="calculation_unit_mismatch:12 apples|12 pears",
    ),
    pytest.param(
        "\\sqrt{9+16} = 5 cm",
        "5",
        False,
        Check("5", "5", steps=(("\\sqrt{9+16}", "5"),)),
        id="calculation_undecided_step_to_pool:\\sqrt{9+16} = 5 cm|5",
    ),
    pytest.param(
        "\\sqrt{9+16} = 5 cm",
        "5 kg",
        False,
        _refused(Reason.UNIT_MISMATCH),
        id="calculation_unit_before_pool:\\sqrt{9+16} = 5 cm|5 kg",
    ),
    # the units: both given and different
    pytest.param("5 cm", "5 kg", False, _refused(Reason.UNIT_MISMATCH), id="units:5 cm|5 kg"),
    pytest.param(
        "18 cents", "\\$18", False, _refused(Reason.UNIT_MISMATCH), id="units:18 cents|\\$18"
    ),
    pytest.param("25\\%", "25 cm", False, _refused(Reason.UNIT_MISMATCH), id="units:25\\%|25 cm"),
    pytest.param("5 cm", "5 centimeters", False, EQUAL, id="units_synonym:5 cm|5 centimeters"),
    pytest.param("5 cm", "5", False, EQUAL, id="units_bare_reference:5 cm|5"),
    pytest.param("5", "5 cm", False, EQUAL, id="units_bare_answer:5|5 cm"),
    # the typed values (compare.equal_values); undecided values go to the pool without units
    pytest.param("0.5", "\\frac{1}{2}", False, EQUAL, id="values:0.5|\\frac{1}{2}"),
    pytest.param("(1,2)", "(2,1)", False, NOT_EQUAL, id="values:(1,2)|(2,1)"),
    pytest.param("x = 1, x = 2", "1, 2", False, EQUAL, id="values_roots:x = 1, x = 2|1, 2"),
    pytest.param(
        "\\sqrt{2}",
        "1.414",
        False,
        Check("\\sqrt{2}", "1.414"),
        id="values_to_pool:\\sqrt{2}|1.414",
    ),
    pytest.param("x^2", "x \\cdot x", False, Check("x^2", "x\\cdot x"), id="values_to_pool:x^2"),
    pytest.param("1, 2", "(1, 2)", False, EQUAL, id="values_list_answers_tuple:1, 2|(1, 2)"),
    pytest.param(
        "5 cm", "\\sqrt{25} cm", False, Check("5", "\\sqrt{25}"), id="values_to_pool_units_removed"
    ),
    # a sentence is decided on the value it states
    pytest.param("Janet makes $18 every day.", "18", False, EQUAL, id="sentence_answer:$18|18"),
    pytest.param(
        "She has 18 apples.", "18 apples", False, EQUAL, id="sentence_answer:18 apples|18 apples"
    ),
]


@pytest.mark.parametrize(("answer", "reference", "as_written", "expected"), DECIDE)
def test_decide(
    answer: str, reference: str, as_written: bool, expected: Verdict | SymbolicCheck
) -> None:
    answer_read = read_statement(answer, same_value, as_written=as_written)
    reference_read = read_statement(reference, same_value, reference=True)
    assert isinstance(reference_read, Statement)
    if isinstance(answer_read, Refused):  # read as no answer: refused before any decision
        assert expected == Verdict(False, answer_read.reason)
        return
    assert decide(answer_read, reference_read) == expected


# (answer, label, the verdict): nothing to compare, said before any reading.
NOTHING = [
    pytest.param("", "5", _refused(Reason.EMPTY_ANSWER), id="empty:answer"),
    pytest.param("  ", "", _refused(Reason.EMPTY_ANSWER), id="empty:answer before reference"),
    pytest.param("5", "", _refused(Reason.NO_REFERENCE), id="empty:reference"),
]


@pytest.mark.parametrize(("answer", "label", "expected"), NOTHING)
def test_nothing_to_compare(answer: str, label: str, expected: Verdict) -> None:
    assert equivalent(answer, label) == expected
