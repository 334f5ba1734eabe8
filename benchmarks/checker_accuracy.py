"""Correctness of the reward server's checker against math-verify, side by side in one run.

Two tables, on the project's own hand-written corpora (``tests/reward_server/``):

1. **Labelled pairs** (``checker_corpus.py``): this server's checker (the same decision as
   the service, run in this process: ``verify.equivalent_inline``) and math-verify used as its
   README shows (both strings wrapped in ``$…$``, ``verify(parse(gold), parse(answer))``).
   Accuracy, false positives, false negatives and p50/p99 time per pair.
2. **Exploits** (``exploit_corpus.py``): whole completions scored by the server's scorer with a
   real verification pool; how many exploits are rewarded and how many controls are not.

    python benchmarks/checker_accuracy.py            # both tables
    python benchmarks/checker_accuracy.py --misses   # also list every wrong verdict

Nothing goes over the network.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1] / "tests" / "reward_server"


def _load(name: str) -> ModuleType:
    """Import a corpus module from tests/ (shared data lives with the tests, see DESIGN.md)."""
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def server_checker() -> Callable[[str, str], bool]:
    from reward_server.verify import equivalent_inline

    return lambda answer, reference: equivalent_inline(answer, reference).equal


def math_verify_checker() -> Callable[[str, str], bool]:
    from math_verify import parse, verify

    def check(answer: str, reference: str) -> bool:
        return bool(verify(parse(f"${reference}$"), parse(f"${answer}$")))

    return check


def _quantile(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q * 100) - 1] if xs else 0.0


def score_pairs(check: Callable[[str, str], bool], pairs: list) -> dict:
    """Verdicts, errors (scored as wrong verdicts: an exception is never 'correct') and times."""
    times, wrong = [], []
    fp = fn = 0
    for pair in pairs:
        start = time.perf_counter()
        try:
            got = check(pair.answer, pair.reference)
        except Exception as exc:  # a crash is a miss, whatever the label
            got = not pair.equal
            pair = type(pair)(pair.answer, pair.reference, pair.equal, pair.kind, repr(exc))
        times.append(time.perf_counter() - start)
        if got != pair.equal:
            wrong.append(pair)
            fp += got and not pair.equal
            fn += pair.equal and not got
    n = len(pairs)
    return {
        "accuracy": (n - len(wrong)) / n,
        "fp": fp,
        "fn": fn,
        "p50_ms": 1000 * _quantile(times, 0.5),
        "p99_ms": 1000 * _quantile(times, 0.99),
        "wrong": wrong,
    }


async def score_completions(completions: list, workers: int, timeout_s: float) -> dict:
    """Score every completion with the service's scorer and a real pool; count what it
    rewards (``Completion.rewarded`` says what counts)."""
    from reward_server.pool import VerifierPool
    from reward_server.scoring import Scorer
    from reward_server.settings import Settings
    from reward_server.verify import Verifier, symbolic_equivalent

    settings = Settings(verify_workers=workers, verify_timeout_s=timeout_s)
    pool = VerifierPool(symbolic_equivalent, size=workers, timeout_s=timeout_s)
    await pool.start()
    try:
        scorer = Scorer(settings, Verifier(pool))
        items = await scorer.score_batch(
            [c.response for c in completions], None, [c.label for c in completions]
        )
    finally:
        await pool.close()
    exploits_rewarded, controls_missed = [], []
    for c, item in zip(completions, items, strict=True):
        rewarded = c.rewarded(item.format_score, item.accuracy_score)
        if c.exploit and rewarded:
            exploits_rewarded.append((c, item))
        if not c.exploit and not rewarded:
            controls_missed.append((c, item))
    return {
        "exploits": sum(c.exploit for c in completions),
        "controls": sum(not c.exploit for c in completions),
        "exploits_rewarded": exploits_rewarded,
        "controls_missed": controls_missed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list every wrong verdict")
    parser.add_argument("--workers", type=int, default=2, help="pool size for the exploits")
    args = parser.parse_args()

    pairs = _load("checker_corpus").PAIRS
    completions = _load("exploit_corpus").COMPLETIONS
    rows = [("this server", score_pairs(server_checker(), pairs))]
    rows.append(("math-verify", score_pairs(math_verify_checker(), pairs)))

    print(f"\nLabelled corpus: {len(pairs)} pairs ({sum(p.equal for p in pairs)} equivalent)\n")
    print("| checker | accuracy | false positives | false negatives | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        print(
            f"| {name} | {100 * r['accuracy']:.1f}% | {r['fp']} | {r['fn']} "
            f"| {r['p50_ms']:.2f} | {r['p99_ms']:.1f} |"
        )
    if args.misses:
        for name, r in rows:
            print(f"\n{name} misses:")
            for p in r["wrong"]:
                print(f"  [{p.kind}] {p.answer!r} vs {p.reference!r}: label {p.equal} ({p.why})")

    ex = asyncio.run(score_completions(completions, args.workers, 5.0))
    print(f"\nExploit corpus: {ex['exploits']} exploits, {ex['controls']} controls\n")
    print("| server | exploits rewarded | controls rewarded |")
    print("|---|---|---|")
    print(
        f"| this version | {len(ex['exploits_rewarded'])} of {ex['exploits']} "
        f"| {ex['controls'] - len(ex['controls_missed'])} of {ex['controls']} |"
    )
    if args.misses:
        for c, item in ex["exploits_rewarded"] + ex["controls_missed"]:
            what = "exploit rewarded" if c.exploit else "control missed"
            print(
                f"  {what} [{c.kind}] {item.answer!r} vs {c.label!r}: format "
                f"{item.format_score} ({item.format_reason}), {item.reason}"
            )


if __name__ == "__main__":
    main()
