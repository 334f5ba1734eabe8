"""Soak: thousands of concurrent single-sample requests, as an OpenRLHF rollout sends them."""

from __future__ import annotations

import asyncio
import random
import time

import httpx
import pytest

R = "<reasoning>\nwork\n</reasoning>\n"


def _items(n: int, seed: int = 1) -> list[tuple[str, str, float]]:
    """(response, label, expected reward) in groups of 8 with repeated answers."""
    rng = random.Random(seed)
    items: list[tuple[str, str, float]] = []
    while len(items) < n:
        k = rng.randint(2, 500)
        label, right, wrong = rng.choice(
            [
                (f"#### {k * 7}", [f"{k * 7:,}", f"\\${k * 7}"], [str(k * 7 + 1)]),
                (f"\\boxed{{\\frac{{{k}}}{{8}}}}", [f"{k / 8:g}", f"{k}/8"], [f"{k / 8 + 0.5:g}"]),
                (f"$\\boxed{{\\sqrt{{{k * 4}}}}}$", [f"2\\sqrt{{{k}}}"], [f"4\\sqrt{{{k}}}"]),
            ]
        )
        choices = [(rng.choice(right), 20.0), (rng.choice(wrong), 10.0), ("", 1.0)]
        for _ in range(8):
            answer, reward = rng.choice(choices)
            response = R if reward == 1.0 else R + f"<answer>{answer}</answer>"
            items.append((response, label, reward))
    return items[:n]


@pytest.mark.slow
def test_soak_concurrency_64(server) -> None:
    items = _items(3000)
    latencies: list[float] = []
    got: list[float | None] = [None] * len(items)
    # A connection dropped before its answer (httpx's ReadError: one in 3,000 in one CI run, its
    # cause not established) is sent again once, as every client of the server does (OpenRLHF's
    # 5 tries, gtpo.reward_client's failover); more than a few such drops fail the soak.
    dropped: list[str] = []

    async def main() -> None:
        sem = asyncio.Semaphore(64)
        limits = httpx.Limits(max_connections=64)
        started = time.perf_counter()
        async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

            async def post(i: int) -> httpx.Response:
                response, label, _ = items[i]
                body = {"query": [response], "labels": [label]}
                try:
                    return await client.post("/get_reward", json=body)
                except httpx.TransportError as exc:
                    dropped.append(f"#{i} at {time.perf_counter() - started:.2f} s: {exc!r}")
                    return await client.post("/get_reward", json=body)

            async def one(i: int) -> None:
                async with sem:
                    t0 = time.perf_counter()
                    r = await post(i)
                    latencies.append(time.perf_counter() - t0)
                assert r.status_code == 200
                got[i] = r.json()["rewards"][0]

            await asyncio.gather(*(one(i) for i in range(len(items))))

    asyncio.run(main())
    print(f"connections dropped before an answer: {len(dropped)}", *dropped, sep="\n")
    assert len(dropped) <= 3, dropped
    assert got == [reward for _, _, reward in items]
    latencies.sort()
    assert latencies[int(0.99 * len(latencies))] < 5.0
