"""Score one completion: response -> format -> answer -> verdict -> reward (paper's scale), in
the response format the request asks for (``reward_server.protocol``'s profiles).

An item is scored in two steps. **Reading** (``Scorer.read``, no waiting): the response, its
format, the answer and the reference, and all that the checker decides without a worker. A
request's items are read together, in the event loop when the request is small and in a reading
thread when it is large (``READ_INLINE_CHARS``), so that no request holds the loop that answers
every other one. An answer's whitespace runs are shortened and its length capped before any
pattern runs on it. **Judging** (``Scorer.judge``): the symbolic checks the reading left to the
verification pool, in the fair queue of the client that asked.

Any exception while reading or checking one item scores that item 0 with a reason
(``answer_error``, ``reference_error``, ``check_error``), is counted by stage and error
(``gtpo_rs_item_errors_total``) and logged once per cause (``ItemErrors``): it never fails the
batch.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from reward_server.checker import reading
from reward_server.checker.compare import Verdict
from reward_server.checker.extract import extract_reference, split_query, unwrap_math
from reward_server.checker.format import (
    SEVERAL_ANSWERS,
    TEXT_AFTER_ANSWER,
    FormatResult,
    Parsed,
    opens_reasoning,
    parse,
)
from reward_server.checker.pending import SymbolicCheck
from reward_server.protocol import (
    ACCURACY_CORRECT,
    FORMAT_MAX,
    NOT_COMPUTED,
    Reason,
    ResponseFormat,
    response_format,
)
from reward_server.service.schemas import ItemScore, Label
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

log = logging.getLogger(__name__)

# Format verdicts that forbid accuracy whatever the settings: the completion holds a second
# answer block, or its block is not where the format puts it (before the reasoning), so the
# block scored may not be its final answer.
NO_ACCURACY_FORMATS = frozenset({Reason.SEVERAL_ANSWER_BLOCKS, Reason.ANSWER_NOT_LAST})
# Format faults that cost format only (10 -> 1.5), the accuracy still judged: text after a
# well-placed answer (it may restate the answer but not give another one), and final answers
# written more than once (think, boxed: each must state the answer's value).
JUDGED_FAULTS = frozenset({TEXT_AFTER_ANSWER, SEVERAL_ANSWERS})
# Verdicts on the trailing text that say nothing about it (a sentence that states no value: "I
# hope this helps!", its CPU budget, a check that raised), or that are no verdict at all.
_ANY_VALUE = re.compile(r"[\d$\\]")
_TRAILING_NEUTRAL = frozenset({Reason.PROSE_IN_ANSWER, Reason.TIMEOUT, Reason.CHECK_ERROR})
_TRAILING_NEUTRAL |= NOT_COMPUTED

# A request whose text (queries, prompts and labels) is longer than this is read in a reading
# thread, off the event loop; a shorter one in the loop, which costs no thread hop. Reading is
# linear: this many characters take about a millisecond.
READ_INLINE_CHARS = 16_384
# A large request is read this many characters at a time, so that the reading threads take
# turns between large requests rather than finishing one before starting the next.
READ_CHUNK_CHARS = 65_536
READ_THREADS = 2
# A whitespace run longer than this in an answer is one space (one newline when it holds one):
# a collapsing policy writes thousands, and an answer is read the same with one.
LONGEST_WHITESPACE_RUN = 16
_LONG_WHITESPACE = re.compile(rf"\s{{{LONGEST_WHITESPACE_RUN + 1},}}")
# An answer as written (its box and wrapping phrase included) longer than this many times
# GTPO_RS_MAX_ANSWER_CHARS is refused as too long before it is unwrapped: unwrapping only removes
# boxes and delimiters around the answer.
RAW_ANSWER_FACTOR = 2
# Other final answers (think, boxed) that are compared with the answer at most: more than this
# many distinct ones are several answers, whatever they state.
MAX_OTHER_ANSWERS = 16

Check = Verdict | SymbolicCheck  # a precheck's result: a verdict, or the pool's check
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
    """What reading one completion found: the format, the answer and the reference; the
    accuracy's reason when reading decided it; otherwise the checks the judge resolves."""

    response: str
    response_format: str
    format: FormatResult
    answer: str | None
    reference: str | None
    reason: Reason | None = None  # decided while reading (no answer, the format gate, an error)
    check: Check | None = None  # the answer against the reference
    # For an answer that may be right, what the rest of the response says about it:
    refused: Reason | None = None  # the words around a boxed answer refuse it
    others: tuple[Check, ...] = ()  # the other final answers against the reference
    trailing: Check | None = None  # the text after an answer block against the reference


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
        self._max_chars = settings.max_answer_chars
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
            try:
                reference = extract_reference(label)
            except Exception as exc:
                self.errors.report("reference", exc)
                out.append(Verdict(False, Reason.REFERENCE_ERROR))
                continue
            if not answer.strip():
                out.append(Verdict(False, Reason.EMPTY_ANSWER))
            elif reference is None:
                out.append(Verdict(False, Reason.NO_REFERENCE))
            else:
                out.append(self._precheck(answer, reference))
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
            before, response = split_query(query, prompt, self._end_tokens)
            prefilled = opens_reasoning(before, fmt)
            parsed = parse(response, fmt, strict=self.settings.strict_format, prefilled=prefilled)
        except Exception as exc:
            self.errors.report("response", exc)
            no_format = FormatResult(0.0, "response_error")
            return ItemRead(query, fmt.name, no_format, None, None, Reason.ANSWER_ERROR)
        try:
            answer = None if parsed.answer is None else self._answer(parsed)
        except Exception as exc:
            self.errors.report("answer", exc)
            return ItemRead(response, fmt.name, parsed.format, None, None, Reason.ANSWER_ERROR)
        try:
            reference = extract_reference(label)
        except Exception as exc:
            self.errors.report("reference", exc)
            return ItemRead(response, fmt.name, parsed.format, answer, None, Reason.REFERENCE_ERROR)
        reason = self._gate(parsed.format, answer, reference)
        if reason is not None:
            return ItemRead(response, fmt.name, parsed.format, answer, reference, reason)
        assert answer is not None and reference is not None
        try:
            check = self._precheck(answer, reference)
            if isinstance(check, Verdict) and not check.equal:  # wrong: nothing else to read
                return ItemRead(response, fmt.name, parsed.format, answer, reference, None, check)
            refused, others, trailing = self._followups(parsed, answer, reference)
        except Exception as exc:
            self.errors.report("check", exc)
            reason = Reason.CHECK_ERROR
            return ItemRead(response, fmt.name, parsed.format, answer, reference, reason)
        return ItemRead(
            response, fmt.name, parsed.format, answer, reference, None, check, refused, others,
            trailing,
        )  # fmt: skip

    def _gate(self, fmt: FormatResult, answer: str | None, reference: str | None) -> Reason | None:
        """The accuracy's reason when there is nothing to check."""
        if answer is None:
            return Reason.NO_ANSWER_BLOCK
        if not answer:
            return Reason.EMPTY_ANSWER
        if reference is None:
            return Reason.NO_REFERENCE
        if fmt.reason in NO_ACCURACY_FORMATS:
            return Reason(fmt.reason)
        if (
            self.settings.accuracy_requires_format
            and fmt.score < FORMAT_MAX
            and fmt.reason not in JUDGED_FAULTS
        ):
            return Reason.FORMAT_NOT_MET
        return None

    def _answer(self, parsed: Parsed) -> str:
        """The final answer, unwrapped: a boxed answer with the text after it when that text
        states a value or refuses one ("\\boxed{18} dollars", "\\boxed{7} or more",
        "\\boxed{9}, but that is wrong"): read as one answer. Text that does neither ("I hope it
        is correct.") is left out, as it is after an answer block."""
        answer = parsed.answer or ""
        tail = _shorten(parsed.tail)
        if tail:
            if len(tail) > self._max_chars:
                # Too long to read with the box: it joins the answer (then too long itself)
                # when it holds anything like a value, as text after an answer block does.
                joins = _ANY_VALUE.search(tail) is not None
            else:
                joins = reading.joins_answer(tail)
            if joins:
                answer = f"{answer} {tail}"
        return self._unwrapped(answer)

    def _unwrapped(self, written: str) -> str:
        """``unwrap_math`` of an answer as written, after its whitespace runs are shortened;
        one too long to be an answer is returned as written (the cost guard refuses it)."""
        written = _shorten(written)
        if len(written) > RAW_ANSWER_FACTOR * self._max_chars:
            return written.strip()
        return unwrap_math(written)

    def _precheck(self, answer: str, reference: str) -> Check:
        try:
            return self.verifier.precheck(answer, reference)
        except Exception as exc:
            self.errors.report("check", exc)
            return Verdict(False, Reason.CHECK_ERROR)

    def _followups(
        self, parsed: Parsed, answer: str, reference: str
    ) -> tuple[Reason | None, tuple[Check, ...], Check | None]:
        """What the rest of the response says about an answer that may be right: words before
        a boxed answer that hedge or negate it (the refusal), other final answers that must
        state its value (their checks), text after an answer block that may give another
        answer (its check)."""
        if not (parsed.lead or parsed.others or parsed.after):
            return None, (), None  # the paper format's answer block, alone
        lead = _shorten(parsed.lead)[-self._max_chars :]  # the words nearest the box
        refused = reading.refusal(lead) if lead.strip() else None
        if refused is not None:
            return refused, (), None
        values = dict.fromkeys(self._unwrapped(other) for other in parsed.others)
        values.pop(answer, None)
        if len(values) > MAX_OTHER_ANSWERS:
            return None, (Verdict(False, Reason.SEVERAL_ANSWERS),), None
        others = tuple(self._precheck(value, reference) for value in values)
        trailing = _shorten(parsed.after).strip()
        if not trailing:
            return None, others, None
        if len(trailing) > self._max_chars:
            # Too long to read as one answer: refused when it holds anything like a value.
            if _ANY_VALUE.search(trailing):
                return None, others, Verdict(False, Reason.ANSWER_NOT_LAST)
            return None, others, None
        if not reading.states_value(trailing):
            return None, others, None
        return None, others, self._precheck(trailing, reference)

    async def judge(
        self, item: ItemRead, deadline: float | None = None, client: Hashable = None
    ) -> ItemScore:
        """The item's score once its checks are resolved (``deadline``: see ``score``)."""
        reason = item.reason
        equal = False
        if reason is None:
            assert item.check is not None
            verdict = item.check
            if not isinstance(verdict, Verdict):
                verdict = await self._resolve(verdict, deadline, client)
            if verdict.equal and (item.refused or item.others or item.trailing):
                verdict = await self._committed(item, verdict, deadline, client)
            equal, reason = verdict.equal, verdict.reason
        accuracy = ACCURACY_CORRECT if equal else 0.0
        return ItemScore(
            response=item.response,
            response_format=item.response_format,
            answer=item.answer,
            reference=item.reference,
            format_score=item.format.score,
            format_reason=item.format.reason,
            accuracy_score=accuracy,
            reason=reason,
            reward=item.format.score + accuracy,
        )

    async def _resolve(self, check: Check, deadline: float | None, client: Hashable) -> Verdict:
        try:
            return await self.verifier.resolve(check, deadline, client)
        except Exception as exc:
            self.errors.report("check", exc)
            return Verdict(False, Reason.CHECK_ERROR)

    async def _committed(
        self, item: ItemRead, verdict: Verdict, deadline: float | None, client: Hashable
    ) -> Verdict:
        """The verdict of a right answer, unless the rest of the response takes it back (see
        ``_followups``); a check among these that could not finish makes the item's verdict
        not computed either."""
        if item.refused is not None:
            return Verdict(False, item.refused)
        for other in item.others:
            again = await self._resolve(other, deadline, client)
            if again.reason in NOT_COMPUTED or again.reason == Reason.CHECK_ERROR:
                return again
            if not again.equal:
                return Verdict(False, Reason.SEVERAL_ANSWERS)
        if item.trailing is None:
            return verdict
        again = await self._resolve(item.trailing, deadline, client)
        if again.equal or again.reason in _TRAILING_NEUTRAL:
            return verdict if again.equal or again.reason == Reason.PROSE_IN_ANSWER else again
        return Verdict(False, Reason.ANSWER_NOT_LAST)


def _shorten(text: str) -> str:
    """``text`` with every whitespace run longer than ``LONGEST_WHITESPACE_RUN`` made one space
    (one newline when it holds one)."""
    if len(text) <= LONGEST_WHITESPACE_RUN:
        return text
    return _LONG_WHITESPACE.sub(lambda m: "\n" if "\n" in m.group() else " ", text)


def _pair_chars(pair: tuple[str, str]) -> int:
    return len(pair[0]) + len(pair[1])


def _row_chars(row: tuple[str, str | None, Label]) -> int:
    query, prompt, label = row
    return len(query) + len(prompt or "") + (len(label) if isinstance(label, str) else 0)
