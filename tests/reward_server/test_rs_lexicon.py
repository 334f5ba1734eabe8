"""The checker's word lists (``reward_server.checker.lexicon``): the relations between lists that
their comments promise, and the words each reading depends on."""

from __future__ import annotations

import pytest

from reward_server.checker import lexicon

_SETS = {
    name: frozenset(value.keys() if isinstance(value, dict) else value)
    for name, value in vars(lexicon).items()
    if name.isupper() and not name.startswith("_")
}
_WORD_SETS = {
    name: words for name, words in _SETS.items() if all(isinstance(w, str) for w in words)
}


def _lists(*names: str) -> frozenset[str]:
    return frozenset().union(*(_SETS[name] for name in names))


@pytest.mark.parametrize("name", sorted(_WORD_SETS), ids=lambda name: f"lower_case:{name}")
def test_words_are_lower_case(name: str) -> None:
    words = _WORD_SETS[name]
    assert words
    assert {w for w in words if w != w.lower()} == set()


# (smaller list, larger list): every word of the first is in the second, as its comment says.
CONTAINED = [
    pytest.param("QUALIFIERS", "HEDGES", id="hedges_contain:QUALIFIERS"),
    pytest.param("HEDGES", "SHORT_ANSWER_HEDGES", id="short_answer_hedges_contain:HEDGES"),
    pytest.param(
        "APPROXIMATE", "SHORT_ANSWER_HEDGES", id="short_answer_hedges_contain:APPROXIMATE"
    ),
    pytest.param("PREPOSITIONS", "CONTEXT_BEFORE", id="context_before_contains:PREPOSITIONS"),
    pytest.param("DETERMINERS", "CONTEXT_BEFORE", id="context_before_contains:DETERMINERS"),
    pytest.param("CONDITIONS", "CONTEXT_BEFORE", id="context_before_contains:CONDITIONS"),
    pytest.param("PREPOSITIONS", "NOT_UNITS", id="not_units_contain:PREPOSITIONS"),
    pytest.param("CONTEXT_BEFORE", "NOT_UNITS", id="not_units_contain:CONTEXT_BEFORE"),
    pytest.param("COPULAS", "NOT_UNITS", id="not_units_contain:COPULAS"),
    pytest.param("CONCLUSIONS", "NOT_UNITS", id="not_units_contain:CONCLUSIONS"),
    pytest.param("APPROXIMATE", "NOT_UNITS", id="not_units_contain:APPROXIMATE"),
    pytest.param("NUMERIC_MULTIPLIERS", "MULTIPLIERS", id="multipliers_contain:NUMERIC"),
    pytest.param("DENOMINATORS", "MULTIPLIERS", id="multipliers_contain:DENOMINATORS"),
    pytest.param("MULTIPLIERS", "OPERATION_NOUNS", id="operation_nouns_contain:MULTIPLIERS"),
    pytest.param("SCALES", "NUMERIC_MULTIPLIERS", id="numeric_multipliers_contain:SCALES"),
    pytest.param("COPULAS", "WHICH_VERBS", id="which_verbs_contain:COPULAS"),
    pytest.param("COPULAS", "PROSE", id="prose_contains:COPULAS"),
    pytest.param("CONCLUSIONS", "PROSE", id="prose_contains:CONCLUSIONS"),
    pytest.param("COPULAS", "SENTENCE_WORDS", id="sentence_words_contain:COPULAS"),
    pytest.param("CONCLUSIONS", "SENTENCE_WORDS", id="sentence_words_contain:CONCLUSIONS"),
    pytest.param("PRONOUNS", "SENTENCE_WORDS", id="sentence_words_contain:PRONOUNS"),
]


@pytest.mark.parametrize(("smaller", "larger"), CONTAINED)
def test_list_contains_list(smaller: str, larger: str) -> None:
    assert _SETS[smaller] - _SETS[larger] == set()


# (list A, list B): two readings that must never share a word (a word would get two reasons).
DISJOINT = [
    pytest.param("NEGATIONS", "HEDGES", id="disjoint:NEGATIONS/HEDGES"),
    pytest.param("NEGATIONS", "SHORT_ANSWER_HEDGES", id="disjoint:NEGATIONS/SHORT_ANSWER_HEDGES"),
    pytest.param("NEGATIONS", "OR_BOUNDS", id="disjoint:NEGATIONS/OR_BOUNDS"),
    pytest.param("NEGATIONS", "PROSE", id="disjoint:NEGATIONS/PROSE"),
    pytest.param("HEDGES", "APPROXIMATE", id="disjoint:HEDGES/APPROXIMATE"),
    pytest.param("SHORT_ANSWER_HEDGES", "PROSE", id="disjoint:SHORT_ANSWER_HEDGES/PROSE"),
    pytest.param("NUMBER_WORDS", "MULTIPLIERS", id="disjoint:NUMBER_WORDS/MULTIPLIERS"),
    pytest.param("NUMBER_WORDS", "SCALES", id="disjoint:NUMBER_WORDS/SCALES"),
    pytest.param("ADJECTIVES", "DENOMINATORS", id="disjoint:ADJECTIVES/DENOMINATORS"),
    pytest.param("PREPOSITIONS", "DETERMINERS", id="disjoint:PREPOSITIONS/DETERMINERS"),
    pytest.param("PREPOSITIONS", "CONDITIONS", id="disjoint:PREPOSITIONS/CONDITIONS"),
    pytest.param("DETERMINERS", "CONDITIONS", id="disjoint:DETERMINERS/CONDITIONS"),
]


@pytest.mark.parametrize(("first", "second"), DISJOINT)
def test_lists_share_no_word(first: str, second: str) -> None:
    assert _SETS[first] & _SETS[second] == set()


# (derived list, its definition): the derived sets are exactly what their comments state.
DERIVED = [
    pytest.param(
        "CONTEXT_BEFORE",
        _lists("PREPOSITIONS", "DETERMINERS", "CONDITIONS"),
        id="derived:CONTEXT_BEFORE",
    ),
    pytest.param(
        "SENTENCE_WORDS",
        (
            _lists("CONTEXT_BEFORE", "COPULAS", "CONCLUSIONS", "PRONOUNS")
            | {"answer", "ie", "namely"}
        )
        - {"per"},
        id="derived:SENTENCE_WORDS_minus_per",
    ),
    pytest.param(
        "SHORT_ANSWER_HEDGES",
        _lists("HEDGES", "APPROXIMATE")
        | (_SETS["OR_BOUNDS"] - {"so", "take"})
        | {"least", "most", "close", "several"},
        id="derived:SHORT_ANSWER_HEDGES",
    ),
]


@pytest.mark.parametrize(("name", "words"), DERIVED)
def test_derived_list(name: str, words: frozenset[str]) -> None:
    assert _SETS[name] == words


# (word, list, member): the single words the comments name.
MEMBERSHIP = [
    # "per" is a preposition but not a sentence word ("5 km per hour" is a unit)
    pytest.param("per", "PREPOSITIONS", True, id="preposition:per"),
    pytest.param("per", "SENTENCE_WORDS", False, id="not_sentence_word:per"),
    pytest.param("per", "NOT_UNITS", True, id="not_unit:per"),
    pytest.param("answer", "SENTENCE_WORDS", True, id="sentence_word:answer"),
    pytest.param("namely", "SENTENCE_WORDS", True, id="sentence_word:namely"),
    pytest.param("of", "PREPOSITIONS", True, id="preposition:of"),
    pytest.param("without", "PREPOSITIONS", True, id="preposition:without"),
    # "18 or so", "give or take": bounds in a sentence, not short-answer hedges
    pytest.param("so", "OR_BOUNDS", True, id="or_bound:so"),
    pytest.param("take", "OR_BOUNDS", True, id="or_bound:take"),
    pytest.param("so", "SHORT_ANSWER_HEDGES", False, id="not_short_answer_hedge:so"),
    pytest.param("take", "SHORT_ANSWER_HEDGES", False, id="not_short_answer_hedge:take"),
    pytest.param("more", "SHORT_ANSWER_HEDGES", True, id="short_answer_hedge:more"),
    pytest.param("several", "SHORT_ANSWER_HEDGES", True, id="short_answer_hedge:several"),
    pytest.param("least", "SHORT_ANSWER_HEDGES", True, id="short_answer_hedge:least"),
    pytest.param("several", "HEDGES", False, id="not_sentence_hedge:several"),
    pytest.param("too", "QUALIFIERS", True, id="qualifier:too"),
    pytest.param("subtotal", "QUALIFIERS", True, id="qualifier:subtotal"),
    pytest.param("maybe", "HEDGES", True, id="hedge:maybe"),
    pytest.param("about", "APPROXIMATE", True, id="approximate:about"),
    pytest.param("wrong", "NEGATIONS", True, id="negation:wrong"),
    pytest.param("isn't", "NEGATIONS", True, id="negation:isn't"),
    pytest.param("rejected", "NEGATIONS", True, id="negation:rejected"),
    # "first" and "second" name a position or a unit of time, never a denominator
    pytest.param("first", "DENOMINATORS", False, id="not_denominator:first"),
    pytest.param("second", "DENOMINATORS", False, id="not_denominator:second"),
    pytest.param("firsts", "DENOMINATORS", False, id="not_denominator:firsts"),
    pytest.param("seconds", "DENOMINATORS", False, id="not_denominator:seconds"),
    pytest.param("first", "ADJECTIVES", True, id="adjective:first"),
    pytest.param("third", "DENOMINATORS", True, id="denominator:third"),
    pytest.param("thirds", "DENOMINATORS", True, id="denominator_plural:thirds"),
    pytest.param("tenths", "DENOMINATORS", True, id="denominator_plural:tenths"),
    pytest.param("hundredths", "DENOMINATORS", True, id="denominator_plural:hundredths"),
    pytest.param("millionth", "DENOMINATORS", True, id="denominator:millionth"),
    pytest.param("squared", "MULTIPLIERS", True, id="multiplier:squared"),
    pytest.param("half", "MULTIPLIERS", True, id="multiplier:half"),
    pytest.param("trillion", "MULTIPLIERS", True, id="multiplier:trillion"),
    pytest.param("trillion", "NUMERIC_MULTIPLIERS", False, id="not_numeric_multiplier:trillion"),
    pytest.param("twice", "OPERATIONS_BEFORE", True, id="operation_before:twice"),
    pytest.param("divided", "OPERATIONS_AFTER", True, id="operation_after:divided"),
    pytest.param("multiple", "OPERATION_NOUNS", True, id="operation_noun:multiple"),
    pytest.param("pi", "MATH_WORDS", True, id="math_word:pi"),
    pytest.param("sin", "MATH_WORDS", True, id="math_word:sin"),
    pytest.param("total", "FILLERS", True, id="filler:total"),
    pytest.param("makes", "WHICH_VERBS", True, id="which_verb:makes"),
    pytest.param("answer", "PROSE", True, id="prose:answer"),
    pytest.param("apiece", "NOT_UNITS", True, id="not_unit:apiece"),
    pytest.param("ago", "NOT_UNITS", True, id="not_unit:ago"),
]


@pytest.mark.parametrize(("word", "name", "member"), MEMBERSHIP)
def test_word_membership(word: str, name: str, member: bool) -> None:
    assert (word in _SETS[name]) is member


def test_denominators_are_ordinals_and_their_plurals() -> None:
    singular = {w for w in lexicon.DENOMINATORS if w + "s" in lexicon.DENOMINATORS}
    assert singular | {w + "s" for w in singular} == lexicon.DENOMINATORS
    assert len(singular) == 28


NUMBER_WORD_VALUES = [
    pytest.param("zero", 0, id="ones:zero"),
    pytest.param("seven", 7, id="ones:seven"),
    pytest.param("ten", 10, id="ones:ten"),
    pytest.param("nineteen", 19, id="teens:nineteen"),
    pytest.param("twenty", 20, id="tens:twenty"),
    pytest.param("forty", 40, id="tens:forty"),
    pytest.param("ninety", 90, id="tens:ninety"),
]


@pytest.mark.parametrize(("word", "value"), NUMBER_WORD_VALUES)
def test_number_words(word: str, value: int) -> None:
    assert lexicon.NUMBER_WORDS[word] == value


def test_number_words_are_zero_to_nineteen_and_the_tens() -> None:
    assert sorted(lexicon.NUMBER_WORDS.values()) == [*range(20), *range(20, 100, 10)]


MULTIPLIER_VALUES = [
    pytest.param("thousand", 1000, id="numeric_multiplier:thousand"),
    pytest.param("thousands", 1000, id="numeric_multiplier_plural:thousands"),
    pytest.param("million", 10**6, id="numeric_multiplier:million"),
    pytest.param("billions", 10**9, id="numeric_multiplier_plural:billions"),
    pytest.param("hundred", 100, id="numeric_multiplier:hundred"),
    pytest.param("dozen", 12, id="numeric_multiplier:dozen"),
    pytest.param("dozens", 12, id="numeric_multiplier_plural:dozens"),
]


@pytest.mark.parametrize(("word", "value"), MULTIPLIER_VALUES)
def test_numeric_multipliers(word: str, value: int) -> None:
    assert lexicon.NUMERIC_MULTIPLIERS[word] == value


def test_scales_have_their_multiplier_values() -> None:
    assert {w: lexicon.NUMERIC_MULTIPLIERS[w] for w in lexicon.SCALES} == lexicon.SCALES


@pytest.mark.parametrize(
    "plural",
    sorted(w for w in lexicon.NUMERIC_MULTIPLIERS if w.endswith("s")),
    ids=lambda plural: f"plural_multiplier:{plural}",
)
def test_plural_multiplier_is_its_singular(plural: str) -> None:
    assert lexicon.NUMERIC_MULTIPLIERS[plural] == lexicon.NUMERIC_MULTIPLIERS[plural[:-1]]


PAIRS = [
    pytest.param(("at", "least"), "APPROXIMATE_PAIRS", True, id="approximate_pair:at least"),
    pytest.param(("up", "to"), "APPROXIMATE_PAIRS", True, id="approximate_pair:up to"),
    pytest.param(("much", "as"), "APPROXIMATE_PAIRS", True, id="as_bound:as much as"),
    pytest.param(("many", "as"), "APPROXIMATE_PAIRS", True, id="as_bound:as many as"),
    pytest.param(("same", "as"), "APPROXIMATE_PAIRS", False, id="not_as_bound:the same as"),
    pytest.param(("could", "be"), "MODAL_HEDGES", True, id="modal_hedge:could be"),
    pytest.param(("might", "be"), "MODAL_HEDGES", True, id="modal_hedge:might be"),
    pytest.param(("must", "be"), "MODAL_HEDGES", False, id="not_modal_hedge:must be"),
    pytest.param(("that", "is"), "RESTATEMENT_MARKERS", True, id="restatement:that is"),
    pytest.param(("ie",), "RESTATEMENT_MARKERS", True, id="restatement:ie"),
    pytest.param(("in", "other", "words"), "RESTATEMENT_MARKERS", True, id="restatement:iow"),
]


@pytest.mark.parametrize(("pair", "name", "member"), PAIRS)
def test_word_pairs(pair: tuple[str, ...], name: str, member: bool) -> None:
    assert (pair in getattr(lexicon, name)) is member
