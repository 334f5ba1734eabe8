"""Score one completion: response -> format -> answer -> verdict -> reward (paper's scale), in
the response format the request asks for (``reward_server.protocol``'s profiles)."""

from __future__ import annotations

import asyncio
import re
import time

from reward_server import sentence
from reward_server.extract import extract_reference, split_query, unwrap_math
from reward_server.format import (
    SEVERAL_ANSWERS,
    TEXT_AFTER_ANSWER,
    Parsed,
    opens_reasoning,
    parse,
)
from reward_server.protocol import (
    ACCURACY_CORRECT,
    FORMAT_MAX,
    Reason,
    ResponseFormat,
    response_format,
)
from reward_server.schemas import ItemScore, Label
from reward_server.settings import Settings
from reward_server.verify import Verdict, Verifier

# Format verdicts that forbid accuracy whatever the settings: the completion holds a second
# answer block, or its block is not where the format puts it (before the reasoning), so the
# block scored may not be its final answer.
NO_ACCURACY_FORMATS = frozenset({Reason.SEVERAL_ANSWER_BLOCKS, Reason.ANSWER_NOT_LAST})
# Format faults that cost format only (10 -> 1.5), the accuracy still judged: text after a
# well-placed answer (it may restate the answer but not give another one), and final answers
# written more than once (think, boxed: each must state the answer's value).
JUDGED_FAULTS = frozenset({TEXT_AFTER_ANSWER, SEVERAL_ANSWERS})
# Verdicts on the trailing text that say nothing about it (the machine's state, or a sentence
# that states no value: "I hope this helps!").
_ANY_VALUE = re.compile(r"[\d$\\]")
_TRAILING_NEUTRAL = frozenset(
    {Reason.PROSE_IN_ANSWER, Reason.TIMEOUT, Reason.QUEUE_TIMEOUT, Reason.WORKER_ERROR}
)


class Scorer:
    """Applies the settings' scoring rules; the verifier decides answer equivalence."""

    def __init__(self, settings: Settings, verifier: Verifier) -> None:
        self.settings = settings
        self.verifier = verifier
        self._end_tokens = tuple(settings.extra_end_tokens)
        self.response_format = response_format(settings.response_format)  # the server's default

    async def score(
        self,
        query: str,
        prompt: str | None,
        label: Label,
        fmt: ResponseFormat | None = None,
        *,
        deadline: float | None = None,
    ) -> ItemScore:
        """Score one completion in the response format ``fmt`` (default: the server's);
        ``deadline`` (``time.perf_counter()``) bounds its symbolic check (default: one
        verification timeout from now)."""
        fmt = fmt or self.response_format
        before, response = split_query(query, prompt, self._end_tokens)
        prefilled = opens_reasoning(before, fmt)
        parsed = parse(response, fmt, strict=self.settings.strict_format, prefilled=prefilled)
        fmt_result = parsed.format
        answer = None if parsed.answer is None else unwrap_math(_with_tail(parsed))
        reference = extract_reference(label)

        equal, reason = False, Reason.NOT_EQUIVALENT
        if answer is None:
            reason = Reason.NO_ANSWER_BLOCK
        elif not answer:
            reason = Reason.EMPTY_ANSWER
        elif reference is None:
            reason = Reason.NO_REFERENCE
        elif fmt_result.reason in NO_ACCURACY_FORMATS:
            reason = Reason(fmt_result.reason)
        elif (
            self.settings.accuracy_requires_format
            and fmt_result.score < FORMAT_MAX
            and fmt_result.reason not in JUDGED_FAULTS
        ):
            reason = Reason.FORMAT_NOT_MET
        else:
            verdict = await self.verifier.check(answer, reference, deadline=deadline)
            if verdict.equal:
                verdict = await self._committed(parsed, answer, reference, verdict, deadline)
            equal, reason = verdict.equal, verdict.reason
        accuracy = ACCURACY_CORRECT if equal else 0.0
        return ItemScore(
            response=response,
            response_format=fmt.name,
            answer=answer,
            reference=reference,
            format_score=fmt_result.score,
            format_reason=fmt_result.reason,
            accuracy_score=accuracy,
            reason=reason,
            reward=fmt_result.score + accuracy,
        )

    async def _committed(
        self, parsed: Parsed, answer: str, reference: str, verdict: Verdict, deadline: float | None
    ) -> Verdict:
        """The verdict of a right answer, unless the rest of the response takes it back: words
        before a boxed answer that hedge or negate it, another final answer that states another
        value, or text after an answer block that gives another answer."""
        refused = sentence.refusal(parsed.lead) if parsed.lead.strip() else None
        if refused is not None:
            return Verdict(False, refused)
        for value in dict.fromkeys(unwrap_math(other) for other in parsed.others):
            if value != answer:
                again = await self.verifier.check(value, reference, deadline=deadline)
                if not again.equal:
                    return Verdict(False, Reason.SEVERAL_ANSWERS)
        if parsed.after.strip():
            return await self._restated(parsed.after.strip(), reference, verdict, deadline)
        return verdict

    async def _restated(
        self, trailing: str, reference: str, verdict: Verdict, deadline: float | None
    ) -> Verdict:
        """The block's verdict, unless the text after the block gives another answer: a value
        (in a sentence, a box, a bare number) that is not the reference, or a hedge or a
        negation of one. Text that states no value ("I hope this helps!") changes nothing."""
        if len(trailing) > self.settings.max_answer_chars:
            # Too long to read as one answer: refused when it holds anything like a value.
            if _ANY_VALUE.search(trailing):
                return Verdict(False, Reason.ANSWER_NOT_LAST)
            return verdict
        if not sentence.states_value(trailing):
            return verdict
        again = await self.verifier.check(trailing, reference, deadline=deadline)
        if again.equal or again.reason in _TRAILING_NEUTRAL:
            return verdict if again.equal or again.reason == Reason.PROSE_IN_ANSWER else again
        return Verdict(False, Reason.ANSWER_NOT_LAST)

    async def score_batch(
        self,
        queries: list[str],
        prompts: list[str] | None,
        labels: list[Label],
        fmt: ResponseFormat | None = None,
    ) -> list[ItemScore]:
        """Score items concurrently (symbolic checks of a batch run in parallel workers). Every
        item's deadline is one verification timeout from now, when the batch arrived: however
        many answers wait for a worker, none takes longer than that."""
        deadline = time.perf_counter() + self.settings.verify_timeout_s
        fmt = fmt or self.response_format
        prompt_list: list[str | None] = [None] * len(queries) if prompts is None else list(prompts)
        items = zip(queries, prompt_list, labels, strict=True)
        return list(
            await asyncio.gather(
                *(self.score(q, p, lab, fmt, deadline=deadline) for q, p, lab in items)
            )
        )


def _with_tail(parsed: Parsed) -> str:
    """A boxed answer with the text after it when that text states a value or refuses one
    ("\\boxed{18} dollars", "\\boxed{7} or more", "\\boxed{9}, but that is wrong"): read as
    one answer. Text that does neither ("I hope it is correct.") is left out, as it is after an
    answer block."""
    answer = parsed.answer or ""
    tail = parsed.tail
    if tail and (sentence.states_value(tail) or sentence.refusal(tail) is not None):
        return f"{answer} {tail}"
    return answer
