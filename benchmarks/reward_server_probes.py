"""The probes of issue 43 against a reward server at its default settings, with a table of
figures: degenerate answers and /healthz meanwhile, overload by hostile clients beside
well-behaved ones, one client's 4,096-pair batch, and connections that are slow, silent,
oversized, half-sent, unread, too many for the file descriptors, or left by a killed
supervisor. Optionally the same against another checkout (the version before), in the same run.

    python benchmarks/reward_server_probes.py
    python benchmarks/reward_server_probes.py --against /tmp/before   # a checkout of the old
    python benchmarks/reward_server_probes.py --only load,degenerate

The slow tests (tests/reward_server/test_rs_probes.py) call the same functions (the harnesses
tests/reward_server/load_probes.py and connection_probes.py) and assert on what they return.
Only loopback traffic; every probe is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

# The harnesses live with the tests (shared harnesses live in tests/, benchmarks import them).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reward_server"))
import connection_probes as CONN
import load_probes as LOAD
from reliability_harness import start_server, stop_server

TOKEN = "s3cret-probe"
R = "<reasoning>\nwork\n</reasoning>\n"
DEGENERATE = {
    "12,000 spaces between two boxes": (R + f"<answer>{LOAD.SPACES}</answer>", ""),
    "12,000 spaces after a box": (R + "<answer>\\boxed{1}" + " " * 12_000 + "x</answer>", ""),
    "?format=boxed, 12,000 spaces": ("w " + LOAD.SPACES, "?format=boxed"),
    "800 KB of end tokens": (R + "<answer>1</answer>" + "</s>" * 200_000, ""),
    "\\boxed nested 400 deep": (R + f"<answer>{LOAD.DEEP}</answer>", ""),
}


async def _poll_health(session, url: str, seen: list[float], started: list[float]) -> None:
    """GET /healthz until cancelled: each answer's seconds in ``seen``; the one in flight
    started at ``started[0]``."""
    while True:
        started[:] = [time.perf_counter()]
        async with session.get(url + "/healthz") as r:
            await r.read()
        seen.append(time.perf_counter() - started.pop())
        await asyncio.sleep(0.02)


async def degenerate(url: str) -> list[str]:
    """Each answer alone in a request, /healthz polled meanwhile: status, seconds, slowest
    /healthz."""
    import aiohttp

    rows = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        for name, (response, query) in DEGENERATE.items():
            seen: list[float] = []
            started: list[float] = []
            polling = asyncio.create_task(_poll_health(s, url, seen, started))
            await asyncio.sleep(0.1)
            t0 = time.perf_counter()
            body = {"query": [response], "labels": ["1"]}
            async with s.post(url + "/get_reward" + query, json=body) as r:
                await r.read()
                status = r.status
            took = time.perf_counter() - t0
            polling.cancel()
            seen += [time.perf_counter() - t for t in started]
            rows.append(
                f"{name}: HTTP {status} in {took:.2f} s, /healthz at most {max(seen):.2f} s"
            )
    return rows


def load(url: str) -> list[str]:
    over = asyncio.run(LOAD.overload(url))
    batch = asyncio.run(LOAD.big_batch(url))
    return [
        f"48 well-behaved + 16 hostile clients, 30 s: {over.requests} right answers sent, "
        f"{over.wrong_200} scored wrong with 200, {over.gave_up} without a reward after 30 s of "
        f"retries, {over.retries} 503s retried; latency to the reward p50 {over.p(0.5):.2f} s, "
        f"p99 {over.p(0.99):.2f} s; /healthz at most {max(over.healthz):.2f} s; hostile "
        f"answers {over.hostile_status}",
        f"4,096-pair batch: HTTP {batch.batch_status} in {batch.batch_seconds:.1f} s; "
        f"{len(batch.singles)} single checks meanwhile, median "
        f"{statistics.median(batch.singles or [0]):.3f} s, worst {batch.worst:.2f} s",
    ]


def _held(h: CONN.Held) -> str:
    open_s = "still open at the end" if h.open_s == float("inf") else f"{h.open_s:.1f} s"
    return (
        f"{h.name} ({h.connections}): open at most {open_s}, {h.closed} closed by the server; "
        f"memory +{h.peak_mb:.0f} MB at the peak, +{h.after_mb:.0f} MB after; {h.answers}"
    )


def connections(url: str, pid: int, tree: Path | None) -> list[str]:
    rows = [_held(CONN.slowloris(url, pid)), _held(CONN.silent(url, pid))]
    rows += [_held(h) for h in CONN.large_headers(url, pid)]
    rows += [_held(CONN.half_sent_bodies(url, pid, token)) for token in (None, TOKEN)]
    rows.append(_held(CONN.unread_answers(url, pid, TOKEN)))
    fds = CONN.few_descriptors({"GTPO_RS_VERIFY_WORKERS": "1"}, cwd=tree)
    rows.append(
        f"256 file descriptors, {fds.silent} silent sockets: {fds.answered} of {fds.requests} "
        f"requests answered {fds.failures or ''}"
    )
    restart = CONN.supervisor_killed({}, cwd=tree)
    free = "never" if restart.port_free_s == float("inf") else f"{restart.port_free_s:.2f} s"
    rows.append(
        f"kill -9 of the supervisor of --workers 2: port free after {free}, "
        f"{restart.workers_left} of {restart.workers} workers left, restart "
        f"{'serves' if restart.restarted else 'fails'}"
    )
    return rows


def run(tree: Path | None, only: set[str]) -> list[str]:
    rows: list[str] = []
    if only & {"degenerate", "load"}:
        proc, url = start_server({"GTPO_RS_VERIFY_WORKERS": "2"}, cwd=tree)
        try:
            if "degenerate" in only:
                rows += asyncio.run(degenerate(url))
            if "load" in only:
                rows += load(url)
        finally:
            stop_server(proc)
    if "connections" in only:
        env = {"GTPO_RS_VERIFY_WORKERS": "2", "GTPO_RS_API_TOKEN": TOKEN}
        proc, url = start_server(env, cwd=tree)
        try:
            rows += connections(url, proc.pid, tree)
        finally:
            stop_server(proc)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, help="another checkout, probed after this one")
    ap.add_argument("--only", default="degenerate,load,connections")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f} before the run")
    for name, tree in [("this checkout", None), ("against", args.against)]:
        if name == "against" and tree is None:
            continue
        print(f"\n{name}{f': {tree}' if tree else ''}")
        for row in run(tree, only):
            print(f"  {row}", flush=True)


if __name__ == "__main__":
    main()
