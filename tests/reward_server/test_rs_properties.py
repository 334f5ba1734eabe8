"""Property tests of the exact number path (hypothesis)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from reward_server.normalize import canonical, fast_equivalent, parse_number

ints = st.integers(min_value=-(10**12), max_value=10**12)


@given(ints)
def test_thousands_separators_and_decorations_keep_the_value(n: int) -> None:
    for spelling in (f"{n:,}", f"{n}.0", f"\\${n}", f"\\boxed{{{n}}}", f"${n}$", f"{n} units"):
        assert fast_equivalent(spelling, str(n)) is True, spelling


@given(ints, ints)
def test_different_integers_are_never_equal(a: int, b: int) -> None:
    if a != b:
        assert fast_equivalent(str(a), str(b)) is False
        assert fast_equivalent(f"{a:,}", f"{b:,}") is False


@given(st.integers(-(10**6), 10**6), st.integers(1, 10**6))
def test_fractions_are_exact(p: int, q: int) -> None:
    value = Fraction(p, q)
    assert parse_number(canonical(f"\\frac{{{p}}}{{{q}}}")) == (value, False)
    # A decimal equals the fraction exactly when it terminates.
    decimal = f"{p / q:.6f}"
    assert fast_equivalent(decimal, f"{p}/{q}") is (Fraction(decimal) == value)


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_fast_path_never_raises_and_is_reflexive(text: str) -> None:
    verdict = fast_equivalent(text, text)
    assert verdict in (True, None) or canonical(text) == ""
