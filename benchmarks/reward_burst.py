"""A rollout's burst of reward requests against a slow but alive server: what the per-attempt
timeout of GTPO's rollout client (`gtpo.openrlhf.rewards`, 180 s) does, side by side with a
shorter one.

OpenRLHF sends every sample of a rollout at once; a rollout actor's client keeps 64 connections
per server and queues the rest. When the server is slower than the burst, the last requests
wait a long time for their answer. If one attempt's timeout is shorter than that wait, the client
gives up on requests the server is still working on and sends them again: the server then does
the same work twice while still behind.

The server here is a stand-in with a fixed service time and a fixed capacity (a FastAPI app on
127.0.0.1 under uvicorn, answering OpenRLHF's /get_reward shape), so that "slow" is exactly
known; it counts every request it starts and every one it finishes.

    python benchmarks/reward_burst.py     # 1024 requests from 8 actors, 0.1 s each, 8 at a time
    python benchmarks/reward_burst.py --n 2048 --actors 16 --timeouts 180 5

Only loopback traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time

from gtpo.local_reward_server import free_port
from gtpo.reward_client import AsyncRewardClient, RewardServerError


def slow_server(service_s: float, capacity: int):
    """A /get_reward stand-in: each request holds one of `capacity` slots for `service_s`."""
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()
    counts = {"started": 0, "finished": 0}
    slots = asyncio.Semaphore(capacity)

    @app.post("/get_reward")
    async def get_reward(body: dict) -> dict:
        counts["started"] += 1
        async with slots:
            await asyncio.sleep(service_s)
        counts["finished"] += 1
        n = len(body["query"])
        return {"rewards": [1.0] * n, "scores": [1.0] * n, "extra_logs": {}}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}/get_reward", counts


async def burst(url: str, n: int, actors: int, attempt_timeout: float, budget: float) -> dict:
    """`n` requests at once from `actors` rollout actors (one client each, as in a run)."""
    clients = [
        AsyncRewardClient([url], retry_for_s=budget, timeout_s=attempt_timeout)
        for _ in range(actors)
    ]
    latencies: list[float] = []
    failures = 0

    async def one(i: int) -> None:
        nonlocal failures
        body = {"query": [f"q{i}"], "prompts": ["p"], "labels": ["1"]}
        started = time.perf_counter()
        try:
            await clients[i % actors].get_reward(body)
        except RewardServerError:
            failures += 1
            return
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.perf_counter() - started
    for client in clients:
        await client.aclose()
    return {"wall": wall, "latencies": sorted(latencies), "failures": failures}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024, help="requests in the burst")
    ap.add_argument("--service-s", type=float, default=0.1, help="server time per request")
    ap.add_argument("--capacity", type=int, default=8, help="requests the server serves at once")
    ap.add_argument("--actors", type=int, default=8, help="rollout actors (vLLM engines)")
    ap.add_argument("--timeouts", type=float, nargs="+", default=[180.0, 5.0])
    ap.add_argument("--budget", type=float, default=300.0, help="--gtpo.reward_timeout")
    args = ap.parse_args()
    backlog = args.n * args.service_s / args.capacity
    in_flight = min(args.n, 64 * args.actors)
    print(
        f"{args.n} requests at once from {args.actors} rollout actors (64 connections each, "
        f"so up to {in_flight} in flight at the server); the server serves {args.capacity} at a "
        f"time for {args.service_s} s each: the burst takes about {backlog:.0f} s, a request "
        f"in flight waits up to about {in_flight * args.service_s / args.capacity:.0f} s at the "
        f"server; retry budget {args.budget:.0f} s"
    )
    header = (
        f"{'attempt timeout':>15} {'wall s':>7} {'p50 s':>6} {'max s':>6} {'failed':>6} "
        f"{'sent':>6} {'served':>6} {'extra work':>10}"
    )
    print(header)
    print("-" * len(header))
    for attempt_timeout in args.timeouts:
        server, thread, url, counts = slow_server(args.service_s, args.capacity)
        try:
            result = asyncio.run(burst(url, args.n, args.actors, attempt_timeout, args.budget))
            time.sleep(args.service_s * 2)  # let the abandoned attempts finish on the server
        finally:
            server.should_exit = True
            thread.join()
        lat = result["latencies"] or [float("nan")]
        extra = counts["finished"] / args.n - 1
        print(
            f"{attempt_timeout:>15.0f} {result['wall']:>7.1f} {statistics.median(lat):>6.1f} "
            f"{lat[-1]:>6.1f} {result['failures']:>6} {counts['started']:>6} "
            f"{counts['finished']:>6} {extra:>9.0%}"
        )
    print(
        "sent: requests the server received; served: requests it completed (an abandoned attempt "
        "still costs the server its full service time); extra work: served / burst − 1"
    )


if __name__ == "__main__":
    main()
