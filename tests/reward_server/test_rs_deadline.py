"""The cost guard, the per-answer bounds and the verdicts' independence of the machine's load.

LaTeX bombs are answered at once with a named reason and never reach a worker; with 64
concurrent clients sending hostile answers, every answer comes back within the wall-clock net
+ 0.5 s of being sent; and a corpus heavy on symbolic checks gets the same verdicts from a fresh
server on a quiet machine and from another beside two CPU-bound processes (slow stage)."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter

import deadline_harness as DEADLINE  # tests/reward_server/, on sys.path (see conftest.py)
import pytest

from reward_server.checker.compare import Verdict
from reward_server.checker.guard import bomb
from reward_server.checker.syntax import Unparsable, parse
from reward_server.service.verify import Verifier

# GTPO_RS_VERIFY_TIMEOUT_S (CPU budget) and GTPO_RS_VERIFY_WALL_TIMEOUT_S of the `server` fixture
TIMEOUT_S = 1.0
WALL_S = 2.0


@pytest.mark.parametrize("answer", DEADLINE.BOMBS)
def test_bombs_are_refused_without_a_worker(answer: str) -> None:
    parse("0")  # the grammar is loaded at the server's start, not on its first answer
    start = time.perf_counter()
    verdict = Verifier(None).precheck(answer, "7")  # no pool: a worker was never an option
    assert time.perf_counter() - start < 0.05
    assert isinstance(verdict, Verdict) and not verdict.equal
    assert verdict.reason.startswith("answer_huge_"), verdict
    reference = Verifier(None).precheck("7", answer)
    assert isinstance(reference, Verdict) and reference.reason.startswith("reference_huge_")


@pytest.mark.parametrize(
    "answer",
    [
        "2^{100}",
        "10^{100}",
        "2^{2^{2^{2}}}",
        "120!",
        "(2^{10})!",
        "\\binom{100}{50}",
        "\\sum_{k=1}^{1000} k",
        "\\sum_{k=1}^{\\infty} \\frac{1}{k^2}",
        "\\binom{100001}{2}",
        "5000!!!!",
        "1.5\\times 10^{3}",
        "(x+1)^{50}",
        "90^\\circ",
        "x^{10^{3}}",
    ],
)
def test_ordinary_answers_pass_the_guard(answer: str) -> None:
    tree = parse(answer)
    assert not isinstance(tree, Unparsable), tree
    assert bomb(tree) is None


@pytest.mark.parametrize("answer", DEADLINE.NOT_NOTATION)
def test_calculus_is_refused_as_unparsable_without_a_worker(answer: str) -> None:
    parse("0")
    start = time.perf_counter()
    verdict = Verifier(None).precheck(answer, "7")
    assert time.perf_counter() - start < 0.05
    assert verdict == Verdict(False, "unparsable_answer")


# A latency bound: in the slow stage's first part, alone, as the tests that bring their own load
# (tests/slow_stage.py). In the default stage the other pytest-xdist process shares the cores,
# and one run beside it and another pytest answered in 2.74 s.
@pytest.mark.slow
def test_sixty_four_hostile_clients_each_answered_within_the_deadline(server, rs_tools) -> None:
    # Bombs (the guard), slow symbolic answers and hung checks (the pool's deadline), mixed.
    answers = DEADLINE.BOMBS + DEADLINE.SLOW + [rs_tools.HANG] * 6
    records = asyncio.run(DEADLINE.drive(server.url, answers, clients=64, rounds=2))
    assert len(records) == 128
    assert not [r for r in records if r["reason"].startswith("error")], records
    late = [r for r in records if r["seconds"] > WALL_S + 0.5]
    assert not late, DEADLINE.summary(records, WALL_S)
    reasons = {r["reason"] for r in records}
    assert {"answer_huge_exponent", "answer_huge_factorial", "answer_huge_sum_bound"} <= reasons
    # The hung checks were cut off: at their CPU budget (a verdict), or at the net or in the
    # queue on a busy machine (a 503 the client would retry, never a 0 that looks computed).
    assert reasons & {"timeout", DEADLINE.UNAVAILABLE}, reasons
    assert not reasons & {"wall_timeout", "queue_timeout", "worker_error"}, reasons


@pytest.mark.slow
def test_verdicts_are_the_same_on_a_quiet_machine_and_beside_cpu_bound_work(make_server) -> None:
    """A fresh server per run (the verdict cache would otherwise answer the second run), two
    verification workers, default budget and net, the corpus sent one completion per request by
    32 concurrent clients: quiet, then beside two processes that each keep a core busy. A
    wall-clock deadline of 2 s from arrival changed 84 and 75 of these 350 verdicts in two runs
    under that load (49 and 43 correct answers scored 0, as `timeout` or `queue_timeout`); the
    CPU budget changes none. The slowest answer under load took 3.5-4 s, against the 10 s net
    (about the same at 64 clients)."""
    pairs = DEADLINE.LOAD_CORPUS
    assert len(pairs) >= 300
    first = make_server()
    quiet = asyncio.run(DEADLINE.verdicts(first.url, pairs, DEADLINE.LOAD_CLIENTS))
    first.stop()
    with DEADLINE.cpu_burners(2):
        loaded = asyncio.run(DEADLINE.verdicts(make_server().url, pairs, DEADLINE.LOAD_CLIENTS))
        load = os.getloadavg()[0]
    print(
        f"\n{len(pairs)} pairs, {DEADLINE.LOAD_CLIENTS} clients: quiet {quiet.seconds:.1f} s "
        f"(slowest answer {quiet.slowest:.2f} s); beside 2 CPU-bound processes "
        f"{loaded.seconds:.1f} s (slowest {loaded.slowest:.2f} s, load average {load:.1f}); "
        f"{sum(a == 10 for a, _ in quiet.results)} correct"
    )
    changed = DEADLINE.differences(pairs, quiet, loaded)
    assert not changed, "\n".join(changed)
    # Every pair was judged, and as its corpus labels it: no timeout hides in either run.
    assert [a == 10 for a, _ in quiet.results] == [equal for *_, equal in pairs]


@pytest.mark.slow
def test_batches_retried_as_openrlhf_does_all_get_their_verdicts_beside_four_cpu_bound_processes(
    make_server,
) -> None:
    """The corpus in batches of 32 through /get_reward, four batches in flight, each retried as
    OpenRLHF's client retries (five tries, a second apart): beside four processes that each
    keep a core busy (twice as many as the 2 cores), every batch gets its verdicts, and they are
    those of a quiet machine. A check slowed past its wall-clock net by want of CPU used to
    start again from nothing on every retry: one batch of 32 got a 503 eight times in a row."""
    pairs = DEADLINE.BATCH_CORPUS
    assert len(pairs) >= 400
    first = make_server()
    quiet = asyncio.run(DEADLINE.batches_as_openrlhf_sends(first.url, pairs, 32, 4))
    first.stop()
    with DEADLINE.cpu_burners(4):
        loaded_server = make_server()
        loaded = asyncio.run(DEADLINE.batches_as_openrlhf_sends(loaded_server.url, pairs, 32, 4))
        load = os.getloadavg()[0]
        timeouts = DEADLINE.timeouts_by_cause(loaded_server.url)
    print(
        f"\n{len(pairs)} pairs in {len(quiet.tries)} batches: quiet {quiet.seconds:.1f} s, "
        f"tries {Counter(quiet.tries)}; beside 4 CPU-bound processes {loaded.seconds:.1f} s "
        f"(load average {load:.1f}), tries {Counter(loaded.tries)}, nets passed {timeouts}"
    )
    assert 0 not in loaded.tries, f"batches that failed all five tries: {loaded.tries}"
    assert 0 not in quiet.tries
    changed = [
        f"{answer!r} vs {label!r}: {a} then {b}"
        for (answer, label, _), a, b in zip(pairs, quiet.accuracies, loaded.accuracies, strict=True)
        if a != b
    ]
    assert not changed, "\n".join(changed)
    assert [a == 10 for a in quiet.accuracies] == [equal for *_, equal in pairs]
