"""Per-answer deadline under hostile load: C concurrent clients send LaTeX bombs and slow answers
to a real reward server on 127.0.0.1, one completion per request as OpenRLHF does; every answer
must come back within the verification timeout + 0.5 s of being sent.

    python benchmarks/reward_server_deadline.py                 # 64 clients, 4 rounds, 2 s
    python benchmarks/reward_server_deadline.py --clients 64 --rounds 8 --timeout 1

Prints the latency distribution, the slowest answer, how many were caught by the cost guard
(answered at once with a named reason) and how many went to a worker and hit the deadline.
``tests/reward_server/test_rs_deadline.py`` runs the same driver against its test server.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
import time
from collections import Counter
from pathlib import Path

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
        "query": [f"<reasoning>r</reasoning><answer>{answer}</answer>"],
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


def _load_load_benchmark():
    spec = importlib.util.spec_from_file_location(
        "reward_server_load", Path(__file__).with_name("reward_server_load.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reward_server_load"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=2.0, help="GTPO_RS_VERIFY_TIMEOUT_S")
    ap.add_argument("--workers", type=int, default=2, help="GTPO_RS_VERIFY_WORKERS")
    args = ap.parse_args()

    load = _load_load_benchmark()
    print(
        f"{os.cpu_count()} CPU cores, load average before the run {os.getloadavg()[0]:.2f} "
        "(other work on the machine delays answers: the client's clock includes it)"
    )
    env = {
        "GTPO_RS_VERIFY_TIMEOUT_S": str(args.timeout),
        "GTPO_RS_VERIFY_WORKERS": str(args.workers),
        "GTPO_RS_CACHE_SIZE": "0",  # every answer is checked afresh: the worst case
    }
    proc, url = load.start_server(env)
    try:
        for name, answers in (("bombs", BOMBS), ("slow", SLOW), ("mixed", BOMBS + SLOW)):
            records = asyncio.run(drive(url, answers, args.clients, args.rounds))
            print(f"\n{name}, {args.clients} clients x {args.rounds} rounds:")
            print(summary(records, args.timeout))
    finally:
        load.stop_server(proc)


if __name__ == "__main__":
    main()
