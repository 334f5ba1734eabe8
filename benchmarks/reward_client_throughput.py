"""Scoring throughput of the project's reward client in the shapes the demo and TRL use it, and
the TCP connections it opens, against a real reward server on 127.0.0.1.

Shapes (each run on the same completions, with a fresh nonce per run so that no run reads
another's verdict cache):

- demo train: ``RewardClient.score(..., per_request=8)``, a group of G = 8 per request, 8 at once;
- demo eval: ``per_request=16``;
- TRL: ``RewardServerReward(url)`` with its defaults, as TRL calls it (8 completions a request
  since this change; one before);
- TRL 1/req, TRL 1/req c64: one completion per request (OpenRLHF's shape), 8 and 64 at once.

    python benchmarks/reward_client_throughput.py            # 2,000 completions, 3 runs each
    python benchmarks/reward_client_throughput.py --n 500 --runs 1

Connections are counted by wrapping ``socket.socket.connect`` in this process: every TCP
connection the client opens to the server passes through it, whatever the HTTP library.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

# The server launcher and the completions are the reliability harness's (shared harnesses live
# with the tests; a benchmark runs as a script, so the harness's folder goes on sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reward_server"))
from reliability_harness import END, PROMPT, plain_items, start_server, stop_server

CONNECTS = {"count": 0}
_connect = socket.socket.connect


def _counting_connect(self: socket.socket, address: object) -> None:
    CONNECTS["count"] += 1
    return _connect(self, address)


def completions(n: int) -> tuple[list[str], list[str], list[str]]:
    """(prompts, responses, labels) with a fresh nonce: the server has never seen them."""
    nonce = uuid.uuid4().hex[:8]
    items = plain_items(n, seed=0)
    return (
        [PROMPT] * len(items),
        [it.response(nonce) + END for it in items],
        [it.label for it in items],
    )


def shapes(url: str) -> dict[str, Callable[[list[str], list[str], list[str]], list[float]]]:
    from gtpo.reward_client import RewardClient
    from gtpo.trl.rewards import RewardServerReward

    def demo(per_request: int) -> Callable[..., list[float]]:
        def run(prompts: list[str], responses: list[str], labels: list[str]) -> list[float]:
            with RewardClient(url) as client:
                return client.score(prompts, responses, labels, per_request).total

        return run

    def trl(**settings: int) -> Callable[..., list[float]]:
        def run(prompts: list[str], responses: list[str], labels: list[str]) -> list[float]:
            reward = RewardServerReward(url, **settings)
            try:
                return reward(prompts, responses, label=labels)
            finally:
                reward.close()

        return run

    return {
        "demo train": demo(8),
        "demo eval": demo(16),
        "TRL": trl(),
        "TRL 1/req": trl(per_request=1),
        "TRL 1/req c64": trl(per_request=1, concurrency=64),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="completions per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per shape (the median is reported)")
    args = ap.parse_args()

    socket.socket.connect = _counting_connect
    proc, url = start_server({})
    print(
        f"{args.n} completions per run, {args.runs} runs per shape, {os.cpu_count()} CPU cores, "
        f"load average {os.getloadavg()[0]:.2f}; client and server share the machine"
    )
    header = f"{'shape':<13} {'completions/s':>13} {'connections':>11}"
    print(header)
    print("-" * len(header))
    try:
        for name, run in shapes(url).items():
            rates, connects = [], []
            for _ in range(args.runs):
                prompts, responses, labels = completions(args.n)
                CONNECTS["count"] = 0
                started = time.perf_counter()
                rewards = run(prompts, responses, labels)
                rates.append(len(rewards) / (time.perf_counter() - started))
                connects.append(CONNECTS["count"])
                assert len(rewards) == len(prompts)
            rate, connections = statistics.median(rates), statistics.median(connects)
            print(f"{name:<13} {rate:>13.0f} {connections:>11.0f}")
    finally:
        stop_server(proc)


if __name__ == "__main__":
    main()
