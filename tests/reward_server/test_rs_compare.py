"""The exact comparison (``reward_server.checker.compare``): one rule per pair of value types, True
or False when it decides and None when the symbolic check must."""

from __future__ import annotations

from fractions import Fraction

import pytest
from readers import statement, tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker.compare import equal_values, same_value
from reward_server.checker.reading import Refused
from reward_server.checker.values import Choice, Expression, Group, Number, Value, Words

# (answer, reference, the exact verdict: True, False or None for undecided).
FAST_EQUIVALENT = [
    # numbers compare as exact rationals
    pytest.param("0.5", "\\frac{1}{2}", True, id="number_exact:0.5|\\frac{1}{2}"),
    pytest.param("0.\\overline{3}", "1/3", True, id="number_repeating:0.\\overline{3}|1/3"),
    pytest.param("0.33", "1/3", False, id="number_rounded:0.33|1/3"),
    pytest.param("0.333333", "1/3", False, id="number_rounded:0.333333|1/3"),
    pytest.param("1,000", "1000", True, id="number_thousands:1,000|1000"),
    pytest.param("\\$18", "18", True, id="number_currency:\\$18|18"),
    pytest.param("5 cm", "5", True, id="number_unit:5 cm|5"),
    pytest.param("12 km/h", "12", True, id="number_unit:12 km/h|12"),
    pytest.param("1.5e3", "1500", True, id="number_scientific:1.5e3|1500"),
    pytest.param("1.5\\times 10^{3}", "1500", True, id="number_scientific:1.5\\times 10^{3}"),
    pytest.param("2\\frac{1}{2}", "2.5", True, id="number_mixed:2\\frac{1}{2}|2.5"),
    pytest.param("five", "5", True, id="number_words:five|5"),
    pytest.param("18.", "18", True, id="number_trailing_period:18.|18"),
    pytest.param("17", "18", False, id="number_different:17|18"),
    # the percent rule: a bare number is read in the reference's unit
    pytest.param("50\\%", "50", True, id="percent_dropped_sign:50\\%|50"),
    pytest.param("50\\%", "0.5", True, id="percent_as_fraction:50\\%|0.5"),
    pytest.param("50", "50\\%", True, id="percent_bare_answer:50|50\\%"),
    pytest.param("0.5", "50\\%", False, id="percent_bare_fraction_answer:0.5|50\\%"),
    pytest.param("25\\%", "0.25", True, id="percent_as_fraction:25\\%|0.25"),
    pytest.param("25 percent", "25\\%", True, id="percent_word:25 percent|25\\%"),
    pytest.param("2000\\%", "20", False, id="percent_wrong_base:2000\\%|20"),
    pytest.param("0.25\\%", "0.25", False, id="percent_wrong_base:0.25\\%|0.25"),
    # numerals in a base compare by digits and base; bare digits take the other's base
    pytest.param("1011_2", "1011_{(2)}", True, id="base_spelling:1011_2|1011_{(2)}"),
    pytest.param("1011", "1011_2", True, id="base_bare_digits:1011|1011_2"),
    pytest.param("11", "1011_2", False, id="base_decimal_value:11|1011_2"),
    pytest.param("1011_2", "23_4", False, id="base_other_base:1011_2|23_4"),
    # choices compare as sets of letters
    pytest.param("B, D", "D, B", True, id="choice_any_order:B, D|D, B"),
    pytest.param("BD", "(B) and (D)", True, id="choice_spelling:BD|(B) and (D)"),
    pytest.param("\\text{(D), (B)}", "B, D", True, id="choice_text:\\text{(D), (B)}|B, D"),
    pytest.param("B, D", "B", False, id="choice_missing_letter:B, D|B"),
    pytest.param("BD", "BC", False, id="choice_other_letter:BD|BC"),
    # tuples and intervals: item by item, bracket by bracket
    pytest.param("(1,2)", "(1, 2)", True, id="ordered_same_items:(1,2)|(1, 2)"),
    pytest.param("(0.5, 1)", "(\\frac{1}{2}, 1)", True, id="ordered_items_exact"),
    pytest.param("(1,2)", "(2,1)", False, id="ordered_order_matters:(1,2)|(2,1)"),
    pytest.param("(1, 2)", "[1, 2]", False, id="ordered_open_vs_closed:(1, 2)|[1, 2]"),
    pytest.param("[1,2)", "[1, 2)", True, id="ordered_interval:[1,2)|[1, 2)"),
    pytest.param("[1,2)", "[1, 3)", False, id="ordered_interval_end:[1,2)|[1, 3)"),
    pytest.param("(1,2)", "(1,2,3)", False, id="ordered_length:(1,2)|(1,2,3)"),
    pytest.param("(x^2, 1)", "(x\\cdot x, 1)", None, id="ordered_item_undecided"),
    # sets and bare lists: multisets
    pytest.param("\\{1,2\\}", "\\{2,1\\}", True, id="unordered_set:\\{1,2\\}|\\{2,1\\}"),
    pytest.param("1, 2", "2, 1", True, id="unordered_list:1, 2|2, 1"),
    pytest.param("\\{1, 2\\}", "1, 2", True, id="unordered_set_vs_list:\\{1, 2\\}|1, 2"),
    pytest.param("x = 1, x = 2", "2, 1", True, id="unordered_roots:x = 1, x = 2|2, 1"),
    pytest.param("1, 2", "1, 2, 3", False, id="unordered_length:1, 2|1, 2, 3"),
    pytest.param("1, 2", "1, 3", False, id="unordered_item:1, 2|1, 3"),
    pytest.param("1, 1", "1, 2", False, id="unordered_multiplicity:1, 1|1, 2"),
    pytest.param("\\{x^2, 1\\}", "\\{1, x\\cdot x\\}", None, id="unordered_item_undecided"),
    pytest.param("1, 2", "(1, 2)", True, id="list_in_order_answers_a_tuple:1, 2|(1, 2)"),
    pytest.param("2, 1", "(1, 2)", False, id="list_in_order_answers_a_tuple:2, 1|(1, 2)"),
    pytest.param("1, 2", "[1, 2]", False, id="list_is_no_interval:1, 2|[1, 2]"),
    # labelled parts: in order, against parts, a bare list or a tuple
    pytest.param("(a) 3 (b) 5", "3, 5", True, id="parts_vs_list:(a) 3 (b) 5|3, 5"),
    pytest.param("(a) 3 (b) 5", "5, 3", False, id="parts_in_order:(a) 3 (b) 5|5, 3"),
    pytest.param("(a) 3 (b) 5", "(3, 5)", True, id="parts_vs_tuple:(a) 3 (b) 5|(3, 5)"),
    pytest.param("(a) 3, (b) 5", "(a) 3 (b) 5", True, id="parts_vs_parts"),
    pytest.param("(a) 3 (b) 5", "(a) 3 (b) 6", False, id="parts_item:(b) 5|(b) 6"),
    pytest.param("(a) 3 (b) 5", "(a) 3 (b) 5 (c) 7", False, id="parts_length"),
    pytest.param("(a) 3 (b) 5", "\\{3, 5\\}", None, id="parts_vs_set:(a) 3 (b) 5|\\{3, 5\\}"),
    # several values against one number
    pytest.param("1, 2", "3", False, id="group_vs_number:1, 2|3"),
    pytest.param("(1,2)", "1", False, id="group_vs_number:(1,2)|1"),
    pytest.param("3", "(1, 2)", False, id="number_vs_group:3|(1, 2)"),
    # words compare as lower-cased words
    pytest.param("no solution", "No Solution", True, id="words_case:no solution|No Solution"),
    pytest.param("\\text{(C)}", "c", True, id="words_letter:\\text{(C)}|c"),
    pytest.param("yes", "no", False, id="words_different:yes|no"),
    # words against a number
    pytest.param("no solution", "5", False, id="words_vs_number:no solution|5"),
    pytest.param("5", "no solution", False, id="number_vs_words:5|no solution"),
    # expressions are left to the symbolic check
    pytest.param("\\sqrt{2}", "1.414", None, id="expression_undecided:\\sqrt{2}|1.414"),
    pytest.param("x^2", "x\\cdot x", None, id="expression_undecided:x^2|x\\cdot x"),
    pytest.param("x^2", "x^2", True, id="expression_same_text:x^2|x^2"),
    # nothing to compare
    pytest.param("", "5", False, id="empty_answer"),
    pytest.param("5", "", False, id="empty_reference"),
    # nested structures are decided here down to depth 4, deeper ones by the symbolic check
    pytest.param(
        "((((0.5, 1), 1), 1), 1)",
        "((((\\frac{1}{2}, 1), 1), 1), 1)",
        True,
        id="depth_limit:item at depth 4 decided",
    ),
    pytest.param(
        "(((((0.5, 1), 1), 1), 1), 1)",
        "(((((\\frac{1}{2}, 1), 1), 1), 1), 1)",
        None,
        id="depth_limit:item at depth 5 undecided",
    ),
    pytest.param(
        "(((((0.5, 1), 1), 1), 1), 1)",
        "(((((0.5, 1), 1), 1), 1), 2)",
        False,
        id="depth_limit:a shallow difference still decides",
    ),
    pytest.param("(b, a)", "(a, b)", False, id="letters_tuple_ordered:(b, a)|(a, b)"),
    pytest.param("B, D", "D, B", True, id="choice_unordered:B, D|D, B"),
]


@pytest.mark.parametrize(("answer", "reference", "expected"), FAST_EQUIVALENT)
def test_same_value_of_answers(answer: str, reference: str, expected: bool | None) -> None:
    read, reference_read = statement(answer), statement(reference)
    if isinstance(read, Refused) or isinstance(reference_read, Refused):
        assert expected is False  # nothing to compare: an empty answer or reference
        return
    assert same_value(read.value, reference_read.value) is expected


HALF = Number(tree("0.5"), Fraction(1, 2), False)
HALF_FRACTION = Number(tree("\\frac{1}{2}"), Fraction(1, 2), False)
PAIR = (Number(tree("1"), Fraction(1), False), Number(tree("2"), Fraction(2), False))

# (answer value, reference value, depth, the exact verdict).
EQUAL_VALUES = [
    pytest.param(HALF, HALF_FRACTION, 0, True, id="number_by_value:0.5|\\frac{1}{2}"),
    pytest.param(
        Number(tree("50\\%"), Fraction(50), True), HALF, 0, True, id="number_percent_flag:50\\%|0.5"
    ),
    pytest.param(
        HALF,
        Number(tree("50\\%"), Fraction(50), True),
        0,
        False,
        id="number_percent_flag:0.5|50\\%",
    ),
    pytest.param(HALF, HALF_FRACTION, 4, True, id="depth_limit:depth 4 decided"),
    pytest.param(HALF, HALF_FRACTION, 5, None, id="depth_limit:depth 5 undecided"),
    pytest.param(HALF, HALF, 5, True, id="same_text_first:equal spellings beyond the depth"),
    pytest.param(
        Expression(tree("x^2")), Expression(tree("x^2")), 0, True, id="same_text_first:expressions"
    ),
    pytest.param(
        Expression(tree("x^2")), Expression(tree("x^3")), 0, None, id="expression_undecided"
    ),
    pytest.param(
        Choice(tree("BD"), frozenset("BD")),
        Choice(tree("B, D"), frozenset("BD")),
        0,
        True,
        id="choice_letters:BD|B, D",
    ),
    pytest.param(
        Group(tree("(1, 2)"), "()", PAIR),
        Group(tree("[1, 2]"), "[]", PAIR),
        0,
        False,
        id="group_brackets:(1, 2)|[1, 2]",
    ),
    pytest.param(
        Group(tree("\\{1, 2\\}"), "set", PAIR),
        Group(tree("2, 1"), "list", PAIR[::-1]),
        0,
        True,
        id="group_multiset:set|list",
    ),
    pytest.param(
        Group(tree("1, 2"), "list", PAIR),
        Number(tree("3"), Fraction(3), False),
        0,
        False,
        id="group_vs_number",
    ),
    pytest.param(
        Words(tree("no solution"), "no solution"),
        Number(tree("5"), Fraction(5), False),
        0,
        False,
        id="words_vs_number",
    ),
    pytest.param(
        Words(tree("\\text{Yes}"), "yes"),
        Words(tree("yes"), "yes"),
        0,
        True,
        id="words_by_words:Yes|yes",
    ),
]


@pytest.mark.parametrize(("answer", "reference", "depth", "expected"), EQUAL_VALUES)
def test_equal_values(answer: Value, reference: Value, depth: int, expected: bool | None) -> None:
    assert equal_values(answer, reference, depth) is expected
