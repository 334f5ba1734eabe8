"""RewardServerReward in TRL with the reasoning models' formats: TRL's own reward call
(`GRPOTrainer._calculate_rewards`, reached through GTPOTrainer) with scripted completions, a
real reward server on 127.0.0.1 and `response_format` sent as `?format=`. The prefilled case is
a conversational prompt whose chat template opens `<think>` after the assistant header, as
DeepSeek-R1 distills' templates do."""

from __future__ import annotations

import pytest

trl = pytest.importorskip("trl")

from trl_harness import make_args, make_trainer  # noqa: E402

from gtpo import GTPOConfig  # noqa: E402
from gtpo.local_reward_server import LocalRewardServer  # noqa: E402
from gtpo.trl import RewardServerReward  # noqa: E402

PREFILLING_TEMPLATE = (
    "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT <think>\n{% endif %}"
)
QUESTION = [{"role": "user", "content": "What is 3+4?"}]
CASES = {
    # (response format, prompt, completion of a right answer, of a wrong one)
    "think_prefilled": ("think", QUESTION, "3+4=7.\n</think>\n\nThe answer is $\\boxed{{{v}}}$."),
    "think": ("think", "What is 3+4? ", "<think>\n3+4=7.\n</think>\n\n$\\boxed{{{v}}}$"),
    "boxed": ("boxed", "What is 3+4? ", "3 + 4 = 7, so the answer is $\\boxed{{{v}}}$."),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LocalRewardServer(tmp_path_factory.mktemp("rs") / "rs.log") as srv:
        srv.wait()
        yield srv


@pytest.mark.parametrize("case", list(CASES))
def test_trl_rewards_in_the_chosen_format(task, tmp_path, server, case: str) -> None:
    fmt, prompt, completion = CASES[case]
    tokenizer, _ = task
    tokenizer.chat_template = PREFILLING_TEMPLATE
    trainer = make_trainer(task, make_args(tmp_path), GTPOConfig(h_ini_prompts=6))
    rewards = {}
    for name, response_format in (("format", fmt), ("server default", None)):
        # the tokenizer renders the conversational prompt: what the model was prompted with
        reward = RewardServerReward(
            server.url, response_format=response_format, tokenizer=tokenizer
        )
        trainer.reward_funcs = [reward]
        trainer.reward_func_names = ["reward_server"]
        trainer.reward_processing_classes = [None]
        texts = [completion.format(v=v) for v in ("7", "8")]
        conversational = isinstance(prompt, list)
        completions = [
            [{"role": "assistant", "content": t}] if conversational else t for t in texts
        ]
        inputs = [{"prompt": prompt, "label": "7"} for _ in texts]
        got = trainer._calculate_rewards(inputs, [prompt] * 2, completions, [[1], [1]])
        rewards[name] = got[:, 0].tolist()
        reward.close()
    assert rewards["format"] == [20.0, 10.0]  # right: format + accuracy; wrong: format only
    assert rewards["server default"] == [0.0, 0.0]  # the paper's format finds no answer block
