"""Score one completion: response -> format -> answer -> verdict -> reward (paper's scale)."""

from __future__ import annotations

import asyncio
import time

from reward_server.extract import extract_answer, extract_reference, extract_response
from reward_server.format import score_format
from reward_server.protocol import ACCURACY_CORRECT, FORMAT_MAX, Reason
from reward_server.schemas import ItemScore, Label
from reward_server.settings import Settings
from reward_server.verify import Verifier

# Format verdicts that forbid accuracy whatever the settings: the completion holds a second
# answer block, or text after its block, so the block scored may not be its final answer.
NO_ACCURACY_FORMATS = frozenset({Reason.SEVERAL_ANSWER_BLOCKS, Reason.ANSWER_NOT_LAST})


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
        elif self.settings.accuracy_requires_format and fmt.score < FORMAT_MAX:
            reason = Reason.FORMAT_NOT_MET
        else:
            verdict = await self.verifier.check(answer, reference, deadline=deadline)
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
