"""The reward server's labelled corpora (``tests/reward_server/*_corpus.py``), loaded by path, as
one list of cases (``corpora``), and a scorer that scores whole completions the way the service
does, on a real verification pool (``score_completions``, ``score_cases``). The benchmark of
the checker's accuracy and the verdict table read the corpora from here."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

CORPORA = Path(__file__).with_name("reward_server")


def load_corpus(name: str) -> ModuleType:
    """``tests/reward_server/<name>.py`` as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, CORPORA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def score_completions(
    responses: list[str],
    labels: list[str],
    prompts: list[str] | None = None,
    response_format: str = "paper",
) -> list:
    """The service's scorer over a two-worker verification pool: one result per completion,
    each query being its prompt (when given) and its response."""
    from reward_server.checker.decide import symbolic_equivalent
    from reward_server.protocol import response_format as profile
    from reward_server.service.pool import VerifierPool
    from reward_server.service.scoring import Scorer
    from reward_server.service.settings import Settings
    from reward_server.service.verify import Verifier

    queries = (
        responses if prompts is None else [p + r for p, r in zip(prompts, responses, strict=True)]
    )

    async def run() -> list:
        pool = VerifierPool(symbolic_equivalent, size=2, timeout_s=5.0)
        await pool.start()
        try:
            scorer = Scorer(Settings(verify_workers=2), Verifier(pool))
            return await scorer.score_batch(queries, prompts, labels, profile(response_format))
        finally:
            await pool.close()

    return asyncio.run(run())


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


async def score_cases(cases: list[Case], workers: int = 2, timeout_s: float = 10.0) -> list:
    """Every completion case through the service's scorer with a real pool, each in its format:
    one ``ItemScore`` per case, in order. A realistic answer block is sent inside a completion
    in the paper's format; the other cases are whole responses after their prompt."""
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
        for name in dict.fromkeys(c.response_format for c in cases):
            group = [i for i, c in enumerate(cases) if c.response_format == name]
            queries = [
                formatted(REASONING, cases[i].answer)
                if cases[i].corpus == "realistic blocks"
                else cases[i].prompt + cases[i].answer
                for i in group
            ]
            prompts = [cases[i].prompt or None for i in group]
            labels = [cases[i].reference for i in group]
            scored = await scorer.score_batch(queries, prompts, labels, response_format(name))
            items.update(zip(group, scored, strict=True))
    finally:
        await pool.close()
    return [items[i] for i in range(len(cases))]
