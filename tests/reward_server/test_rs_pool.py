"""The killable verification pool, the verdict cache and single-flight (real worker processes)."""

from __future__ import annotations

import asyncio
import os
import time

from reward_server.pool import VerifierPool
from reward_server.verify import Verifier, symbolic_equivalent

HANG = "\\hang"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited all the same.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def _pool(**kw) -> VerifierPool:
    restarts: list[str] = kw.pop("restarts", [])
    return VerifierPool(
        symbolic_equivalent,
        size=kw.pop("size", 2),
        timeout_s=kw.pop("timeout_s", 1.0),
        hang_answer=HANG,
        on_restart=restarts.append,
        **kw,
    )


def test_hung_check_is_killed_and_replaced_while_others_are_served() -> None:
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(restarts=restarts, timeout_s=1.0)
        await pool.start()
        try:
            before = {p.pid for p in pool._procs}
            t0 = time.perf_counter()
            hung = asyncio.create_task(pool.run(HANG, "1"))
            # Meanwhile the other worker keeps answering real symbolic checks.
            answered = []
            for k in range(2, 12):
                res = await pool.run(f"\\sqrt{{{k * k}}}", str(k))
                answered.append((res.equal, time.perf_counter() - t0))
            result = await hung
            elapsed = time.perf_counter() - t0
            assert (result.equal, result.reason) == (False, "timeout")
            assert 1.0 <= elapsed < 2.5
            assert all(eq for eq, _ in answered)
            assert max(t for _, t in answered) < 1.0, "healthy checks waited for the hung one"
            await asyncio.sleep(0)  # let the slot finish replacing its worker
            for _ in range(100):
                if len(pool._procs) == 2 and {p.pid for p in pool._procs} != before:
                    break
                await asyncio.sleep(0.05)
            after = {p.pid for p in pool._procs}
            assert len(after) == 2 and len(before & after) == 1
            killed = (before - after).pop()
            assert not _alive(killed)
            # The replacement works.
            assert (await pool.run("\\frac{2}{4}", "0.5")).equal
        finally:
            await pool.close()
        assert restarts == ["timeout"]

    asyncio.run(main())


def test_adversarial_answers_return_false_within_the_timeout() -> None:
    async def main() -> None:
        pool = _pool(timeout_s=1.0, memory_mb=1024)
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
        pool = _pool(restarts=restarts, timeout_s=0.5)
        await pool.start()
        verifier = Verifier(pool, on_cache=lookups.append)
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
            # Timeouts are not cached: a second identical hang is checked (and killed) again.
            first = await verifier.check(HANG, "1")
            second = await verifier.check(HANG, "1")
            assert first.reason == second.reason == "timeout" and not second.cached
        finally:
            await pool.close()
        assert restarts == ["timeout", "timeout"]

    asyncio.run(main())


def test_close_kills_every_worker_and_rejects_new_work() -> None:
    async def main() -> None:
        pool = _pool(size=2)
        await pool.start()
        pids = [p.pid for p in pool._procs]
        hung = asyncio.create_task(pool.run(HANG, "1"))
        await asyncio.sleep(0.2)
        await pool.close()
        assert (await hung).equal is False
        assert not any(_alive(pid) for pid in pids)
        try:
            await pool.run("1", "1")
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
                assert (await pool.run(f"\\sqrt{{{(k + 2) ** 2}}}", str(k + 2))).equal
        finally:
            await pool.close()

    asyncio.run(main())
    assert restarts == ["recycle", "recycle"]


def test_a_worker_killed_from_outside_is_replaced_and_never_scores_true() -> None:
    restarts: list[str] = []

    async def main() -> None:
        pool = _pool(size=2, restarts=restarts)
        await pool.start()
        try:
            victim = next(iter(pool._procs))
            os.kill(victim.pid, 9)  # e.g. the kernel's OOM killer
            await asyncio.sleep(0.1)
            results = [await pool.run(f"\\sqrt{{{k * k}}}", str(k)) for k in range(2, 8)]
            lost = [r for r in results if r.reason == "worker_error"]
            assert len(lost) == 1 and not lost[0].equal
            assert all(r.equal for r in results if r.reason != "worker_error")
            assert victim.pid not in {p.pid for p in pool._procs}
        finally:
            await pool.close()
        assert restarts == ["worker_error"]

    asyncio.run(main())
