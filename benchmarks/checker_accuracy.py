"""Correctness of the reward server's checker against math-verify, side by side in one run.

One table, three of the project's own hand-written corpora (``tests/reward_server/``), each
scored by this server and by math-verify used as its README shows:

1. **Labelled pairs** (``checker_corpus.py``): answer/reference pairs. This server: the same
   decision as the service, in this process (``verify.equivalent_inline``); math-verify: both
   strings wrapped in ``$…$``, ``verify(parse(gold), parse(answer))``.
2. **Realistic answer blocks** (``realistic_corpus.py``): what instruct models write in their
   answer block (sentences, labels, markdown, units…), against dataset labels. This server: the
   whole completion through the service's scorer and a real verification pool, correct when
   its accuracy is 10; math-verify: ``verify(parse("$reference$"), parse(block))``, the block
   as written (its extraction finds the answer in free text).
3. **Exploits** (``exploit_corpus.py``): completions that try to game the reward, and clean
   controls. This server: the scorer with a real pool (an exploit counts as rewarded as
   ``Completion.rewarded`` says); math-verify: ``verify`` of the reference against the whole
   response (it has no notion of the format). A false positive is a rewarded exploit, a false
   negative a control not rewarded.
4. **Format corpora** (``format_corpus.py``): whole responses of reasoning models in the
   ``think`` format (DeepSeek-R1 distills with the template's prefilled ``<think>`` and
   without, Qwen3, QwQ) and the ``boxed`` format (Qwen2.5-Math), right and wrong. This server:
   the scorer in that format (``?format=``), correct when the accuracy is 10; math-verify:
   ``verify`` of the reference against the whole response, as its README shows.
5. **Exploits in the other formats**: the exploit corpus's answers moved into each format
   (``exploit_corpus.in_format``: an answer block or a box after ``</think>``, a solution
   ending in a box). This server: rewarded when format and accuracy are both 10;
   math-verify: the whole response.

    python benchmarks/checker_accuracy.py            # the table
    python benchmarks/checker_accuracy.py --misses   # also list every wrong verdict

Nothing goes over the network.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from rs_corpora import Case, corpora, score_cases


@dataclass
class Result:
    verdicts: list[bool] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self, cases: list[Case]) -> dict:
        wrong = [c for c, v in zip(cases, self.verdicts, strict=True) if v != c.expected]
        return {
            "n": len(cases),
            "accuracy": 1 - len(wrong) / len(cases),
            "fp": sum(not c.expected for c in wrong),
            "fn": sum(c.expected for c in wrong),
            "p50_ms": 1000 * _quantile(self.times, 0.5),
            "p99_ms": 1000 * _quantile(self.times, 0.99),
            "wrong": wrong,
        }


def _quantile(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q * 100) - 1] if xs else 0.0


# ---------------------------------------------------------------- this server


def server_pairs(cases: list[Case]) -> Result:
    from reward_server.checker.decide import equivalent_inline

    return _timed(lambda c: equivalent_inline(c.answer, c.reference).equal, cases)


async def server_completions(cases: list[Case], workers: int, timeout_s: float) -> Result:
    """Whole completions through the service's scorer with a real pool, each in its format;
    ``Case.expected`` is compared with whether the completion is rewarded."""
    start = time.perf_counter()
    items = await score_cases(cases, workers, timeout_s)
    elapsed = time.perf_counter() - start
    result = Result(times=[elapsed / len(cases)] * len(cases))
    for case, item in zip(cases, items, strict=True):
        judge = case.rewarded or (lambda _fmt, accuracy: accuracy == 10)
        rewarded = judge(item.format_score, item.accuracy_score)
        result.verdicts.append(rewarded)
        if rewarded != case.expected:
            result.errors.append(f"{item.answer!r} vs {item.reference!r}: {item.reason}")
    return result


# ---------------------------------------------------------------- math-verify


def math_verify_check(case: Case) -> bool:
    from math_verify import parse, verify

    from reward_server.checker.extract import extract_reference

    if case.corpus == "labelled pairs":
        return bool(verify(parse(f"${case.reference}$"), parse(f"${case.answer}$")))
    reference = extract_reference(case.reference)
    return bool(verify(parse(f"${reference}$"), parse(case.answer)))


def _timed(check: Callable[[Case], bool], cases: list[Case]) -> Result:
    """Verdicts and times; an exception is a wrong verdict, never 'correct'."""
    result = Result()
    for case in cases:
        start = time.perf_counter()
        try:
            got = check(case)
        except Exception as exc:  # a crash is a miss, whatever the label
            got = not case.expected
            result.errors.append(f"{case.answer!r}: {exc!r}")
        result.times.append(time.perf_counter() - start)
        result.verdicts.append(got)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list every wrong verdict")
    parser.add_argument("--workers", type=int, default=2, help="verification pool size")
    args = parser.parse_args()

    sets = corpora()
    rows = []
    for name, cases in sets.items():
        if name == "labelled pairs":
            ours = server_pairs(cases)
        else:
            ours = asyncio.run(server_completions(cases, args.workers, 5.0))
        theirs = _timed(math_verify_check, cases)
        rows += [(name, "this server", ours, cases), (name, "math-verify", theirs, cases)]

    for name, cases in sets.items():
        passing = sum(c.expected for c in cases)
        print(f"{name}: {len(cases)} items, {passing} to pass, {len(cases) - passing} to refuse")
    print("\n| corpus | checker | accuracy | false positives | false negatives |")
    print("|---|---|---|---|---|")
    summaries = []
    for name, checker, result, cases in rows:
        s = result.summary(cases)
        summaries.append((name, checker, s))
        print(f"| {name} | {checker} | {100 * s['accuracy']:.1f}% | {s['fp']} | {s['fn']} |")
    print("\nlabelled pairs, time per pair:")
    for name, checker, s in summaries:
        if name == "labelled pairs":
            print(f"  {checker}: p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.1f} ms")
    if args.misses:
        for name, checker, s in summaries:
            if s["wrong"]:
                print(f"\n{checker} misses on {name}:")
            for c in s["wrong"]:
                what = "false positive" if not c.expected else "false negative"
                print(f"  {what}: {c.answer!r} vs {c.reference!r} {c.note}")


if __name__ == "__main__":
    main()
