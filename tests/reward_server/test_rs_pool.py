"""The killable verification pool, the verdict cache and single-flight (real worker processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from deadline_harness import paced_check  # tests/reward_server/, on sys.path (conftest.py)
from reliability_harness import HANG, forkserver_pid

from reward_server.checker.decide import symbolic_equivalent
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.syntax import parse
from reward_server.checker.values import value_of
from reward_server.protocol import NOT_COMPUTED
from reward_server.service.metrics import Metrics
from reward_server.service.pool import VerifierPool
from reward_server.service.verify import Verifier


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited all the same.
    return _state(pid) not in ("Z", "X")


def _state(pid: int) -> str:
    """The process's state letter in /proc (R running, S sleeping, T stopped, Z zombie), or
    "X" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "X"


def _worker_pids(pool: VerifierPool) -> set[int]:
    """The pool's worker processes, read under its lock (its threads start and kill them)."""
    with pool._procs_lock:
        return {p.pid for p in pool._procs}


def _live_workers(pool: VerifierPool) -> int:
    return len([pid for pid in _worker_pids(pool) if _alive(pid)])


# The reason a check's timeout carries, by its cause: its CPU budget (the answer's own cost, a
# verdict) or the wall-clock net (the machine's load: no verdict).
REASON_OF_CAUSE = {"cpu": "timeout", "wall": "wall_timeout"}


def _far(s: float = 30.0) -> float:
    """A caller's deadline that puts the wall-clock net ``s`` seconds away: only the CPU budget
    can end the check, however busy the machine (a starved worker on a loaded machine reached
    a 0.6 s net before a 0.3 s budget, and the test asserted which came first)."""
    return time.perf_counter() + s


def _symbolic(answer: str, reference: str) -> SymbolicCheck:
    """A check as the exact rules leave it to the worker: the two answers' values."""
    return SymbolicCheck(value_of(parse(answer)), value_of(parse(reference)))


def _pool(**kw) -> VerifierPool:
    restarts: list[str] = kw.pop("restarts", [])
    return VerifierPool(
        kw.pop("target", symbolic_equivalent),
        size=kw.pop("size", 2),
        timeout_s=kw.pop("timeout_s", 1.0),
        hang_answer=_symbolic(HANG, "1").answer,
        on_restart=restarts.append,
        **kw,
    )


def test_hung_check_is_killed_and_replaced_while_others_are_served() -> None:
    restarts: list[str] = []
    causes: list[str] = []

    async def main() -> None:
        # The hang spins (as a stuck sympy call does): its CPU budget ends it, or on a very busy
        # machine the wall-clock net, 2.5 s after it arrived.
        pool = _pool(restarts=restarts, timeout_s=1.0, wall_timeout_s=2.5, on_timeout=causes.append)
        await pool.start()
        try:
            before = _worker_pids(pool)
            t0 = time.perf_counter()
            hung = asyncio.create_task(pool.run(_symbolic(HANG, "1")))
            # Meanwhile the other worker keeps answering real symbolic checks.
            answered = []
            for k in range(2, 12):
                res = await pool.run(_symbolic(f"\\sqrt{{{k * k}}}", str(k)))
                answered.append((res.equal, time.perf_counter() - t0))
            result = await hung
            elapsed = time.perf_counter() - t0
            # The reason carries the cause: the budget (a verdict) or the net (none).
            assert causes and (result.equal, result.reason) == (False, REASON_OF_CAUSE[causes[0]])
            assert 1.0 <= elapsed < 3.0
            assert all(eq for eq, _ in answered)
            assert max(t for _, t in answered) < 1.0, "healthy checks waited for the hung one"
            await asyncio.sleep(0)  # let the slot finish replacing its worker
            for _ in range(100):
                if len(pool._procs) == 2 and _worker_pids(pool) != before:
                    break
                await asyncio.sleep(0.05)
            after = _worker_pids(pool)
            assert len(after) == 2 and len(before & after) == 1
            killed = (before - after).pop()
            assert not _alive(killed)
            # The replacement works.
            assert (await pool.run(_symbolic("\\frac{2}{4}", "0.5"))).equal
        finally:
            await pool.close()
        assert len(restarts) == 1, restarts
        # Answered at its budget, the worker ended there. Answered at the net (a busy machine),
        # the check runs on: its budget ends it ("timeout", its own cause counted too), or,
        # starved of CPU, the hang guard does ("wall_timeout").
        if causes[0] == "cpu":
            assert (causes, restarts) == (["cpu"], ["timeout"])
        elif causes == ["wall", "cpu"]:
            assert restarts == ["timeout"]
        else:
            assert causes == ["wall"] and restarts[0] in ("timeout", "wall_timeout"), restarts

    asyncio.run(main())


def test_adversarial_answers_return_false_within_the_timeout() -> None:
    async def main() -> None:
        pool = _pool(timeout_s=1.0, wall_timeout_s=2.0, memory_mb=1024)
        await pool.start()
        verifier = Verifier(pool)
        try:
            for answer in ("10^{10^{10^{10}}}", "9^{9^{9^{9^{9}}}}", "(10^{10^{10}})!", "x" * 900):
                t0 = time.perf_counter()
                verdict = await verifier.check(answer, "1")
                assert not verdict.equal, (answer, verdict)
                assert time.perf_counter() - t0 < 2.5, answer
            # ...and the pool still serves afterwards.
            assert (await verifier.check("\\sqrt{4}", "2")).equal
        finally:
            await pool.close()

    asyncio.run(main())


def test_cache_and_single_flight_share_one_check() -> None:
    lookups: list[bool] = []
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(restarts=restarts, timeout_s=0.5, wall_timeout_s=1.0)
        await pool.start()
        verifier = Verifier(pool, on_cache=lookups.append)  # hangs: a far net (see _far)
        try:
            # A group of 8 completions with the same answer, arriving together.
            group = await asyncio.gather(
                *(verifier.check("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt2}") for _ in range(8))
            )
            assert all(v.equal for v in group)
            assert lookups.count(False) == 1 and lookups.count(True) == 7
            again = await verifier.check("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt2}")
            assert again.equal and again.cached
            # Numbers never reach the pool or the cache.
            assert (await verifier.check("1,000", "1000")).equal
            assert len(lookups) == 9
            # A first timeout is not cached (it may be a stall): the same hang is checked (and
            # killed) again; after its second timeout it is the answer's fault, and cached.
            first = await verifier.check(HANG, "1", deadline=_far())
            second = await verifier.check(HANG, "1", deadline=_far())
            assert first.reason == second.reason == "timeout" and not second.cached
            t0 = time.perf_counter()
            third = await verifier.check(HANG, "1", deadline=_far())
            assert third.reason == "timeout" and third.cached and not third.equal
            assert time.perf_counter() - t0 < 0.1
            # Another hang is still checked on its own.
            assert not (await verifier.check(HANG, "2", deadline=_far())).cached
        finally:
            await pool.close()
        assert restarts == ["timeout", "timeout", "timeout"]

    asyncio.run(main())


def test_a_timeout_at_the_wall_net_is_never_cached() -> None:
    """A check that the wall-clock net ends (here one that waits without using CPU, as a check
    starved of CPU on a busy machine does) timed out because of the machine's load: caching it
    after two such timeouts scored that answer 0 for the rest of the run, however quiet the
    machine became. Only timeouts at the CPU budget (the answer's own cost) may stick, after
    the second. Each asserts what its cause says, not which limit a starved process met first."""
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(target=paced_check, restarts=restarts, timeout_s=0.3, wall_timeout_s=0.6)
        await pool.start()
        verifier = Verifier(pool)
        try:
            verdicts = [await verifier.check("sleep:100", "sleep:1") for _ in range(3)]
            assert [v.reason for v in verdicts] == ["wall_timeout"] * 3, verdicts
            assert not any(v.cached for v in verdicts), verdicts
            # The CPU budget's timeouts still stick after the second (a net 30 s away: only
            # the budget can end these, on a machine however busy).
            burns = [await verifier.check("burn:inf", "burn:1", deadline=_far()) for _ in range(3)]
            assert [(v.reason, v.cached) for v in burns] == [
                ("timeout", False),
                ("timeout", False),
                ("timeout", True),
            ], burns
        finally:
            await pool.close()
        # each hang's worker was killed (a retry arriving as it died joined its check)
        assert set(restarts[:-2]) == {"wall_timeout"} and restarts[-2:] == ["timeout"] * 2

    asyncio.run(main())


def test_close_kills_every_worker_and_rejects_new_work() -> None:
    async def main() -> None:
        pool = _pool(size=2)
        await pool.start()
        pids = list(_worker_pids(pool))
        hung = asyncio.create_task(pool.run(_symbolic(HANG, "1")))
        await asyncio.sleep(0.2)
        await pool.close()
        assert (await hung).equal is False
        assert not any(_alive(pid) for pid in pids)
        try:
            await pool.run(_symbolic("1", "1"))
        except RuntimeError:
            pass
        else:
            raise AssertionError("a closed pool accepted work")

    asyncio.run(main())


def test_workers_are_recycled_after_max_tasks() -> None:
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(size=1, max_tasks=3, restarts=restarts)
        await pool.start()
        try:
            for k in range(7):
                assert (await pool.run(_symbolic(f"\\sqrt{{{(k + 2) ** 2}}}", str(k + 2)))).equal
        finally:
            await pool.close()

    asyncio.run(main())
    assert restarts == ["recycle", "recycle"]


def _new_worker(pool: VerifierPool, old: set[int]) -> int:
    """Wait for a worker that is not in ``old`` (a replacement) and return its pid."""
    for _ in range(200):
        fresh = _worker_pids(pool) - old
        if fresh:
            return fresh.pop()
        time.sleep(0.01)
    raise AssertionError("no replacement worker started")


def test_an_idle_worker_killed_from_outside_is_replaced_at_once() -> None:
    restarts: list[str] = []
    reruns: list[None] = []
    sizes: list[int] = []

    async def main() -> None:
        pool = _pool(
            size=2, restarts=restarts, on_rerun=lambda: reruns.append(None), on_size=sizes.append
        )
        await pool.start()
        try:
            before = _worker_pids(pool)
            victim = next(iter(before))
            os.kill(victim, 9)  # e.g. the kernel's OOM killer
            # Replaced without waiting for work to reach the dead worker.
            fresh = await asyncio.to_thread(_new_worker, pool, before)
            assert not _alive(victim) and fresh != victim
            for _ in range(100):
                if len(pool._procs) == 2:
                    break
                await asyncio.sleep(0.01)
            assert _worker_pids(pool) == (before - {victim}) | {fresh}
            results = [await pool.run(_symbolic(f"\\sqrt{{{k * k}}}", str(k))) for k in range(2, 8)]
            assert all(r.equal and r.reason == "equivalent" for r in results), results
        finally:
            await pool.close()
        assert restarts == ["worker_error"] and reruns == []
        # The live-worker count: 1, 2 at start; 1 then 2 again after the kill; 0 after close.
        assert sizes[:4] == [1, 2, 1, 2] and sizes[-1] == 0, sizes

    asyncio.run(main())


def test_the_size_gauge_ends_at_the_live_count_when_workers_start_together() -> None:
    """After the forkserver dies every worker is replaced at once, from several threads. The
    gauge must end at the number of live workers whatever order those threads report in: one
    reporting a stale count last left the gauge short of a whole pool (the reliability suite
    then waited for full size in vain)."""
    sizes: list[int] = []
    first_report = threading.Event()

    def on_size(live: int) -> None:
        if not first_report.is_set():
            first_report.set()
            time.sleep(0.3)  # the first thread to count is the last to report, unless serialised
        sizes.append(live)

    pool = _pool(size=2, on_size=on_size)
    threads = [threading.Thread(target=pool._spawn) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(pool._procs) == 2
        assert sizes[-1] == 2, sizes
    finally:
        asyncio.run(pool.close())


def test_a_forkserver_that_dies_while_starting_a_worker_is_started_again() -> None:
    """Workers are forked by the multiprocessing forkserver. One that dies while a slot waits
    on it for a new worker (killed, as the reliability suite does under load) made that start
    raise EOFError, which the slot did not retry: the slot ended and the pool stayed one worker
    short for good. Here the forkserver is stopped the moment a recycled worker is gone, so the
    slot's start of its replacement waits on it, and then killed, so that start fails."""
    stop_forkserver_at_next_drop: list[int] = []  # the forkserver's pid, once armed

    def on_size(live: int) -> None:
        if live == 1 and stop_forkserver_at_next_drop:
            os.kill(stop_forkserver_at_next_drop.pop(), signal.SIGSTOP)

    async def main() -> None:
        pool = _pool(size=2, max_tasks=1, on_size=on_size)
        await pool.start()
        try:
            server = forkserver_pid(os.getpid())
            assert server is not None
            stop_forkserver_at_next_drop.append(server)
            # The worker answers, is recycled, and its slot asks the stopped forkserver for a
            # replacement.
            assert (await pool.run(_symbolic("\\frac{2}{4}", "0.5"))).equal
            for _ in range(100):
                if not stop_forkserver_at_next_drop:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            assert _state(server) == "T"  # stopped, with a start waiting on it
            os.kill(server, signal.SIGKILL)  # the other worker dies with it (its death signal)
            for _ in range(200):
                if _live_workers(pool) == 2:
                    break
                await asyncio.sleep(0.05)
            assert _live_workers(pool) == 2
            assert all(not slot.done() for slot in pool._slots), "a dispatch slot ended"
            results = [await pool.run(_symbolic(f"\\sqrt{{{k * k}}}", str(k))) for k in range(2, 8)]
            assert all(r.equal for r in results), results
        finally:
            await pool.close()

    asyncio.run(main())


def test_a_slot_that_fails_is_logged_and_replaced(caplog: pytest.LogCaptureFixture) -> None:
    """Every loss of a worker is handled inside its dispatch slot; an error that escapes one
    anyway (a defect, here injected into one check) must not leave the pool a worker short for
    the rest of its life, silently."""

    async def main() -> None:
        pool = _pool(size=2)
        await pool.start()
        real_check = pool._check
        failures = iter([RuntimeError("a defect in dispatch")])

        async def failing_once(worker, job):
            for exc in failures:
                raise exc
            return await real_check(worker, job)

        pool._check = failing_once
        try:
            first = await pool.run(_symbolic("\\frac{2}{4}", "0.5"))
            assert (first.equal, first.reason) == (False, "worker_error")  # its caller answered
            for _ in range(200):
                if _live_workers(pool) == 2:
                    break
                await asyncio.sleep(0.05)
            assert _live_workers(pool) == 2
            assert sum(not slot.done() for slot in pool._slots) == 2
            results = await asyncio.gather(
                *(pool.run(_symbolic(f"\\sqrt{{{k * k}}}", str(k))) for k in range(2, 10))
            )
            assert all(r.equal for r in results), results
        finally:
            await pool.close()

    with caplog.at_level("ERROR", logger="reward_server.service.pool"):
        asyncio.run(main())
    assert "a verification slot failed" in caplog.text and "a defect in dispatch" in caplog.text


def test_a_busy_worker_killed_runs_the_check_again_within_the_wall_net() -> None:
    """A worker killed in the middle of a check: the check runs again on the replacement. An
    answer whose every run loses its worker gets no more time than the wall-clock net in all,
    then scores 0 as ``worker_error``."""
    restarts: list[str] = []
    reruns: list[None] = []

    async def main() -> None:
        # A check that waits (no CPU): only the 2 s net from its arrival can end it.
        pool = _pool(
            target=paced_check,
            size=1,
            timeout_s=1.0,
            wall_timeout_s=2.0,
            restarts=restarts,
            on_rerun=lambda: reruns.append(0),
        )
        await pool.start()
        try:
            seen = _worker_pids(pool)
            pid = next(iter(seen))
            t0 = time.perf_counter()
            hung = asyncio.create_task(pool.run(SymbolicCheck("sleep:100", "1")))
            kills = 0
            while kills < 20:  # kill whichever worker holds the check, every 0.3 s
                await asyncio.sleep(0.3)
                if hung.done():
                    break
                os.kill(pid, 9)
                kills += 1
                pid = await asyncio.to_thread(_new_worker, pool, seen)
                seen.add(pid)
            result = await hung
            elapsed = time.perf_counter() - t0
            # Each run lived 0.3 s: stopped by the answer's net, 2 s after it arrived (its
            # caller's wait and the last run end together). How many kills fit in the net
            # depends on how fast a busy machine starts replacements (2 beside two CPU-bound
            # processes, 3-6 quiet): at least one, and no more time than the net.
            assert not result.equal and result.reason in ("worker_error", "wall_timeout"), result
            assert 2.0 <= elapsed < 2.5 and 1 <= kills < 10, (elapsed, kills)
            # Each kill cost a restart and a re-run; the run alive at the deadline is killed too.
            assert restarts[:kills] == ["worker_error"] * kills, restarts
            assert set(restarts[kills:]) <= {"wall_timeout"} and len(reruns) in (kills - 1, kills)
            # The pool is whole again and serves.
            assert (await pool.run(SymbolicCheck("burn:0.01", "burn:0.01"))).equal
            assert len(pool._procs) == 1
        finally:
            await pool.close()

    asyncio.run(main())


def test_the_wall_net_runs_from_arrival_not_from_when_a_worker_is_free() -> None:
    """Five checks that wait forever, queued on one worker: each caller has its answer within
    the net (+0.5 s) of its arrival, not after the checks queued before it ran out their own
    (5 s for the last one if the net started at pick-up)."""

    async def main() -> None:
        pool = _pool(target=paced_check, size=1, timeout_s=0.5, wall_timeout_s=1.0)
        await pool.start()
        try:
            t0 = time.perf_counter()

            async def timed() -> tuple[str, float]:
                result = await pool.run(SymbolicCheck("sleep:100", "1"))
                return result.reason, time.perf_counter() - t0

            results = await asyncio.gather(*(timed() for _ in range(5)))
            assert max(t for _, t in results) < 1.5, results
            # The first held the worker; the rest never got one: not the answer's fault.
            assert sorted(r for r, _ in results) == ["queue_timeout"] * 4 + ["wall_timeout"]
            # The replacement serves at once. A caller's deadline is one CPU budget after the
            # answer arrived (what the routes pass): an answer that arrived 0.3 s ago has
            # 0.7 s of its net left.
            for _ in range(100):
                if len(pool._procs) == 1 and pool._slots and pool.ready:
                    break
                await asyncio.sleep(0.05)
            t1 = time.perf_counter()
            late = await pool.run(SymbolicCheck("sleep:100", "1"), deadline=t1 - 0.3 + 0.5)
            assert late.reason == "wall_timeout" and 0.6 < time.perf_counter() - t1 < 1.2
        finally:
            await pool.close()

    asyncio.run(main())


def test_a_check_slowed_for_want_of_cpu_keeps_its_verdict_until_the_wall_net() -> None:
    """Waiting for a CPU uses none of the check's budget: a check that takes twice its CPU
    budget in wall time without using CPU gets its verdict (a wall-clock timeout of 0.5 s
    would have killed it); one that never ends is stopped by the wall-clock net."""
    causes: list[str] = []
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(
            target=paced_check,
            size=1,
            timeout_s=0.5,
            wall_timeout_s=3.0,
            on_timeout=causes.append,
            restarts=restarts,
        )
        await pool.start()
        try:
            slow = await pool.run(SymbolicCheck("sleep:1.0", "sleep:1.0"))
            assert (slow.equal, slow.reason) == (True, "equivalent")
            t0 = time.perf_counter()
            stuck = await pool.run(SymbolicCheck("sleep:100", "sleep:100"))
            assert (stuck.equal, stuck.reason) == (False, "wall_timeout")
            assert time.perf_counter() - t0 >= 3.0  # never cut before the net
            # Its worker is replaced by its slot, which saw the same net pass: on a busy
            # machine a moment after the caller's answer (a pool closed first replaces nothing).
            waited = time.perf_counter()
            while not restarts and time.perf_counter() - waited < 10:
                await asyncio.sleep(0.05)
        finally:
            await pool.close()

    asyncio.run(main())
    assert causes == ["wall"] and restarts == ["wall_timeout"]


def test_a_check_starved_of_cpu_keeps_running_past_the_net_and_its_retry_gets_the_verdict() -> None:
    """Beside CPU-bound work, a check within its CPU budget can take longer than the wall-clock
    net: its caller gets ``wall_timeout`` (not computed: a 503 the client retries), but the
    check keeps running, and a retry made as OpenRLHF's client makes them (up to 5 tries, a
    second apart) joins it and gets its verdict. Killed at the net instead, every retry started
    it again from nothing and never finished."""
    restarts: list[str] = []

    async def main() -> list[tuple[str, bool]]:
        pool = _pool(
            target=paced_check, size=1, timeout_s=1.0, wall_timeout_s=1.2, restarts=restarts
        )
        await pool.start()
        verifier = Verifier(pool)
        tries = []
        try:
            for _ in range(5):  # 0.3 s of CPU, a tenth of the time: about 3 s of wall time
                verdict = await verifier.check("starve:0.3", "starve:0.30")
                tries.append((str(verdict.reason), verdict.cached))
                if verdict.reason not in NOT_COMPUTED:
                    break
                await asyncio.sleep(1.0)
        finally:
            await pool.close()
        return tries

    tries = asyncio.run(main())
    assert tries[0] == ("wall_timeout", False), tries
    assert tries[-1][0] == "not_equivalent", tries  # a verdict (the two are spelled apart)
    assert restarts == [], "the starved check was killed"


def test_a_check_that_burns_cpu_is_ended_at_its_cpu_budget() -> None:
    """A check under its CPU budget finishes; one over it is ended by its CPU time, well
    before a 60 s wall-clock net, and the pool serves on with a replacement."""
    causes: list[str] = []
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(
            target=paced_check,
            size=1,
            timeout_s=0.5,
            wall_timeout_s=60.0,
            on_timeout=causes.append,
            restarts=restarts,
        )
        await pool.start()
        try:
            within = await pool.run(SymbolicCheck("burn:0.2", "burn:0.2"))
            assert (within.equal, within.reason) == (True, "equivalent")
            over = await pool.run(SymbolicCheck("burn:inf", "burn:inf"))
            assert (over.equal, over.reason) == (False, "timeout")
            assert (await pool.run(SymbolicCheck("burn:0.01", "burn:0.01"))).equal
        finally:
            await pool.close()

    asyncio.run(main())
    assert causes == ["cpu"] and restarts == ["timeout"]


def test_a_real_slow_symbolic_answer_is_ended_at_its_cpu_budget() -> None:
    """sympy works on this sum (of numbers of up to 35,000 digits) for seconds of CPU time: its
    budget ends it, not the net."""
    causes: list[str] = []

    async def main() -> None:
        pool = _pool(size=1, timeout_s=0.5, wall_timeout_s=60.0, on_timeout=causes.append)
        await pool.start()
        try:
            result = await pool.run(_symbolic("\\sum_{k=1}^{9000} k^{k}", "1"))
            assert (result.equal, result.reason) == (False, "timeout")
        finally:
            await pool.close()

    asyncio.run(main())
    assert causes == ["cpu"]


def test_waiting_for_a_worker_does_not_count_against_the_budget() -> None:
    """Four checks of 0.3 s of CPU each, arriving together at one worker with a 0.5 s budget:
    the last waits about 0.9 s for the worker, and all four get their verdict."""

    async def main() -> None:
        pool = _pool(target=paced_check, size=1, timeout_s=0.5, wall_timeout_s=60.0)
        await pool.start()
        try:
            results = await asyncio.gather(
                *(pool.run(SymbolicCheck(f"burn:0.3{k}", f"burn:0.3{k}")) for k in range(4))
            )
            assert [(r.equal, r.reason) for r in results] == [(True, "equivalent")] * 4
        finally:
            await pool.close()

    asyncio.run(main())


def test_timeouts_are_counted_by_cause_in_the_metrics() -> None:
    metrics = Metrics()

    def count(cause: str) -> float | None:
        return metrics.registry.get_sample_value("gtpo_rs_verify_timeouts_total", {"cause": cause})

    assert (count("cpu"), count("wall"), count("queue")) == (0.0, 0.0, 0.0)

    async def main() -> None:
        pool = _pool(
            target=paced_check,
            size=1,
            timeout_s=0.3,
            wall_timeout_s=1.0,
            on_timeout=metrics.on_timeout,
            on_timing=metrics.on_timing,
        )
        await pool.start()
        try:
            assert (
                await pool.run(SymbolicCheck("burn:inf", "1"), deadline=_far())
            ).reason == "timeout"  # cpu
            # One check holds the only worker past the net; the one behind it never gets it.
            stuck, queued = await asyncio.gather(
                pool.run(SymbolicCheck("sleep:100", "1")),
                pool.run(SymbolicCheck("burn:0.01", "burn:0.01")),
            )
            assert (stuck.reason, queued.reason) == ("wall_timeout", "queue_timeout")
            assert (await pool.run(SymbolicCheck("burn:0.1", "burn:0.1"), deadline=_far())).equal
        finally:
            await pool.close()

    asyncio.run(main())
    assert (count("cpu"), count("wall"), count("queue")) == (1.0, 1.0, 1.0)
    # The finished check's CPU time: about the 0.1 s it burned.
    assert metrics.registry.get_sample_value("gtpo_rs_verify_cpu_seconds_count") == 1.0
    cpu = metrics.registry.get_sample_value("gtpo_rs_verify_cpu_seconds_sum")
    assert cpu is not None and 0.09 <= cpu < 0.3


def test_a_wall_net_below_the_cpu_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="below the CPU budget"):
        _pool(timeout_s=2.0, wall_timeout_s=1.0)
    assert _pool(timeout_s=2.0)._wall_timeout_s == 10.0  # WALL_NET_FACTOR budgets


def _finishing_order(first: list[tuple[str, str]], then: list[tuple[str, str]]) -> list[str]:
    """One worker; the (answer, client) checks of ``first`` queued, then, 10 ms later, those of
    ``then``: the clients in the order their checks finished."""
    done: list[str] = []

    async def main() -> None:
        pool = _pool(target=paced_check, size=1, timeout_s=2.0, wall_timeout_s=60.0)
        await pool.start()

        async def run(answer: str, client: str) -> None:
            assert (await pool.run(SymbolicCheck(answer, answer), client=client)).equal
            done.append(client)

        try:
            queued = [asyncio.create_task(run(*check)) for check in first]
            await asyncio.sleep(0.01)
            await asyncio.gather(*(run(*check) for check in then), *queued)
        finally:
            await pool.close()

    asyncio.run(main())
    return done


def test_one_clients_batch_does_not_hold_back_another_clients_check() -> None:
    """One FIFO for every client made a single check wait for a whole batch queued before it
    (a 4,096-pair batch delayed everyone else's checks 9.4 s). The fair queue serves the
    client that has used the worker least: the single check goes next."""
    batch = [(f"burn:0.05{k:02d}", "batch") for k in range(20)]
    done = _finishing_order(batch, [("burn:0.01", "single")])
    assert done.index("single") <= 2, done  # after the batch's running check and at most one


def test_a_client_whose_checks_use_the_worker_long_gets_its_share_not_all() -> None:
    """A client whose every check takes 0.3 s of the only worker, against one whose ten checks
    take 0.01 s each, both queued at once: after the costly client's first check, the cheap
    client's ten are all answered before its second, whatever the machine's load (the order is
    by the worker time each has used, not by arrival: first come, the costly four went first)."""
    costly = [(f"burn:0.3{k}", "costly") for k in range(4)]
    cheap = [(f"burn:0.01{k}", "cheap") for k in range(10)]
    done = _finishing_order(costly, cheap)
    assert done[:11] == ["costly"] + ["cheap"] * 10, done


def test_an_answer_that_kills_every_worker_it_meets_is_its_own_failure() -> None:
    """A check whose worker dies under it is run again (a worker lost to an operator or the OOM
    killer is the machine's state: no verdict, a 503). One that loses its worker on every one
    of its runs is the answer's doing: a verdict, check_error, cached, so that a policy that
    repeats it costs no more workers (before: worker_error, never cached, 10 workers a repeat)."""
    restarts: list[str] = []
    errors: list[tuple[str, str]] = []

    async def main() -> None:
        pool = _pool(target=paced_check, size=1, timeout_s=2.0, wall_timeout_s=60.0,
                     restarts=restarts)  # fmt: skip
        await pool.start()
        verifier = Verifier(pool, on_error=lambda stage, error: errors.append((stage, error)))
        try:
            first = await verifier.check("crash:1", "1", deadline=_far())
            assert (first.equal, first.reason, first.cached) == (False, "check_error", False)
            again = await verifier.check("crash:1", "1", deadline=_far())
            assert (again.reason, again.cached) == ("check_error", True)
            assert (await verifier.check("burn:0.01", "burn:0.01")).equal  # the pool serves
        finally:
            await pool.close()

    asyncio.run(main())
    assert restarts == ["worker_error"] * 10
    assert errors == [("check", "WorkerLost")]


def test_once_the_server_stops_a_lost_worker_is_not_replaced() -> None:
    """Before, a check that ran into its budget while the server drained its requests after a
    stop signal had its worker replaced (a new process, killed moments later by ``close``; with
    the forkserver gone, a new forkserver outliving the server). Now its slot ends, its caller
    still gets its answer, and the other worker serves what is left."""
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(restarts=restarts, timeout_s=0.5, wall_timeout_s=30.0)
        await pool.start()
        try:
            before = _worker_pids(pool)
            pool.stop_replacing()
            hung = await pool.run(_symbolic(HANG, "1"), deadline=_far())
            assert (hung.equal, hung.reason) == (False, "timeout")
            assert (await pool.run(_symbolic("\\sqrt{9}", "3"))).equal  # the other worker
            for _ in range(100):  # the lost worker's slot kills it as it ends
                if _live_workers(pool) == 1:
                    break
                await asyncio.sleep(0.05)
            assert _live_workers(pool) == 1 and _worker_pids(pool) <= before
        finally:
            await pool.close()
        assert restarts == []

    asyncio.run(main())
