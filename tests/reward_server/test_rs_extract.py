"""Response, answer and reference extraction."""

from __future__ import annotations

import time

import pytest

from reward_server.checker.extract import answer_block, extract_answer, extract_reference
from reward_server.checker.response import extract_response, strip_end_tokens

RESPONSE = "<reasoning>\n2 + 2 = 4\n</reasoning>\n<answer>\n4\n</answer>"

QWEN_PROMPT = (
    "<|im_start|>system\nRespond in the format <reasoning>...</reasoning>"
    "<answer>...</answer><|im_end|>\n<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n"
    "<|im_start|>assistant\n"
)
LLAMA3_PROMPT = (
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 2?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)


def test_exact_prompt_prefix_is_removed_and_end_token_dropped() -> None:
    query = QWEN_PROMPT + RESPONSE + "<|im_end|>"
    assert extract_response(query, QWEN_PROMPT) == RESPONSE


def test_prompt_found_when_decode_changed_whitespace() -> None:
    # A tokenizer round trip turned newlines into spaces and doubled a space.
    mangled = QWEN_PROMPT.replace("\n", " ").replace("What is", "What  is")
    query = mangled + RESPONSE + "<|im_end|>"
    assert extract_response(query, QWEN_PROMPT) == RESPONSE


def test_prompt_found_after_duplicated_bos() -> None:
    query = "<|begin_of_text|>" + LLAMA3_PROMPT + RESPONSE + "<|eot_id|>"
    assert extract_response(query, LLAMA3_PROMPT) == RESPONSE


@pytest.mark.parametrize(
    ("template_prompt", "end"),
    [
        (QWEN_PROMPT, "<|im_end|>"),
        (LLAMA3_PROMPT, "<|eot_id|>"),
        (
            "<start_of_turn>user\nWhat is 2 + 2?<end_of_turn>\n<start_of_turn>model\n",
            "<end_of_turn>",
        ),
        ("<s>[INST] What is 2 + 2? [/INST]", "</s>"),
    ],
)
def test_chat_marker_fallback_when_prompt_is_not_in_query(template_prompt: str, end: str) -> None:
    # The client's prompt string differs from what was decoded: fall back to the assistant marker.
    query = template_prompt + RESPONSE + end
    assert extract_response(query, "a prompt that is not there") == RESPONSE


def test_no_prompt_and_no_marker_means_the_query_is_the_response() -> None:
    assert extract_response(RESPONSE + "</s>", None) == RESPONSE
    assert extract_response(RESPONSE, "") == RESPONSE


def test_repeated_trailing_end_and_pad_tokens_are_dropped() -> None:
    assert strip_end_tokens(RESPONSE + "<|im_end|>\n<|endoftext|><pad><pad> \n") == RESPONSE
    assert strip_end_tokens(RESPONSE + "<|eot_id|>") == RESPONSE
    # A token in the middle is content, not an end token.
    assert strip_end_tokens("a</s>b") == "a</s>b"


def test_extra_end_tokens_from_settings() -> None:
    assert extract_response(RESPONSE + "<|my_eos|>", None, ["<|my_eos|>"]) == RESPONSE
    assert extract_response(RESPONSE + "<|my_eos|>", None) == RESPONSE + "<|my_eos|>"


def test_prompt_text_repeated_in_response_is_kept() -> None:
    prompt = "Q: 1+1?\n"
    query = prompt + "<reasoning>Q: 1+1? is 2</reasoning><answer>2</answer>"
    assert (
        extract_response(query, prompt) == "<reasoning>Q: 1+1? is 2</reasoning><answer>2</answer>"
    )


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("<reasoning>r</reasoning><answer>\n42\n</answer>", "42"),
        ("<answer>1</answer> then <answer>2</answer>", "2"),  # the last block counts
        ("<answer>The result is \\boxed{\\frac{1}{2}}.</answer>", "\\frac{1}{2}"),
        ("<answer>$\\frac{3}{4}$</answer>", "\\frac{3}{4}"),
        ("<answer>$$ 5 $$</answer>", "5"),
        ("<answer>\\(x+1\\)</answer>", "x+1"),
        ("<answer>\\boxed{\\boxed{7}}</answer>", "7"),
        ("<answer>\\boxed 9</answer>", "9"),
        ("<answer></answer>", ""),
    ],
)
def test_answer_from_last_block_unwrapped(response: str, answer: str) -> None:
    assert extract_answer(response) == answer


@pytest.mark.parametrize(
    "response",
    ["no tags", "<answer>5", "5</answer>", "</answer>5<answer>", "<reasoning>x</reasoning>"],
)
def test_no_answer_block(response: str) -> None:
    assert extract_answer(response) is None


def test_answer_block_is_linear_on_many_unclosed_tags() -> None:
    evil = "<answer>" * 200_000 + "</answer>"
    start = time.process_time()
    assert answer_block(evil) == ""
    assert answer_block("<answer>" * 200_000) is None
    assert time.process_time() - start < 0.5


@pytest.mark.parametrize(
    ("label", "reference"),
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),  # GSM8K
        ("... so the total is\n#### 1,234", "1,234"),
        ("#### -5", "-5"),
        ("We get $\\boxed{2}$ first, then $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),  # MATH: last
        # a worked solution's boxes assigned to a name each are one list of answers
        ("So $x=\\boxed{1}$ or $x=\\boxed{2}$.", "1, 2"),
        ("The solutions are $x = \\boxed{1}$ and $x = \\boxed{-2}$.", "1, -2"),
        ("$a=\\boxed{3}$, $b_1=\\boxed{4}$", "3, 4"),
        ("We get $x=\\boxed{2}$ first, then $y=\\boxed{5}$.", "5"),  # words between: the last
        ("so $x \\in \\boxed{[1, \\infty)}$", "[1, \\infty)"),
        (
            "\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}",
            "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
        ),
        ("72", "72"),
        (" \\frac{1}{2} ", "\\frac{1}{2}"),
        ("$(1,2)$", "(1,2)"),
        ("\\text{(C)}", "\\text{(C)}"),
        (72, "72"),
        (0.5, "0.5"),
        (-3, "-3"),
    ],
)
def test_reference_detection(label: object, reference: str) -> None:
    assert extract_reference(label) == reference


@pytest.mark.parametrize("label", [None, "", "   ", "####", True, ["72"], {"a": 1}])
def test_missing_reference(label: object) -> None:
    assert extract_reference(label) is None
