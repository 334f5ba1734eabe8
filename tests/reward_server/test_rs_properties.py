"""Property tests of the exact number path and of the sentence reader (hypothesis)."""

from __future__ import annotations

import time
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from reward_server.checker.compare import same_value
from reward_server.checker.decide import equivalent_inline
from reward_server.checker.normalize import canonical
from reward_server.checker.numbers import parse_number
from reward_server.checker.sentence import read
from reward_server.checker.values import value_of

ints = st.integers(min_value=-(10**12), max_value=10**12)


def _exact(answer: str, reference: str) -> bool | None:
    """The exact comparison of two answers' values, read from their text."""
    return same_value(value_of(answer), value_of(reference))


@given(ints)
def test_thousands_separators_and_decorations_keep_the_value(n: int) -> None:
    for spelling in (f"{n:,}", f"{n}.0", f"\\${n}", f"\\boxed{{{n}}}", f"${n}$", f"{n} units"):
        assert _exact(spelling, str(n)) is True, spelling


@given(ints, ints)
def test_different_integers_are_never_equal(a: int, b: int) -> None:
    if a != b:
        assert _exact(str(a), str(b)) is False
        assert _exact(f"{a:,}", f"{b:,}") is False


@given(st.integers(-(10**6), 10**6), st.integers(1, 10**6))
def test_fractions_are_exact(p: int, q: int) -> None:
    value = Fraction(p, q)
    assert parse_number(canonical(f"\\frac{{{p}}}{{{q}}}")) == (value, False)
    # A decimal equals the fraction exactly when it terminates.
    decimal = f"{p / q:.6f}"
    assert _exact(decimal, f"{p}/{q}") is (Fraction(decimal) == value)


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_fast_path_never_raises_and_is_reflexive(text: str) -> None:
    verdict = _exact(text, text)
    assert verdict in (True, None) or canonical(text) == ""


# ---------------------------------------------------------------- sentences

latexish = st.text(alphabet="ab x=12,.$\\{}()^_-+ the is of in\n*%", max_size=120)


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=120), latexish))
def test_sentence_reader_never_raises_and_says_why(text: str) -> None:
    reading = read(text, same_value)
    assert (reading.value is None) != (reading.reason is None)


names = st.sampled_from(["Janet", "Tom", "The farm", "Each of the workers"])
positive = st.integers(min_value=1, max_value=10**6)


@settings(max_examples=100)
@given(names, positive, positive)
def test_the_stated_value_counts_and_context_does_not(name: str, a: int, b: int) -> None:
    stated = f"In {a} days, {name} makes ${b:,}."
    assert equivalent_inline(stated, str(b)).equal
    assert equivalent_inline(stated, str(a)).equal is (a == b)
    hedged = f"{name} makes about ${b} every day."
    assert not equivalent_inline(hedged, str(b)).equal
    if a != b:
        several = f"{name} makes ${a} on Monday and ${b} on Tuesday."
        assert equivalent_inline(several, str(a)).reason == "several_candidates"


def test_sentence_reader_is_fast_on_long_hostile_text() -> None:
    # The cost guard lets answers of up to 1000 characters through; the reader is linear.
    for text in (
        "the 1 of 2 is 3 " * 60,
        "$1$ and " * 120,
        "(" * 400 + "1" + ")" * 400,
        "x = 1 = 2 = 3 " * 70,
        "\\boxed 1 or " * 80,
    ):
        start = time.perf_counter()
        read(text[:1000], same_value)
        assert time.perf_counter() - start < 0.05, text[:40]
