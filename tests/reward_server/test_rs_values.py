"""Typed values (``reward_server.checker.values``): the type and fields each shape of answer is
read into (its tree aside), and the readers it is made of (``words_of``, ``choice_letters``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from readers import statement, tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker.extract import answer_text
from reward_server.checker.reading import Statement
from reward_server.checker.syntax import Unparsable, parse
from reward_server.checker.values import (
    Choice,
    Expression,
    Group,
    Number,
    Numeral,
    Value,
    Words,
    choice_letters,
    value_of,
    words_of,
)


def _shape(value: Value) -> Any:
    """What a value says, its tree aside (an expression's tree; a row spells it as text)."""
    if isinstance(value, Number):
        return ("number", value.value, value.percent)
    if isinstance(value, Numeral):
        return ("numeral", value.digits, value.base)
    if isinstance(value, Choice):
        return ("choice", value.letters)
    if isinstance(value, Group):
        return ("group", value.kind, tuple(_shape(item) for item in value.items), value.names)
    if isinstance(value, Words):
        return ("words", value.words)
    written = value.tree
    return ("expression", tree(written) if isinstance(written, str) else written)


def _tree_or_none(text: str) -> Any:
    read = parse(answer_text(text))
    return None if isinstance(read, Unparsable) else tree(text)


BD = frozenset("BD")


def _n(k: int) -> Number:
    """A whole number as an item: a group's items are read into values too."""
    return Number(str(k), Fraction(k), False)


ONE_TWO = (_n(1), _n(2))

# (answer, its typed value).
READ_VALUE = [
    # numbers: exact, with whether they were written as a percent
    pytest.param("18", Number("18", Fraction(18), False), id="number:18"),
    pytest.param("-3.5", Number("-3.5", Fraction(-7, 2), False), id="number_decimal:-3.5"),
    pytest.param(
        "\\frac{1}{2}", Number("\\frac{1}{2}", Fraction(1, 2), False), id="number_fraction"
    ),
    pytest.param(
        "2\\frac{1}{2}", Number("2\\frac{1}{2}", Fraction(5, 2), False), id="number_mixed"
    ),
    pytest.param(
        "0.\\overline{3}",
        Number("0.\\overline{3}", Fraction(1, 3), False),
        id="number_repeating:0.\\overline{3}",
    ),
    pytest.param("1.5e3", Number("1.5e3", Fraction(1500), False), id="number_scientific:1.5e3"),
    pytest.param("1,000", Number("1,000", Fraction(1000), False), id="number_thousands:1,000"),
    pytest.param("50\\%", Number("50\\%", Fraction(50), True), id="number_percent:50\\%"),
    pytest.param(
        "twenty-five", Number("twenty-five", Fraction(25), False), id="number_words:twenty-five"
    ),
    pytest.param(
        "5 thousand", Number("5 thousand", Fraction(5000), False), id="number_scale:5 thousand"
    ),
    pytest.param("2 dozen", Number("2 dozen", Fraction(24), False), id="number_dozen:2 dozen"),
    pytest.param("16-3-4", Number("16-3-4", Fraction(9), False), id="number_calculation:16-3-4"),
    pytest.param("x=5", Number("x=5", Fraction(5), False), id="number_assignment:x=5"),
    pytest.param("5 cm", Number("5 cm", Fraction(5), False), id="number_unit_suffix:5 cm"),
    # choices: two or more letters A-E
    pytest.param("BD", Choice("BD", BD), id="choice_joined:BD"),
    pytest.param("B, D", Choice("B, D", BD), id="choice_comma:B, D"),
    pytest.param("(B), (D)", Choice("(B), (D)", BD), id="choice_bracketed:(B), (D)"),
    pytest.param("(B) and (D)", Choice("(B) and (D)", BD), id="choice_and:(B) and (D)"),
    pytest.param(
        "\\text{(D), (B)}", Choice("\\text{(D), (B)}", BD), id="choice_text:\\text{(D), (B)}"
    ),
    pytest.param("B", Words("B", "b"), id="one_letter_is_words:B"),
    pytest.param("BB", Words("BB", "bb"), id="repeated_letter_is_words:BB"),
    # groups: brackets by kind, sets, bare lists, labelled parts
    pytest.param("(1, 2)", Group("(1, 2)", "()", ONE_TWO), id="group_tuple:(1, 2)"),
    pytest.param("[1, 2)", Group("[1, 2)", "[)", ONE_TWO), id="group_interval:[1, 2)"),
    pytest.param("(1, 2]", Group("(1, 2]", "(]", ONE_TWO), id="group_interval:(1, 2]"),
    pytest.param("[0,1]", Group("[0,1]", "[]", (_n(0), _n(1))), id="group_interval:[0,1]"),
    pytest.param("\\{1, 2\\}", Group("\\{1, 2\\}", "set", ONE_TWO), id="group_set"),
    pytest.param("1, 2", Group("1, 2", "list", ONE_TWO), id="group_list:1, 2"),
    pytest.param(
        "(1,2),(3,4)",
        Group(
            "(1,2),(3,4)",
            "list",
            (Group("(1,2)", "()", ONE_TWO), Group("(3,4)", "()", (_n(3), _n(4)))),
        ),
        id="group_list_of_tuples:(1,2),(3,4)",
    ),
    pytest.param("(a)3, (b)5", Group("(a)3, (b)5", "parts", (_n(3), _n(5))), id="group_parts"),
    pytest.param(
        "(a)3, (c)5",
        Group("(a)3, (c)5", "labelled", (_n(3), _n(5)), ("a", "c")),
        id="parts_only_labelled_in_order:(a)3, (c)5",
    ),
    pytest.param(
        "(i)2, (ii)4", Group("(i)2, (ii)4", "parts", (_n(2), _n(4))), id="group_parts_roman"
    ),
    pytest.param(
        "3, (a)4, (b)5",
        Group("3, (a)4, (b)5", "labelled", (_n(3), _n(4), _n(5)), ("", "a", "b")),
        id="parts_only_from_the_start:3, (a)4, (b)5",
    ),
    # a one-item bracket or set is its item; a one-item closed bracket stays a group
    pytest.param("(C)", Words("C", "c"), id="one_item_bracket:(C)"),
    pytest.param("(x+1)", Expression("x+1"), id="one_item_bracket:(x+1)"),
    pytest.param("\\{5\\}", Number("5", Fraction(5), False), id="one_item_set:\\{5\\}"),
    pytest.param(
        "\\{(1, 2)\\}", Group("(1, 2)", "()", ONE_TWO), id="one_item_set_of_tuple:\\{(1, 2)\\}"
    ),
    pytest.param("[5]", Group("[5]", "[]", (_n(5),)), id="one_item_closed_bracket_kept:[5]"),
    # words
    pytest.param("no solution", Words("no solution", "no solution"), id="words:no solution"),
    pytest.param(
        "\\text{No Solution}",
        Words("\\text{No Solution}", "no solution"),
        id="words_text_lowered:\\text{No Solution}",
    ),
    pytest.param("doesn't exist", Words("doesn't exist", "doesn't exist"), id="words_apostrophe"),
    pytest.param("\\text{(C)}", Words("\\text{(C)}", "c"), id="words_text_letter:\\text{(C)}"),
    # anything else is an expression
    pytest.param("x^2+1", Expression("x^2+1"), id="expression:x^2+1"),
    pytest.param("\\sqrt{2}", Expression("\\sqrt{2}"), id="expression:\\sqrt{2}"),
    pytest.param("\\emptyset", Group("\\emptyset", "set", ()), id="empty_set:\\emptyset"),
    pytest.param("1011_2", Numeral("1011_2", "1011", 2, 11), id="numeral:1011_2"),
    pytest.param("4_2", Numeral("4_2", "4", 2, None), id="numeral_invalid_digit:4_2"),
    # a bracketed tuple of letters is a tuple, never choice letters ("(b, a)" is ordered)
    pytest.param(
        "(b, a)",
        Group("(b, a)", "()", (Words("b", "b"), Words("a", "a"))),
        id="letters_tuple:(b, a)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), READ_VALUE)
def test_value_of_an_answer(text: str, expected: Value) -> None:
    read = statement(text)
    assert isinstance(read, Statement)
    assert _shape(read.value) == _shape(expected)


# (text, (kind of group, its items) or None when it is no group).
PARSE_STRUCTURE = [
    pytest.param("(1, 2)", ("()", ["1", "2"]), id="bracket_pair:(1, 2)"),
    pytest.param("[1, 2)", ("[)", ["1", "2"]), id="bracket_pair:[1, 2)"),
    pytest.param("(1, 2]", ("(]", ["1", "2"]), id="bracket_pair:(1, 2]"),
    pytest.param("[0, \\infty)", ("[)", ["0", "\\infty"]), id="bracket_pair:[0, \\infty)"),
    pytest.param("(5)", None, id="bracket_one_item_is_the_item:(5)"),
    pytest.param("[1, (2, 3)]", ("[]", ["1", "(2, 3)"]), id="nested_item_kept:[1, (2, 3)]"),
    pytest.param("\\{1, 2\\}", ("set", ["1", "2"]), id="set:\\{1, 2\\}"),
    pytest.param("1, 2", ("list", ["1", "2"]), id="bare_list:1, 2"),
    pytest.param(
        "(1, 2), (3, 4)", ("list", ["(1, 2)", "(3, 4)"]), id="bare_list_of_tuples:(1, 2), (3, 4)"
    ),
    pytest.param("5", None, id="scalar:5"),
    pytest.param("f(1, 2)", None, id="function_call:f(1, 2)"),
    pytest.param("(1, 2)+(3, 4)", None, id="bracket_closes_early:(1, 2)+(3, 4)"),
    pytest.param("(1,2)(3,4)", None, id="bracket_closes_early:(1,2)(3,4)"),
    pytest.param("\\{1,2\\}\\cup\\{3\\}", None, id="set_closes_early:\\{1,2\\}\\cup\\{3\\}"),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_STRUCTURE)
def test_groups(text: str, expected: tuple[str, list[str]] | None) -> None:
    value = value_of(tree(text))
    if expected is None:
        assert not isinstance(value, Group)
        return
    kind, items = expected
    assert isinstance(value, Group) and value.kind == kind
    assert [item.tree for item in value.items] == [tree(item) for item in items]


# (text, its lower-cased words or None).
TEXT_FORM = [
    pytest.param("no solution", "no solution", id="words:no solution"),
    pytest.param("No Solution.", "no solution", id="lowered_period_dropped:No Solution."),
    pytest.param("\\text{ no solution }", "no solution", id="text_command_stripped"),
    pytest.param("\\textbf{yes}", "yes", id="text_command:\\textbf{yes}"),
    pytest.param("\\mathrm{True}", "true", id="text_command:\\mathrm{True}"),
    pytest.param("\\text{(C)}", "c", id="bracketed_letter:\\text{(C)}"),
    pytest.param("(c)", "c", id="bracketed_letter:(c)"),
    pytest.param("B.", "b", id="letter_period:B."),
    pytest.param("doesn't exist", "doesn't exist", id="apostrophe:doesn't exist"),
    pytest.param("well-defined", "well-defined", id="hyphen:well-defined"),
    pytest.param("5", None, id="number:5"),
    pytest.param("\\text{5 apples}", None, id="digit_in_text:\\text{5 apples}"),
    pytest.param("x^2", None, id="math:x^2"),
    pytest.param("a_1", None, id="math:a_1"),
    pytest.param("\\pi", None, id="command:\\pi"),
    pytest.param("(ab)", "ab", id="bracketed_word_is_the_word:(ab)"),
    pytest.param("", None, id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), TEXT_FORM)
def test_words(text: str, expected: str | None) -> None:
    read = _tree_or_none(text)
    assert (None if read is None else words_of(read)) == expected


# (text, its multiple-choice letters or None).
CHOICE_LETTERS = [
    pytest.param("B, D", BD, id="comma:B, D"),
    pytest.param("B,D", BD, id="comma_unspaced:B,D"),
    pytest.param("B D", BD, id="space:B D"),
    pytest.param("(B) and (D)", BD, id="and:(B) and (D)"),
    pytest.param("\\text{(D), (B)}", BD, id="text_any_order:\\text{(D), (B)}"),
    pytest.param("BD", BD, id="joined:BD"),
    pytest.param("DB", BD, id="joined_any_order:DB"),
    pytest.param("ABCDE", frozenset("ABCDE"), id="joined_all_five:ABCDE"),
    pytest.param("B", frozenset("B"), id="one_letter:B"),
    pytest.param("\\textbf{C}", frozenset("C"), id="text_command:\\textbf{C}"),
    pytest.param("BB", None, id="repeated_joined:BB"),
    pytest.param("B, B", None, id="repeated_listed:B, B"),
    pytest.param("F", None, id="beyond_e:F"),
    pytest.param("ABCDEF", None, id="beyond_e:ABCDEF"),
    pytest.param("bd", None, id="joined_lower_case:bd"),
    pytest.param("(B)(D)", None, id="bracketed_joined:(B)(D)"),
    pytest.param("x", None, id="not_a_letter_a_to_e:x"),
    pytest.param("", None, id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), CHOICE_LETTERS)
def test_choice_letters(text: str, expected: frozenset[str] | None) -> None:
    read = _tree_or_none(text)
    assert (None if read is None else choice_letters(read)) == expected
