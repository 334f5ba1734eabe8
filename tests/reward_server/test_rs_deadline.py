"""The cost guard and the per-answer deadline: LaTeX bombs are answered at once with a named
reason and never reach a worker; with 64 concurrent clients sending hostile answers, every
answer comes back within the verification timeout + 0.5 s of being sent."""

from __future__ import annotations

import asyncio
import time

import deadline_harness as DEADLINE  # tests/reward_server/, on sys.path (see conftest.py)
import pytest

from reward_server.guard import bomb
from reward_server.verify import Verifier

TIMEOUT_S = 1.0  # GTPO_RS_VERIFY_TIMEOUT_S of the `server` fixture


@pytest.mark.parametrize("answer", DEADLINE.BOMBS)
def test_bombs_are_refused_without_a_worker(answer: str) -> None:
    start = time.perf_counter()
    verdict = Verifier(None).precheck(answer, "7")  # no pool: a worker was never an option
    assert time.perf_counter() - start < 0.05
    assert not isinstance(verdict, tuple) and not verdict.equal
    assert verdict.reason.startswith("answer_huge_"), verdict
    reference = Verifier(None).precheck("7", answer)
    assert not isinstance(reference, tuple) and reference.reason.startswith("reference_huge_")


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
        "\\int_0^1 x^{2} dx",
        "\\int_0^{\\infty} e^{-x^2} dx",
        "1.5\\times 10^{3}",
        "(x+1)^{50}",
        "90^\\circ",
        "x^{10^{3}}",
    ],
)
def test_ordinary_answers_pass_the_guard(answer: str) -> None:
    assert bomb(answer) is None


def test_sixty_four_hostile_clients_each_answered_within_the_deadline(server, rs_tools) -> None:
    # Bombs (the guard), slow symbolic answers and hung checks (the pool's deadline), mixed.
    answers = DEADLINE.BOMBS + DEADLINE.SLOW + [rs_tools.HANG] * 6
    records = asyncio.run(DEADLINE.drive(server.url, answers, clients=64, rounds=2))
    assert len(records) == 128
    assert not [r for r in records if r["reason"].startswith("error")], records
    late = [r for r in records if r["seconds"] > TIMEOUT_S + 0.5]
    assert not late, DEADLINE.summary(records, TIMEOUT_S)
    reasons = {r["reason"] for r in records}
    assert {"answer_huge_exponent", "answer_huge_factorial", "answer_huge_sum_bound"} <= reasons
    assert reasons & {"timeout", "queue_timeout"}, reasons  # the hung checks were cut off
