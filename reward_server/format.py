"""Format reward (paper's scale): 10 for ``<reasoning>…</reasoning>`` then ``<answer>…</answer>``
ending the response; partial credit when only one block is there.

Partial credit follows the paper's scheme: 1.0 when exactly one block is complete, 1.5 when in
addition the other block's tags appear partially (an opening or closing tag without its partner,
or a complete block in the wrong place — the paper's example is a response that closes
``</reasoning>`` and then forgets ``<answer>``: 1.0). Nothing complete scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from reward_server.protocol import ANSWER_CLOSE as A_CLOSE
from reward_server.protocol import ANSWER_OPEN as A_OPEN
from reward_server.protocol import FORMAT_MAX
from reward_server.protocol import REASONING_CLOSE as R_CLOSE
from reward_server.protocol import REASONING_OPEN as R_OPEN

ONE_BLOCK = 1.0
ONE_BLOCK_AND_TAGS = 1.5


def _has_block(text: str, open_tag: str, close_tag: str) -> bool:
    """An opening tag followed somewhere later by its closing tag (linear: no regex backtracking
    on adversarial inputs made of thousands of unclosed tags)."""
    start = text.find(open_tag)
    return start >= 0 and text.find(close_tag, start + len(open_tag)) >= 0


@dataclass(frozen=True)
class FormatResult:
    """Format score and why: ``ok``, ``strict_violation``, ``text_after_answer``,
    ``answer_not_last``, ``several_answer_blocks``, ``missing_reasoning``, ``missing_answer``,
    ``no_blocks``."""

    score: float
    reason: str


def _full_lenient(response: str) -> bool:
    """The response ends with an answer block, and a complete reasoning block comes before it."""
    if not response.endswith(A_CLOSE):
        return False
    a_open = response.rfind(A_OPEN, 0, len(response) - len(A_CLOSE))
    if a_open < 0:
        return False
    r_close = response.rfind(R_CLOSE, 0, a_open)
    return r_close >= 0 and response.rfind(R_OPEN, 0, r_close) >= 0


def _full_strict(response: str) -> bool:
    """Exactly one tag of each kind, in order, reasoning first, only whitespace between blocks."""
    if any(response.count(tag) != 1 for tag in (R_OPEN, R_CLOSE, A_OPEN, A_CLOSE)):
        return False
    body = response.lstrip()
    if not body.startswith(R_OPEN) or not body.endswith(A_CLOSE):
        return False
    r_close, a_open = body.find(R_CLOSE), body.find(A_OPEN)
    return r_close < a_open and body[r_close + len(R_CLOSE) : a_open].strip() == ""


def score_format(response: str, strict: bool = False) -> FormatResult:
    """Format score of a response whose trailing end-of-turn tokens are already removed."""
    response = response.rstrip()
    has_answer = _has_block(response, A_OPEN, A_CLOSE)
    if has_answer and (response.count(A_OPEN) > 1 or response.count(A_CLOSE) > 1):
        # A second answer block, wherever it hides (after an end-of-turn token, in a comment,
        # a code fence or a "format reminder"), is a second candidate: partial format at most.
        both = _has_block(response, R_OPEN, R_CLOSE)
        return FormatResult(ONE_BLOCK_AND_TAGS if both else ONE_BLOCK, "several_answer_blocks")
    if _full_strict(response) if strict else _full_lenient(response):
        return FormatResult(FORMAT_MAX, "ok")

    has_reasoning = _has_block(response, R_OPEN, R_CLOSE)
    if has_reasoning and has_answer:
        # Both blocks exist but not in the required shape (order, trailing text, strictness):
        # one block earns credit and the other's tags are there.
        head = response[: response.rfind(A_CLOSE) + len(A_CLOSE)]
        if _full_strict(head) if strict else _full_lenient(head):
            return FormatResult(ONE_BLOCK_AND_TAGS, "text_after_answer")  # the shape, then text
        reason = "strict_violation" if strict and _full_lenient(response) else "answer_not_last"
        return FormatResult(ONE_BLOCK_AND_TAGS, reason)
    if has_reasoning:
        partial = A_OPEN in response or A_CLOSE in response
        return FormatResult(ONE_BLOCK_AND_TAGS if partial else ONE_BLOCK, "missing_answer")
    if has_answer:
        partial = R_OPEN in response or R_CLOSE in response
        return FormatResult(ONE_BLOCK_AND_TAGS if partial else ONE_BLOCK, "missing_reasoning")
    return FormatResult(0.0, "no_blocks")


def text_after_answer(response: str) -> str:
    """What follows the last ``</answer>`` of a response (empty when nothing does)."""
    close = response.rfind(A_CLOSE)
    return "" if close < 0 else response[close + len(A_CLOSE) :].strip()
