"""Reading an answer once (``reward_server.checker.reading.read_statement``): JSON and sentences
read to the value they state, refusals with their reason, and each field of the ``Statement``."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from reward_server.checker.compare import same_value
from reward_server.checker.reading import Refused, Statement, read_statement, statement
from reward_server.checker.relations import read_label
from reward_server.checker.values import Choice, Expression, Group, Number, Value, Words
from reward_server.protocol import Reason


def _number(text: str, value: int) -> Number:
    return Number(text, Fraction(value), False)


def _plain(text: str, value: Value, **fields: Any) -> Statement:
    """The Statement of an answer with no relation, unit, refusal or words unless given."""
    base: dict[str, Any] = {
        "text": text,
        "value": value,
        "value_text": text,
        "unit": None,
        "sides": None,
        "label": None,
        "congruence": None,
        "refusal": None,
        "words": None,
    }
    return Statement(**(base | fields))


# (answer, keyword arguments of read_statement, the whole result).
READ_STATEMENT = [
    # an answer written as JSON is the value it holds
    pytest.param('{"answer": 42}', {}, _plain("42", _number("42", 42)), id="json:number"),
    pytest.param(
        '```json\n{"answer": "x = 2"}\n```',
        {},
        _plain("x=2", _number("x=2", 2), sides=("2",), label=read_label("x")),
        id="json_fenced:string",
    ),
    pytest.param(
        '{"answer": [1, 2]}',
        {},
        _plain("1, 2", Group("1, 2", "list", (_number("1", 1), _number("2", 2)))),
        id="json:list",
    ),
    # a sentence is the value it states, with its unit
    pytest.param(
        "Janet makes $18 every day.",
        {},
        _plain("18 dollars", _number("18", 18), value_text="18", unit="dollar"),
        id="sentence_value:Janet makes $18 every day.",
    ),
    pytest.param(
        "The answer is (B) and (D).",
        {},
        _plain("(B), (D)", Choice("(B), (D)", frozenset("BD"))),
        id="sentence_value:The answer is (B) and (D).",
    ),
    pytest.param(
        "Janet makes $18 every day.",
        {"reference": True},
        _plain("18 dollars", _number("18", 18), value_text="18", unit="dollar"),
        id="reference_sentence_value:Janet makes $18 every day.",
    ),
    # a sentence that states no single value is refused, with the reason
    pytest.param(
        "The answer is not 18.",
        {},
        Refused(Reason.NEGATED_ANSWER),
        id="sentence_refused_negated:The answer is not 18.",
    ),
    pytest.param(
        "Perhaps it is 18.",
        {},
        Refused(Reason.HEDGED_ANSWER),
        id="sentence_refused_hedged:Perhaps it is 18.",
    ),
    pytest.param(
        "She has many apples.",
        {},
        Refused(Reason.PROSE_IN_ANSWER),
        id="sentence_refused_prose:She has many apples.",
    ),
    pytest.param(
        "The answer is 12 and the other is 13.",
        {},
        Refused(Reason.SEVERAL_CANDIDATES),
        id="sentence_refused_several:12 and the other is 13",
    ),
    pytest.param(
        "The answer is twice 9.",
        {},
        Refused(Reason.MULTIPLIER_WORD),
        id="sentence_refused_multiplier:twice 9",
    ),
    pytest.param(
        "16 - 3 = 12, so she has 12 eggs.",
        {},
        Refused(Reason.FALSE_EQUATION),
        id="sentence_refused_false_working:16 - 3 = 12, so",
    ),
    pytest.param(
        "all real numbers",
        {},
        Refused(Reason.PROSE_IN_ANSWER),
        id="sentence_refused_prose:all real numbers",
    ),
    pytest.param(
        "no solution", {}, Refused(Reason.NEGATED_ANSWER), id="sentence_refused:no solution"
    ),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), READ_STATEMENT)
def test_read_statement(text: str, kwargs: dict[str, bool], expected: Refused | Statement) -> None:
    assert read_statement(text, same_value, **kwargs) == expected


# (answer, keyword arguments, (canonical text, refusal, words)): never Refused.
NOT_REFUSED = [
    # a reference is never refused: one that states no single value is read as written
    pytest.param(
        "She has many apples.",
        {"reference": True},
        ("She has many apples", None, "she has many apples"),
        id="reference_never_refused:She has many apples.",
    ),
    pytest.param(
        "It is not true.",
        {"reference": True},
        ("It is not true", Reason.NEGATED_ANSWER, "it is not true"),
        id="reference_never_refused:It is not true.",
    ),
    # as_written: not read as a sentence (the other side is a worded answer)
    pytest.param(
        "all real numbers",
        {"as_written": True},
        ("all real numbers", None, "all real numbers"),
        id="as_written_skips_sentence:all real numbers",
    ),
    pytest.param(
        "no solution",
        {"as_written": True},
        ("no solution", Reason.NEGATED_ANSWER, "no solution"),
        id="as_written_skips_sentence:no solution",
    ),
    # a JSON object that is not one member holding a value stays as it is
    pytest.param(
        '{"answer": 1, "b": 2}',
        {},
        ('{"answer":1, "b":2}', Reason.PROSE_IN_ANSWER, None),
        id="json_two_members_kept",
    ),
    pytest.param(
        '{"answer": true}',
        {},
        ('{"answer":true}', Reason.PROSE_IN_ANSWER, None),
        id="json_boolean_kept",
    ),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), NOT_REFUSED)
def test_not_refused(
    text: str, kwargs: dict[str, bool], expected: tuple[str, Reason | None, str | None]
) -> None:
    read = read_statement(text, same_value, **kwargs)
    assert isinstance(read, Statement)
    assert (read.text, read.refusal, read.words) == expected


# (answer, (label, sides)) of an equation (relations.split_equation).
EQUATIONS = [
    pytest.param("x = 5", ("x", ("5",)), id="assignment:x = 5"),
    pytest.param("f(x) = 2x+1", ("f(x)", ("2x+1",)), id="function_label:f(x) = 2x+1"),
    pytest.param("x + y = 5", ("x+y", ("5",)), id="quantity_label:x + y = 5"),
    pytest.param("12 = y", ("y", ("12",)), id="backwards_assignment:12 = y"),
    pytest.param("20 - 8 = 12", (None, ("20-8", "12")), id="calculation:20 - 8 = 12"),
    pytest.param("2x = 14", (None, ("2x", "14")), id="equation_to_solve:2x = 14"),
    pytest.param("e = 3", (None, ("e", "3")), id="constant_is_no_label:e = 3"),
    pytest.param("x = 1, x = 2", (None, None), id="list_of_roots:x = 1, x = 2"),
    pytest.param("x \\le 3", (None, None), id="inequality:x \\le 3"),
    pytest.param("18", (None, None), id="no_equation:18"),
]


@pytest.mark.parametrize(("text", "expected"), EQUATIONS)
def test_equation_fields(text: str, expected: tuple[str | None, tuple[str, ...] | None]) -> None:
    read = read_statement(text, same_value)
    assert isinstance(read, Statement)
    assert (read.label and read.label.text, read.sides) == expected


# (answer, (value_text, unit, value)): the value without its unit, read once.
UNITS = [
    pytest.param("5 cm", ("5", "cm", _number("5", 5)), id="unit:5 cm"),
    pytest.param("12 km/h", ("12", "km/h", _number("12", 12)), id="compound_unit:12 km/h"),
    pytest.param("18 apples", ("18", "apple", _number("18", 18)), id="word_unit:18 apples"),
    pytest.param("\\$18", ("18", "dollar", _number("18", 18)), id="currency_unit:\\$18"),
    pytest.param(
        "50\\%",
        ("50\\%", "%", Number("50\\%", Fraction(50), True)),
        id="percent_stays_in_value:50\\%",
    ),
    pytest.param(
        "3\\sqrt{2} meters",
        ("3\\sqrt{2}", "m", Expression("3\\sqrt{2}")),
        id="expression_value:3\\sqrt{2} meters",
    ),
    pytest.param("18", ("18", None, _number("18", 18)), id="no_unit:18"),
]


@pytest.mark.parametrize(("text", "expected"), UNITS)
def test_unit_fields(text: str, expected: tuple[str, str | None, Value]) -> None:
    read = read_statement(text, same_value)
    assert isinstance(read, Statement)
    assert (read.value_text, read.unit, read.value) == expected


# (answer, congruence: (sides, modulus) or None).
CONGRUENCES = [
    pytest.param("17 \\equiv 2 \\pmod 5", (("17", "2"), "5"), id="congruence:17 \\equiv 2"),
    pytest.param("x \\equiv 2 \\pmod 5", (("2",), "5"), id="congruence_name_dropped:x \\equiv 2"),
    pytest.param(
        "x \\equiv 3 (\\text{mod } 7)", (("3",), "7"), id="congruence_text_mod:(\\text{mod } 7)"
    ),
    pytest.param("13 \\equiv 12", (("13", "12"), None), id="congruence_no_modulus"),
    pytest.param("x = 5", None, id="no_congruence:x = 5"),
]


@pytest.mark.parametrize(("text", "expected"), CONGRUENCES)
def test_congruence_field(text: str, expected: tuple[tuple[str, ...], str | None] | None) -> None:
    read = read_statement(text, same_value)
    assert isinstance(read, Statement)
    assert read.congruence == expected


# (short answer, the answer policy's refusal recorded in the Statement).
REFUSALS = [
    pytest.param("maybe 18", Reason.HEDGED_ANSWER, id="hedged:maybe 18"),
    pytest.param("not 18", Reason.NEGATED_ANSWER, id="negated:not 18"),
    pytest.param("9 squared", Reason.MULTIPLIER_WORD, id="multiplier:9 squared"),
    pytest.param("12 result", Reason.PROSE_IN_ANSWER, id="prose:12 result"),
    pytest.param("3 (or four)", Reason.SEVERAL_CANDIDATES, id="several:3 (or four)"),
    pytest.param("5 thousand", None, id="numeric_multiplier_allowed:5 thousand"),
    pytest.param("18 apples", None, id="unit_allowed:18 apples"),
    pytest.param("18", None, id="no_words:18"),
]


@pytest.mark.parametrize(("text", "expected"), REFUSALS)
def test_refusal_field(text: str, expected: Reason | None) -> None:
    read = read_statement(text, same_value)
    assert isinstance(read, Statement)
    assert read.refusal is expected


# (answer, the whole answer as words, or None).
WORDS = [
    pytest.param("yes", "yes", id="words:yes"),
    pytest.param("\\text{(C)}", "c", id="words_letter:\\text{(C)}"),
    pytest.param("\\text{No Solution}", "no solution", id="words_text:\\text{No Solution}"),
    pytest.param("18", None, id="number:18"),
    pytest.param("x^2+1", None, id="expression:x^2+1"),
]


@pytest.mark.parametrize(("text", "expected"), WORDS)
def test_words_field(text: str, expected: str | None) -> None:
    read = read_statement(text, same_value, as_written=True)
    assert isinstance(read, Statement)
    assert read.words == expected


def test_a_worded_answer_has_no_unit() -> None:
    # its last word is part of the words, not a unit ("no solution" is not "no" solutions)
    read = read_statement("no solution", same_value, reference=True)
    assert isinstance(read, Statement)
    assert (read.value, read.unit, read.value_text) == (
        Words("no solution", "no solution"),
        None,
        "no solution",
    )


def test_words_value_of_a_letter() -> None:
    # a bracketed letter is read as the letter's word, also as the value
    read = read_statement("(C)", same_value)
    assert isinstance(read, Statement)
    assert (read.value, read.words) == (Words("C", "c"), "c")


def test_sides_steps_and_residue_are_read_with_the_statement() -> None:
    calculation = statement("20-8=12")
    assert calculation.side_statements == (statement("20-8"), statement("12"))
    assert calculation.side_statements[1].value == _number("12", 12)
    assert calculation.steps == ((_number("20-8", 12), _number("12", 12)),)
    assert statement("P=2l+2w=16").steps == ()  # a formula's steps are not checked
    assert statement("2^{10}\\equiv4\\pmod5").residue == statement("4")
    assert statement("5\\equiv12\\pmod7").residue == Reason.FALSE_EQUATION
    assert statement("x\\equiv\\sqrt{2}\\pmod5").residue is None  # left to the symbolic check
    assert statement("13\\equiv12").residue == statement("13 = 12")
    assert statement("12").side_statements is None
