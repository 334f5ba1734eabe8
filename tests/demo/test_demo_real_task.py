"""The real-model demo's task (gtpo.demo.word_problems, gtpo.demo.real): word problems whose
worked solutions hold, a held-out split never trained on, prompts in the model's own chat
template, and the policy wrapper's encode/decode round trip with the end-of-turn token."""

from __future__ import annotations

import random
import re

import pytest

from gtpo.demo.word_problems import TEMPLATES, make_word_split, word_problem
from reward_server.checker.extract import answer_block

EQUATION = re.compile(r"\$?(\d+) ([+\-×÷]) \$?(\d+) = \$?(\d+)")


@pytest.mark.parametrize("steps", [(1,), (2,), (1, 2)])
def test_every_worked_solution_is_right_and_ends_on_the_answer(steps):
    rng = random.Random(0)
    operations = {"+": int.__add__, "-": int.__sub__, "×": int.__mul__, "÷": int.__floordiv__}
    kinds = set()
    for _ in range(400):
        problem = word_problem(rng, steps)
        kinds.add(problem.kind)
        equations = EQUATION.findall(problem.reasoning)
        assert len(equations) == problem.steps, problem.reasoning
        for a, op, b, result in equations:
            assert operations[op](int(a), int(b)) == int(result), problem.reasoning
            if op == "÷":
                assert int(a) % int(b) == 0  # shares come out even
        assert int(equations[-1][3]) == problem.answer >= 0
        assert answer_block(problem.demonstration()).strip() == str(problem.answer)
    assert kinds == {t.__name__.lstrip("_") for s in steps for t in TEMPLATES[s]}


def test_the_held_out_questions_are_never_trained_on_and_do_not_move():
    small, large = make_word_split(50, 20), make_word_split(400, 20)
    assert [p.question for p in small.heldout] == [p.question for p in large.heldout]
    held = {p.question for p in large.heldout}
    assert not held & {p.question for p in large.train}
    assert len({p.question for p in large.train}) == 400
    with pytest.raises(ValueError, match="steps"):
        make_word_split(1, 1, steps=(3,))


def test_prompts_use_the_models_chat_template_and_the_policy_round_trips(real_model):
    from transformers import AutoTokenizer

    from gtpo.data.prompt import SYSTEM_PROMPT
    from gtpo.demo.real import chat_split, hf_policy, worked_solution

    tokenizer = AutoTokenizer.from_pretrained(real_model.path)
    split = chat_split(tokenizer, 8, 4, steps=(1,))
    problem = split.train[0]
    assert problem.prompt.startswith("<|im_start|>system\n" + SYSTEM_PROMPT + "<|im_end|>\n")
    assert problem.prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert worked_solution(problem) == problem.solution
    assert problem.solution.startswith("<reasoning>\n") and problem.solution.endswith("</answer>")

    policy = hf_policy(model=None, tokenizer=tokenizer)
    ids = policy.encode(problem.prompt)
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")  # a special token, once
    completion = [*policy.encode(problem.solution), policy.eos_id]
    text = policy.decode(completion)
    assert text == problem.solution + "<|im_end|>"  # kept: the server strips it, as OpenRLHF's
    assert policy.pad_id == policy.eos_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
