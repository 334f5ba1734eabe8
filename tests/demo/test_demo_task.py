"""The synthetic task and its tokenizer: right answers, distinct styles, a clean held-out split,
and noise shaped like the paper's situation (wrong answers come with shorter reasoning)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gtpo.demo.run import DemoConfig
from gtpo.demo.task import (
    BROKEN_FORMATS,
    N_OPERANDS,
    R_OPEN,
    STYLES,
    TAGS,
    Problem,
    clean_completion,
    corpus,
    demonstration,
    format_completion,
    make_split,
    random_problem,
    reasoning_text,
    running_values,
    style_of,
)
from gtpo.demo.tokenizer import EOS, build_tokenizer, check_round_trip
from reward_server.checker.extract import extract_answer
from reward_server.checker.format import score_format


def _problems(n: int, seed: int = 7) -> list[Problem]:
    rng = random.Random(seed)
    return [random_problem(rng) for _ in range(n)]


def test_answers_are_the_value_of_the_expression():
    for problem in _problems(2000):
        expression = problem.prompt.removesuffix("=")
        assert problem.prompt.endswith("=")
        assert problem.answer == eval(expression)  # only digits, + and -: safe
        assert all(v >= 0 for v in running_values(problem))
        assert len(problem.operands) in N_OPERANDS
    # Other sizes on request (the OpenRLHF fit harness keeps short problems).
    assert {len(p.operands) for p in make_split(50, 10, n_operands=(3,)).train} == {3}


def test_every_style_reasons_to_the_right_answer_in_the_paper_format():
    for problem in _problems(300):
        for style in STYLES:
            text = clean_completion(problem, style)
            verdict = score_format(text)
            assert verdict.score == 10.0, (style, text, verdict)
            assert extract_answer(text) == str(problem.answer)
            # The reasoning ends on the answer it states (no style computes something else).
            reasoning = text[len(R_OPEN) : text.index("</reasoning>")]
            assert reasoning.endswith(str(problem.answer)), (style, reasoning)


def test_hand_checked_styles():
    problem = Problem((3, 4, 2), ("+", "-"))
    values = running_values(problem)
    assert values == [3, 7, 5]
    assert reasoning_text(problem, "chain", values) == "3+4=7, 7-2=5"
    assert reasoning_text(problem, "words", values) == "3 plus 4 is 7, minus 2 is 5"
    assert reasoning_text(problem, "running", values) == "start 3, add 4 get 7, take 2 get 5"
    assert reasoning_text(problem, "regroup", values) == "add 3+4=7, take 2, 7-2=5"
    assert reasoning_text(problem, "short", values) == "3, 7, 5 so 5"


def test_styles_differ_so_a_group_shares_mostly_the_tags():
    split = make_split(300, 50)
    tokenizer = build_tokenizer(corpus(split.train))
    for problem in split.heldout:
        texts = [clean_completion(problem, style) for style in STYLES]
        assert len(set(texts)) == len(STYLES)
        ids = [tokenizer.encode(t).ids for t in texts]
        assert len({len(i) for i in ids}) >= 3  # lengths differ, not just wording
        common = 0
        while all(len(i) > common and i[common] == ids[0][common] for i in ids):
            common += 1
        # Across styles the only shared prefix is the <reasoning> tag.
        assert common == 1
        assert tokenizer.id_to_token(ids[0][0]) == R_OPEN


def test_completions_are_long_so_the_shared_tokens_are_a_small_share():
    """The paper's regime (Sec. 4.1): completions of many tokens, of which the spans every
    completion shares (4 tags and the end token) are a small part; not 10-token answers that
    are half tags."""
    split = make_split(2000, 16)
    tokenizer = build_tokenizer(corpus(split.train))
    rng = random.Random(0)
    lengths = [
        len(tokenizer.encode(demonstration(problem, rng).completion).ids) + 1  # + end token
        for problem in split.train
    ]
    mean = sum(lengths) / len(lengths)
    assert mean >= 38
    assert 5 / mean < 0.14
    shortest_style = min(
        sum(len(tokenizer.encode(clean_completion(p, style)).ids) for p in split.train[:200])
        for style in STYLES
    )
    assert shortest_style / 200 >= 25  # even the shortest style is not mostly tags
    assert max(lengths) <= DemoConfig().max_new_tokens


def test_heldout_prompts_never_appear_in_training():
    split = make_split(3000, 200)
    train = {p.prompt for p in split.train}
    heldout = {p.prompt for p in split.heldout}
    assert len(train) == 3000 and len(heldout) == 200
    assert not train & heldout
    # The held-out set does not depend on how many training prompts are asked for.
    assert make_split(100, 200).heldout == split.heldout
    assert make_split(3000, 200) == split


def test_wrong_answers_come_with_shorter_reasoning():
    rng = random.Random(0)
    problems = _problems(400, seed=3)
    demos = [demonstration(rng.choice(problems), rng) for _ in range(6000)]
    by_style = {s: [d for d in demos if d.style == s] for s in STYLES}
    error = {s: sum(not d.correct for d in ds) / len(ds) for s, ds in by_style.items()}
    assert error["short"] > 0.35
    assert all(error[s] < 0.25 for s in STYLES if s != "short")
    wrong = [len(d.completion) for d in demos if not d.correct]
    right = [len(d.completion) for d in demos if d.correct]
    assert sum(wrong) / len(wrong) < 0.9 * sum(right) / len(right)


def test_demonstrations_are_noisy_but_mostly_well_formed():
    rng = random.Random(1)
    problems = _problems(200, seed=5)
    demos = [demonstration(rng.choice(problems), rng) for _ in range(4000)]
    broken = [d for d in demos if not d.well_formed]
    assert 0.15 < len(broken) / len(demos) < 0.25
    for d in demos:
        assert (score_format(d.completion).score == 10.0) == d.well_formed, d.completion
    # Some well-formed demonstrations state an answer their reasoning does not reach.
    mismatched = 0
    for d in demos:
        if d.well_formed and d.style != "short":
            reasoning = d.completion[len(R_OPEN) : d.completion.index("</reasoning>")]
            mismatched += not reasoning.endswith(extract_answer(d.completion))
    assert mismatched > 0.02 * len(demos)


@pytest.mark.parametrize("broken", BROKEN_FORMATS)
def test_broken_formats_lose_format_reward(broken):
    assert score_format(format_completion("3+4=7", "7", broken)).score < 10.0


def test_tokenizer_round_trips_splits_digits_and_keeps_tags_whole():
    split = make_split(500, 50)
    tokenizer = build_tokenizer(corpus(split.train))
    check_round_trip(tokenizer, corpus(split.heldout))
    assert tokenizer.get_vocab_size() <= 64
    text = "<reasoning>12+39=51</reasoning><answer>51</answer>"
    tokens = tokenizer.encode(text).tokens
    assert tokens[:6] == ["<reasoning>", "1", "2", "+", "3", "9"]
    assert Counter(tokens)["<answer>"] == 1 and tokens[-1] == "</answer>"
    ids = [*tokenizer.encode(text).ids, tokenizer.token_to_id(EOS)]
    assert tokenizer.decode(ids, skip_special_tokens=False) == text + EOS
    assert all(tokenizer.token_to_id(tag) is not None for tag in TAGS)


def test_style_of_recognises_every_style():
    for problem in _problems(200):
        for style in STYLES:
            assert style_of(clean_completion(problem, style)) == style
    assert style_of("<answer>5</answer>") == "other"
    assert style_of("<reasoning>hello</reasoning><answer>5</answer>") == "other"
