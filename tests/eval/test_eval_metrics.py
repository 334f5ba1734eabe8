"""pass@k and maj@k against brute-force enumeration over every k-subset, and hand cases."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gtpo.eval import group_answers, maj_at_k, maj_at_k_from_labels, pass_at_k


def brute_pass(correct: list[bool], k: int) -> Fraction:
    subsets = list(itertools.combinations(range(len(correct)), k))
    hits = sum(any(correct[i] for i in s) for s in subsets)
    return Fraction(hits, len(subsets))


def brute_maj(labels: list[int | None], good: dict[int, bool], k: int) -> Fraction:
    """Majority of every k-subset; t classes tied at the top score 1/t if one is correct."""
    subsets = list(itertools.combinations(range(len(labels)), k))
    total = Fraction(0)
    for s in subsets:
        votes = Counter(labels[i] for i in s if labels[i] is not None)
        if not votes:
            continue
        top = max(votes.values())
        winners = [c for c, v in votes.items() if v == top]
        total += Fraction(sum(good[c] for c in winners), len(winners))
    return total / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_brute_force_for_every_c_and_k(n: int) -> None:
    for c in range(n + 1):
        correct = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_pass(correct, k)), abs=1e-12)


def test_pass_at_k_edge_cases() -> None:
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 0, 10) == 0.0  # c = 0
    assert pass_at_k(10, 10, 1) == 1.0 and pass_at_k(10, 10, 10) == 1.0  # c = n
    assert pass_at_k(10, 1, 10) == 1.0  # k = n: the one subset holds the correct sample
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # pass@1 is c/n
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 − C(3,2)/C(4,2) = 1 − 3/6


def test_pass_at_k_large_n_is_stable() -> None:
    # C(5000, 64) overflows a float; the product form does not.
    value = pass_at_k(5000, 3, 64)
    exact = 1 - Fraction(math.comb(4997, 64), math.comb(5000, 64))
    assert value == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [(4, 1, 5, "k=5 is outside 1..n=4"), (4, 1, 0, "outside"), (4, 5, 1, "0 <= c <= n"),
     (0, 0, 1, "n >= 1"), (4, -1, 1, "0 <= c <= n")],
)  # fmt: skip
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_integers() -> None:
    with pytest.raises(TypeError):
        pass_at_k(4.0, 1, 1)  # type: ignore[arg-type]


def equivalent_numbers(a: str, b: str) -> bool:
    """A stand-in judge: numeric value equality (1/2 == 0.5)."""
    return Fraction(a) == Fraction(b)


def test_maj_at_k_groups_equivalent_strings() -> None:
    # By string "7" has 2 votes against 1 each for "1/2" and "0.5"; by value 1/2 has 2 of 4
    # and ties with 7, then adds a third vote.
    answers = ["1/2", "7", "0.5", "7", "2/4"]
    correct = [True, False, True, False, True]
    assert maj_at_k(answers, correct, 5, equivalent=equivalent_numbers) == 1.0
    assert maj_at_k(answers, correct, 5) == 0.0  # string grouping: "7" wins
    assert group_answers(answers, equivalent_numbers) == [0, 1, 0, 1, 0]


def test_maj_at_k_tie_scores_one_over_t() -> None:
    # One vote each for a correct and a wrong answer: a tie, worth 1/2 whatever the order.
    assert maj_at_k(["3", "4"], [True, False], 2) == 0.5
    assert maj_at_k(["4", "3"], [False, True], 2) == 0.5
    # Three-way tie with one correct answer: 1/3.
    assert maj_at_k(["a", "b", "c"], [False, True, False], 3) == pytest.approx(1 / 3)
    # Equivalence turns a loss into a tie: by string "3" (2 votes) beats "1/2" and "0.5"
    # (1 each); by value 1/2 has 2 votes too.
    answers = ["1/2", "3", "0.5", "3"]
    correct = [True, False, True, False]
    assert maj_at_k(answers, correct, 4) == 0.0
    assert maj_at_k(answers, correct, 4, equivalent=equivalent_numbers) == 0.5


def test_maj_at_k_abstentions_and_k1() -> None:
    answers = [None, "5", "", "6"]
    correct = [False, True, False, False]
    # k = 1: a random single sample; only sample 1 is a correct vote → 1/4 (= pass@1).
    assert maj_at_k(answers, correct, 1) == pytest.approx(0.25)
    # All-abstain subsets score 0: k = 2 over {None, ""} gives 0.
    value = maj_at_k(answers, correct, 2)
    assert value == pytest.approx(float(brute_maj([None, 0, None, 1], {0: True, 1: False}, 2)))
    assert maj_at_k([None, None], [False, False], 2) == 0.0


def test_maj_at_k_averages_over_subsets_not_first_k() -> None:
    # The first two samples agree on a wrong answer; over all 2-subsets of 4 it is different.
    answers = ["9", "9", "1", "1"]
    correct = [False, False, True, True]
    # 6 subsets: {9,9} → 0, {1,1} → 1, four mixed ties → 1/2 each: (0 + 1 + 2) / 6 = 1/2.
    assert maj_at_k(answers, correct, 2) == pytest.approx(0.5)


def test_maj_at_k_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"k=3 is outside 1\.\.n=2"):
        maj_at_k(["1", "2"], [True, False], 3)
    with pytest.raises(ValueError, match="one flag per answer"):
        maj_at_k(["1", "2"], [True], 1)


def test_find_match_is_called_once_per_new_answer() -> None:
    calls = []

    def find(answer: str, reps: list[str]) -> int | None:
        calls.append((answer, tuple(reps)))
        return next((i for i, r in enumerate(reps) if Fraction(r) == Fraction(answer)), None)

    labels = group_answers(["1/2", "1/2", "0.5", "3", "0.5"], find_match=find)
    assert labels == [0, 0, 0, 1, 0]
    # Repeated strings reuse their class without asking the judge again.
    assert calls == [("0.5", ("1/2",)), ("3", ("1/2",))]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=1, max_size=9),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.data(),
)
def test_maj_at_k_equals_brute_force(labels: list[int | None], flags: list[bool], data) -> None:
    k = data.draw(st.integers(1, len(labels)))
    good = dict(enumerate(flags))
    expected = brute_maj(labels, good, k)
    assert maj_at_k_from_labels(labels, good, k) == pytest.approx(float(expected), abs=1e-12)


def test_maj_at_k_n64_is_fast_and_in_range() -> None:
    rng = random.Random(0)
    labels = [rng.choice([None, 0, 1, 2, 3, 4, 5]) for _ in range(64)]
    good = {j: j == 2 for j in range(6)}
    values = [maj_at_k_from_labels(labels, good, k) for k in (1, 4, 8, 16, 32, 64)]
    assert all(0.0 <= v <= 1.0 for v in values)
    # maj@1 is the share of samples voting for the correct class.
    assert values[0] == pytest.approx(labels.count(2) / 64)
