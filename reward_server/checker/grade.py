"""The checker's front door: ``grade`` a response against a label in a response format,
``equivalent`` an answer to a reference, and ``commit`` a right answer against what the rest of
the response says about it.

Every rule of the accuracy reward lives behind these calls: where the answer is (the profile's
tags or its boxes), the format gates, a boxed answer read with the words around it, the raw
answer's length, the other final answers and the text after an answer block, which may take a
right answer back. What no exact rule decides comes back as ``pending.SymbolicCheck`` values
for the caller to resolve (the service: in its worker pool, with its deadlines and cache; the
offline tools: ``decide.symbolic_equivalent`` in process), and ``commit`` turns the resolved
verdicts into the item's verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reward_server.checker import reading
from reward_server.checker.compare import Verdict
from reward_server.checker.decide import precheck, symbolic_equivalent
from reward_server.checker.extract import extract_reference, unwrap_math
from reward_server.checker.format import (
    SEVERAL_ANSWERS,
    TEXT_AFTER_ANSWER,
    FormatResult,
    Parsed,
    parse,
)
from reward_server.checker.pending import SymbolicCheck
from reward_server.protocol import FORMAT_MAX, NOT_COMPUTED, Reason, ResponseFormat

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
_TRAILING_NEUTRAL = frozenset({Reason.PROSE_IN_ANSWER, Reason.TIMEOUT, Reason.CHECK_ERROR})
_TRAILING_NEUTRAL |= NOT_COMPUTED
_ANY_VALUE = re.compile(r"[\d$\\]")
# A whitespace run longer than this in an answer is one space (one newline when it holds one):
# a collapsing policy writes thousands, and an answer is read the same with one.
LONGEST_WHITESPACE_RUN = 16
_LONG_WHITESPACE = re.compile(rf"\s{{{LONGEST_WHITESPACE_RUN + 1},}}")
# An answer as written (its box and wrapping phrase included) longer than this many times the
# length cap is refused as too long before it is unwrapped: unwrapping only removes boxes and
# delimiters around the answer.
RAW_ANSWER_FACTOR = 2
# Other final answers (think, boxed) compared with the answer at most: more than this many
# distinct ones are several answers, whatever they state.
MAX_OTHER_ANSWERS = 16

Check = Verdict | SymbolicCheck  # a precheck's result: a verdict, or the pool's check

# The front door. ``symbolic_equivalent`` decides a ``SymbolicCheck`` (sympy, imported on first
# use: in the caller's verification workers, never in the server process).
__all__ = [
    "Check",
    "Grading",
    "Limits",
    "Rules",
    "commit",
    "equivalent",
    "grade",
    "symbolic_equivalent",
    "verdict_inline",
]


@dataclass(frozen=True)
class Limits:
    """The cost guard's caps: an answer's length (characters) and bracket nesting."""

    max_chars: int = 1000
    max_nesting: int = 40


@dataclass(frozen=True)
class Rules:
    """How a response is graded: its format profile, strict tags, and whether accuracy needs
    the full format (``accuracy_requires_format``)."""

    fmt: ResponseFormat
    strict: bool = False
    requires_format: bool = True
    limits: Limits = Limits()


@dataclass(frozen=True)
class Grading:
    """What grading one response found before any symbolic check: the format, the answer and
    the reference; the accuracy's reason when grading decided it (no answer, the format gate,
    an error: ``error`` says at which stage and what); otherwise the checks to resolve, the
    answer's (``check``) and, for an answer that may be right, what the rest of the response
    says about it (``refused``: words around a boxed answer refuse it; ``others``: the other
    final answers, each of which must state its value; ``trailing``: the text after an answer
    block)."""

    format: FormatResult
    answer: str | None
    reference: str | None
    reason: Reason | None = None
    check: Check | None = None
    refused: Reason | None = None
    others: tuple[Check, ...] = ()
    trailing: Check | None = None
    error: tuple[str, BaseException] | None = None

    @property
    def followups(self) -> bool:
        return self.refused is not None or bool(self.others) or self.trailing is not None


def equivalent(answer: str, reference: str, limits: Limits = Limits()) -> Check:
    """Whether an answer (as written) is a reference or a dataset label's answer: the verdict,
    or the symbolic check that decides it."""
    try:
        extracted = extract_reference(reference)
    except Exception as exc:
        raise _StageError("reference", exc) from exc
    if not answer.strip():
        return Verdict(False, Reason.EMPTY_ANSWER)
    if extracted is None:
        return Verdict(False, Reason.NO_REFERENCE)
    return _precheck(answer, extracted, limits)


class _StageError(Exception):
    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.cause = stage, cause


def equivalent_or_error(
    answer: str, reference: str, limits: Limits = Limits()
) -> tuple[Check, tuple[str, BaseException] | None]:
    """``equivalent``, with an exception the pair raised scored as that pair's reason
    (``reference_error``, ``check_error``) and returned with its stage for the caller to count."""
    try:
        return equivalent(answer, reference, limits), None
    except _StageError as failed:
        reason = Reason.REFERENCE_ERROR if failed.stage == "reference" else Reason.CHECK_ERROR
        return Verdict(False, reason), (failed.stage, failed.cause)


def grade(response: str, label: object, rules: Rules, *, prefilled: bool = False) -> Grading:
    """Grade a response (its trailing end-of-turn tokens removed) against a dataset label.
    ``prefilled``: the prompt ends with the format's opening reasoning tag. Never raises: an
    exception one stage raises is that response's reason (``answer_error``,
    ``reference_error``, ``check_error``), with the stage in ``error``."""
    fmt = rules.fmt
    try:
        parsed = parse(response, fmt, strict=rules.strict, prefilled=prefilled)
    except Exception as exc:
        no_format = FormatResult(0.0, "response_error")
        return Grading(no_format, None, None, Reason.ANSWER_ERROR, error=("response", exc))
    try:
        answer = None if parsed.answer is None else _answer(parsed, rules.limits)
    except Exception as exc:
        return Grading(parsed.format, None, None, Reason.ANSWER_ERROR, error=("answer", exc))
    try:
        reference = extract_reference(label)
    except Exception as exc:
        error = ("reference", exc)
        return Grading(parsed.format, answer, None, Reason.REFERENCE_ERROR, error=error)
    reason = _gate(parsed.format, answer, reference, rules.requires_format)
    if reason is not None:
        return Grading(parsed.format, answer, reference, reason)
    assert answer is not None and reference is not None
    try:
        check = _precheck(answer, reference, rules.limits)
        if isinstance(check, Verdict) and not check.equal:  # wrong: nothing else to read
            return Grading(parsed.format, answer, reference, check=check)
        refused, others, trailing = _followups(parsed, answer, reference, rules.limits)
    except _StageError as failed:
        error = (failed.stage, failed.cause)
        return Grading(parsed.format, answer, reference, Reason.CHECK_ERROR, error=error)
    except Exception as exc:
        return Grading(parsed.format, answer, reference, Reason.CHECK_ERROR, error=("check", exc))
    return Grading(parsed.format, answer, reference, None, check, refused, others, trailing)


def commit(
    grading: Grading, verdict: Verdict, others: Sequence[Verdict], trailing: Verdict | None
) -> Verdict:
    """The verdict of a graded response, from its answer's verdict and the resolved verdicts
    of its other final answers and its trailing text: a right answer stands unless a refusal,
    another final answer with another value, or trailing text that states another value takes
    it back; a check among these that could not finish makes the verdict not computed too."""
    if not verdict.equal or not grading.followups:
        return verdict
    if grading.refused is not None:
        return Verdict(False, grading.refused)
    for other in others:
        if other.reason in NOT_COMPUTED or other.reason == Reason.CHECK_ERROR:
            return other
        if not other.equal:
            return Verdict(False, Reason.SEVERAL_ANSWERS)
    if trailing is None:
        return verdict
    if trailing.equal or trailing.reason == Reason.PROSE_IN_ANSWER:
        return verdict
    if trailing.reason in _TRAILING_NEUTRAL:
        return trailing
    return Verdict(False, Reason.ANSWER_NOT_LAST)


def verdict_inline(grading: Grading) -> Verdict:
    """A grading's verdict with its checks resolved in this process, without the pool's budget:
    only for trusted inputs (tests, offline tools), as ``decide.equivalent_inline``."""
    if grading.reason is not None:
        return Verdict(False, grading.reason)

    def resolve(check: Check) -> Verdict:
        return check if isinstance(check, Verdict) else Verdict(*symbolic_equivalent(check))

    assert grading.check is not None
    verdict = resolve(grading.check)
    others = [resolve(other) for other in grading.others]
    trailing = resolve(grading.trailing) if grading.trailing is not None else None
    return commit(grading, verdict, others, trailing)


# ------------------------------------------------------------------ the rules


def _gate(
    fmt: FormatResult, answer: str | None, reference: str | None, requires_format: bool
) -> Reason | None:
    """The accuracy's reason when there is nothing to check."""
    if answer is None:
        return Reason.NO_ANSWER_BLOCK
    if not answer:
        return Reason.EMPTY_ANSWER
    if reference is None:
        return Reason.NO_REFERENCE
    if fmt.reason in NO_ACCURACY_FORMATS:
        return Reason(fmt.reason)
    if requires_format and fmt.score < FORMAT_MAX and fmt.reason not in JUDGED_FAULTS:
        return Reason.FORMAT_NOT_MET
    return None


def _answer(parsed: Parsed, limits: Limits) -> str:
    """The final answer, unwrapped: a boxed answer with the text after it when that text
    states a value or refuses one ("\\boxed{18} dollars", "\\boxed{7} or more",
    "\\boxed{9}, but that is wrong"): read as one answer. Text that does neither ("I hope it
    is correct.") is left out, as it is after an answer block."""
    answer = parsed.answer or ""
    tail = shorten(parsed.tail)
    if tail:
        if len(tail) > limits.max_chars:
            # Too long to read with the box: it joins the answer (then too long itself) when it
            # holds anything like a value, as text after an answer block does.
            joins = _ANY_VALUE.search(tail) is not None
        else:
            joins = reading.joins_answer(tail)
        if joins:
            answer = f"{answer} {tail}"
    return _unwrapped(answer, limits)


def _unwrapped(written: str, limits: Limits) -> str:
    """``unwrap_math`` of an answer as written, after its whitespace runs are shortened; one too
    long to be an answer is returned as written (the cost guard refuses it)."""
    written = shorten(written)
    if len(written) > RAW_ANSWER_FACTOR * limits.max_chars:
        return written.strip()
    return unwrap_math(written)


def _precheck(answer: str, reference: str, limits: Limits) -> Check:
    try:
        return precheck(
            answer, reference, max_chars=limits.max_chars, max_nesting=limits.max_nesting
        )
    except Exception as exc:
        raise _StageError("check", exc) from exc


def _followups(
    parsed: Parsed, answer: str, reference: str, limits: Limits
) -> tuple[Reason | None, tuple[Check, ...], Check | None]:
    """What the rest of the response says about an answer that may be right: words before a
    boxed answer that hedge or negate it (the refusal), other final answers that must state its
    value (their checks), text after an answer block that may give another answer (its
    check)."""
    if not (parsed.lead or parsed.others or parsed.after):
        return None, (), None  # the paper format's answer block, alone
    lead = shorten(parsed.lead)[-limits.max_chars :]  # the words nearest the box
    refused = reading.refusal(lead) if lead.strip() else None
    if refused is not None:
        return refused, (), None
    values = dict.fromkeys(_unwrapped(other, limits) for other in parsed.others)
    values.pop(answer, None)
    if len(values) > MAX_OTHER_ANSWERS:
        return None, (Verdict(False, Reason.SEVERAL_ANSWERS),), None
    others = tuple(_precheck(value, reference, limits) for value in values)
    trailing = shorten(parsed.after).strip()
    if not trailing:
        return None, others, None
    if len(trailing) > limits.max_chars:
        # Too long to read as one answer: refused when it holds anything like a value.
        if _ANY_VALUE.search(trailing):
            return None, others, Verdict(False, Reason.ANSWER_NOT_LAST)
        return None, others, None
    if not reading.states_value(trailing):
        return None, others, None
    return None, others, _precheck(trailing, reference, limits)


def shorten(text: str) -> str:
    """``text`` with every whitespace run longer than ``LONGEST_WHITESPACE_RUN`` made one space
    (one newline when it holds one)."""
    if len(text) <= LONGEST_WHITESPACE_RUN:
        return text
    return _LONG_WHITESPACE.sub(lambda m: "\n" if "\n" in m.group() else " ", text)
