"""The checker's front door (``reward_server.checker.grade``): every response-format profile, the
built-in ones and one with other tags, scores its own well-formed response full marks; the rest
of a response takes a right answer back through ``commit``; ``equivalent`` decides a pair."""

from __future__ import annotations

import pytest

from reward_server.checker.compare import Verdict
from reward_server.checker.grade import Grading, Rules, equivalent, grade, verdict_inline
from reward_server.checker.pending import SymbolicCheck
from reward_server.protocol import (
    ACCURACY_CORRECT,
    FORMAT_MAX,
    RESPONSE_FORMATS,
    Reason,
    ResponseFormat,
)

# A profile of one's own: other tags than the paper's, no boxes.
CUSTOM = ResponseFormat(
    "custom",
    "<thought>…</thought><final>…</final>",
    reasoning=("<thought>", "</thought>"),
    answer=("<final>", "</final>"),
    boxed=False,
    prefill=False,
)
# Only an answer block: the reasoning is free text.
ANSWER_ONLY = ResponseFormat(
    "answer_only", "<final>…</final>", reasoning=None, answer=("<final>", "</final>"), boxed=False,
    prefill=False,
)  # fmt: skip
PROFILES = [*RESPONSE_FORMATS.values(), CUSTOM, ANSWER_ONLY]


def _reward(grading: Grading) -> float:
    accuracy = ACCURACY_CORRECT if verdict_inline(grading).equal else 0.0
    return grading.format.score + accuracy


@pytest.mark.parametrize("fmt", PROFILES, ids=lambda f: f.name)
@pytest.mark.parametrize(
    ("answer", "label"),
    [("42", "42"), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt2}"), ("x = 3", "#### 3")],
)
def test_every_profile_scores_its_own_response_full_marks(
    fmt: ResponseFormat, answer: str, label: str
) -> None:
    response = fmt.formatted("Add the numbers, then check.", answer)
    grading = grade(response, label, Rules(fmt))
    assert grading.format.score == FORMAT_MAX, grading.format
    assert _reward(grading) == FORMAT_MAX + ACCURACY_CORRECT


@pytest.mark.parametrize("fmt", [f for f in PROFILES if f.prefill], ids=lambda f: f.name)
def test_a_prefilled_opening_tag_counts(fmt: ResponseFormat) -> None:
    opening = fmt.reasoning[0]  # type: ignore[index]
    response = fmt.formatted("Step by step.", "7").removeprefix(opening).lstrip("\n")
    assert _reward(grade(response, "7", Rules(fmt), prefilled=True)) == 20.0


def test_a_profile_reads_its_own_tags_not_the_papers() -> None:
    papers = RESPONSE_FORMATS["paper"].formatted("Step by step.", "7")
    grading = grade(papers, "7", Rules(CUSTOM))
    assert grading.format.score == 0 and grading.reason == Reason.NO_ANSWER_BLOCK
    own = CUSTOM.formatted("Step by step.", "7")
    assert _reward(grade(own, "7", Rules(RESPONSE_FORMATS["paper"]))) == 0.0


# (response in the paper's format, label, the verdict's reason): what the rest of a response
# says about a right answer.
PAPER = RESPONSE_FORMATS["paper"]
BOXED = RESPONSE_FORMATS["boxed"]
COMMITTED = [
    pytest.param(PAPER, PAPER.formatted("r", "18") + " So it is 20.", "18", "answer_not_last"),
    pytest.param(PAPER, PAPER.formatted("r", "18") + " I hope this helps!", "18", "equivalent"),
    pytest.param(PAPER, PAPER.formatted("r", "18") + " That is 18.", "18", "equivalent"),
    pytest.param(BOXED, "Perhaps the answer is $\\boxed{18}$.", "18", "hedged_answer"),
    pytest.param(BOXED, "$\\boxed{17}$, so finally $\\boxed{18}$.", "18", "several_answers"),
    pytest.param(BOXED, "The answer is $\\boxed{18}$.", "18", "equivalent"),
]


@pytest.mark.parametrize(("fmt", "response", "label", "reason"), COMMITTED)
def test_the_rest_of_a_response_takes_a_right_answer_back(
    fmt: ResponseFormat, response: str, label: str, reason: str
) -> None:
    assert verdict_inline(grade(response, label, Rules(fmt))).reason == reason


def test_a_grading_that_raises_is_that_responses_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from reward_server.checker import grade as front_door

    def boom(label: object) -> str:
        raise RecursionError("too deep")

    monkeypatch.setattr(front_door, "extract_reference", boom)
    grading = grade(PAPER.formatted("r", "7"), "7", Rules(PAPER))
    assert grading.reason == Reason.REFERENCE_ERROR
    assert grading.error is not None and grading.error[0] == "reference"


def test_equivalent_decides_a_pair_or_leaves_its_check() -> None:
    assert equivalent("1,000", "1000") == Verdict(True, Reason.EQUIVALENT)
    assert equivalent("", "5") == Verdict(False, Reason.EMPTY_ANSWER)
    assert equivalent("5", "#### 5") == Verdict(True, Reason.EQUIVALENT)
    assert isinstance(equivalent("\\sqrt{8}", "2\\sqrt2"), SymbolicCheck)
