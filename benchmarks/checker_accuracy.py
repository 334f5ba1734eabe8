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
from rs_corpora import load_corpus

REASONING = "I worked it out step by step."


@dataclass(frozen=True)
class Case:
    """One item of any corpus: what is checked, against what, and whether it should pass."""

    answer: str  # an answer, an answer block or a whole response
    reference: str  # a bare reference or a dataset label
    expected: bool  # True: should be judged correct (rewarded)
    corpus: str
    note: str
    prompt: str = ""  # before the response in the query (a prefilled <think>)
    response_format: str = "paper"
    # What counts as rewarded on this server: the accuracy (None), or a corpus's own rule.
    rewarded: Callable[[float, float], bool] | None = None


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


def corpora() -> dict[str, list[Case]]:
    from reward_server.checker.extract import extract_reference

    pairs = [
        Case(p.answer, p.reference, p.equal, "labelled pairs", f"[{p.kind}] {p.why}")
        for p in load_corpus("checker_corpus").PAIRS
    ]
    realistic_module = load_corpus("realistic_corpus")
    realistic = [
        Case(b.block, b.label, b.correct, "realistic blocks", f"[{b.style}] {b.why}")
        for b in realistic_module.CORRECT + realistic_module.WRONG
    ]
    exploit_module = load_corpus("exploit_corpus")
    exploits = [
        Case(c.response, c.label, not c.exploit, "exploits", f"[{c.kind}] {c.why}",
             rewarded=c.rewarded)
        for c in exploit_module.COMPLETIONS
    ]  # fmt: skip
    formats = load_corpus("format_corpus")
    by_format = {
        f"{name} responses": [
            Case(
                r.text,
                r.label,
                r.correct,
                f"{name} responses",
                f"[{r.style}] {r.why}",
                PROMPT + ("<think>\n" if r.prefilled else ""),
                name,
            )
            for r in rows
        ]
        for name, rows in (("think", formats.THINK), ("boxed", formats.BOXED))
    }
    moved = [
        Case(exploit_module.in_format(c, layout), c.label, not c.exploit, "exploits, formats",
             f"[{layout} {c.kind}] {c.why}", "", layout.split("_")[0], _full_reward)
        for layout in ("think_block", "think_box", "boxed")
        for c in exploit_module.COMPLETIONS
        if c.kind not in exploit_module.BLOCK_KINDS
    ]  # fmt: skip
    for case in realistic + exploits + moved:  # every label yields a reference
        assert extract_reference(case.reference) is not None, case
    return {
        "labelled pairs": pairs,
        "realistic blocks": realistic,
        "exploits": exploits,
        **by_format,
        "exploits, formats": moved,
    }


PROMPT = "<|im_start|>user\nSolve the problem.<|im_end|>\n<|im_start|>assistant\n"


def _full_reward(format_score: float, accuracy_score: float) -> bool:
    return format_score == 10 and accuracy_score == 10


# ---------------------------------------------------------------- this server


def server_pairs(cases: list[Case]) -> Result:
    from reward_server.checker.decide import equivalent_inline

    return _timed(lambda c: equivalent_inline(c.answer, c.reference).equal, cases)


async def server_completions(cases: list[Case], workers: int, timeout_s: float) -> Result:
    """Whole completions through the service's scorer with a real pool, each in its format;
    ``Case.expected`` is compared with whether the completion is rewarded."""
    from reward_server.checker.decide import symbolic_equivalent
    from reward_server.protocol import formatted, response_format
    from reward_server.service.pool import VerifierPool
    from reward_server.service.scoring import Scorer
    from reward_server.service.settings import Settings
    from reward_server.service.verify import Verifier

    settings = Settings(verify_workers=workers, verify_timeout_s=timeout_s)
    pool = VerifierPool(symbolic_equivalent, size=workers, timeout_s=timeout_s)
    await pool.start()
    items: dict[int, object] = {}
    try:
        scorer = Scorer(settings, Verifier(pool))
        start = time.perf_counter()
        for name in dict.fromkeys(c.response_format for c in cases):
            group = [i for i, c in enumerate(cases) if c.response_format == name]
            blocks = {i: cases[i].corpus == "realistic blocks" for i in group}
            queries = [
                formatted(REASONING, cases[i].answer)
                if blocks[i]
                else cases[i].prompt + cases[i].answer
                for i in group
            ]
            prompts = [cases[i].prompt or None for i in group]
            fmt = response_format(name)
            labels = [cases[i].reference for i in group]
            scored = await scorer.score_batch(queries, prompts, labels, fmt)
            items.update(zip(group, scored, strict=True))
        elapsed = time.perf_counter() - start
    finally:
        await pool.close()
    result = Result(times=[elapsed / len(cases)] * len(cases))
    for i, case in enumerate(cases):
        item = items[i]
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
