"""Load benchmark of the reward server, side by side with sequential in-process math-verify.

Starts ``python -m reward_server`` as a separate process on 127.0.0.1 (a fresh one per
concurrency level, so no level inherits another's cache), then sends N completions one per
request — as OpenRLHF does — at concurrency 1, 16 and 64, and reports completions/s, p50/p99
latency and errors. In the same run it times math-verify called sequentially in this process on
the same items (parse reference, parse answer, verify), and prints the ratios.

    python benchmarks/reward_server_load.py            # 5,000 completions, groups of 8
    python benchmarks/reward_server_load.py --n 1000 --concurrency 1 64
    # this checkout against another one (e.g. a git worktree of an earlier commit), alternating
    python benchmarks/reward_server_load.py --concurrency 64 --against /tmp/before --repeat 3

Only loopback traffic; every loop is bounded by N.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# The server launcher and the problem generator are the reliability harness's, which lives with
# the tests (shared harnesses live in tests/, benchmarks import them); a benchmark runs as a
# script, so the harness's folder goes on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reward_server"))
from reliability_harness import problem, start_server, stop_server, tree_cpu_seconds

PROMPT = "<|im_start|>user\nSolve the problem.<|im_end|>\n<|im_start|>assistant\n"


@dataclass
class Item:
    query: str
    label: str
    answer: str | None  # what the <answer> block holds (None: no block)
    correct: bool  # expected accuracy verdict when the format is full


def make_items(n: int, group: int, seed: int) -> list[Item]:
    """Groups of ``group`` completions per prompt; answers repeat within a group (as sampled
    completions do); a mix of correct, wrong and malformed completions."""
    rng = random.Random(seed)
    items: list[Item] = []
    while len(items) < n:
        label, right, wrong = problem(rng)
        # A group samples from 2-3 distinct answers, so repeats are common.
        pool = [(rng.choice(right), True), (rng.choice(wrong), False), (rng.choice(right), True)]
        for _ in range(group):
            answer, correct = rng.choice(pool[: rng.randint(2, 3)])
            shape = rng.random()
            if shape < 0.8:
                response = f"<reasoning>\nwork\n</reasoning>\n<answer>\n{answer}\n</answer>"
                items.append(Item(PROMPT + response + "<|im_end|>", label, answer, correct))
            elif shape < 0.9:  # malformed: no answer block
                response = f"<reasoning>\nwork, so {answer}\n</reasoning>"
                items.append(Item(PROMPT + response + "<|im_end|>", label, None, False))
            else:  # malformed: answer without reasoning (format partial: accuracy gated)
                response = f"<answer>{answer}</answer>"
                items.append(Item(PROMPT + response + "<|im_end|>", label, answer, False))
    return items[:n]


# ---------------------------------------------------------------- server


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for name in ('cache_lookups_total{result="hit"}', 'cache_lookups_total{result="miss"}'):
        m = re.search(r"^gtpo_rs_" + re.escape(name) + r" (\S+)$", text, re.MULTILINE)
        out[name] = float(m.group(1)) if m else 0.0
    return out


async def drive(url: str, items: list[Item], concurrency: int, per_request_session: bool) -> dict:
    """Send every item as its own request with at most ``concurrency`` in flight."""
    import aiohttp

    latencies: list[float] = []
    errors = 0
    wrong_verdicts = 0
    timeout = aiohttp.ClientTimeout(total=180)
    connector = aiohttp.TCPConnector(limit=concurrency)
    shared = aiohttp.ClientSession(timeout=timeout, connector=connector)

    async def one(item: Item) -> None:
        nonlocal errors, wrong_verdicts
        body = {"query": [item.query], "prompts": [PROMPT], "labels": [item.label]}
        t0 = time.perf_counter()
        try:
            if per_request_session:  # what OpenRLHF 0.11's client does
                async with (
                    aiohttp.ClientSession(timeout=timeout) as s,
                    s.post(url + "/get_reward", json=body) as r,
                ):
                    r.raise_for_status()
                    data = await r.json()
            else:
                async with shared.post(url + "/get_reward", json=body) as r:
                    r.raise_for_status()
                    data = await r.json()
        except Exception:
            errors += 1
            return
        latencies.append(time.perf_counter() - t0)
        if len(data.get("rewards", [])) != 1:
            errors += 1
            return
        accurate = data["extra_logs"]["accuracy_reward"][0] == 10.0
        wrong_verdicts += accurate != item.correct

    # `concurrency` senders pulling from one queue of items, each with one request in flight.
    # The client shares two cores with the server: one task per item waiting on a semaphore
    # cost it 39-40% of a core and 168 garbage collections per 5,000 requests (this process also
    # holds math-verify's caches), against 30% and 9 this way, and the server 6-27% of its
    # measured completions/s.
    pending = iter(items)

    async def sender() -> None:
        for item in pending:
            await one(item)

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    client_cpu = time.process_time() - cpu0
    await shared.close()
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    return {
        "throughput": len(items) / wall,
        "p50": pick(0.50),
        "p99": pick(0.99),
        "errors": errors,
        "wrong_verdicts": wrong_verdicts,
        "client_cpu": client_cpu / wall,
    }


# ---------------------------------------------------------------- baseline


def math_verify_sequential(items: list[Item]) -> tuple[float, int]:
    """Completions/s of the usual in-process use of math-verify: parse the reference, parse the
    answer block (or the whole response when there is none), verify. Also returns how many
    verdicts differ from the expected ones (format gating applied the same way)."""
    try:
        from math_verify import parse, verify
    except ImportError:
        sys.exit(
            "the baseline is math-verify, not installed here: "
            "pip install 'math-verify[antlr4_13_2]>=0.7'"
        )
    from math_verify.parser import parse_expr_cached, parse_latex_cached
    from sympy.core.cache import clear_cache

    # Start cold on these items each time (the server starts a fresh process per level too),
    # but with the grammar loaded, as the server's warmed-up workers are.
    clear_cache()
    parse_latex_cached.cache_clear()
    parse_expr_cached.cache_clear()
    parse("$1$")
    disagreements = 0
    t0 = time.perf_counter()
    for it in items:
        reference = it.label.split("####")[-1].strip() if "####" in it.label else it.label
        gold = parse(reference if "\\boxed" in reference else f"${reference}$")
        pred = parse(f"${it.answer}$" if it.answer is not None else it.query)
        ok = bool(verify(gold, pred)) and it.answer is not None
        full_format = "<reasoning>" in it.query and it.answer is not None
        disagreements += (ok and full_format) != it.correct
    return len(items) / (time.perf_counter() - t0), disagreements


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5000, help="completions per level")
    ap.add_argument("--group", type=int, default=8, help="completions per prompt")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--session-per-request",
        action="store_true",
        help="open a new HTTP session per request, exactly like OpenRLHF 0.11's client",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument(
        "--against",
        type=Path,
        help="another checkout whose reward server runs right after this one's at each level "
        "(same items, same baseline measurement): a before/after in one run",
    )
    ap.add_argument("--repeat", type=int, default=1, help="rounds over the levels")
    args = ap.parse_args()

    items = make_items(args.n, args.group, args.seed)
    load = os.getloadavg()[0]
    print(
        f"{len(items)} completions, groups of {args.group}, {os.cpu_count()} CPU cores, "
        f"load average before the run {load:.2f} (other work on the machine skews the numbers)"
    )
    checkouts = [("this", None)] + ([] if args.against is None else [("against", args.against)])
    rows = []
    for _ in range(args.repeat):
        for c in args.concurrency:
            # The baseline is re-measured right before each level, so that each ratio compares
            # two measurements taken under the same background load.
            baseline, base_wrong = math_verify_sequential(items)
            for name, tree in checkouts:
                proc, url = start_server({}, cwd=tree)
                try:
                    cpu0 = tree_cpu_seconds(proc.pid)
                    res = asyncio.run(drive(url, items, c, args.session_per_request))
                    # What the server spent per completion: on two cores shared with the
                    # client, wall throughput varies by ±20% between rounds; CPU less so.
                    res["server_cpu_ms"] = (tree_cpu_seconds(proc.pid) - cpu0) / len(items) * 1e3
                    res.update(scrape(url))
                finally:
                    stop_server(proc)
                res.update(
                    concurrency=c, baseline=baseline, baseline_wrong=base_wrong, checkout=name
                )
                rows.append(res)

    if args.against is not None:
        print(f"against: {args.against}")
    header = (
        f"{'server':>7} {'conc':>4} {'compl/s':>9} {'math-verify/s':>13} {'ratio':>6} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'p99/p50':>7} {'errors':>6} {'wrong':>5} "
        f"{'pool hit/miss':>13} {'client CPU':>10} {'server CPU ms/compl':>19}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        hits = r['cache_lookups_total{result="hit"}']
        miss = r['cache_lookups_total{result="miss"}']
        print(
            f"{r['checkout']:>7} {r['concurrency']:>4} {r['throughput']:>9.1f} "
            f"{r['baseline']:>13.1f} "
            f"{r['throughput'] / r['baseline']:>5.2f}x {r['p50'] * 1e3:>8.2f} "
            f"{r['p99'] * 1e3:>8.2f} {r['p99'] / r['p50']:>7.1f} {r['errors']:>6} "
            f"{r['wrong_verdicts']:>5} {hits:>6.0f}/{miss:<6.0f} {r['client_cpu']:>9.0%} "
            f"{r['server_cpu_ms']:>19.3f}"
        )
    print(
        "wrong: server verdicts that differ from the generator's ground truth; sequential "
        f"math-verify differs on {rows[0]['baseline_wrong']} of the same items"
    )
    print("targets: >= 1.8x sequential math-verify, p99 <= 10x p50 at concurrency 64, 0 errors")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
