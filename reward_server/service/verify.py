"""Answer equivalence as a service: the checker's decision in the server process
(``checker.grade.equivalent``: the cost guard, each answer read once, the exact comparisons),
and what it leaves to sympy in a killable process pool (``checker.symbolic``, worker
processes); the verifier joins them with a cache and single-flight.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable

from reward_server.checker.compare import Verdict
from reward_server.checker.grade import Limits, equivalent
from reward_server.checker.pending import SymbolicCheck
from reward_server.protocol import NOT_COMPUTED, Reason
from reward_server.service.pool import CAUSE_CPU, Job, PoolResult, VerifierPool

log = logging.getLogger(__name__)

_TIMEOUTS_REMEMBERED = 10_000  # checks that timed out once, waiting to see whether they repeat


class Verifier:
    """Equivalence with a fast path, an LRU cache and single-flight requests to the pool.

    The G completions of one prompt often repeat an answer and arrive concurrently: the cache
    serves repeats that finished, and single-flight makes concurrent repeats share one check.
    A check outlives a caller whose net passed (the pool's ``Job``): a retry of the answer joins
    it while it runs and finds its verdict cached once it ends.
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
        self._cache: OrderedDict[SymbolicCheck, PoolResult] = OrderedDict()
        self._cache_size = cache_size
        self._inflight: dict[SymbolicCheck, Job] = {}
        self._timed_out_once: OrderedDict[SymbolicCheck, None] = OrderedDict()
        self._max_chars = max_chars
        self._max_nesting = max_nesting
        self._on_cache = on_cache or (lambda hit: None)
        # (stage, exception name) of a check that raised in its worker, each time one does
        self._on_error = on_error or (lambda stage, error: None)

    def precheck(self, answer: str, reference: str) -> Verdict | SymbolicCheck:
        """The verdict when no symbolic check is needed (``grade.equivalent``), else the check
        the pool must decide."""
        return equivalent(answer, reference, Limits(self._max_chars, self._max_nesting))

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
        key: Verdict | SymbolicCheck,
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
        job = self._inflight.get(key)
        shared = job is not None
        self._on_cache(shared)
        if job is None:
            try:
                job = self._pool.submit(key, deadline=deadline, client=client)
            except Exception as exc:  # the pool is not running (not yet, or no more)
                log.warning("symbolic check not run: %s", exc)
                return Verdict(False, Reason.NO_VERIFIER)
            self._inflight[key] = job
            job.result.add_done_callback(functools.partial(self._finished, key))
        result = await self._pool.wait(job, deadline)
        return Verdict(
            result.equal, result.reason, cached=shared and result.reason not in NOT_COMPUTED
        )

    def _finished(self, key: SymbolicCheck, done: asyncio.Future[PoolResult]) -> None:
        """A check's job ended, whoever still waited for it: its verdict is cached (when it is
        one) for every later caller, a retry of one whose caller gave up at its net
        included."""
        if self._inflight.get(key) is not None and self._inflight[key].result is done:
            del self._inflight[key]
        if done.cancelled():
            return
        result = done.result()
        if result.error is not None:
            self._on_error("check", result.error)
        if self._cache_size > 0 and self._cacheable(key, result):
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _cacheable(self, key: SymbolicCheck, result: PoolResult) -> bool:
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
