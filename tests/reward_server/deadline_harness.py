"""The per-answer deadline under hostile load: LaTeX bombs (the cost guard answers them at once)
and slow symbolic answers (the pool's CPU budget and wall-clock net cut them), sent by C
concurrent clients to a real reward server, one completion per request as OpenRLHF does;
``drive`` times every answer. And the verdicts' independence of the machine's load:
``verdicts`` scores a fixed corpus heavy on symbolic checks, beside ``cpu_burners`` or not.

tests/reward_server/test_rs_deadline.py asserts on what ``drive`` and ``verdicts`` return;
benchmarks/reward_server_deadline.py prints ``summary`` of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import checker_corpus  # tests/reward_server/, on sys.path (conftest.py or the benchmark)
import realistic_corpus

from reward_server.checker.pending import SymbolicCheck
from reward_server.protocol import formatted

# Answers that would hold a verification worker for its whole timeout without the cost guard.
BOMBS = [
    "10^{10^{10^{10}}}",
    "9^{9^{9^{9}}}",
    "2^{2^{2^{2^{2^{2}}}}}",
    "(10^{8})!",
    "((10!)!)!",
    "10^{8}!!!!",
    "\\sum_{k=1}^{10^{12}} k^{2}",
    "\\prod_{k=1}^{10^{9}} k",
    "\\binom{10^{12}}{10^{6}}",
    "\\binom{x}{10^{6}}",
    "e^{10^{9}}",
    "x^{10^{100}}",
    "1000000000!",
]
# Calculus the grammar does not read (integrals, limits, derivatives): refused as unparsable,
# at once, however large their numbers.
NOT_NOTATION = [
    "\\int x^{10^{9}} \\, dx",
    "\\int_0^1 x^{123456789} dx",
    "\\lim_{x\\to 0} x^{10^{9}}",
]
# Answers the guard lets through that still make sympy work hard (nested radicals, big
# polynomials, symbolic sums): they go to a worker and the deadline bounds them.
SLOW = [
    "\\sum_{k=1}^{9000} k^{k}",  # ~4 s of sympy: always cut by the deadline
    "\\sum_{k=1}^{\\infty} \\frac{1}{k^{3}+k+1}",
    "\\sin^{20}(x)\\cos^{20}(x) - \\frac{\\sin^{20}(2x)}{2^{20}}",
    "\\sqrt[3]{2+\\sqrt{5}}+\\sqrt[3]{2-\\sqrt{5}}",
    "\\prod_{k=1}^{60} (x+k)",
]


# The record of a request answered 503: a check that could not finish in time (its wall-clock
# net, the queue), which the server says instead of scoring it.
UNAVAILABLE = "503 (not computed)"


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
                        data = await resp.json()
                        reason = UNAVAILABLE if resp.status == 503 else data["results"][0]["reason"]
                except Exception as exc:  # counted and reported, never hidden
                    reason = f"error: {exc!r}"
                records.append(
                    {"answer": answer, "seconds": time.perf_counter() - t0, "reason": reason}
                )

        await asyncio.gather(*(one_client(c) for c in range(clients)))
    return records


def summary(records: list[dict], bound_s: float) -> str:
    """Latencies, the slowest answer, how many took over ``bound_s`` (the wall-clock net) +
    0.5 s, and the verdicts' reasons."""
    secs = sorted(r["seconds"] for r in records)
    slowest = max(records, key=lambda r: r["seconds"])
    late = sum(s > bound_s + 0.5 for s in secs)
    reasons = Counter(r["reason"] for r in records)
    return (
        f"{len(records)} answers: p50 {secs[len(secs) // 2]:.3f} s, "
        f"p99 {secs[min(len(secs) - 1, int(0.99 * len(secs)))]:.3f} s, max {secs[-1]:.3f} s "
        f"({slowest['answer'][:40]!r}); over the {bound_s:g} s bound + 0.5 s: {late}\n"
        f"reasons: {dict(reasons.most_common())}"
    )


def timeouts_by_cause(url: str) -> dict[str, float]:
    """``gtpo_rs_verify_timeouts_total`` of a server, by cause (cpu, wall, queue)."""
    import re
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    pattern = r'^gtpo_rs_verify_timeouts_total\{cause="(\w+)"\} (\S+)$'
    return {m[1]: float(m[2]) for m in re.finditer(pattern, text, re.MULTILINE)}


def _spelled(side: object) -> str:
    """A paced check's side as written: a test builds its checks from text ("sleep:100"), the
    service from a typed value, whose tree is ``sleep : 100`` (a product of a word, a ratio
    and a number; ``inf`` is infinity)."""
    if isinstance(side, str):
        return side
    tree = getattr(side, "tree", None)
    parts = getattr(tree, "factors", None)
    if parts is None:
        value = getattr(tree, "text", None)
        return str(value)
    word, amount = parts
    seconds = "inf" if getattr(amount, "name", None) == "infty" else amount.text
    return f"{word.text}:{seconds}"


def paced_check(check: SymbolicCheck) -> tuple[bool, str]:
    """A pool target whose cost the answer sets: ``sleep:S`` waits S seconds without using CPU
    (a check that hangs), ``burn:S`` uses S seconds of CPU time, ``starve:S`` uses S seconds of
    CPU time a tenth of the time (a check starved of CPU on a busy machine: ten times as long in
    wall time); ``burn:inf`` never ends; ``crash:N`` ends its worker. Equal when the answer is
    the reference."""
    answer, reference = _spelled(check.answer), _spelled(check.reference)
    kind, _, seconds = answer.partition(":")
    if kind == "crash":  # ends its worker, as a parser that segfaults would
        os._exit(1)
    if kind == "sleep":
        time.sleep(float(seconds))
    elif kind == "burn":
        end = time.process_time() + float(seconds)
        while time.process_time() < end:
            pass
    elif kind == "starve":
        end = time.process_time() + float(seconds)
        while time.process_time() < end:
            burst = time.process_time() + 0.005
            while time.process_time() < burst:
                pass
            time.sleep(0.045)
    return answer == reference, "equivalent" if answer == reference else "not_equivalent"


# ---------------------------------------------------------------- verdicts under load

# The corpora's classes that mostly need the symbolic check (expressions, trigonometric
# identities, complex numbers, matrices and tuples, equations and relations, solution sets):
# the answers whose verdict a wall-clock deadline made depend on the machine's load.
_SYMBOLIC_KINDS = {
    "symbolic",
    "trig_exponents",
    "trig_identities",
    "complex",
    "tolerance",
    "near_misses",
    "named_functions",
    "relations",
    "chains",
    "structures",
    "other_notations",
    "solution_sets",
    "intervals",
    "heavy_symbolic",
}
_SYMBOLIC_STYLES = {"expression", "chain", "multipart", "wrong_value"}

# Concurrent clients that send the load corpus: enough that answers wait for a worker.
LOAD_CLIENTS = 32
# (answer, label, the corpus's verdict): every pair of those classes, right and wrong.
LOAD_CORPUS: list[tuple[str, str, bool]] = [
    (p.answer, p.reference, p.equal) for p in checker_corpus.PAIRS if p.kind in _SYMBOLIC_KINDS
] + [
    (b.block, b.label, b.correct)
    for b in realistic_corpus.CORRECT + realistic_corpus.WRONG
    if b.style in _SYMBOLIC_STYLES
]


@contextlib.contextmanager
def cpu_burners(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` processes that each keep one core busy (at the default priority), ended on exit."""
    from reliability_harness import term_with_parent

    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"],
                    preexec_fn=term_with_parent if sys.platform.startswith("linux") else None,
                )
            )
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()


@dataclass
class Run:
    """One scoring of a corpus: each pair's (accuracy_score, reason), in order; the seconds
    the whole run and its slowest answer took; the 503s retried (verdicts not computed in
    time, sent again after Retry-After as every client does)."""

    results: list[tuple[float, str]]
    seconds: float
    slowest: float
    retried: int = 0


async def verdicts(url: str, pairs: list[tuple[str, str, bool]], clients: int) -> Run:
    """Score every pair through ``/v1/score``, one completion per request, ``clients`` requests
    in flight."""
    import aiohttp

    results: list[tuple[float, str]] = [(-1.0, "")] * len(pairs)
    slowest = 0.0
    retried = 0
    pending = iter(enumerate(pairs))
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(
        timeout=timeout, connector=aiohttp.TCPConnector(limit=clients)
    ) as session:

        async def sender() -> None:
            nonlocal slowest, retried
            for i, (answer, label, _) in pending:
                body = {"query": [formatted("r", answer)], "labels": [label]}
                sent = time.perf_counter()
                for _ in range(30):
                    async with session.post(url + "/v1/score", json=body) as resp:
                        if resp.status != 503:
                            resp.raise_for_status()
                            item = (await resp.json())["results"][0]
                            break
                        wait = float(resp.headers.get("Retry-After", "1"))
                    retried += 1
                    await asyncio.sleep(wait)
                else:
                    raise RuntimeError(f"{answer!r}: 503 thirty times")
                results[i] = (item["accuracy_score"], item["reason"])
                slowest = max(slowest, time.perf_counter() - sent)

        t0 = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(clients)))
    return Run(results, time.perf_counter() - t0, slowest, retried)


# The acceptance corpus of retried batches: the load corpus and every other checker-corpus pair
# whose class reaches the grammar and the symbolic check (numbers, units, the grammar's own
# notations), so that heavy and light checks share each batch as they do in training.
_BATCH_KINDS = {"numbers", "units", "grammar_notations", "plain_text_roots", "function_values"}
BATCH_CORPUS: list[tuple[str, str, bool]] = LOAD_CORPUS + [
    (p.answer, p.reference, p.equal) for p in checker_corpus.PAIRS if p.kind in _BATCH_KINDS
]
# OpenRLHF's remote reward client (openrlhf/utils/agent.py, ``_post_request``): five tries, a
# second apart, any error (a 503 included) retried, the run ended after the fifth.
OPENRLHF_TRIES = 5
OPENRLHF_PAUSE_S = 1.0


@dataclass
class Batches:
    """One scoring of a corpus in batches: each pair's accuracy (10 or 0) in order, and how
    many tries each batch took (0 for a batch that failed all of them)."""

    accuracies: list[float]
    tries: list[int]
    seconds: float


async def batches_as_openrlhf_sends(
    url: str, pairs: list[tuple[str, str, bool]], batch: int, senders: int
) -> Batches:
    """Score ``pairs`` through ``/get_reward`` in batches of ``batch`` completions (with their
    prompts), ``senders`` batches in flight, each retried as OpenRLHF's client does."""
    import aiohttp

    accuracies: list[float] = [-1.0] * len(pairs)
    starts = range(0, len(pairs), batch)
    tries: list[int] = [0] * len(starts)
    pending = iter(enumerate(starts))
    timeout = aiohttp.ClientTimeout(total=180)  # OpenRLHF's

    async def sender(session: aiohttp.ClientSession) -> None:
        for b, start in pending:
            rows = pairs[start : start + batch]
            prompts = [
                f"<|im_start|>user\nQuestion {start + i}<|im_end|>\n" for i in range(len(rows))
            ]
            body = {
                "query": [p + formatted("r", row[0]) for p, row in zip(prompts, rows, strict=True)],
                "prompts": prompts,
                "labels": [label for _, label, _ in rows],
            }
            for attempt in range(1, OPENRLHF_TRIES + 1):
                try:
                    async with session.post(url + "/get_reward", json=body) as resp:
                        resp.raise_for_status()
                        extra = (await resp.json())["extra_logs"]
                except aiohttp.ClientError:
                    await asyncio.sleep(OPENRLHF_PAUSE_S)
                    continue
                accuracies[start : start + len(rows)] = extra["accuracy_reward"]
                tries[b] = attempt
                break

    t0 = time.perf_counter()
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(sender(session) for _ in range(senders)))
    return Batches(accuracies, tries, time.perf_counter() - t0)


def differences(pairs: list[tuple[str, str, bool]], quiet: Run, loaded: Run) -> list[str]:
    """One line per pair whose verdict differs between two runs."""
    return [
        f"{answer!r} vs {label!r}: {a} then {b}"
        for (answer, label, _), a, b in zip(pairs, quiet.results, loaded.results, strict=True)
        if a != b
    ]
