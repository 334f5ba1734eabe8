"""OpenRLHF 0.11's own remote-reward client against a real server.

Needs the real ``openrlhf`` package: ``pip install --no-deps openrlhf==0.11.2`` plus the light
modules its package ``__init__`` imports (``transformers``, ``pylatexenc``); vLLM, DeepSpeed and
flash-attn are not needed to import ``openrlhf.utils.agent``.
"""

from __future__ import annotations

import asyncio

import pytest

agent = pytest.importorskip("openrlhf.utils.agent", reason="openrlhf 0.11 is not installed")

PROMPT = (
    "<|im_start|>system\nAnswer in <reasoning></reasoning><answer></answer>.<|im_end|>\n"
    "<|im_start|>user\nJanet has 3 apples and buys 4 more. How many?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def _query(response: str) -> str:
    # What SingleTurnAgentExecutor.execute sends: decode(prompt_ids + action_ids) with
    # special tokens kept, so the response ends with the end-of-turn token.
    return PROMPT + response + "<|im_end|>"


def test_fetch_rewards_via_http_single_sample(server) -> None:
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=server.url + "/get_reward")
    got = asyncio.run(
        executor._fetch_rewards_via_http(
            [_query("<reasoning>3 + 4 = 7</reasoning>\n<answer>7</answer>")],
            [PROMPT],
            ["Janet has 3 + 4 = <<3+4=7>>7 apples.\n#### 7"],
        )
    )
    # One response per shard (one server): what execute() reads rewards/scores/extra_logs from.
    assert got == [
        {
            "rewards": [20.0],
            "scores": [1.0],  # the accuracy as 1 or 0: what dynamic filtering reads
            "extra_logs": {"format_reward": [10.0], "accuracy_reward": [10.0]},
        }
    ]


def test_fetch_rewards_via_http_concurrent_group(server) -> None:
    """A group of G=8 completions scored concurrently, one request each, as the rollout does."""
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=server.url + "/get_reward")
    responses = [
        "<reasoning>3+4</reasoning><answer>7</answer>",
        "<reasoning>3+4</reasoning><answer>\\boxed{7}</answer>",
        "<reasoning>3+4</reasoning><answer>7 apples</answer>",
        "<reasoning>3*4</reasoning><answer>12</answer>",
        "<answer>7</answer>",
        "<reasoning>3+4 <answer>7</answer>",
        "<reasoning>3+4</reasoning>",
        "7",
    ]
    expected = [20.0, 20.0, 20.0, 10.0, 1.0, 1.5, 1.0, 0.0]

    async def group() -> list[list[dict]]:
        return await asyncio.gather(
            *(
                executor._fetch_rewards_via_http([_query(r)], [PROMPT], ["#### 7"])
                for r in responses
            )
        )

    results = asyncio.run(group())
    assert [res[0]["rewards"][0] for res in results] == expected
    assert [res[0]["extra_logs"]["accuracy_reward"][0] for res in results] == [
        10.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ]  # fmt: skip


def test_fetch_rewards_via_http_batch_of_several(server) -> None:
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=server.url + "/get_reward")
    got = asyncio.run(
        executor._fetch_rewards_via_http(
            [_query("<reasoning>r</reasoning><answer>\\frac{1}{2}</answer>"), _query("none")],
            [PROMPT, PROMPT],
            ["$\\boxed{0.5}$", "#### 1"],
        )
    )
    assert len(got) == 1 and got[0]["rewards"] == [20.0, 0.0]
