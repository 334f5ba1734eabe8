"""Reading an answer once (``reward_server.checker.reading.read_statement``): JSON and sentences
read to the value they state, refusals with their reason, and each field of the ``Statement``,
all read from the answer's tree."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from readers import tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker.compare import same_value
from reward_server.checker.reading import Refused, Statement, read_statement, read_text
from reward_server.checker.values import Choice, Group, Number, Value, Words
from reward_server.protocol import Reason


def _shape(value: Value) -> Any:
    """What a value says, its tree aside."""
    if isinstance(value, Number):
        return ("number", value.value, value.percent)
    if isinstance(value, Choice):
        return ("choice", value.letters)
    if isinstance(value, Group):
        return ("group", value.kind, tuple(_shape(item) for item in value.items))
    if isinstance(value, Words):
        return ("words", value.words)
    return ("expression", value.tree)


def _number(value: int | Fraction, percent: bool = False) -> tuple[str, Fraction, bool]:
    return ("number", Fraction(value), percent)


def _read(text: str, **kwargs: bool) -> Any:
    """The reading of ``text``: its refusal, or (value, unit, refusal, words)."""
    read = read_statement(text, same_value, **kwargs)
    if isinstance(read, Refused):
        return read
    return _shape(read.value), read.unit, read.refusal, read.words


# (answer, keyword arguments of read_statement, what it reads as).
READ_STATEMENT = [
    # an answer written as JSON is the value it holds
    pytest.param('{"answer": 42}', {}, (_number(42), None, None, None), id="json:number"),
    pytest.param(
        '```json\n{"answer": "x = 2"}\n```', {}, (_number(2), None, None, None), id="json_fenced"
    ),
    pytest.param(
        '{"answer": [1, 2]}',
        {},
        (("group", "list", (_number(1), _number(2))), None, None, None),
        id="json:list",
    ),
    # a sentence is the value it states, with its unit
    pytest.param(
        "Janet makes $18 every day.",
        {},
        (_number(18), "dollar", None, None),
        id="sentence_value:Janet makes $18 every day.",
    ),
    pytest.param(
        "The answer is (B) and (D).",
        {},
        (("choice", frozenset("BD")), None, None, None),
        id="sentence_value:The answer is (B) and (D).",
    ),
    pytest.param(
        "Janet makes $18 every day.",
        {"reference": True},
        (_number(18), "dollar", None, None),
        id="reference_sentence_value:Janet makes $18 every day.",
    ),
    pytest.param(
        "She has twenty-five apples.",
        {},
        (_number(25), "apple", None, None),
        id="sentence_number_words:twenty-five apples",
    ),
    # a sentence that states no single value is refused, with the reason
    pytest.param("The answer is not 18.", {}, Refused(Reason.NEGATED_ANSWER), id="negated"),
    pytest.param("Perhaps it is 18.", {}, Refused(Reason.HEDGED_ANSWER), id="hedged"),
    pytest.param("She has many apples.", {}, Refused(Reason.PROSE_IN_ANSWER), id="prose"),
    pytest.param(
        "The answer is 12 and the other is 13.",
        {},
        Refused(Reason.SEVERAL_CANDIDATES),
        id="several:12 and the other is 13",
    ),
    pytest.param("The answer is twice 9.", {}, Refused(Reason.MULTIPLIER_WORD), id="twice 9"),
    pytest.param(
        "16 - 3 = 12, so she has 12 eggs.",
        {},
        Refused(Reason.FALSE_EQUATION),
        id="false_working:16 - 3 = 12, so",
    ),
    pytest.param("all real numbers", {}, Refused(Reason.PROSE_IN_ANSWER), id="all_real_numbers"),
    pytest.param("no solution", {}, Refused(Reason.NEGATED_ANSWER), id="no_solution"),
    pytest.param(
        "13 \\text{ (which equals 12)}",
        {},
        Refused(Reason.SEVERAL_CANDIDATES),
        id="remark_in_text_states_another_value",
    ),
    # what the grammar cannot read is no answer
    pytest.param("2 +", {}, Refused(Reason.UNPARSABLE_ANSWER), id="unparsable:2 +"),
    # a reference is never refused: one that states no single value is read as written
    pytest.param(
        "She has many apples.",
        {"reference": True},
        (("words", "she has many apples"), None, None, "she has many apples"),
        id="reference_never_refused:She has many apples.",
    ),
    pytest.param(
        "It is not true.",
        {"reference": True},
        (("words", "it is not true"), None, Reason.NEGATED_ANSWER, "it is not true"),
        id="reference_never_refused:It is not true.",
    ),
    # as_written: not read as a sentence (the other side is a worded answer)
    pytest.param(
        "all real numbers",
        {"as_written": True},
        (("words", "all real numbers"), None, None, "all real numbers"),
        id="as_written_skips_sentence:all real numbers",
    ),
    pytest.param(
        "no solution",
        {"as_written": True},
        (("words", "no solution"), None, Reason.NEGATED_ANSWER, "no solution"),
        id="as_written_skips_sentence:no solution",
    ),
    # a JSON object that is not one member holding a value is no notation
    pytest.param('{"answer": 1, "b": 2}', {}, Refused(Reason.UNPARSABLE_ANSWER), id="json_two"),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), READ_STATEMENT)
def test_read_statement(text: str, kwargs: dict[str, bool], expected: Any) -> None:
    assert _read(text, **kwargs) == expected


def _statement(text: str) -> Statement:
    read = read_text(text)
    assert isinstance(read, Statement), read
    return read


# (answer, (label, sides)) of an equation (relations.equation).
EQUATIONS = [
    pytest.param("x = 5", ("x", ("5",)), id="assignment:x = 5"),
    pytest.param("f(x) = 2x+1", ("f(x)", ("2x+1",)), id="function_label:f(x) = 2x+1"),
    pytest.param("x + y = 5", ("x+y", ("5",)), id="quantity_label:x + y = 5"),
    pytest.param("h(2) = 3", ("h(2)", ("3",)), id="function_at_a_value:h(2) = 3"),
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
    read = _statement(text)
    label, sides = expected
    assert (read.label.tree if read.label else None) == (tree(label) if label else None)
    found = tuple(side.tree for side in read.side_statements) if read.side_statements else None
    assert found == (tuple(tree(side) for side in sides) if sides else None)


# (answer, (the value's tree, unit, value)): the value without its unit, read once.
UNITS = [
    pytest.param("5 cm", ("5", "cm", _number(5)), id="unit:5 cm"),
    pytest.param("12 km/h", ("12", "km/h", _number(12)), id="compound_unit:12 km/h"),
    pytest.param("18 apples", ("18", "apple", _number(18)), id="word_unit:18 apples"),
    pytest.param("\\$18", ("18", "dollar", _number(18)), id="currency_unit:\\$18"),
    pytest.param("50\\%", ("50\\%", "%", _number(50, True)), id="percent_stays_in_value"),
    pytest.param("50 percent", ("50", "%", _number(50, True)), id="percent_word"),
    pytest.param(
        "3\\sqrt{2} meters",
        ("3\\sqrt{2}", "m", ("expression", tree("3\\sqrt{2}"))),
        id="expression_value:3\\sqrt{2} meters",
    ),
    pytest.param("18", ("18", None, _number(18)), id="no_unit:18"),
]


@pytest.mark.parametrize(("text", "expected"), UNITS)
def test_unit_fields(text: str, expected: tuple[str, str | None, Any]) -> None:
    read = _statement(text)
    value_tree, unit, value = expected
    assert (read.value_tree, read.unit, _shape(read.value)) == (tree(value_tree), unit, value)


# (answer, congruence: (sides, modulus) or None).
CONGRUENCES = [
    pytest.param("17 \\equiv 2 \\pmod 5", (("17", "2"), "5"), id="congruence:17 \\equiv 2"),
    pytest.param("x \\equiv 2 \\pmod 5", (("2",), "5"), id="congruence_name_dropped:x \\equiv 2"),
    pytest.param(
        "x \\equiv 3 (\\text{mod } 7)", (("3",), "7"), id="congruence_text_mod:(\\text{mod } 7)"
    ),
    pytest.param("13 \\equiv 12", None, id="no_modulus_is_an_equation:13 \\equiv 12"),
    pytest.param("x = 5", None, id="no_congruence:x = 5"),
]


@pytest.mark.parametrize(("text", "expected"), CONGRUENCES)
def test_congruence_field(text: str, expected: tuple[tuple[str, ...], str] | None) -> None:
    read = _statement(text)
    if expected is None:
        assert read.congruence is None
        return
    sides, modulus = expected
    assert read.congruence == (tuple(tree(side) for side in sides), tree(modulus))


# (short answer, the answer policy's refusal recorded in the Statement).
REFUSALS = [
    pytest.param("maybe 18", Reason.HEDGED_ANSWER, id="hedged:maybe 18"),
    pytest.param("not 18", Reason.NEGATED_ANSWER, id="negated:not 18"),
    pytest.param("9 squared", Reason.MULTIPLIER_WORD, id="multiplier:9 squared"),
    pytest.param("12 result", Reason.PROSE_IN_ANSWER, id="prose:12 result"),
    pytest.param("3 four", Reason.SEVERAL_CANDIDATES, id="several:3 four"),
    pytest.param("5 thousand", None, id="numeric_multiplier_allowed:5 thousand"),
    pytest.param("18 apples", None, id="unit_allowed:18 apples"),
    pytest.param("18", None, id="no_words:18"),
]


@pytest.mark.parametrize(("text", "expected"), REFUSALS)
def test_refusal_field(text: str, expected: Reason | None) -> None:
    assert _statement(text).refusal is expected


# (answer, the whole answer as words, or None).
WORDS = [
    pytest.param("yes", "yes", id="words:yes"),
    pytest.param("\\text{(C)}", "c", id="words_letter:\\text{(C)}"),
    pytest.param("\\text{No Solution}", "no solution", id="words_text:\\text{No Solution}"),
    pytest.param("doesn't exist", "doesn't exist", id="words_apostrophe:doesn't exist"),
    pytest.param("18", None, id="number:18"),
    pytest.param("twenty", None, id="number_word:twenty"),
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
    assert (_shape(read.value), read.unit) == (("words", "no solution"), None)


def test_words_value_of_a_letter() -> None:
    # a bracketed letter is read as the letter's word, also as the value
    read = _statement("(C)")
    assert (_shape(read.value), read.words) == (("words", "c"), "c")


def test_sides_steps_and_residue_are_read_with_the_statement() -> None:
    calculation = _statement("20-8=12")
    assert calculation.side_statements is not None
    assert [_shape(side.value) for side in calculation.side_statements] == [
        _number(12),
        _number(12),
    ]
    assert [(_shape(a), _shape(b)) for a, b in calculation.steps] == [(_number(12), _number(12))]
    assert _statement("P=2l+2w=16").steps == ()  # a formula's steps are not checked
    residue = _statement("2^{10}\\equiv4\\pmod5").residue
    assert isinstance(residue, Statement) and _shape(residue.value) == _number(4)
    assert _statement("5\\equiv12\\pmod7").residue == Reason.FALSE_EQUATION
    assert _statement("x\\equiv\\sqrt{2}\\pmod5").residue is None  # left to the symbolic check
    assert _statement("13\\equiv12").steps != ()  # without a modulus: the equation 13 = 12
    assert _statement("12").side_statements is None


def test_plus_minus_reads_as_its_two_values() -> None:
    for text in ("\\pm 2", "x = \\pm 2", "2, -2"):
        assert _shape(_statement(text).value) == ("group", "list", (_number(2), _number(-2)))
