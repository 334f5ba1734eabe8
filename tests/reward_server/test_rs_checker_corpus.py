"""The checker against the labelled corpus (``checker_corpus.py``): every label, and the named
reasons of the answer policy."""

from __future__ import annotations

import pytest
from rs_corpora import load_corpus

from reward_server.checker.decide import equivalent_inline

PAIRS = load_corpus("checker_corpus").PAIRS


def test_corpus_covers_every_class_with_both_labels() -> None:
    assert len(PAIRS) >= 400
    assert len({(p.answer, p.reference) for p in PAIRS}) == len(PAIRS), "duplicate pairs"
    for kind in {p.kind for p in PAIRS}:
        labels = {p.equal for p in PAIRS if p.kind == kind}
        assert labels == {True, False}, f"{kind} has only {labels} labels"


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{p.kind}:{p.answer}|{p.reference}" for p in PAIRS])
def test_label(pair) -> None:
    verdict = equivalent_inline(pair.answer, pair.reference)
    assert verdict.equal == pair.equal, f"{pair.why}: {verdict}"


@pytest.mark.parametrize(
    ("answer", "reference", "reason"),
    [
        ("7\\text{ or more}", "7", "hedged_answer"),
        ("\\text{about } 12", "12", "hedged_answer"),
        ("9\\text{ is incorrect}", "9", "negated_answer"),
        ("\\text{not } 9", "9", "negated_answer"),
        ("\\boxed{9} \\text{ is wrong; the answer is } 10", "9", "negated_answer"),
        ("9 squared", "9", "multiplier_word"),
        ("4\\text{ pi}", "4", "multiplier_word"),
        ("3\\mathrm{i}", "3", "multiplier_word"),
        ("3 \\text{ (or four)}", "3", "several_candidates"),
        ("\\text{it is the number of eggs she sells}", "12", "prose_in_answer"),
        ("She makes more than $12 a day.", "12", "hedged_answer"),
        ("She makes $12 on Monday and $15 on Tuesday.", "12", "several_candidates"),
        ("She does not make $12.", "12", "negated_answer"),
        ("The answer is 4 factorial.", "4", "multiplier_word"),
        ("\\boxed 3 or \\boxed 4", "4", "not_equivalent"),
        ("18 cents", "\\$18", "unit_mismatch"),
        ("30 \\text{ radians}", "30^\\circ", "unit_mismatch"),
        ("13 \\equiv 12", "12", "false_equation"),
        ("5\\mathrm{e}", "5", "multiplier_word"),
        ("13 = 12", "12", "false_equation"),
        ("20 - 7 = 12", "12", "false_equation"),
        ("5 cm", "5\\text{ m}", "unit_mismatch"),
        ("9 cm^3", "9\\text{ cm}^2", "unit_mismatch"),
        ("45, 678", "45678", "not_equivalent"),
        ("0.25", "25\\%", "not_equivalent"),
    ],
)
def test_policy_refusals_are_named(answer: str, reference: str, reason: str) -> None:
    verdict = equivalent_inline(answer, reference)
    assert (verdict.equal, verdict.reason) == (False, reason)


def test_worded_references_are_compared_as_words() -> None:
    # The word policy guards numeric references; a worded reference is matched as words.
    assert equivalent_inline("\\text{no solution}", "\\text{No solution}").equal
    assert not equivalent_inline("\\text{no solution}", "\\text{one solution}").equal
