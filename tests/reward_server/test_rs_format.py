"""Format reward (paper's scale) and how it gates accuracy."""

from __future__ import annotations

import asyncio
import time

import pytest

from reward_server.checker.format import parse, score_format
from reward_server.protocol import BOXED, PAPER, THINK, Reason
from reward_server.service.scoring import Scorer
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

R = "<reasoning>\nstep\n</reasoning>\n"
A = "<answer>\n5\n</answer>"


@pytest.mark.parametrize(
    ("response", "score", "reason"),
    [
        (R + A, 10.0, "ok"),
        (R + A + "\n\n", 10.0, "ok"),
        ("<reasoning>x</reasoning><answer>5</answer>", 10.0, "ok"),
        ("Let me think. " + R + A, 10.0, "ok"),  # lenient: text before the reasoning block
        (R + "so the answer follows " + A, 10.0, "ok"),
        (R + A + " Hope this helps!", 1.5, "text_after_answer"),
        ("<reasoning>x</reasoning><answer>5</answer> 5 again", 1.5, "text_after_answer"),
        (A + R, 1.5, "answer_not_last"),
        (R, 1.0, "missing_answer"),
        (R + "<answer>5", 1.5, "missing_answer"),  # truncated inside the answer
        (R + "5</answer>", 1.5, "missing_answer"),
        (A, 1.0, "missing_reasoning"),
        ("<reasoning>step " + A, 1.5, "missing_reasoning"),  # reasoning never closed
        ("step</reasoning>" + A, 1.5, "missing_reasoning"),
        ("just 5", 0.0, "no_blocks"),
        ("<reasoning>step <answer>5", 0.0, "no_blocks"),
        ("</reasoning><reasoning></answer><answer>", 0.0, "no_blocks"),  # tags, no block
        ("", 0.0, "no_blocks"),
        # A second answer block, wherever it hides, is partial format at most.
        (R + "<answer>4</answer>\n" + A, 1.5, "several_answer_blocks"),
        (R + A + "<|im_end|>\n<answer>4</answer>", 1.5, "several_answer_blocks"),
        (R + A + "\n<!-- <answer>4</answer> -->", 1.5, "several_answer_blocks"),
        (R + A + "\nReminder: answer as <answer>…</answer>", 1.5, "several_answer_blocks"),
        ("<answer>4</answer>" + A, 1.0, "several_answer_blocks"),
        (R + A + "</answer>", 1.5, "several_answer_blocks"),
    ],
)
def test_lenient_format(response: str, score: float, reason: str) -> None:
    result = score_format(response)
    assert (result.score, result.reason) == (score, reason)


@pytest.mark.parametrize(
    ("response", "lenient", "strict"),
    [
        (R + A, 10.0, 10.0),
        ("  " + R + A, 10.0, 10.0),
        ("Sure. " + R + A, 10.0, 1.5),  # strict: reasoning must come first
        (R + "so " + A, 10.0, 1.5),  # strict: only whitespace between the blocks
        (R + R + A, 10.0, 1.5),  # strict: exactly one block of each
        (R + "<answer>4</answer>" + A, 1.5, 1.5),  # a second answer block: never full
        (A + R + A, 1.5, 1.5),
        (R, 1.0, 1.0),
    ],
)
def test_strict_mode(response: str, lenient: float, strict: float) -> None:
    assert score_format(response).score == lenient
    result = score_format(response, strict=True)
    assert result.score == strict
    if lenient == 10.0 and strict < 10.0:
        assert result.reason == "strict_violation"


def test_format_is_linear_on_adversarial_tag_floods() -> None:
    start = time.process_time()
    assert score_format("<reasoning>" * 200_000).score == 0.0
    assert score_format("<reasoning>" * 100_000 + "</answer>" * 100_000).score == 0.0
    assert score_format("<answer>" * 200_000 + "</answer>").score == 1.0
    assert time.process_time() - start < 1.0


def _score(settings: Settings, response: str, label: object) -> tuple[float, float, str]:
    scorer = Scorer(settings, Verifier(None))  # numbers only: decided without the pool
    item = asyncio.run(scorer.score(response, None, label))
    assert item.reward == item.format_score + item.accuracy_score
    return item.format_score, item.accuracy_score, item.reason


def test_accuracy_requires_full_format_by_default() -> None:
    s = Settings(verify_workers=1)
    assert _score(s, R + A, "#### 5") == (10.0, 10.0, Reason.EQUIVALENT)
    assert _score(s, R + "<answer>6</answer>", "#### 5") == (10.0, 0.0, Reason.NOT_EQUIVALENT)
    assert _score(s, A, "5") == (1.0, 0.0, Reason.FORMAT_NOT_MET)
    assert _score(s, R, "5") == (1.0, 0.0, Reason.NO_ANSWER_BLOCK)
    assert _score(s, R + "<answer> </answer>", "5") == (10.0, 0.0, Reason.EMPTY_ANSWER)
    assert _score(s, R + A, None) == (10.0, 0.0, Reason.NO_REFERENCE)


def test_accuracy_without_format_gate_and_strict_setting() -> None:
    s = Settings(verify_workers=1, accuracy_requires_format=False)
    assert _score(s, A, "5") == (1.0, 10.0, Reason.EQUIVALENT)
    # Even without the gate, a second block or a block before the reasoning earns no accuracy.
    assert _score(s, R + "<answer>4</answer>" + A, "5") == (1.5, 0.0, Reason.SEVERAL_ANSWER_BLOCKS)
    assert _score(s, A + R, "5") == (1.5, 0.0, Reason.ANSWER_NOT_LAST)
    strict = Settings(verify_workers=1, strict_format=True)
    assert _score(strict, "Sure. " + R + A, "5") == (1.5, 0.0, Reason.FORMAT_NOT_MET)
    assert _score(strict, R + A, 5) == (10.0, 10.0, Reason.EQUIVALENT)


@pytest.mark.parametrize("gate", [True, False])
@pytest.mark.parametrize(
    ("tail", "accuracy", "reason"),
    [
        # The format pays for the text (1.5); the accuracy is judged on the block.
        (" Hope this helps!", 10.0, Reason.EQUIVALENT),
        ("\n\nLet me know if anything is not clear.", 10.0, Reason.EQUIVALENT),
        ("\nSo the answer is 5.", 10.0, Reason.EQUIVALENT),  # a restatement
        ("\nThe final answer is $\\boxed{5}$.", 10.0, Reason.EQUIVALENT),
        # Text that gives another answer, hedges it or negates it.
        ("\nThe final answer is $\\boxed{6}$.", 0.0, Reason.ANSWER_NOT_LAST),
        ("\nSo the answer is 6.", 0.0, Reason.ANSWER_NOT_LAST),
        (" (or maybe 6)", 0.0, Reason.ANSWER_NOT_LAST),
        ("\nThat is not 5, it is 6.", 0.0, Reason.ANSWER_NOT_LAST),
        ("\n\\boxed{5} \\text{ or } \\boxed{6}", 0.0, Reason.ANSWER_NOT_LAST),
    ],
)
def test_text_after_the_answer_block_costs_format_not_accuracy(
    gate: bool, tail: str, accuracy: float, reason: Reason
) -> None:
    # With or without the format gate: the gate asks for the reasoning block and then the
    # answer block, which this completion has; the text after them is paid by the format.
    s = Settings(verify_workers=1, accuracy_requires_format=gate)
    assert _score(s, R + A + tail, "#### 5") == (1.5, accuracy, reason)
    assert _score(s, R + "<answer>6</answer>" + tail, "#### 5")[1] == 0.0


def test_overlong_text_after_the_block_with_values_is_not_read() -> None:
    s = Settings(verify_workers=1, max_answer_chars=50)
    assert _score(s, R + A + " So 5. " + "x" * 60, "5") == (1.5, 0.0, Reason.ANSWER_NOT_LAST)
    assert _score(s, R + A + " Thanks! " + "x" * 60, "5") == (1.5, 10.0, Reason.EQUIVALENT)
    start = time.process_time()  # a long tail is looked at once, never tokenised
    assert _score(Settings(verify_workers=1), R + A + " ok" * 100_000, "5")[1] == 10.0
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize(
    ("response", "prefilled", "strict", "score"),
    [
        ("step\n</reasoning>\n<answer>\n5\n</answer>", True, False, 10.0),
        ("step\n</reasoning>\n<answer>\n5\n</answer>", True, True, 10.0),
        ("step\n</reasoning>\n<answer>\n5\n</answer>", False, False, 1.5),  # no tag anywhere
        ("<reasoning>\nstep\n</reasoning>\n<answer>5</answer>", True, True, 1.5),  # two opened
        ("step\n<answer>\n5\n</answer>", True, False, 1.5),  # the block never closed
        ("step and no tags", True, False, 0.0),
    ],
)
def test_paper_format_with_the_reasoning_tag_prefilled(
    response: str, prefilled: bool, strict: bool, score: float
) -> None:
    """A chat template that opens the assistant turn with <reasoning> (as reasoning models'
    templates open <think>): the tag at the end of the prompt counts as the response's."""
    assert parse(response, PAPER, strict=strict, prefilled=prefilled).format.score == score
    prompt = "<|im_start|>assistant\n" + ("<reasoning>\n" if prefilled else "")
    scorer = Scorer(Settings(verify_workers=1, strict_format=strict), Verifier(None))
    item = asyncio.run(scorer.score(prompt + response + "<|im_end|>", prompt, "#### 5", PAPER))
    assert item.format_score == score


# ------------------------------------------------------------------ think and boxed

T = "<think>\nstep\n</think>\n\n"


@pytest.mark.parametrize(
    ("response", "prefilled", "score", "reason"),
    [
        (T + "So $\\boxed{5}$.", False, 10.0, "ok"),
        ("step\n</think>\n\nSo $\\boxed{5}$.", True, 10.0, "ok"),  # the prompt opened the block
        ("<think></think>\\boxed{5}", False, 10.0, "ok"),  # an empty block is complete
        (T + "<answer>5</answer>", False, 10.0, "ok"),
        (T + "<answer>\\boxed{5}</answer>", False, 10.0, "ok"),
        (T + "\\boxed{5}.\n\n**Final Answer**\n\\boxed{5}", False, 10.0, "ok"),  # one value twice
        (T + "\\[\n\\boxed{5}\n\\]", False, 10.0, "ok"),  # closing delimiters may follow the box
        (T + "\\boxed{5}. Hope this helps!", False, 1.5, "text_after_answer"),
        (T + "<answer>5</answer> Hope this helps!", False, 1.5, "text_after_answer"),
        (T + "\\boxed{4}, no: \\boxed{5}", False, 1.5, "several_answers"),
        (T + "\\boxed{4} <answer>5</answer>", False, 1.5, "several_answers"),
        ("step\n</think>\n\n\\boxed{5}", False, 1.5, "missing_reasoning"),  # no opening tag
        ("The answer is \\boxed{5}.", False, 1.0, "missing_reasoning"),  # no think block
        (T + "so the answer follows", False, 1.0, "missing_answer"),
        (T + "so \\boxed{5", False, 1.5, "missing_answer"),  # cut off inside the box
        (T + "<answer>5", False, 1.5, "missing_answer"),
        ("<think>\nso \\boxed{5}", False, 0.0, "no_blocks"),  # cut off inside the think block
        ("so \\boxed{5}", True, 0.0, "no_blocks"),  # the same, the block opened by the prompt
        ("", True, 0.0, "no_blocks"),
    ],
)
def test_think_format(response: str, prefilled: bool, score: float, reason: str) -> None:
    result = parse(response, THINK, prefilled=prefilled).format
    assert (result.score, result.reason) == (score, reason)


def test_nothing_inside_the_think_block_is_the_answer() -> None:
    parsed = parse("<think>\nit is \\boxed{4}\n<answer>4</answer>\n</think>\n\n\\boxed{5}", THINK)
    assert (parsed.answer, parsed.others) == ("\\boxed{5}", ())
    assert parse("<think>\nit is \\boxed{4}", THINK).answer is None


@pytest.mark.parametrize(
    ("response", "strict", "score"),
    [
        (T + "\\boxed{5}", False, 10.0),
        (T + "\\boxed{5}", True, 10.0),
        ("Sure. " + T + "\\boxed{5}", False, 10.0),
        ("Sure. " + T + "\\boxed{5}", True, 1.5),  # strict: nothing before the block
        (T + T + "\\boxed{5}", True, 1.5),  # strict: one block
    ],
)
def test_think_strict_mode(response: str, strict: bool, score: float) -> None:
    assert parse(response, THINK, strict=strict).format.score == score


@pytest.mark.parametrize(
    ("response", "score", "reason"),
    [
        ("3 + 2 = 5, so the answer is $\\boxed{5}$.", 10.0, "ok"),
        ("3 + 2 = 5.\n\\[\n\\boxed{5}\n\\]", 10.0, "ok"),
        ("\\boxed{2}, \\boxed{3}", 10.0, "ok"),  # one list of boxes
        ("\\\\boxed{5}", 10.0, "ok"),  # a doubled backslash
        ("\\boxed 5", 10.0, "ok"),  # a box without braces
        ("So $\\boxed{5}$ apples.", 1.5, "text_after_answer"),
        ("First \\boxed{4}, then \\boxed{5}.", 1.5, "several_answers"),
        ("so \\boxed{5", 0.0, "missing_answer"),
        ("the answer is 5", 0.0, "missing_answer"),
    ],
)
def test_boxed_format(response: str, score: float, reason: str) -> None:
    result = parse(response, BOXED).format
    assert (result.score, result.reason) == (score, reason)


@pytest.mark.parametrize(
    ("fmt", "response", "prefilled", "accuracy", "reason"),
    [
        (THINK, T + "So $\\boxed{5}$.", False, 10.0, Reason.EQUIVALENT),
        (THINK, "step\n</think>\n\n$\\boxed{5}$", True, 10.0, Reason.EQUIVALENT),
        (THINK, "step\n</think>\n\n$\\boxed{5}$", False, 0.0, Reason.FORMAT_NOT_MET),
        (THINK, T + "\\boxed{5}. Hope this helps!", False, 10.0, Reason.EQUIVALENT),
        (THINK, T + "\\boxed{5} or more", False, 0.0, Reason.HEDGED_ANSWER),
        (THINK, T + "Perhaps it is \\boxed{5}.", False, 0.0, Reason.HEDGED_ANSWER),
        (THINK, T + "It is not \\boxed{5}.", False, 0.0, Reason.NEGATED_ANSWER),
        (THINK, T + "\\boxed{4}. Then \\boxed{5}", False, 0.0, Reason.SEVERAL_ANSWERS),
        (THINK, T + "\\boxed{5} <answer>5</answer>", False, 10.0, Reason.EQUIVALENT),
        (THINK, T + "<answer>5</answer>\nSo it is 6.", False, 0.0, Reason.ANSWER_NOT_LAST),
        (THINK, "<think>\nso \\boxed{5}", False, 0.0, Reason.NO_ANSWER_BLOCK),
        (BOXED, "so $\\boxed{5}$.", False, 10.0, Reason.EQUIVALENT),
        (BOXED, "\\boxed{5} \\text{ or } \\boxed{6}", False, 0.0, Reason.NOT_EQUIVALENT),
        (BOXED, "so $\\boxed{5}$, which is too high.", False, 0.0, Reason.HEDGED_ANSWER),
    ],
)
def test_accuracy_in_every_format(
    fmt, response: str, prefilled: bool, accuracy: float, reason: Reason
) -> None:
    prompt = "Question?\n" + ("<think>\n" if prefilled else "")
    scorer = Scorer(Settings(verify_workers=1), Verifier(None))
    item = asyncio.run(scorer.score(prompt + response, prompt, "#### 5", fmt))
    assert (item.accuracy_score, item.reason) == (accuracy, reason)
    assert item.response_format == fmt.name


def test_think_and_boxed_formats_are_linear_on_floods() -> None:
    # CPU seconds, as in every bound of this kind: the wall clock also counts the waits for a
    # CPU (2.6 s beside two CPU-bound processes, against a 2 s bound)
    start = time.process_time()
    flood = "<answer>1</answer>\\boxed{2}" * 20_000
    assert parse(T + flood, THINK).format.reason == "several_answers"
    assert parse("<think>" * 100_000 + "</think>" * 100_000, THINK).format.score == 1.0
    assert parse("\\boxed{" * 100_000, BOXED).format.score == 0.0
    assert parse("\\boxed{1}, " * 20_000 + "\\boxed{1}", BOXED).format.score == 10.0  # a list
    assert time.process_time() - start < 2.0
