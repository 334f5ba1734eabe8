"""Score one completion: response -> format -> answer -> verdict -> reward (paper's scale)."""

from __future__ import annotations

import asyncio
import re
import time

from reward_server import sentence
from reward_server.extract import extract_answer, extract_reference, extract_response
from reward_server.format import score_format, text_after_answer
from reward_server.protocol import ACCURACY_CORRECT, FORMAT_MAX, Reason
from reward_server.schemas import ItemScore, Label
from reward_server.settings import Settings
from reward_server.verify import Verdict, Verifier

# Format verdicts that forbid accuracy whatever the settings: the completion holds a second
# answer block, or its block is not where the format puts it (before the reasoning), so the
# block scored may not be its final answer.
NO_ACCURACY_FORMATS = frozenset({Reason.SEVERAL_ANSWER_BLOCKS, Reason.ANSWER_NOT_LAST})
# Text after a well-placed answer block costs format only (10 -> 1.5): the accuracy is judged on
# the block, and the text may restate the answer but not give another one.
TEXT_AFTER_ANSWER = "text_after_answer"
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

    async def score(
        self, query: str, prompt: str | None, label: Label, *, deadline: float | None = None
    ) -> ItemScore:
        """Score one completion; ``deadline`` (``time.perf_counter()``) bounds its symbolic
        check (default: one verification timeout from now)."""
        response = extract_response(query, prompt, self._end_tokens)
        fmt = score_format(response, strict=self.settings.strict_format)
        answer = extract_answer(response)
        reference = extract_reference(label)

        equal, reason = False, Reason.NOT_EQUIVALENT
        if answer is None:
            reason = Reason.NO_ANSWER_BLOCK
        elif not answer:
            reason = Reason.EMPTY_ANSWER
        elif reference is None:
            reason = Reason.NO_REFERENCE
        elif fmt.reason in NO_ACCURACY_FORMATS:
            reason = Reason(fmt.reason)
        elif (
            self.settings.accuracy_requires_format
            and fmt.score < FORMAT_MAX
            and fmt.reason != TEXT_AFTER_ANSWER
        ):
            reason = Reason.FORMAT_NOT_MET
        else:
            verdict = await self.verifier.check(answer, reference, deadline=deadline)
            if verdict.equal and fmt.reason == TEXT_AFTER_ANSWER:
                verdict = await self._restated(response, reference, verdict, deadline)
            equal, reason = verdict.equal, verdict.reason
        accuracy = ACCURACY_CORRECT if equal else 0.0
        return ItemScore(
            response=response,
            answer=answer,
            reference=reference,
            format_score=fmt.score,
            format_reason=fmt.reason,
            accuracy_score=accuracy,
            reason=reason,
            reward=fmt.score + accuracy,
        )

    async def _restated(
        self, response: str, reference: str, verdict: Verdict, deadline: float | None
    ) -> Verdict:
        """The block's verdict, unless the text after the block gives another answer: a value
        (in a sentence, a box, a bare number) that is not the reference, or a hedge or a
        negation of one. Text that states no value ("I hope this helps!") changes nothing."""
        trailing = text_after_answer(response)
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
        self, queries: list[str], prompts: list[str] | None, labels: list[Label]
    ) -> list[ItemScore]:
        """Score items concurrently (symbolic checks of a batch run in parallel workers). Every
        item's deadline is one verification timeout from now, when the batch arrived: however
        many answers wait for a worker, none takes longer than that."""
        deadline = time.perf_counter() + self.settings.verify_timeout_s
        prompt_list: list[str | None] = [None] * len(queries) if prompts is None else list(prompts)
        items = zip(queries, prompt_list, labels, strict=True)
        return list(
            await asyncio.gather(*(self.score(q, p, lab, deadline=deadline) for q, p, lab in items))
        )
