"""The format corpora (``format_corpus.py``): whole responses of reasoning models in the
``think`` and ``boxed`` formats, scored by the service's scorer with a real verification pool.
Every right response earns accuracy 10, every wrong one 0, each with the format reward its
layout earns."""

from __future__ import annotations

import pytest
from rs_corpora import load_corpus, score_completions

CORPUS = load_corpus("format_corpus")
PROMPT = "<|im_start|>user\nSolve the problem.<|im_end|>\n<|im_start|>assistant\n"
CASES = [("think", r) for r in CORPUS.THINK] + [("boxed", r) for r in CORPUS.BOXED]


def prompt_of(response) -> str:
    # A template that prefills the think block ends the prompt with "<think>\n".
    return PROMPT + ("<think>\n" if response.prefilled else "")


@pytest.fixture(scope="module")
def scored() -> dict[str, list]:
    return {
        name: score_completions(
            [r.text for r in rows], [r.label for r in rows], [prompt_of(r) for r in rows], name
        )
        for name, rows in (("think", CORPUS.THINK), ("boxed", CORPUS.BOXED))
    }


def test_corpus_size_and_styles() -> None:
    for rows in (CORPUS.THINK, CORPUS.BOXED):
        assert sum(r.correct for r in rows) >= 200 and sum(not r.correct for r in rows) >= 300
        assert len({(r.text, r.label, r.prefilled) for r in rows}) == len(rows), "duplicates"
        assert all(r.why for r in rows)
    styles = {r.style for r in CORPUS.THINK}
    for style in ("r1_prefilled", "r1_open", "qwen3", "qwq", "box_in_think", "empty_think"):
        assert style in styles
    for style in ("truncated", "truncated_open", "right_in_think", "several_boxes"):
        assert style in styles
    assert {r.prefilled for r in CORPUS.THINK} == {True, False}


@pytest.mark.parametrize(
    "index", range(len(CASES)), ids=[f"{n}:{r.style}:{r.label[-12:]}" for n, r in CASES]
)
def test_response(scored: dict[str, list], index: int) -> None:
    name, response = CASES[index]
    item = scored[name][
        CORPUS.THINK.index(response) if name == "think" else index - len(CORPUS.THINK)
    ]
    what = "right response refused" if response.correct else "wrong response rewarded"
    assert item.accuracy_score == (10.0 if response.correct else 0.0), (
        f"{what} ({response.style}: {response.why}): {item.answer!r} vs {item.reference!r} "
        f"-> {item.reason}"
    )
    assert item.format_score == response.format_score, (response.style, item.format_reason)
