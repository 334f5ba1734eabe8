"""Answer equivalence: exact normalisers first, then math-verify in a killable process pool.

The exact rules live in ``normalize.py`` (server process), the symbolic check in
``symbolic.py`` (worker processes); this module joins them with a cache and single-flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from reward_server import notation, policy, relations, sentence
from reward_server.guard import bomb, complexity_violation
from reward_server.normalize import canonical, fast_equivalent, text_form
from reward_server.numbers import parse_number
from reward_server.pool import PoolResult, VerifierPool
from reward_server.protocol import Reason
from reward_server.units import split_unit, units_differ

log = logging.getLogger(__name__)

_TIMEOUTS_REMEMBERED = 10_000  # pairs that timed out once, waiting to see whether they repeat


def symbolic_equivalent(answer: str, reference: str) -> tuple[bool, str]:
    """The pool's target: ``symbolic.symbolic_equivalent``, imported on first use so that the
    server process itself never loads sympy (workers have it preloaded by the forkserver)."""
    from reward_server import symbolic

    return symbolic.symbolic_equivalent(answer, reference)


@dataclass(frozen=True)
class Verdict:
    """``equal`` is True only for ``Reason.EQUIVALENT``; every other reason scores 0."""

    equal: bool
    reason: str  # a Reason value
    cached: bool = False


class Verifier:
    """Equivalence with a fast path, an LRU cache and single-flight requests to the pool.

    The G completions of one prompt often repeat an answer and arrive concurrently: the cache
    serves repeats that finished, and single-flight makes concurrent repeats share one check.
    Worker errors are not cached, nor is a pair's first timeout (a stall of an overloaded machine
    must not stick); its second timeout is: the answer itself hangs the parser (a LaTeX bomb a
    policy has learned to repeat), and every further repeat would cost a worker and a timeout.
    """

    def __init__(
        self,
        pool: VerifierPool | None,
        *,
        cache_size: int = 100_000,
        max_chars: int = 1000,
        max_nesting: int = 40,
        on_cache: Callable[[bool], None] | None = None,
    ) -> None:
        self._pool = pool
        self._cache: OrderedDict[tuple[str, str], PoolResult] = OrderedDict()
        self._cache_size = cache_size
        self._inflight: dict[tuple[str, str], asyncio.Future[PoolResult]] = {}
        self._timed_out_once: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._max_chars = max_chars
        self._max_nesting = max_nesting
        self._on_cache = on_cache or (lambda hit: None)

    def precheck(self, answer: str, reference: str) -> Verdict | tuple[str, str]:
        """The verdict when no symbolic check is needed (too big, refused by the answer policy,
        or decided exactly), else the (answer, reference) pair the pool must decide."""
        for text, who in ((answer, "answer"), (reference, "reference")):
            problem = complexity_violation(text, self._max_chars, self._max_nesting)
            problem = problem or bomb(text)  # the cost guard: no worker for a LaTeX bomb
            if problem is not None:
                return Verdict(False, Reason(f"{who}_{problem}"))
        read = read_answer(answer, reference)
        if isinstance(read, Verdict):
            return read
        return decide(canonical(read), canonical(_stated(reference)))

    async def check(self, answer: str, reference: str, *, deadline: float | None = None) -> Verdict:
        """Verdict for one (answer, reference) pair; ``deadline`` (``time.perf_counter()``)
        bounds a symbolic check, waiting for a worker included (default: one timeout)."""
        key = self.precheck(answer, reference)
        if isinstance(key, Verdict):
            return key
        if self._pool is None:
            return Verdict(False, Reason.NO_VERIFIER)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self._on_cache(True)
            return Verdict(hit.equal, hit.reason, cached=True)
        shared = self._inflight.get(key)
        if shared is not None:
            self._on_cache(True)
            result = await asyncio.shield(shared)
            return Verdict(result.equal, result.reason, cached=True)
        self._on_cache(False)
        fut: asyncio.Future[PoolResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            result = await self._pool.run(key[0], key[1], deadline=deadline)
        except asyncio.CancelledError:
            fut.set_result(PoolResult(False, Reason.WORKER_ERROR))  # release the followers
            raise
        except Exception:
            log.exception("verification failed")
            result = PoolResult(False, Reason.WORKER_ERROR)
        finally:
            self._inflight.pop(key, None)
        fut.set_result(result)
        if self._cache_size > 0 and self._cacheable(key, result):
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return Verdict(result.equal, result.reason)

    def _cacheable(self, key: tuple[str, str], result: PoolResult) -> bool:
        if result.reason in (Reason.WORKER_ERROR, Reason.QUEUE_TIMEOUT):
            return False  # the machine's state, not the answer's: ask again next time
        if result.reason != Reason.TIMEOUT:
            return True
        if key in self._timed_out_once:
            del self._timed_out_once[key]
            return True
        self._timed_out_once[key] = None
        if len(self._timed_out_once) > _TIMEOUTS_REMEMBERED:
            self._timed_out_once.popitem(last=False)
        return False


def read_answer(answer: str, reference: str) -> Verdict | str:
    """What the checker judges: the value a sentence states (``sentence.read``), or the answer
    itself when it is no sentence; a verdict when the sentence states no single value. A worded
    reference ("no solution") is compared as words, so its answers are never read as
    sentences. An answer written as JSON (``{"answer": 42}``) is the value it holds."""
    answer = notation.json_answer(answer)
    if not sentence.is_sentence(answer) or text_form(canonical(reference)) is not None:
        return answer
    if canonical(answer) == canonical(reference):
        return answer  # the reference's own words ("x \\text{ if } x > 0"): nothing to read
    reading = sentence.read(answer)
    if reading.value is None:
        return Verdict(False, reading.reason or Reason.PROSE_IN_ANSWER)
    return reading.value


def _stated(reference: str) -> str:
    """A reference written as a sentence stands for the value it states: /v1/equivalent
    compares two answers when ``gtpo eval`` groups maj@k votes ("18" and "Janet makes $18").
    A dataset label is not a sentence; one that states no single value is kept as written."""
    if not sentence.is_sentence(reference):
        return reference
    return sentence.read(reference).value or reference


def decide(answer: str, reference: str) -> Verdict | tuple[str, str]:
    """The answer policy, then the exact rules, on two canonical answers: a verdict, or the
    (value, value) pair left for the symbolic check (units and assignments removed)."""
    if not answer or not reference:
        return Verdict(False, Reason.EMPTY_ANSWER if not answer else Reason.NO_REFERENCE)
    if answer == reference:
        return Verdict(True, Reason.EQUIVALENT)
    worded = text_form(reference)
    if worded is None:
        problem = policy.word_problem(answer, numeric=parse_number(answer) is not None)
        if problem is not None:
            return Verdict(False, problem)
    elif text_form(answer) is not None:  # a worded reference ("no solution") is compared as words
        equal = text_form(answer) == worded
        return Verdict(equal, Reason.EQUIVALENT if equal else Reason.NOT_EQUIVALENT)
    congruence = relations.congruence(answer)
    if congruence is not None:
        decided = relations.congruence_value(*congruence)
        if decided is None:
            return answer, reference
        if decided == Reason.FALSE_EQUATION:
            return Verdict(False, decided)
        answer = decided
    sides = relations.equation_sides(answer)
    ref_sides = relations.equation_sides(reference)
    if sides is not None and ref_sides is not None and len(sides) == len(ref_sides) == 1:
        labels = relations.equation_label(answer), relations.equation_label(reference)
        if not relations.same_quantity(*labels):
            return answer, reference  # "\cos x = ..." against "\sin x = ...": whole relations
        answer, reference = sides[0], ref_sides[0]  # "y = 2x+1" against "f(x) = 2x+1"
    elif sides is not None and ref_sides is None:
        steps = relations.checked_steps(sides)
        if any(fast_equivalent(left, right) is False for left, right in steps):
            return Verdict(False, Reason.FALSE_EQUATION)  # "13 = 12": not an answer
        if units_differ(sides[-1], reference):
            return Verdict(False, Reason.UNIT_MISMATCH)
        if not all(fast_equivalent(left, right) for left, right in steps):
            # "\\sqrt{9+16} = 5 cm": the pool checks every step, the last side without its unit
            return " = ".join([*sides[:-1], split_unit(sides[-1])[0]]), reference
        answer = sides[-1]
    if units_differ(answer, reference):
        return Verdict(False, Reason.UNIT_MISMATCH)
    value, ref_value = split_unit(answer)[0], split_unit(reference)[0]
    decided = fast_equivalent(value, ref_value)
    if decided is None:
        return value, ref_value
    return Verdict(decided, Reason.EQUIVALENT if decided else Reason.NOT_EQUIVALENT)


def equivalent_inline(
    answer: str, reference: str, *, max_chars: int = 1000, max_nesting: int = 40
) -> Verdict:
    """The same decision as ``Verifier.check`` in this process, without the pool's timeout.

    Only for trusted inputs (tests, offline tools): an adversarial answer can run for minutes.
    """
    pair = Verifier(None, max_chars=max_chars, max_nesting=max_nesting).precheck(answer, reference)
    if isinstance(pair, Verdict):
        return pair
    equal, reason = symbolic_equivalent(*pair)
    return Verdict(equal, reason)
