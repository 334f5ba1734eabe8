"""Format reward (paper's scale, 0..10) and where the final answer is, per response format
(the profiles of ``reward_server.protocol``).

``paper``: 10 for ``<reasoning>…</reasoning>`` then ``<answer>…</answer>`` ending the response.
Partial credit follows the paper's scheme: 1.0 when exactly one block is complete, 1.5 when in
addition the other block's tags appear partially (an opening or closing tag without its partner,
or a complete block in the wrong place — the paper's example is a response that closes
``</reasoning>`` and then forgets ``<answer>``: 1.0). Nothing complete scores 0.

Formats whose answer may be a ``\\boxed{}`` (``think``, ``boxed``) read the response as the
reasoning block (when the format has one) and then the *final answers*: every answer block and
every list of boxes after the reasoning. The last one is the answer; the others must state the
same value. The same scale: 10 for the reasoning block (when the format has one) followed by
exactly one final answer that ends the response (closing math delimiters and a period may
follow a box); 1.5 for text after it, for final answers that differ, or for the tags of a block
that is not complete; 1.0 for one of the two parts alone; 0 for neither.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from reward_server.checker.extract import (
    answer_block,
    box_groups,
    boxes,
    normalize_boxes,
    unwrap_math,
)
from reward_server.protocol import ANSWER_CLOSE as A_CLOSE
from reward_server.protocol import ANSWER_OPEN as A_OPEN
from reward_server.protocol import FORMAT_MAX, PAPER, ResponseFormat

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
    ``answer_not_last``, ``several_answer_blocks`` (paper), ``several_answers`` (think, boxed),
    ``missing_reasoning``, ``missing_answer``, ``no_blocks``."""

    score: float
    reason: str


def _full_lenient(response: str, tags: tuple[str, str, str, str]) -> bool:
    """The response ends with an answer block, and a complete reasoning block comes before it."""
    r_open, r_close, a_open, a_close = tags
    if not response.endswith(a_close):
        return False
    answer_start = response.rfind(a_open, 0, len(response) - len(a_close))
    if answer_start < 0:
        return False
    if not r_open:
        return True
    reasoning_end = response.rfind(r_close, 0, answer_start)
    return reasoning_end >= 0 and response.rfind(r_open, 0, reasoning_end) >= 0


def _full_strict(response: str, tags: tuple[str, str, str, str]) -> bool:
    """Exactly one tag of each kind, in order, reasoning first, only whitespace between blocks."""
    r_open, r_close, a_open, a_close = tags
    if any(response.count(tag) != 1 for tag in tags if tag):
        return False
    body = response.strip()
    if not body.startswith(r_open or a_open) or not body.endswith(a_close):
        return False
    if not r_open:
        return True
    reasoning_end, answer_start = body.find(r_close), body.find(a_open)
    return (
        reasoning_end < answer_start
        and not body[reasoning_end + len(r_close) : answer_start].strip()
    )


def _tags(fmt: ResponseFormat) -> tuple[str, str, str, str]:
    """(reasoning open, reasoning close, answer open, answer close) of a tagged format; a
    format without a reasoning block has empty reasoning tags."""
    r_open, r_close = fmt.reasoning or ("", "")
    a_open, a_close = fmt.answer or (A_OPEN, A_CLOSE)
    return r_open, r_close, a_open, a_close


def score_format(response: str, strict: bool = False, fmt: ResponseFormat = PAPER) -> FormatResult:
    """Format score of a response whose trailing end-of-turn tokens are already removed, in a
    tagged format (the paper's by default: its own tags for any other)."""
    r_open, r_close, a_open, a_close = tags = _tags(fmt)
    response = response.rstrip()
    has_answer = _has_block(response, a_open, a_close)
    has_reasoning = not r_open or _has_block(response, r_open, r_close)
    if has_answer and (response.count(a_open) > 1 or response.count(a_close) > 1):
        # A second answer block, wherever it hides (after an end-of-turn token, in a comment,
        # a code fence or a "format reminder"), is a second candidate: partial format at most.
        return FormatResult(
            ONE_BLOCK_AND_TAGS if has_reasoning else ONE_BLOCK, "several_answer_blocks"
        )
    if _full_strict(response, tags) if strict else _full_lenient(response, tags):
        return FormatResult(FORMAT_MAX, "ok")

    if has_reasoning and has_answer:
        # Both blocks exist but not in the required shape (order, trailing text, strictness):
        # one block earns credit and the other's tags are there.
        head = response[: response.rfind(a_close) + len(a_close)]
        if _full_strict(head, tags) if strict else _full_lenient(head, tags):
            return FormatResult(ONE_BLOCK_AND_TAGS, "text_after_answer")  # the shape, then text
        lenient = _full_lenient(response, tags)
        reason = "strict_violation" if strict and lenient else "answer_not_last"
        return FormatResult(ONE_BLOCK_AND_TAGS, reason)
    if has_reasoning and r_open:
        partial = a_open in response or a_close in response
        return FormatResult(ONE_BLOCK_AND_TAGS if partial else ONE_BLOCK, "missing_answer")
    if has_answer:
        partial = r_open in response or r_close in response
        return FormatResult(ONE_BLOCK_AND_TAGS if partial else ONE_BLOCK, "missing_reasoning")
    return FormatResult(0.0, "no_blocks")


def text_after_answer(response: str, fmt: ResponseFormat = PAPER) -> str:
    """What follows the last closing answer tag of a response (empty when nothing does)."""
    close_tag = _tags(fmt)[3]
    close = response.rfind(close_tag)
    return "" if close < 0 else response[close + len(close_tag) :].strip()


# ------------------------------------------------------------------ every format


ONE_PART = ONE_BLOCK  # think, boxed: one of the two parts alone (the paper's 1.0)
PART_AND_TAGS = ONE_BLOCK_AND_TAGS  # think, boxed: a part, and the other's tags or faults (1.5)
TEXT_AFTER_ANSWER = "text_after_answer"
SEVERAL_ANSWERS = "several_answers"


@dataclass(frozen=True)
class Parsed:
    """What the scorer reads from one response in one format.

    answer: the final answer as written (an answer block's content, or the final list of
        boxes), None when there is none;
    lead: before a boxed answer, its sentence (hedges and negations there refuse it);
    tail: after a boxed answer, the text that follows it (read with it when it states a value
        or refuses one: "\\boxed{7} or more");
    others: the other final answers (think, boxed); each must state the answer's value;
    after: text after an answer block, judged by the restatement rule (``scoring``).
    """

    format: FormatResult
    answer: str | None
    lead: str = ""
    tail: str = ""
    others: tuple[str, ...] = ()
    after: str = ""


def opens_reasoning(prompt: str, fmt: ResponseFormat) -> bool:
    """Whether ``prompt`` ends with the format's opening reasoning tag: the chat template
    prefilled it, so the response starts inside the reasoning block."""
    return fmt.reasoning is not None and prompt.rstrip().endswith(fmt.reasoning[0])


def parse(
    response: str, fmt: ResponseFormat, *, strict: bool = False, prefilled: bool = False
) -> Parsed:
    """The format score and the final answer of a response whose trailing end-of-turn tokens
    are removed. ``prefilled``: the prompt ends with the format's opening reasoning tag."""
    if not fmt.boxed:
        if prefilled and fmt.prefill:  # the chat template wrote the opening tag
            response = fmt.reasoning[0] + response
        answer = answer_block(response, *_tags(fmt)[2:])
        return Parsed(
            score_format(response, strict, fmt), answer, after=text_after_answer(response, fmt)
        )
    response = normalize_boxes(response.rstrip())
    if fmt.reasoning is None:
        finals = _final_answers(response, fmt)
        if finals is None:
            return Parsed(FormatResult(0.0, "missing_answer"), None)
        return finals.parsed(FormatResult(FORMAT_MAX, "ok"))
    r_open, r_close = fmt.reasoning
    first_close, last_close = response.find(r_close), response.rfind(r_close)
    opened = (prefilled and fmt.prefill) or response.find(r_open, 0, max(first_close, 0)) >= 0
    if last_close < 0:
        # No reasoning block ends: inside an opened one nothing is an answer (a response cut
        # off while thinking); with no tag at all the response is an answer without reasoning.
        if opened or r_open in response:
            return Parsed(FormatResult(0.0, "no_blocks"), None)
        finals = _final_answers(response, fmt)
        if finals is None:
            return Parsed(FormatResult(0.0, "no_blocks"), None)
        return finals.parsed(FormatResult(ONE_PART, "missing_reasoning"))
    finals = _final_answers(response[last_close + len(r_close) :], fmt)
    if finals is None:
        tags = any(tag in response[last_close:] for tag in (*(fmt.answer or ()), "\\boxed"))
        if not opened:
            return Parsed(FormatResult(0.0, "no_blocks"), None)  # tags, no complete part
        return Parsed(FormatResult(PART_AND_TAGS if tags else ONE_PART, "missing_answer"), None)
    if not opened:
        return finals.parsed(FormatResult(PART_AND_TAGS, "missing_reasoning"))
    if strict:
        once = response.count(r_open) + (prefilled and fmt.prefill) == 1
        lead = response[: response.find(r_open)] if r_open in response else ""
        if not once or response.count(r_close) != 1 or lead.strip():
            return finals.parsed(FormatResult(PART_AND_TAGS, "strict_violation"))
    return finals.parsed(FormatResult(FORMAT_MAX, "ok"))


@dataclass(frozen=True)
class _Finals:
    """The final answers of the text after the reasoning (``_final_answers``)."""

    answer: str
    lead: str
    tail: str
    others: tuple[str, ...]
    after: str
    trailing: bool  # text follows the final answer
    differ: bool  # the other final answers are not written as the answer is

    def parsed(self, full: FormatResult) -> Parsed:
        """``full`` when the final answer is alone and ends the response, else its fault."""
        fmt = full
        if full.score == FORMAT_MAX and self.differ:
            fmt = FormatResult(PART_AND_TAGS, SEVERAL_ANSWERS)
        elif full.score == FORMAT_MAX and self.trailing:
            fmt = FormatResult(PART_AND_TAGS, TEXT_AFTER_ANSWER)
        return Parsed(fmt, self.answer, self.lead, self.tail, self.others, self.after)


# What may follow a boxed answer that ends the response: closing math delimiters, a period.
_CLOSERS = re.compile(r"(?:\s|\$|\\\)|\\\]|\.)*")
# Where the sentence of a boxed answer starts: a line break, or the end of a sentence.
_SENTENCE_END = re.compile(r"\n|[.!?](?=\s)")


def _final_answers(text: str, fmt: ResponseFormat) -> _Finals | None:
    """The final answers of ``text`` (what follows the reasoning; boxes already normalised):
    the last answer block, else the last list of boxes; None when there is neither."""
    blocks: list[tuple[int, int]] = []  # (start, end) of each complete answer block
    a_open, a_close = fmt.answer or ("", "")
    while (
        fmt.answer is not None and (start := text.find(a_open, blocks[-1][1] if blocks else 0)) >= 0
    ):
        close = text.find(a_close, start + len(a_open))
        if close < 0:
            break
        blocks.append((start, close + len(a_close)))
    starts = [s for s, _ in blocks]  # sorted, and the blocks never overlap
    outside = [b for b in boxes(text) if not _inside(b[0], blocks, starts)]
    grouped = [(g[0][0], g[-1][1]) for g in box_groups(outside, text)]
    groups = tuple(text[s:e] for s, e in grouped)
    if blocks:
        contents = [text[s + len(a_open) : e - len(a_close)] for s, e in blocks]
        answer, after = contents[-1], text[blocks[-1][1] :]
        others = (*contents[:-1], *groups)
        return _Finals(answer, "", "", others, after, bool(after.strip()), _differ(answer, others))
    if not groups:
        return None
    start, end = grouped[-1]
    rest = text[end:]
    trailing = _CLOSERS.fullmatch(rest) is None
    # What follows the box, its closing math delimiter dropped ("\\boxed{18}$ dollars").
    after_box = rest.lstrip().lstrip("$").removeprefix("\\)").removeprefix("\\]").strip()
    # The sentence before the box, from the end of the previous list of boxes at the earliest.
    head = text[grouped[-2][1] if len(grouped) > 1 else 0 : start]
    cuts = list(_SENTENCE_END.finditer(head))
    lead = head[cuts[-1].end() :] if cuts else head
    lead = lead.rstrip().rstrip("$").removesuffix("\\(").removesuffix("\\[")
    others = groups[:-1]
    tail = after_box if trailing else ""
    return _Finals(groups[-1], lead, tail, others, "", trailing, _differ(groups[-1], others))


def _inside(position: int, blocks: list[tuple[int, int]], starts: list[int]) -> bool:
    """Whether ``position`` falls in one of ``blocks`` (bisected: a flood of boxes and blocks
    stays linear)."""
    i = bisect.bisect_right(starts, position) - 1
    return i >= 0 and position < blocks[i][1]


def _differ(answer: str, others: tuple[str, ...]) -> bool:
    """Whether any other final answer is written differently (spacing aside)."""
    key = re.sub(r"\s+", "", unwrap_math(answer))
    return any(re.sub(r"\s+", "", unwrap_math(other)) != key for other in others)
