"""Score one completion: the response located in the query, graded by the checker's front door
(``checker.grade``), its checks resolved, its reward on the paper's scale, in the response
format the request asks for (``reward_server.protocol``'s profiles). No answer policy here:
what counts as right is the checker's.

An item is scored in two steps. **Reading** (``Scorer.read``, no waiting): the response, then
``grade`` decides all it can without a worker. A request's items are read together, in the
event loop when the request is small and in a reading thread when it is large
(``READ_INLINE_CHARS``), so that no request holds the loop that answers every other one.
**Judging** (``Scorer.judge``): the symbolic checks the grading left, resolved by the
verification pool in the fair queue of the client that asked, then ``grade.commit``.

Any exception while reading or checking one item scores that item 0 with a reason
(``answer_error``, ``reference_error``, ``check_error``), is counted by stage and error
(``gtpo_rs_item_errors_total``) and logged once per cause (``ItemErrors``): it never fails the
batch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar

from reward_server.checker.compare import Verdict
from reward_server.checker.format import FormatResult, opens_reasoning
from reward_server.checker.grade import (
    Check,
    Grading,
    Limits,
    Rules,
    commit,
    equivalent_or_error,
    grade,
)
from reward_server.checker.response import Start, locate
from reward_server.protocol import ACCURACY_CORRECT, Reason, ResponseFormat, response_format
from reward_server.service.schemas import ItemScore, Label
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

log = logging.getLogger(__name__)

# A request whose text (queries, prompts and labels) is longer than this is read in a reading
# thread, off the event loop; a shorter one in the loop, which costs no thread hop. Reading is
# linear: this many characters take about a millisecond.
READ_INLINE_CHARS = 16_384
# A large request is read this many characters at a time, so that the reading threads take
# turns between large requests rather than finishing one before starting the next.
READ_CHUNK_CHARS = 65_536
READ_THREADS = 2

Row = TypeVar("Row")
Read = TypeVar("Read")


class ItemErrors:
    """Exceptions that cost one item: ``count(stage, error)`` each time, and one log line the
    first time each (stage, exception type) occurs, without a traceback (a RecursionError's
    traceback was 135 KB a request)."""

    def __init__(self, count: Callable[[str, str], None] | None = None) -> None:
        self._count = count or (lambda stage, error: None)
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def report(self, stage: str, error: BaseException | str) -> None:
        name = error if isinstance(error, str) else type(error).__name__
        self._count(stage, name)
        with self._lock:
            first = (stage, name) not in self._logged
            self._logged.add((stage, name))
        if first:
            message = "" if isinstance(error, str) else f": {str(error)[:200]}"
            log.error(
                "%s of an item raised %s%s; the item scores 0 (%s_error), the rest of its "
                "batch is scored; counted in gtpo_rs_item_errors_total, logged once",
                stage, name, message, stage if stage != "response" else "answer",
            )  # fmt: skip


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs 3 us a request
class ItemRead:
    """One completion read: its response, where it starts, its format's name and what grading
    it found."""

    response: str
    response_start: Start
    response_format: str
    grading: Grading


class Scorer:
    """Applies the settings' scoring rules; the verifier decides answer equivalence."""

    def __init__(
        self, settings: Settings, verifier: Verifier, errors: ItemErrors | None = None
    ) -> None:
        self.settings = settings
        self.verifier = verifier
        self.errors = errors or ItemErrors()
        self._end_tokens = tuple(settings.extra_end_tokens)
        self.response_format = response_format(settings.response_format)  # the server's default
        self._rules = Rules(
            self.response_format,
            strict=settings.strict_format,
            requires_format=settings.accuracy_requires_format,
            limits=Limits(settings.max_answer_chars, settings.max_nesting),
        )
        self._reader: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ batches

    async def score_batch(
        self,
        queries: list[str],
        prompts: list[str] | None,
        labels: list[Label],
        fmt: ResponseFormat | None = None,
        *,
        client: Hashable = None,
    ) -> list[ItemScore]:
        """Score items concurrently (symbolic checks of a batch run in parallel workers). Every
        item's deadline is one verification timeout from now, when the batch arrived: however
        many answers wait for a worker, none takes longer than that. ``client``: whom the
        verification pool's fair queue charges for the checks."""
        deadline = time.perf_counter() + self.settings.verify_timeout_s
        fmt = fmt or self.response_format
        prompt_list: list[str | None] = [None] * len(queries) if prompts is None else list(prompts)
        rows = list(zip(queries, prompt_list, labels, strict=True))
        if sum(map(_row_chars, rows)) <= READ_INLINE_CHARS:
            reads = self._read_rows(rows, fmt)
        else:
            reads = await self._off_loop(rows, _row_chars, self._read_rows, fmt)
        return list(await asyncio.gather(*(self.judge(r, deadline, client) for r in reads)))

    def _read_rows(
        self, rows: Sequence[tuple[str, str | None, Label]], fmt: ResponseFormat
    ) -> list[ItemRead]:
        return [self.read(q, p, lab, fmt) for q, p, lab in rows]

    async def equivalent_batch(
        self, pairs: list[tuple[str, str]], *, client: Hashable = None
    ) -> list[Verdict]:
        """``/v1/equivalent``: the verdict on each (answer as written, reference or dataset
        label), with the same policy, cost guard, deadline and fair queue as scoring."""
        deadline = time.perf_counter() + self.settings.verify_timeout_s  # from the arrival
        if sum(map(_pair_chars, pairs)) <= READ_INLINE_CHARS:
            reads = self._read_pairs(pairs)
        else:
            reads = await self._off_loop(pairs, _pair_chars, self._read_pairs)
        return list(
            await asyncio.gather(*(self._resolve(check, deadline, client) for check in reads))
        )

    def _read_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[Check]:
        out: list[Check] = []
        for answer, label in pairs:
            check, error = equivalent_or_error(answer, label, self._rules.limits)
            if error is not None:
                self.errors.report(*error)
            out.append(check)
        return out

    async def _off_loop(
        self,
        rows: Sequence[Row],
        chars: Callable[[Row], int],
        read_rows: Callable[..., list[Read]],
        *args: object,
    ) -> list[Read]:
        """``read_rows(rows, *args)`` for a large request: in a reading thread,
        ``READ_CHUNK_CHARS`` at a time (the loop answers other requests meanwhile)."""
        sizes = list(map(chars, rows))
        if self._reader is None:
            self._reader = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="gtpo-rs-read")
        loop = asyncio.get_running_loop()
        out: list[Read] = []
        start = taken = 0
        for end, size in enumerate(sizes, 1):
            taken += size
            if taken >= READ_CHUNK_CHARS or end == len(rows):
                out += await loop.run_in_executor(self._reader, read_rows, rows[start:end], *args)
                start, taken = end, 0
        return out

    # ------------------------------------------------------------------ one item

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
        return await self.judge(self.read(query, prompt, label, fmt), deadline)

    def read(
        self, query: str, prompt: str | None, label: Label, fmt: ResponseFormat | None = None
    ) -> ItemRead:
        """Everything about one completion that needs no worker (see the module)."""
        fmt = fmt or self.response_format
        try:
            located = locate(query, prompt, self._end_tokens)
            response = located.response
            if response is None:  # never the query's text: that would score the prompt
                return ItemRead("", located.start, fmt.name, _NOT_FOUND)
            prefilled = opens_reasoning(located.before, fmt)
        except Exception as exc:
            self.errors.report("response", exc)
            no_format = FormatResult(0.0, "response_error")
            grading = Grading(no_format, None, None, Reason.ANSWER_ERROR)
            return ItemRead("", Start.NOT_FOUND, fmt.name, grading)
        rules = self._rules if fmt is self._rules.fmt else replace(self._rules, fmt=fmt)
        grading = grade(response, label, rules, prefilled=prefilled)
        if grading.error is not None:
            self.errors.report(*grading.error)
        return ItemRead(response, located.start, fmt.name, grading)

    async def judge(
        self, item: ItemRead, deadline: float | None = None, client: Hashable = None
    ) -> ItemScore:
        """The item's score once its checks are resolved (``deadline``: see ``score``)."""
        grading = item.grading
        reason = grading.reason
        equal = False
        if reason is None:
            assert grading.check is not None
            verdict = await self._resolve(grading.check, deadline, client)
            if verdict.equal and grading.followups:
                others = [await self._resolve(o, deadline, client) for o in grading.others]
                trailing = None
                if grading.trailing is not None:
                    trailing = await self._resolve(grading.trailing, deadline, client)
                verdict = commit(grading, verdict, others, trailing)
            equal, reason = verdict.equal, verdict.reason
        accuracy = ACCURACY_CORRECT if equal else 0.0
        return ItemScore(
            response=item.response,
            response_start=item.response_start,
            response_format=item.response_format,
            answer=grading.answer,
            reference=grading.reference,
            format_score=grading.format.score,
            format_reason=grading.format.reason,
            accuracy_score=accuracy,
            reason=reason,
            reward=grading.format.score + accuracy,
        )

    async def _resolve(self, check: Check, deadline: float | None, client: Hashable) -> Verdict:
        try:
            return await self.verifier.resolve(check, deadline, client)
        except Exception as exc:
            self.errors.report("check", exc)
            return Verdict(False, Reason.CHECK_ERROR)


# A prompt given and not found in its query (``response.Start.NOT_FOUND``): no format, no answer.
_NOT_FOUND = Grading(
    FormatResult(0.0, Reason.RESPONSE_NOT_FOUND.value), None, None, Reason.RESPONSE_NOT_FOUND
)


def _pair_chars(pair: tuple[str, str]) -> int:
    return len(pair[0]) + len(pair[1])


def _row_chars(row: tuple[str, str | None, Label]) -> int:
    query, prompt, label = row
    return len(query) + len(prompt or "") + (len(label) if isinstance(label, str) else 0)
