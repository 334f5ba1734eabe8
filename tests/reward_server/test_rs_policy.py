"""The answer policy (``reward_server.checker.policy``): the words of a short answer, of a sentence
and around a box that make it no answer, each with its named reason."""

from __future__ import annotations

import pytest
from readers import tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker import policy
from reward_server.checker.extract import answer_text
from reward_server.checker.syntax import Unparsable, parse
from reward_server.protocol import Reason

# (answer, its lower-cased words).
WORDS = [
    pytest.param("18 apples", ["apples"], id="bare_word:18 apples"),
    pytest.param("\\text{Total: 18}", ["total"], id="text_word:\\text{Total: 18}"),
    pytest.param("\\mathrm{i}", ["i"], id="text_single_letter:\\mathrm{i}"),
    pytest.param("\\textbf{Yes}", ["yes"], id="lower_cased:\\textbf{Yes}"),
    pytest.param(
        "\\text{5 apples} and more",
        ["apples", "and", "more"],
        id="text_then_bare:\\text{5 apples} and more",
    ),
    pytest.param("x", [], id="bare_single_letter:x"),
    pytest.param("x^2 + \\sin x", [], id="command_name:\\sin"),
    pytest.param("3\\pi", [], id="command_name:\\pi"),
    pytest.param("\\frac{1}{2}", [], id="command_name:\\frac"),
]


@pytest.mark.parametrize(("text", "expected"), WORDS)
def test_words(text: str, expected: list[str]) -> None:
    assert policy.tree_words(tree(text)) == expected


# (short answer, reads as one number, reason or None).
WORD_PROBLEM = [
    pytest.param("9 is wrong", False, Reason.NEGATED_ANSWER, id="negation:9 is wrong"),
    pytest.param("not 9", False, Reason.NEGATED_ANSWER, id="negation:not 9"),
    pytest.param(
        "9 is incorrect", False, Reason.NEGATED_ANSWER, id="negation_before_prose:9 is incorrect"
    ),
    pytest.param("7 or more", False, Reason.HEDGED_ANSWER, id="or_bound:7 or more"),
    pytest.param("about 18", False, Reason.HEDGED_ANSWER, id="approximate:about 18"),
    pytest.param("approximately 18", False, Reason.HEDGED_ANSWER, id="approximate:approximately"),
    pytest.param("18 at least", False, Reason.HEDGED_ANSWER, id="bound_after_value:18 at least"),
    pytest.param("18 at most", True, Reason.HEDGED_ANSWER, id="bound_after_value:18 at most"),
    pytest.param("several", False, Reason.HEDGED_ANSWER, id="short_answer_hedge:several"),
    pytest.param("maybe 5", False, Reason.HEDGED_ANSWER, id="hedge:maybe 5"),
    pytest.param("a lower bound 18", False, Reason.HEDGED_ANSWER, id="qualifier:lower bound"),
    pytest.param("3 (or four)", False, Reason.SEVERAL_CANDIDATES, id="digits_and_word:3 (or four)"),
    pytest.param("3 four", False, Reason.SEVERAL_CANDIDATES, id="digits_and_word:3 four"),
    pytest.param("five", True, None, id="number_word_alone:five"),
    pytest.param("\\text{five}", True, None, id="number_word_alone:\\text{five}"),
    pytest.param("5 thousand", True, None, id="numeric_multiplier:5 thousand"),
    pytest.param("5 dozen", True, None, id="numeric_multiplier:5 dozen"),
    pytest.param("10 hundreds", True, None, id="numeric_multiplier:10 hundreds"),
    pytest.param("5\\text{ hundred}", True, None, id="hundred_not_participle:5\\text{ hundred}"),
    pytest.param(
        "5 thousand", False, Reason.MULTIPLIER_WORD, id="numeric_multiplier_not_numeric:5 thousand"
    ),
    pytest.param("5 trillion", True, Reason.MULTIPLIER_WORD, id="multiplier:5 trillion"),
    pytest.param("9 squared", True, Reason.MULTIPLIER_WORD, id="multiplier:9 squared"),
    pytest.param("5 times", True, Reason.MULTIPLIER_WORD, id="multiplier:5 times"),
    pytest.param("5 pi", False, None, id="constant_not_a_word:5 pi is 5π"),
    pytest.param("3 halves", False, Reason.MULTIPLIER_WORD, id="fraction_word:3 halves"),
    pytest.param("2 tenths", True, Reason.MULTIPLIER_WORD, id="denominator:2 tenths"),
    pytest.param("4 doubled", True, Reason.MULTIPLIER_WORD, id="past_participle:4 doubled"),
    pytest.param("9 raised", True, Reason.MULTIPLIER_WORD, id="past_participle:9 raised"),
    pytest.param(
        "5\\text{ reduced}", True, Reason.MULTIPLIER_WORD, id="past_participle_text:5 reduced"
    ),
    pytest.param("12 is the total", True, Reason.PROSE_IN_ANSWER, id="prose:12 is the total"),
    pytest.param("the answer 12", True, None, id="announcement_is_extraction:the answer 12"),
    pytest.param("12 the answer", True, Reason.PROSE_IN_ANSWER, id="prose:12 the answer"),
    pytest.param("\\text{it}", False, Reason.PROSE_IN_ANSWER, id="prose_in_text:\\text{it}"),
    pytest.param("12", True, None, id="bare_value:12"),
    pytest.param("x = 5", True, None, id="assignment:x = 5"),
    pytest.param("18 apples", True, None, id="unit:18 apples"),
    pytest.param("5 cm", True, None, id="unit:5 cm"),
    pytest.param("18 seconds", True, None, id="unit_not_denominator:18 seconds"),
    pytest.param("18 give or take", False, Reason.HEDGED_ANSWER, id="or_bound:18 give or take"),
    pytest.param("18 or so", False, Reason.HEDGED_ANSWER, id="or_bound:18 or so"),
]


@pytest.mark.parametrize(("answer", "numeric", "expected"), WORD_PROBLEM)
def test_word_problem(answer: str, numeric: bool, expected: Reason | None) -> None:
    read = parse(answer_text(answer))
    if isinstance(read, Unparsable):  # no notation: refused as unparsable, before any policy
        assert expected is not None, read
        return
    assert policy.word_problem(tree(answer), numeric) is expected


# (words of a sentence, None for the value among them; the words stand before a box; reason).
REFUSAL = [
    pytest.param(["it", "is", "not", None], False, Reason.NEGATED_ANSWER, id="negation:not"),
    pytest.param(["18", "was", "rejected"], False, Reason.NEGATED_ANSWER, id="rejection:rejected"),
    pytest.param(["it", "isn't", None], False, Reason.NEGATED_ANSWER, id="negation:isn't"),
    pytest.param(["no", "more"], True, Reason.NEGATED_ANSWER, id="negation_first:no more"),
    pytest.param(["maybe", None], False, Reason.HEDGED_ANSWER, id="hedge:maybe"),
    pytest.param(["probably", None], False, Reason.HEDGED_ANSWER, id="hedge:probably"),
    pytest.param([None, "is", "too", "high"], False, Reason.HEDGED_ANSWER, id="qualifier:too"),
    pytest.param(
        ["a", "subtotal", "of", None], False, Reason.HEDGED_ANSWER, id="qualifier:subtotal"
    ),
    pytest.param(["it", "could", "be", None], False, Reason.HEDGED_ANSWER, id="modal:could be"),
    pytest.param(["it", "might", "be", None], False, Reason.HEDGED_ANSWER, id="modal:might be"),
    pytest.param(["could", None, "be"], False, None, id="modal_not_adjacent:could _ be"),
    pytest.param([None, "or", "more"], False, Reason.HEDGED_ANSWER, id="or_bound:or more"),
    pytest.param([None, "or", "fewer"], False, Reason.HEDGED_ANSWER, id="or_bound:or fewer"),
    pytest.param([None, "or", "so"], False, Reason.HEDGED_ANSWER, id="or_bound:or so"),
    pytest.param(["give", "or", "take"], False, Reason.HEDGED_ANSWER, id="or_bound:give or take"),
    pytest.param(["or", "and"], False, None, id="or_without_bound:or and"),
    pytest.param(["the", "answer", "is", None], False, None, id="statement:the answer is _"),
    pytest.param(["the", "answer", "is"], True, None, id="statement_before_box:the answer is"),
    pytest.param(["at", "least"], True, Reason.HEDGED_ANSWER, id="bound_before_box:at least"),
    pytest.param(["up", "to"], True, Reason.HEDGED_ANSWER, id="bound_before_box:up to"),
    pytest.param(["as", "many", "as"], True, Reason.HEDGED_ANSWER, id="bound_before_box:as many"),
    pytest.param(["about"], True, Reason.HEDGED_ANSWER, id="approximate_before_box:about"),
    pytest.param(["more", "than"], True, Reason.HEDGED_ANSWER, id="approximate_before_box:than"),
    pytest.param(["at", "least"], False, None, id="bound_only_before_box:at least"),
    pytest.param(["about"], False, None, id="approximate_only_before_box:about"),
    pytest.param(["about", "the", "answer", "is"], True, None, id="bound_not_last:about _ is"),
    pytest.param(["more"], True, None, id="comparative_alone:more"),
    pytest.param([], True, None, id="no_words"),
    pytest.param([None], True, None, id="value_only"),
]


@pytest.mark.parametrize(("words", "bound_at_end", "expected"), REFUSAL)
def test_refusal(words: list[str | None], bound_at_end: bool, expected: Reason | None) -> None:
    assert policy.refusal(words, bound_at_end=bound_at_end) is expected
