"""pass@k and maj@k over n samples per prompt, exactly (no sampling noise, no seed).

pass@k (Chen et al. 2021): the probability that a uniformly random k-subset of the n samples
holds at least one correct sample, 1 − C(n−c, k) / C(n, k).

maj@k (Wang et al. 2023, self-consistency): the expected correctness of a majority vote over a
uniformly random k-subset of the n samples, computed exactly over all C(n, k) subsets (not the
first k, not a Monte-Carlo average). Answers vote by equivalence class, not by string; samples
without an answer abstain; when t classes tie for the most votes the subset scores 1/t if one of
them is correct, which is the expected score of a uniformly random tie-break — a fixed number, so
the result depends neither on sample order nor on a seed. A subset where every sample abstains
scores 0.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

# find_match(answer, representatives) -> index of the first representative the answer is
# equivalent to, or None. One call per new answer lets a client batch its checks (one HTTP
# request per answer to the reward server instead of one per pair).
FindMatch = Callable[[str, Sequence[str]], "int | None"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for ``c`` correct samples out of ``n``: 1 − C(n−c, k) / C(n, k).

    Computed as 1 − Π_{i=n−c+1}^{n} (1 − k/i) (Chen et al. 2021, Fig. 3), which never forms the
    binomials, so n in the thousands is fine.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"pass_at_k: {name} must be an int, got {value!r}")
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs n >= 1 and 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(
            f"pass_at_k: k={k} is outside 1..n={n}; sample at least k completions per prompt "
            "(raise --n) or drop the larger k"
        )
    if n - c < k:
        return 1.0  # every k-subset holds a correct sample
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def _equivalent_matcher(equivalent: Callable[[str, str], bool]) -> FindMatch:
    def find(answer: str, representatives: Sequence[str]) -> int | None:
        for index, rep in enumerate(representatives):
            if equivalent(answer, rep):
                return index
        return None

    return find


def group_answers(
    answers: Sequence[str | None],
    equivalent: Callable[[str, str], bool] | None = None,
    *,
    find_match: FindMatch | None = None,
) -> list[int | None]:
    """Equivalence class of each answer (None: abstains), classes numbered by first appearance.

    Greedy in sample order: an answer joins the first class whose representative (its first
    answer) it is equivalent to, else it founds a new class. Identical strings always share a
    class without a check. ``equivalent(answer, representative)`` decides one pair;
    ``find_match`` decides against all representatives at once. With neither, answers group by
    string. ``None`` and empty answers abstain.
    """
    if equivalent is not None and find_match is not None:
        raise ValueError("group_answers: pass equivalent or find_match, not both")
    if equivalent is not None:
        find_match = _equivalent_matcher(equivalent)
    representatives: list[str] = []
    by_string: dict[str, int] = {}
    labels: list[int | None] = []
    for answer in answers:
        if answer is None or answer == "":
            labels.append(None)
            continue
        label = by_string.get(answer)
        if label is None and find_match is not None and representatives:
            label = find_match(answer, representatives)
            if label is not None and not 0 <= label < len(representatives):
                raise ValueError(f"find_match returned {label}, not a representative's index")
        if label is None:
            label = len(representatives)
            representatives.append(answer)
        by_string[answer] = label
        labels.append(label)
    return labels


def _majority_score(sizes: Sequence[int], good: Sequence[bool], abstain: int, k: int) -> float:
    """E[score of the majority vote over a uniform k-subset], ties split 1/t, exactly.

    ``sizes[j]`` samples voted for class j, ``good[j]`` says whether class j is correct,
    ``abstain`` samples did not vote. For each correct class c and each count v ≥ 1 it draws,
    a dynamic programme over the other classes counts (samples drawn, classes tied at v) with
    every other class drawing at most v; the count of k-subsets is a product of binomials
    (multivariate hypergeometric). Integers throughout, so no overflow and no rounding until
    the final division.
    """
    n = sum(sizes) + abstain
    total = math.comb(n, k)
    numerator_by_ties: dict[int, int] = defaultdict(int)
    for c, (size_c, good_c) in enumerate(zip(sizes, good, strict=True)):
        if not good_c:
            continue
        others = [s for j, s in enumerate(sizes) if j != c]
        for v in range(1, min(size_c, k) + 1):
            # states[(drawn from other classes, other classes that drew exactly v)] = ways
            states: dict[tuple[int, int], int] = {(0, 0): 1}
            budget = k - v
            for size in others:
                nxt: dict[tuple[int, int], int] = defaultdict(int)
                for (drawn, ties), ways in states.items():
                    for x in range(min(size, v, budget - drawn) + 1):
                        nxt[(drawn + x, ties + (x == v))] += ways * math.comb(size, x)
                states = nxt
            base = math.comb(size_c, v)
            for (drawn, ties), ways in states.items():
                rest = budget - drawn
                if rest <= abstain:
                    numerator_by_ties[ties] += base * ways * math.comb(abstain, rest)
    return float(sum(num / (total * (ties + 1)) for ties, num in numerator_by_ties.items()))


def maj_at_k_from_labels(
    labels: Sequence[int | None], label_correct: dict[int, bool] | Sequence[bool], k: int
) -> float:
    """maj@k when the equivalence classes are known: ``labels[i]`` is sample i's class (None:
    abstains) and ``label_correct[class]`` whether that class's answer is correct."""
    n = len(labels)
    if not 1 <= k <= n:
        raise ValueError(
            f"maj_at_k: k={k} is outside 1..n={n}; sample at least k completions per prompt "
            "(raise --n) or drop the larger k"
        )
    counts = Counter(label for label in labels if label is not None)
    classes = sorted(counts)
    sizes = [counts[j] for j in classes]
    good = [bool(label_correct[j]) for j in classes]
    return _majority_score(sizes, good, n - sum(sizes), k)


def maj_at_k(
    answers: Sequence[str | None],
    correct: Sequence[bool],
    k: int,
    *,
    equivalent: Callable[[str, str], bool] | None = None,
    find_match: FindMatch | None = None,
) -> float:
    """maj@k for one prompt: expected correctness of the majority answer of k of the n samples.

    ``answers[i]`` is sample i's extracted answer (None or "" abstains), ``correct[i]`` whether
    it is correct. Answers are grouped with `group_answers` (``equivalent`` /``find_match``; by
    string without them), and a class is correct when its representative — its first sample —
    is. The result is the exact average over all C(n, k) subsets; ties between t classes score
    1/t when one of them is correct (see the module docstring).
    """
    if len(answers) != len(correct):
        raise ValueError(
            f"maj_at_k: {len(answers)} answers but {len(correct)} correctness flags; pass one "
            "flag per answer"
        )
    if not 1 <= k <= len(answers):
        raise ValueError(
            f"maj_at_k: k={k} is outside 1..n={len(answers)}; sample at least k completions "
            "per prompt (raise --n) or drop the larger k"
        )
    labels = group_answers(answers, equivalent, find_match=find_match)
    label_correct: dict[int, bool] = {}
    for label, ok in zip(labels, correct, strict=True):
        if label is not None and label not in label_correct:
            label_correct[label] = bool(ok)
    return maj_at_k_from_labels(labels, label_correct, k)
