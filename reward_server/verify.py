"""Answer equivalence: the cost guard, then each answer read once (``reading.py``), decided
(``decide``) with the exact comparisons (``compare.py``, server process), and what they leave
to math-verify in a killable process pool (``symbolic.py``, worker processes); the verifier
joins them with a cache and single-flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable

from reward_server import relations
from reward_server.compare import Verdict, equal_values, fast_equivalent
from reward_server.guard import bomb, complexity_violation
from reward_server.normalize import canonical
from reward_server.pool import CAUSE_CPU, PoolResult, VerifierPool
from reward_server.protocol import NOT_COMPUTED, Reason
from reward_server.reading import Refused, Statement, read_statement, statement
from reward_server.units import split_unit, units_differ

log = logging.getLogger(__name__)

_TIMEOUTS_REMEMBERED = 10_000  # pairs that timed out once, waiting to see whether they repeat


def symbolic_equivalent(answer: str, reference: str) -> tuple[bool, str]:
    """The pool's target: ``symbolic.symbolic_equivalent``, imported on first use so that the
    server process itself never loads sympy (workers have it preloaded by the forkserver)."""
    from reward_server import symbolic

    return symbolic.symbolic_equivalent(answer, reference)


class Verifier:
    """Equivalence with a fast path, an LRU cache and single-flight requests to the pool.

    The G completions of one prompt often repeat an answer and arrive concurrently: the cache
    serves repeats that finished, and single-flight makes concurrent repeats share one check.
    What is no verdict is never cached (``protocol.NOT_COMPUTED``: a lost worker, the wall-clock
    net, the queue; the machine's load, however often it happens), nor a pair's first timeout at
    its CPU budget (a stall must not stick); its second is: the answer itself hangs the parser (a
    LaTeX bomb a policy has learned to repeat), and every further repeat would cost a worker and
    a timeout. A check that raised in its worker (``check_error``) is the answer's doing, and
    cached like any verdict.
    """

    def __init__(
        self,
        pool: VerifierPool | None,
        *,
        cache_size: int = 100_000,
        max_chars: int = 1000,
        max_nesting: int = 40,
        on_cache: Callable[[bool], None] | None = None,
        on_error: Callable[[str, str], None] | None = None,
    ) -> None:
        self._pool = pool
        self._cache: OrderedDict[tuple[str, str], PoolResult] = OrderedDict()
        self._cache_size = cache_size
        self._inflight: dict[tuple[str, str], asyncio.Future[PoolResult]] = {}
        self._timed_out_once: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._max_chars = max_chars
        self._max_nesting = max_nesting
        self._on_cache = on_cache or (lambda hit: None)
        # (stage, exception name) of a check that raised in its worker, each time one does
        self._on_error = on_error or (lambda stage, error: None)

    def precheck(self, answer: str, reference: str) -> Verdict | tuple[str, str]:
        """The verdict when no symbolic check is needed (too big, refused by the answer policy,
        or decided exactly), else the (answer, reference) pair the pool must decide."""
        for text, who in ((answer, "answer"), (reference, "reference")):
            problem = complexity_violation(text, self._max_chars, self._max_nesting)
            problem = problem or bomb(text)  # the cost guard: no worker for a LaTeX bomb
            if problem is not None:
                return Verdict(False, Reason(f"{who}_{problem}"))
        reference_read = read_statement(reference, reference=True)
        assert isinstance(reference_read, Statement)  # a reference is never refused
        # A worded reference ("no solution") is compared as words, so its answers are never
        # read as sentences; nor is an answer spelled as the reference is.
        as_written = reference_read.words is not None or canonical(answer) == canonical(reference)
        answer_read = read_statement(answer, as_written=as_written)
        if isinstance(answer_read, Refused):
            return Verdict(False, answer_read.reason)
        return decide(answer_read, reference_read)

    async def check(
        self,
        answer: str,
        reference: str,
        *,
        deadline: float | None = None,
        client: Hashable = None,
    ) -> Verdict:
        """Verdict for one (answer, reference) pair; ``deadline`` (``time.perf_counter()``)
        bounds a symbolic check, waiting for a worker included (default: one timeout)."""
        return await self.resolve(self.precheck(answer, reference), deadline, client)

    async def resolve(
        self,
        key: Verdict | tuple[str, str],
        deadline: float | None = None,
        client: Hashable = None,
    ) -> Verdict:
        """The verdict of a ``precheck`` result: itself when it is one, else the symbolic
        check's (the cache, a check in flight, or the pool, where ``client`` waits its turn)."""
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
            result = await self._pool.run(key[0], key[1], deadline=deadline, client=client)
        except asyncio.CancelledError:
            fut.set_result(PoolResult(False, Reason.WORKER_ERROR))  # release the followers
            raise
        except Exception as exc:  # the pool is not running (not yet, or no more)
            log.warning("symbolic check not run: %s", exc)
            result = PoolResult(False, Reason.NO_VERIFIER)
        finally:
            self._inflight.pop(key, None)
        fut.set_result(result)
        if result.error is not None:
            self._on_error("check", result.error)
        if self._cache_size > 0 and self._cacheable(key, result):
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return Verdict(result.equal, result.reason)

    def _cacheable(self, key: tuple[str, str], result: PoolResult) -> bool:
        if result.reason in NOT_COMPUTED:
            return False  # the machine's state, not the answer's: ask again next time
        if result.reason != Reason.TIMEOUT or result.cause != CAUSE_CPU:
            return True
        if key in self._timed_out_once:
            del self._timed_out_once[key]
            return True
        self._timed_out_once[key] = None
        if len(self._timed_out_once) > _TIMEOUTS_REMEMBERED:
            self._timed_out_once.popitem(last=False)
        return False


def decide(answer: Statement, reference: Statement) -> Verdict | tuple[str, str]:
    """The verdict on two read answers, or the (answer, reference) pair left for the symbolic
    check (relations and units removed where they are decided here).

    In order: the answer policy (a worded reference is compared as words instead); a
    congruence's residue; an equation against an equation (the sides, when both name the same
    quantity) or against a value (every step of a calculation holds, the last side is the
    value); the units; the typed values (``compare.equal_values``)."""
    a, r = answer.text, reference.text
    if not a or not r:
        return Verdict(False, Reason.EMPTY_ANSWER if not a else Reason.NO_REFERENCE)
    if a == r:
        return Verdict(True, Reason.EQUIVALENT)
    if reference.words is None:
        if answer.refusal is not None:
            return Verdict(False, answer.refusal)
    elif answer.words is not None:
        return _verdict(answer.words == reference.words)
    if answer.congruence is not None:
        residue = relations.congruence_value(*answer.congruence)
        if residue is None:
            return a, r
        if residue == Reason.FALSE_EQUATION:
            return Verdict(False, Reason.FALSE_EQUATION)
        answer = statement(residue)
    if answer.sides is not None and reference.sides is not None:
        if len(answer.sides) == len(reference.sides) == 1:
            if not relations.same_quantity(answer.label, reference.label) or any(
                relations.relates_labels(x.label, y.label, y.sides)
                for x, y in ((answer, reference), (reference, answer))
            ):
                # "\cos x = ..." against "\sin x = ...", "y = x" against "x = y": whole relations
                return answer.text, r
            answer, reference = statement(answer.sides[0]), statement(reference.sides[0])
    elif answer.sides is not None:
        steps = relations.checked_steps(list(answer.sides))
        if any(fast_equivalent(left, right) is False for left, right in steps):
            return Verdict(False, Reason.FALSE_EQUATION)  # "13 = 12": not an answer
        if units_differ(answer.sides[-1], r):
            return Verdict(False, Reason.UNIT_MISMATCH)
        if not all(fast_equivalent(left, right) for left, right in steps):
            # "\\sqrt{9+16} = 5 cm": the pool checks every step, the last side without its unit
            return " = ".join([*answer.sides[:-1], split_unit(answer.sides[-1])[0]]), r
        answer = statement(answer.sides[-1])
    if answer.unit is not None and reference.unit is not None and answer.unit != reference.unit:
        return Verdict(False, Reason.UNIT_MISMATCH)
    if not answer.value.text or not reference.value.text:
        return _verdict(False)
    decided = equal_values(answer.value, reference.value)
    if decided is None:
        return answer.value_text, reference.value_text
    return _verdict(decided)


def _verdict(equal: bool) -> Verdict:
    return Verdict(equal, Reason.EQUIVALENT if equal else Reason.NOT_EQUIVALENT)


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
