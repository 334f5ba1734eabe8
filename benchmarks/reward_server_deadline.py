"""Per-answer bounds under hostile load: C concurrent clients send LaTeX bombs and slow answers
to a real reward server on 127.0.0.1, one completion per request as OpenRLHF does; every answer
must come back within the wall-clock net + 0.5 s of being sent, and the slow ones are cut by
their CPU budget.

    python benchmarks/reward_server_deadline.py                 # 64 clients, 4 rounds, 2 s
    python benchmarks/reward_server_deadline.py --clients 64 --rounds 8 --timeout 1
    python benchmarks/reward_server_deadline.py --invariance    # also: verdicts under load

Prints the latency distribution, the slowest answer, how many were caught by the cost guard
(answered at once with a named reason), how many went to a worker and timed out, and the
timeouts by cause (CPU budget, wall-clock net while running, net while waiting for a worker).
``--invariance`` also scores the load corpus (350 answer/reference pairs heavy on symbolic
checks) with a fresh server on the machine as it is and with another beside two CPU-bound
processes, and prints both times and how many verdicts differ.
``tests/reward_server/test_rs_deadline.py`` runs the same drivers
(tests/reward_server/deadline_harness.py) against its test servers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

# The driver and the server launcher live with the tests (shared harnesses live in tests/,
# benchmarks import them); a benchmark runs as a script, so their folder goes on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reward_server"))
import deadline_harness as DEADLINE
from reliability_harness import start_server, stop_server

from reward_server.service.pool import WALL_NET_FACTOR


def invariance(env: dict[str, str], clients: int) -> None:
    """The load corpus scored by a fresh server, then by another beside two CPU-bound
    processes (the verdict cache would answer a second pass on the same server)."""

    def run() -> DEADLINE.Run:
        proc, url = start_server(env)
        try:
            return asyncio.run(DEADLINE.verdicts(url, DEADLINE.LOAD_CORPUS, clients))
        finally:
            stop_server(proc)

    quiet = run()
    with DEADLINE.cpu_burners(2):
        loaded = run()
        load = os.getloadavg()[0]
    changed = DEADLINE.differences(DEADLINE.LOAD_CORPUS, quiet, loaded)
    print(f"\nload corpus, {len(DEADLINE.LOAD_CORPUS)} pairs, {clients} clients:")
    for name, r in (("as the machine is", quiet), ("beside 2 CPU-bound processes", loaded)):
        right = sum(a == 10 for a, _ in r.results)
        print(f"  {name}: {r.seconds:.1f} s, slowest answer {r.slowest:.2f} s, {right} correct")
    print(f"  load average at the end {load:.2f}; verdicts that differ: {len(changed)}")
    for line in changed[:20]:
        print("   ", line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument(
        "--timeout", type=float, default=2.0, help="GTPO_RS_VERIFY_TIMEOUT_S (CPU budget)"
    )
    ap.add_argument(
        "--wall",
        type=float,
        default=None,
        help=f"GTPO_RS_VERIFY_WALL_TIMEOUT_S (default: {WALL_NET_FACTOR:g} x --timeout)",
    )
    ap.add_argument("--workers", type=int, default=2, help="GTPO_RS_VERIFY_WORKERS")
    ap.add_argument(
        "--invariance", action="store_true", help="also compare verdicts quiet and under load"
    )
    args = ap.parse_args()
    wall = WALL_NET_FACTOR * args.timeout if args.wall is None else args.wall

    print(
        f"{os.cpu_count()} CPU cores, load average before the run {os.getloadavg()[0]:.2f} "
        "(other work on the machine delays answers: the client's clock includes it)"
    )
    env = {
        "GTPO_RS_VERIFY_TIMEOUT_S": str(args.timeout),
        "GTPO_RS_VERIFY_WALL_TIMEOUT_S": str(wall),
        "GTPO_RS_VERIFY_WORKERS": str(args.workers),
    }
    # Every answer is checked afresh: the worst case.
    proc, url = start_server({**env, "GTPO_RS_CACHE_SIZE": "0"})
    try:
        for name, answers in (
            ("bombs", DEADLINE.BOMBS),
            ("slow", DEADLINE.SLOW),
            ("mixed", DEADLINE.BOMBS + DEADLINE.SLOW),
        ):
            before = DEADLINE.timeouts_by_cause(url)
            records = asyncio.run(DEADLINE.drive(url, answers, args.clients, args.rounds))
            after = DEADLINE.timeouts_by_cause(url)
            causes = {k: int(v - before.get(k, 0.0)) for k, v in after.items()}
            print(f"\n{name}, {args.clients} clients x {args.rounds} rounds:")
            print(DEADLINE.summary(records, wall))
            print(f"timeouts by cause: {causes}")
    finally:
        stop_server(proc)
    if args.invariance:
        invariance(env, DEADLINE.LOAD_CLIENTS)


if __name__ == "__main__":
    main()
