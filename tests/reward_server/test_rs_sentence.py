"""Answers written as sentences (``reward_server.checker.sentence``): which answers are sentences,
the one value a sentence states or why it states none (one row per rule of the module), the words
that refuse a boxed value, and whether a text states any value."""

from __future__ import annotations

import pytest

from reward_server.checker import sentence
from reward_server.checker.compare import same_value
from reward_server.protocol import Reason

# (text, whether it holds prose beyond a short answer's words).
IS_SENTENCE = [
    pytest.param("18", False, id="no_words:18"),
    pytest.param("x = 2", False, id="no_words:x = 2"),
    pytest.param("\\frac{1}{2}", False, id="command_only:\\frac{1}{2}"),
    pytest.param("x^2 + \\sin x", False, id="command_only:x^2 + \\sin x"),
    pytest.param("5 square feet", False, id="unit_words:5 square feet"),
    pytest.param("5 miles per hour", False, id="unit_words:5 miles per hour"),
    pytest.param("18 dollars", False, id="unit_words:18 dollars"),
    pytest.param("5 apples", False, id="one_word:5 apples"),
    pytest.param("maybe 18", False, id="one_word:maybe 18"),
    pytest.param("twenty five", False, id="number_words:twenty five"),
    pytest.param("7 or more", False, id="joiner_and_one_word:7 or more"),
    pytest.param("3 (or four)", False, id="joiner_and_number_word:3 (or four)"),
    pytest.param("2 and 3", False, id="joiner:2 and 3"),
    pytest.param("5 cm and 6 cm", False, id="joiner_and_units:5 cm and 6 cm"),
    pytest.param(
        "\\begin{cases} 1 & \\text{if } x > 0 \\\\ 0 & \\text{otherwise} \\end{cases}",
        False,
        id="environment_text_is_no_prose:cases",
    ),
    pytest.param("Janet makes $18 every day", True, id="sentence_word:Janet makes $18 every day"),
    pytest.param("When x = 2, y = 7", True, id="sentence_word_condition:When x = 2, y = 7"),
    pytest.param("The answer is 5", True, id="sentence_word:The answer is 5"),
    pytest.param("Total: $45", True, id="label_colon:Total: $45"),
    pytest.param("it's 5", True, id="contraction_pronoun:it's 5"),
    pytest.param("no solution", True, id="two_words:no solution"),
    pytest.param("5 red apples", True, id="two_words:5 red apples"),
    pytest.param("all real numbers", True, id="two_words:all real numbers"),
]


@pytest.mark.parametrize(("text", "expected"), IS_SENTENCE)
def test_is_sentence(text: str, expected: bool) -> None:
    assert sentence.is_sentence(text) is expected


def _value(value: str) -> tuple[str, None]:
    return value, None


def _refused(reason: Reason) -> tuple[None, Reason]:
    return None, reason


# (sentence, what it states: its value with its unit, or the reason it states none).
READ = [
    # context: a number after a preposition or a determiner
    pytest.param(
        "He runs every 2 days and covers 10 miles.",
        _value("10 miles"),
        id="context_preposition:every 2 days",
    ),
    pytest.param(
        "The 3 friends share 12 cookies.",
        _value("12 cookies"),
        id="context_determiner:the 3 friends",
    ),
    pytest.param(
        "By selling 9 cakes, she makes $18.",
        _value("$18"),
        id="context_gerund_after_preposition:by selling 9 cakes",
    ),
    pytest.param(
        "One of them has 5 apples.", _value("5 apples"), id="context_pronoun_one:one of them"
    ),
    # ... unless it names the value: "a profit of", "a total of"
    pytest.param(
        "She makes a profit of $5,000.",
        _value("$5,000"),
        id="names_the_value:a profit of $5,000",
    ),
    pytest.param("a total of 12 eggs", _value("12 eggs"), id="names_the_value:a total of 12"),
    # ... or it is the only number the sentence states, or the object of its one infinitive
    pytest.param(
        "The car travels at 60 miles per hour.",
        _value("60 miles per hour"),
        id="only_number_after_preposition:at 60 miles per hour",
    ),
    pytest.param(
        "He is left with 5 apples.",
        _value("5 apples"),
        id="only_number_after_preposition:with 5 apples",
    ),
    pytest.param(
        "She needs to pay $64 for 16 cups.",
        _value("$64"),
        id="infinitive_object:to pay $64 for 16 cups",
    ),
    pytest.param(
        "She sells them in 3 days for $5.",
        _refused(Reason.PROSE_IN_ANSWER),
        id="two_numbers_after_prepositions:in 3 days for $5",
    ),
    pytest.param(
        "The reciprocal of 42 is the answer.",
        _refused(Reason.PROSE_IN_ANSWER),
        id="never_after_of:the reciprocal of 42",
    ),
    # context: a clause a condition opens, up to its punctuation or the main verb
    pytest.param("If x = 2, then y = 7.", _value("y = 7"), id="context_condition:if x = 2"),
    pytest.param("When x = 2, y = 7", _value("y = 7"), id="context_condition:when x = 2"),
    pytest.param(
        "If each of the 5 workers paints 4 walls, they paint 20 walls.",
        _value("20 walls"),
        id="context_condition_clause:if each of the 5 workers paints 4 walls",
    ),
    pytest.param(
        "She will be 20 when her brother turns 12.",
        _value("20"),
        id="context_condition_at_end:when her brother turns 12",
    ),
    pytest.param(
        "The remainder when N is divided by 7 is 2.",
        _value("2"),
        id="context_condition_ends_at_main_verb:when N is divided by 7 is 2",
    ),
    # context: the subject before the copula that states the value
    pytest.param(
        "The sum of the first 10 integers is 55.",
        _value("55"),
        id="subject_before_copula:the first 10 integers is 55",
    ),
    pytest.param("Half of 36 is 18.", _value("18"), id="subject_before_copula:half of 36 is 18"),
    pytest.param("Total: $45", _value("$45"), id="label_colon:Total: $45"),
    # context: the premises before a conclusion
    pytest.param(
        "She had 20 apples and ate 2, so she has 18 apples.",
        _value("18 apples"),
        id="premises_before_conclusion:so she has 18 apples",
    ),
    pytest.param(
        "He planted 10 rows of 12 plants, which is 120 plants.",
        _value("120 plants"),
        id="premises_before_conclusion:which is 120 plants",
    ),
    pytest.param(
        "She bought 3 packs of 24, for a total of 72.",
        _value("72"),
        id="premises_before_conclusion:for a total of 72",
    ),
    pytest.param(
        "The answer is 20, so 18.",
        _refused(Reason.SEVERAL_CANDIDATES),
        id="premise_answer_not_restated:the answer is 20, so 18",
    ),
    pytest.param(
        "16 - 3 = 12, so she has 12 eggs.",
        _refused(Reason.FALSE_EQUATION),
        id="premise_false_step:16 - 3 = 12",
    ),
    pytest.param(
        "16 - 3 = 13, so she has 13 eggs.",
        _value("13 eggs"),
        id="premise_true_step:16 - 3 = 13",
    ),
    # candidates: one, or a list joined by and/or/commas; a name right after a copula
    pytest.param("The roots are 2 and 3.", _value("2, 3"), id="candidates_list:2 and 3"),
    pytest.param(
        "The solutions are x = 2 and x = 3.",
        _value("x = 2, x = 3"),
        id="candidates_list:x = 2 and x = 3",
    ),
    pytest.param(
        "She has 18 apples and 5 pears.",
        _value("18 apples, 5 pears"),
        id="candidates_list_with_units:18 apples and 5 pears",
    ),
    pytest.param("The answer is 12 or 13.", _value("12 or 13"), id="candidates_or:12 or 13"),
    pytest.param("The answer is $ab$.", _value("ab"), id="name_after_copula:is $ab$"),
    pytest.param("The answer is (B) and (D).", _value("(B), (D)"), id="names_listed:(B) and (D)"),
    # several candidates that differ
    pytest.param(
        "The answer is 12 and the other is 13.",
        _refused(Reason.SEVERAL_CANDIDATES),
        id="several_candidates:12 and the other is 13",
    ),
    pytest.param(
        "She has 18 apples and he has 5 pears.",
        _refused(Reason.SEVERAL_CANDIDATES),
        id="several_candidates:18 apples and he has 5 pears",
    ),
    # restatements of one value are one candidate
    pytest.param("The answer is 3/4, or 0.75.", _value("3/4"), id="restatement:3/4, or 0.75"),
    pytest.param("The answer is 0.5 or 1/2.", _value("0.5"), id="restatement:0.5 or 1/2"),
    pytest.param(
        "The answer is 18 dollars, or $18.",
        _value("18 dollars"),
        id="restatement_units:18 dollars, or $18",
    ),
    pytest.param("The answer is 0.25, or 25%.", _value("0.25"), id="restatement:0.25, or 25%"),
    pytest.param(
        "The answer is 3/4 or 0.8.", _value("3/4 or 0.8"), id="not_restatement:3/4 or 0.8"
    ),
    # restatement markers: the values they stand between must be one
    pytest.param(
        "The answer is $\\frac{1}{2}$ (that is, 0.5).",
        _value("0.5"),
        id="restatement_marker_that_is:(that is, 0.5)",
    ),
    pytest.param(
        "She earns $18, that is 18 dollars.",
        _value("18 dollars"),
        id="restatement_marker_that_is:$18, that is 18 dollars",
    ),
    pytest.param("The answer is 9, i.e. nine.", _value("nine"), id="restatement_marker_ie:i.e."),
    pytest.param(
        "The answer is 1/2, in other words 0.5.",
        _value("0.5"),
        id="restatement_marker_in_other_words",
    ),
    pytest.param(
        "The answer is 13 (that is, 12).",
        _refused(Reason.SEVERAL_CANDIDATES),
        id="restatement_marker_differs:13 (that is, 12)",
    ),
    pytest.param(
        "It is 18, namely 19.",
        _refused(Reason.SEVERAL_CANDIDATES),
        id="restatement_marker_differs:18, namely 19",
    ),
    # negations anywhere
    pytest.param("It is not 18.", _refused(Reason.NEGATED_ANSWER), id="negation:not 18"),
    pytest.param("There are no apples.", _refused(Reason.NEGATED_ANSWER), id="negation:no"),
    # hedges anywhere, modals
    pytest.param("The answer is probably 18.", _refused(Reason.HEDGED_ANSWER), id="hedge:probably"),
    pytest.param(
        "The answer could be 18.", _refused(Reason.HEDGED_ANSWER), id="modal_hedge:could be"
    ),
    # bounds and approximations before the value
    pytest.param("The answer is about 18.", _refused(Reason.HEDGED_ANSWER), id="bound:about"),
    pytest.param("She has at least 18.", _refused(Reason.HEDGED_ANSWER), id="bound:at least"),
    pytest.param(
        "The answer is more than 18.", _refused(Reason.HEDGED_ANSWER), id="bound:more than"
    ),
    pytest.param(
        "The answer is as many as 40.", _refused(Reason.HEDGED_ANSWER), id="bound:as many as"
    ),
    pytest.param("The answer is up to 18.", _refused(Reason.HEDGED_ANSWER), id="bound:up to"),
    pytest.param("The answer is ~18.", _refused(Reason.HEDGED_ANSWER), id="approximate_sign:~"),
    pytest.param(
        "The answer is \\approx 18.", _refused(Reason.HEDGED_ANSWER), id="approximate:\\approx"
    ),
    # bounds after the value
    pytest.param(
        "She needs 18 or more apples.", _refused(Reason.HEDGED_ANSWER), id="bound_after:or more"
    ),
    pytest.param(
        "The answer is 18 or less.", _refused(Reason.HEDGED_ANSWER), id="bound_after:or less"
    ),
    pytest.param("It has 18 or so apples.", _refused(Reason.HEDGED_ANSWER), id="bound_after:or so"),
    pytest.param(
        "The answer is 18 give or take.",
        _refused(Reason.HEDGED_ANSWER),
        id="bound_after:give or take",
    ),
    # "between 18 and 20": both ends are bounds
    pytest.param(
        "The value is between 18 and 20.",
        _refused(Reason.HEDGED_ANSWER),
        id="between:between 18 and 20",
    ),
    pytest.param(
        "The answer is between 18 and 20 apples.",
        _refused(Reason.HEDGED_ANSWER),
        id="between_with_unit:between 18 and 20 apples",
    ),
    # a range of two numbers is a hedge, never a subtraction
    pytest.param("It takes 3-5 hours.", _refused(Reason.HEDGED_ANSWER), id="range:3-5"),
    pytest.param(
        "It takes 3\u20135 hours.", _refused(Reason.HEDGED_ANSWER), id="range_en_dash:3–5"
    ),
    pytest.param("The answer is 3 - 5.", _value("3 - 5"), id="dash_between_math_is_minus:3 - 5"),
    pytest.param(
        "Janet makes $18 - that is her profit.",
        _value("$18"),
        id="dash_between_words_is_punctuation:$18 - that is",
    ),
    # operations in words change the value
    pytest.param(
        "The answer is twice 9.", _refused(Reason.MULTIPLIER_WORD), id="operation_before:twice"
    ),
    pytest.param(
        "The answer is half 36.", _refused(Reason.MULTIPLIER_WORD), id="operation_before:half"
    ),
    pytest.param(
        "The answer is 4 to the power of 2.",
        _refused(Reason.MULTIPLIER_WORD),
        id="operation_after:to the power of",
    ),
    pytest.param(
        "It costs 6 times 3 dollars.",
        _refused(Reason.MULTIPLIER_WORD),
        id="operation_after:times",
    ),
    pytest.param(
        "She has 9 divided by 3 apples.",
        _refused(Reason.MULTIPLIER_WORD),
        id="operation_after:divided by",
    ),
    pytest.param(
        "The answer is 9 squared.", _refused(Reason.MULTIPLIER_WORD), id="operation_after:squared"
    ),
    # comparatives: a difference beside the value is no second answer; alone it is the value
    pytest.param(
        "Zoe ran 26 laps, 4 laps more than Tim.",
        _value("26 laps"),
        id="comparative_beside_value:4 laps more than Tim",
    ),
    pytest.param(
        "Tim is 4 years older than Zoe, who is 10.",
        _value("10"),
        id="comparative_beside_value:4 years older than Zoe",
    ),
    pytest.param(
        "She has 5 more apples than Tom.",
        _value("5"),
        id="comparative_alone:5 more apples than Tom",
    ),
    # number words, kept as the words the grammar reads
    pytest.param(
        "She has twenty-five apples.", _value("twenty-five apples"), id="number_word:twenty-five"
    ),
    pytest.param(
        "Janet makes eighteen dollars.",
        _value("eighteen dollars"),
        id="number_word:eighteen dollars",
    ),
    pytest.param("The answer is two dozen.", _value("two dozen"), id="number_word:two dozen"),
    pytest.param("The answer is negative 5.", _value("-5"), id="sign_word:negative 5"),
    pytest.param("The answer is minus 5.", _value("-5"), id="sign_word:minus 5"),
    pytest.param("The answer is -5.", _value("-5"), id="sign:-5"),
    # units kept with the value: at most two words, never a function word
    pytest.param("Janet makes $18 every day.", _value("$18"), id="unit_currency:$18 every day"),
    pytest.param(
        "The area is 24 square units.", _value("24 square units"), id="unit_two_words:24 square"
    ),
    pytest.param("He is 5 feet tall.", _value("5 feet"), id="unit_word:5 feet tall"),
    pytest.param("The speed is 60 km/h.", _value("60 km/h"), id="unit_compound:60 km/h"),
    pytest.param("She needs 3 more bags.", _value("3"), id="unit_never_function_word:3 more"),
    # no value at all
    pytest.param("He is the answer.", _refused(Reason.PROSE_IN_ANSWER), id="no_value:prose"),
    # a compound number in words is one number
    pytest.param(
        "The answer is one hundred and twelve.",
        _value("one hundred and twelve"),
        id="number_words:one hundred and twelve",
    ),
    pytest.param(
        "He paid five thousand dollars.", _value("five thousand dollars"), id="number_words:scale"
    ),
]


@pytest.mark.parametrize(("text", "expected"), READ)
def test_read(text: str, expected: tuple[str | None, Reason | None]) -> None:
    reading = sentence.read(text, same_value)
    assert (reading.value, reading.reason) == expected


# (words before or after a boxed value, why they refuse it or None).
REFUSAL = [
    pytest.param("The final answer is", None, id="plain_lead:The final answer is"),
    pytest.param("is the answer", None, id="plain_tail:is the answer"),
    pytest.param("I hope it is correct.", None, id="plain_tail:I hope it is correct."),
    pytest.param("dollars", None, id="unit_tail:dollars"),
    pytest.param("It is not", Reason.NEGATED_ANSWER, id="negation_lead:It is not"),
    pytest.param(", but that is wrong", Reason.NEGATED_ANSWER, id="negation_tail:but wrong"),
    pytest.param("and that is incorrect", Reason.NEGATED_ANSWER, id="negation_tail:incorrect"),
    pytest.param("Perhaps the answer is", Reason.HEDGED_ANSWER, id="hedge_lead:Perhaps"),
    pytest.param("I think the answer is", Reason.HEDGED_ANSWER, id="hedge_lead:I think"),
    pytest.param("The answer could be", Reason.HEDGED_ANSWER, id="modal_lead:could be"),
    pytest.param("So the answer is at least", Reason.HEDGED_ANSWER, id="bound_at_end:at least"),
    pytest.param("The answer is at most", Reason.HEDGED_ANSWER, id="bound_at_end:at most"),
    pytest.param("The answer is about", Reason.HEDGED_ANSWER, id="bound_at_end:about"),
    pytest.param("up to", Reason.HEDGED_ANSWER, id="bound_at_end:up to"),
    pytest.param("or more", Reason.HEDGED_ANSWER, id="or_bound_tail:or more"),
    pytest.param("or so", Reason.HEDGED_ANSWER, id="or_bound_tail:or so"),
]


@pytest.mark.parametrize(("text", "expected"), REFUSAL)
def test_refusal(text: str, expected: Reason | None) -> None:
    assert sentence.refusal(text) is expected


# (text, whether it holds any value: a number, a number word or math).
STATES_VALUE = [
    pytest.param("18 dollars", True, id="number:18 dollars"),
    pytest.param("eighteen", True, id="number_word:eighteen"),
    pytest.param("$x + 1$", True, id="math_with_operator:$x + 1$"),
    pytest.param("$\\pi$", True, id="value_command:$\\pi$"),
    pytest.param("\\sqrt{2}", True, id="value_command:\\sqrt{2}"),
    pytest.param("I hope this helps!", False, id="prose_only:I hope this helps!"),
    pytest.param("dollars", False, id="unit_only:dollars"),
    pytest.param("$x$", False, id="name_only:$x$"),
    pytest.param("$f(x)$", False, id="name_only:$f(x)$"),
    pytest.param("The answer is $ab$.", False, id="name_only:The answer is $ab$."),
    pytest.param("", False, id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), STATES_VALUE)
def test_states_value(text: str, expected: bool) -> None:
    assert sentence.states_value(text) is expected
