"""Realistic answer blocks (``realistic_corpus.py``) scored as whole completions by the service's
scorer with a real verification pool: every correct block earns accuracy 10, every wrong one 0."""

from __future__ import annotations

import asyncio

import pytest
from rs_corpora import load_corpus, score_completions

from reward_server.protocol import formatted
from reward_server.service.scoring import Scorer
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

CORPUS = load_corpus("realistic_corpus")
BLOCKS = CORPUS.CORRECT + CORPUS.WRONG


@pytest.fixture(scope="module")
def scored() -> list:
    queries = [formatted("I worked it out step by step.", b.block) for b in BLOCKS]
    return score_completions(queries, [b.label for b in BLOCKS])


def test_corpus_size_and_styles() -> None:
    assert len(CORPUS.CORRECT) >= 300
    assert len(CORPUS.WRONG) >= 100
    assert len({(b.block, b.label) for b in BLOCKS}) == len(BLOCKS), "duplicate blocks"
    styles = {b.style for b in CORPUS.CORRECT}
    for style in ("sentence", "label", "markdown", "display_math", "units", "restatement"):
        assert style in styles
    for style in ("chain", "multipart", "aime"):
        assert style in styles
    for style in ("hedge", "negation", "several", "context_only"):
        assert sum(b.style == style for b in CORPUS.WRONG) >= 15, style
    assert all(b.why for b in CORPUS.WRONG), "every wrong block says why"


@pytest.mark.parametrize(
    "index", range(len(BLOCKS)), ids=[f"{b.style}:{b.block[:40]}" for b in BLOCKS]
)
def test_block(scored: list, index: int) -> None:
    block, item = BLOCKS[index], scored[index]
    assert item.format_score == 10.0
    expected = 10.0 if block.correct else 0.0
    what = "correct block refused" if block.correct else f"wrong block rewarded ({block.why})"
    assert item.accuracy_score == expected, f"{what}: {item.answer!r} vs {item.reference!r}"
    if not block.correct:
        assert item.reason != "equivalent"


@pytest.mark.parametrize(
    ("block", "label", "reason"),
    [
        ("Janet makes about $18 every day.", "#### 18", "hedged_answer"),
        ("Janet makes $18 or more every day.", "#### 18", "hedged_answer"),
        ("Janet does not make $18 every day.", "#### 18", "negated_answer"),
        ("Janet makes $18 on weekdays and $20 on weekends.", "#### 18", "several_candidates"),
        ("The answer is 20, so 18.", "#### 18", "several_candidates"),
        ("She has 42 stickers. Her brother has 30 stickers.", "#### 42", "several_candidates"),
        ("$16 - 3 - 4 = 8$, so she makes $8 \\times 2 = 16$.", "#### 16", "false_equation"),
        ("She has twice 9 apples.", "#### 9", "multiplier_word"),
        ("It is the number of eggs she sells.", "#### 9", "prose_in_answer"),
        ("Janet makes 18 cents every day.", "#### \\$18", "unit_mismatch"),
        ("In 18 days, Janet collects 25 eggs.", "#### 18", "not_equivalent"),
    ],
)
def test_refusals_are_named(block: str, label: str, reason: str) -> None:
    async def run():
        scorer = Scorer(Settings(verify_workers=1), Verifier(None))  # decided without the pool
        return await scorer.score(formatted("work", block), None, label)

    item = asyncio.run(run())
    assert (item.accuracy_score, item.reason) == (0.0, reason)
