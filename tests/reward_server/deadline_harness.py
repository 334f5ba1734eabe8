"""The per-answer deadline under hostile load: LaTeX bombs (the cost guard answers them at once)
and slow symbolic answers (the pool's deadline cuts them), sent by C concurrent clients to a real
reward server, one completion per request as OpenRLHF does; ``drive`` times every answer.

tests/reward_server/test_rs_deadline.py asserts on what ``drive`` returns;
benchmarks/reward_server_deadline.py prints ``summary`` of it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from reward_server.protocol import formatted

# Answers that would hold a verification worker for its whole timeout without the cost guard.
BOMBS = [
    "10^{10^{10^{10}}}",
    "9^{9^{9^{9}}}",
    "2^{2^{2^{2^{2^{2}}}}}",
    "(10^{8})!",
    "((10!)!)!",
    "\\Gamma(10^{10})",
    "\\sum_{k=1}^{10^{12}} k^{2}",
    "\\prod_{k=1}^{10^{9}} k",
    "\\int x^{10^{9}} \\, dx",
    "\\int_0^1 x^{123456789} dx",
    "\\binom{10^{12}}{10^{6}}",
    "\\frac{d^{100000}}{dx^{100000}} x^{200000}",
    "x^{10^{100}}",
    "1000000000!",
]
# Answers the guard lets through that still make sympy work hard (nested radicals, big
# polynomials, symbolic sums): they go to a worker and the deadline bounds them.
SLOW = [
    "\\int e^{x^{2}} \\sin(x^{3}) dx",  # ~8 s of sympy: always cut by the deadline
    "\\lim_{x\\to 0} \\frac{\\sin(\\tan x)-\\tan(\\sin x)}{x^{7}}",
    "\\sum_{k=1}^{\\infty} \\frac{1}{k^{3}+k+1}",
    "\\int \\frac{x^{20}}{1+x^{7}} dx",
    "\\sqrt[3]{2+\\sqrt{5}}+\\sqrt[3]{2-\\sqrt{5}}",
    "\\prod_{k=1}^{60} (x+k)",
]


def body(answer: str, label: str = "7") -> dict:
    return {
        "query": [formatted("r", answer)],
        "labels": [label],
    }


async def drive(url: str, answers: list[str], clients: int, rounds: int) -> list[dict]:
    """``clients`` concurrent clients, each sending ``rounds`` requests (answers in turn);
    returns one record per request: answer, seconds, reason (or the error)."""
    import aiohttp  # a lighter client than httpx: the clock should mostly see the server

    records: list[dict] = []
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def one_client(c: int) -> None:
            for r in range(rounds):
                answer = answers[(c * rounds + r) % len(answers)]
                t0 = time.perf_counter()
                try:
                    async with session.post(url + "/v1/score", json=body(answer)) as resp:
                        reason = (await resp.json())["results"][0]["reason"]
                except Exception as exc:  # counted and reported, never hidden
                    reason = f"error: {exc!r}"
                records.append(
                    {"answer": answer, "seconds": time.perf_counter() - t0, "reason": reason}
                )

        await asyncio.gather(*(one_client(c) for c in range(clients)))
    return records


def summary(records: list[dict], timeout_s: float) -> str:
    secs = sorted(r["seconds"] for r in records)
    slowest = max(records, key=lambda r: r["seconds"])
    late = sum(s > timeout_s + 0.5 for s in secs)
    reasons = Counter(r["reason"] for r in records)
    return (
        f"{len(records)} answers: p50 {secs[len(secs) // 2]:.3f} s, "
        f"p99 {secs[min(len(secs) - 1, int(0.99 * len(secs)))]:.3f} s, max {secs[-1]:.3f} s "
        f"({slowest['answer'][:40]!r}); over timeout + 0.5 s: {late}\n"
        f"reasons: {dict(reasons.most_common())}"
    )
