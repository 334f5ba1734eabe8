"""Probes of a reward server under what a collapsing policy and hostile clients send at once
(issue 43), against a real ``python -m reward_server`` on 127.0.0.1.

- ``overload``: well-behaved clients (one right symbolic answer per request, as OpenRLHF
  sends, retrying a 429/5xx after a backoff of 0.5 s doubled up to 8 s for 30 s, as the
  project's clients do) beside hostile ones (256-item symbolic batches, answers that use the
  whole CPU budget, whitespace runs between boxes, boxes nested 400 deep, exponent towers)
  for a while; every well-behaved reward is checked (a right answer must come back 20), and
  ``/healthz`` is timed throughout.
- ``big_batch``: one client's 4,096-pair ``/v1/equivalent`` batch while another client sends
  single checks: how long the single checks wait.

The slow tests (test_rs_probes.py) assert on what these return; benchmarks/
reward_server_probes.py prints them, for this checkout and an older one side by side.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from reward_server.protocol import formatted

RETRYABLE = (429, 500, 502, 503, 504, 408)
RETRY_FOR_S = 30.0  # the project's clients' default retry budget
DEEP = "\\boxed{" * 400 + "1" + "}" * 400
SPACES = "\\boxed{1}" + " " * 12_000 + "x\\boxed{2}"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def symbolic_pair(rng: random.Random, offset: int = 0) -> tuple[str, str]:
    """A right answer that only the symbolic check decides, and its label (``offset`` moves
    the numbers out of another caller's range, so that neither shares the other's checks)."""
    if rng.random() < 0.5:
        k = rng.choice([k for k in range(2, 600) if int(k**0.5) ** 2 != k]) + 1000 * offset
        while int(k**0.5) ** 2 == k:
            k += 1
        return f"\\frac{{1}}{{\\sqrt{{{k}}}}}", f"\\frac{{\\sqrt{{{k}}}}}{{{k}}}"
    a = rng.randint(2, 999) + 1000 * offset
    return f"(x+{a})^2", f"x^2+{2 * a}x+{a * a}"


def _square(a: int) -> tuple[str, str]:
    return f"(x+{a})^2", f"x^2+{2 * a}x+{a * a}"


def hostile_body(kind: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """(path, body) of the ``kind``-th hostile request."""
    kind %= 5
    if kind == 0:  # a 256-item batch of distinct symbolic answers
        pairs = [symbolic_pair(rng) for _ in range(256)]
        return "/v1/score", {
            "query": [formatted("w", a) for a, _ in pairs],
            "labels": [r for _, r in pairs],
        }
    if kind == 1:  # an answer sympy works on for seconds: it uses its whole CPU budget
        k = rng.randint(1, 10**9)
        answer = f"\\int e^{{x^{{2}}}} \\sin(x^{{3}}) dx + {k}"
        return "/get_reward", {"query": [formatted("w", answer)], "labels": ["7"]}
    if kind == 2:
        return "/get_reward", {"query": [formatted("w", SPACES)], "labels": ["2"]}
    if kind == 3:
        return "/get_reward", {"query": [formatted("w", DEEP)], "labels": [DEEP]}
    tower = f"{rng.randint(2, 9)}^{{{rng.randint(2, 9)}^{{{rng.randint(2, 9)}^{{9^{{9}}}}}}}}"
    return "/get_reward", {"query": [formatted("w", tower)], "labels": ["1"]}


@dataclass
class OverloadReport:
    seconds: float
    well_behaved: int
    hostile: int
    requests: int = 0  # well-behaved requests sent (first attempts)
    rewarded: int = 0  # ... that got a 200 within their retry budget
    wrong_200: int = 0  # a 200 whose reward is not the answer's (20)
    gave_up: int = 0  # no 200 within RETRY_FOR_S of retries
    retries: int = 0  # retryable answers (503 ...) the well-behaved clients sent again
    errors: int = 0  # connection errors among them (also retried)
    latency: list[float] = field(default_factory=list)  # first attempt -> reward
    hostile_requests: int = 0
    hostile_status: dict[str, int] = field(default_factory=dict)
    healthz: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    def p(self, q: float) -> float:
        return _percentile(self.latency, q)


async def overload(
    url: str, *, well_behaved: int = 48, hostile: int = 16, seconds: float = 30.0, seed: int = 0
) -> OverloadReport:
    import aiohttp

    report = OverloadReport(seconds, well_behaved, hostile)
    rng = random.Random(seed)
    stop = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=120)

    async def good(session: aiohttp.ClientSession, c: int) -> None:
        while time.monotonic() < stop:
            answer, label = symbolic_pair(rng)
            body = {"query": [formatted("w", answer)], "labels": [label]}
            report.requests += 1
            first = time.monotonic()
            delay = 0.5
            while True:
                status, data = 0, None
                try:
                    async with session.post(url + "/get_reward", json=body) as r:
                        status = r.status
                        data = await r.json(content_type=None)
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    report.errors += 1
                if status == 200:
                    report.rewarded += 1
                    report.latency.append(time.monotonic() - first)
                    if data["rewards"] != [20.0]:
                        report.wrong_200 += 1
                        if len(report.examples) < 5:
                            report.examples.append(f"{answer} vs {label}: {data}")
                    break
                if status and status not in RETRYABLE:
                    raise RuntimeError(f"well-behaved request refused: {status} {data}")
                if time.monotonic() - first + delay > RETRY_FOR_S:
                    report.gave_up += 1
                    break
                report.retries += 1
                await asyncio.sleep(delay)
                delay = min(2 * delay, 8.0)

    async def bad(session: aiohttp.ClientSession, c: int) -> None:
        k = c
        while time.monotonic() < stop:
            path, body = hostile_body(k, rng)
            k += 1
            report.hostile_requests += 1
            try:
                async with session.post(url + path, json=body) as r:
                    await r.read()
                    key = str(r.status)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                key = type(exc).__name__
            report.hostile_status[key] = report.hostile_status.get(key, 0) + 1

    async def health(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < stop:
            t0 = time.monotonic()
            async with session.get(url + "/healthz") as r:
                await r.read()
            report.healthz.append(time.monotonic() - t0)
            await asyncio.sleep(0.25)

    sessions = [
        aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=1))
        for _ in range(well_behaved + hostile + 1)
    ]
    try:
        await asyncio.gather(
            *(good(sessions[c], c) for c in range(well_behaved)),
            *(bad(sessions[well_behaved + c], c) for c in range(hostile)),
            health(sessions[-1]),
        )
    finally:
        for s in sessions:
            await s.close()
    return report


@dataclass
class BigBatchReport:
    batch_status: int
    batch_seconds: float
    singles: list[float]  # each single check's latency while the batch was in flight
    single_status: dict[int, int] = field(default_factory=dict)

    @property
    def worst(self) -> float:
        return max(self.singles, default=0.0)


async def big_batch(url: str, pairs: int = 4096) -> BigBatchReport:
    """One client sends ``pairs`` distinct symbolic pairs in one /v1/equivalent request; another
    client meanwhile sends single symbolic checks, one at a time, until the batch is answered."""
    import aiohttp

    # Distinct pairs with numbers of their own: no check of the batch, of the singles or of an
    # earlier probe on the same server is answered by the cache or shared.
    batch = [_square(100_000 + i) for i in range(pairs)]
    body = {"pairs": [{"answer": a, "reference": r} for a, r in batch]}
    singles: list[float] = []
    statuses: dict[int, int] = {}
    timeout = aiohttp.ClientTimeout(total=300)
    async with (
        aiohttp.ClientSession(timeout=timeout) as big,
        aiohttp.ClientSession(timeout=timeout) as small,
    ):
        done = asyncio.Event()
        t0 = time.monotonic()

        async def send_batch() -> tuple[int, float]:
            try:
                async with big.post(url + "/v1/equivalent", json=body) as r:
                    await r.read()
                    return r.status, time.monotonic() - t0
            finally:
                done.set()

        async def send_singles() -> None:
            await asyncio.sleep(0.5)  # the batch is queued first
            k = 0
            while not done.is_set():
                answer, reference = _square(900_000 + k)
                start = time.monotonic()
                single = {"pairs": [{"answer": answer, "reference": reference}]}
                async with small.post(url + "/v1/equivalent", json=single) as r:
                    await r.read()
                    statuses[r.status] = statuses.get(r.status, 0) + 1
                singles.append(time.monotonic() - start)
                k += 1

        (status, seconds), _ = await asyncio.gather(send_batch(), send_singles())
    return BigBatchReport(status, seconds, singles, statuses)
