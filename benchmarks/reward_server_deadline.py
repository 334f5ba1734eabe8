"""Per-answer deadline under hostile load: C concurrent clients send LaTeX bombs and slow answers
to a real reward server on 127.0.0.1, one completion per request as OpenRLHF does; every answer
must come back within the verification timeout + 0.5 s of being sent.

    python benchmarks/reward_server_deadline.py                 # 64 clients, 4 rounds, 2 s
    python benchmarks/reward_server_deadline.py --clients 64 --rounds 8 --timeout 1

Prints the latency distribution, the slowest answer, how many were caught by the cost guard
(answered at once with a named reason) and how many went to a worker and hit the deadline.
``tests/reward_server/test_rs_deadline.py`` runs the same driver
(tests/reward_server/deadline_harness.py) against its test server.
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
from deadline_harness import BOMBS, SLOW, drive, summary
from reliability_harness import start_server, stop_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=2.0, help="GTPO_RS_VERIFY_TIMEOUT_S")
    ap.add_argument("--workers", type=int, default=2, help="GTPO_RS_VERIFY_WORKERS")
    args = ap.parse_args()

    print(
        f"{os.cpu_count()} CPU cores, load average before the run {os.getloadavg()[0]:.2f} "
        "(other work on the machine delays answers: the client's clock includes it)"
    )
    env = {
        "GTPO_RS_VERIFY_TIMEOUT_S": str(args.timeout),
        "GTPO_RS_VERIFY_WORKERS": str(args.workers),
        "GTPO_RS_CACHE_SIZE": "0",  # every answer is checked afresh: the worst case
    }
    proc, url = start_server(env)
    try:
        for name, answers in (("bombs", BOMBS), ("slow", SLOW), ("mixed", BOMBS + SLOW)):
            records = asyncio.run(drive(url, answers, args.clients, args.rounds))
            print(f"\n{name}, {args.clients} clients x {args.rounds} rounds:")
            print(summary(records, args.timeout))
    finally:
        stop_server(proc)


if __name__ == "__main__":
    main()
