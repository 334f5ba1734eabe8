"""Reasoning models' formats through OpenRLHF's real reward executor, and OpenRLHF's own dynamic
filtering over the server's answers.

A real reward server on 127.0.0.1 (`LocalRewardServer`, default settings: the paper's format),
chosen per run by `?format=` in `--reward.remote_url`, as a user would pass it. The executors
are OpenRLHF 0.11.2's `SingleTurnAgentExecutor` and GTPO's `RetryingRewardExecutor`; only the
vLLM engine is scripted (it needs a GPU): it returns the tokens of chosen completions. The filter
is `SamplesGenerator._generate_vllm` from the installed wheel
(openrlhf/trainer/ppo_utils/samples_generator.py), with Ray's object store replaced by a dict.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

agent = pytest.importorskip("openrlhf.utils.agent")
samples_generator = pytest.importorskip("openrlhf.trainer.ppo_utils.samples_generator")

from gtpo.local_reward_server import LocalRewardServer  # noqa: E402

G = 4
PREFIX = "<|im_start|>user What is 3+4 ? <|im_end|> <|im_start|>assistant"
RIGHT, WRONG = "7", "8"
# Each run: its format, whether the chat template opens the think block, and how a completion
# with a given final answer reads.
FINAL = "So the answer is $\\boxed{{{v}}}$ ."
RUNS = {
    "think_prefilled": ("think", True, "Okay 3+4 is {v} . </think> " + FINAL),
    "think": ("think", False, "<think> Okay 3+4 is {v} . </think> " + FINAL),
    "boxed": ("boxed", False, "We add 3 and 4 . The answer is $\\boxed{{{v}}}$ ."),
}
# The groups of one step, by how many of their G completions are right.
GROUPS = {"mixed_2": 2, "mixed_1": 1, "all_right": G, "all_wrong": 0}


def word_tokenizer(texts: list[str]):
    """Word-level tokenizer over every word of ``texts`` (decode joins words with spaces)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for text in texts for w in text.split()} | {"<|im_end|>"})
    vocab = {"<unk>": 0, **{w: i + 1 for i, w in enumerate(words)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


class ScriptedEngine:
    """The vLLM engine's `generate` as the executor calls it: the next scripted completion."""

    def __init__(self, completions: list[list[int]]) -> None:
        self.completions = list(completions)

    async def generate(self, prompt_ids, params, multi_modal_data=None):
        ids = self.completions.pop(0)
        output = SimpleNamespace(token_ids=ids, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LocalRewardServer(tmp_path_factory.mktemp("rs") / "rs.log") as srv:
        srv.wait()
        yield srv


def rollout(executor, run: str) -> dict[str, list[dict]]:
    """Every group's G samples through ``executor.execute``, one request per sample, as a
    rollout actor sends them; the samples of each group in order."""
    _, prefilled, template = RUNS[run]
    prompt = PREFIX + (" <think>" if prefilled else "")
    texts = {
        name: [template.format(v=RIGHT if i < right else WRONG) for i in range(G)]
        for name, right in GROUPS.items()
    }
    tokenizer = word_tokenizer([prompt, *(t for group in texts.values() for t in group)])
    params = SimpleNamespace(max_tokens=64, logprobs=None)

    async def all_groups() -> dict[str, list[dict]]:
        out = {}
        for name, group in texts.items():
            completions = [tokenizer(t + " <|im_end|>")["input_ids"] for t in group]
            engine = ScriptedEngine(completions)
            out[name] = await asyncio.gather(
                *(executor.execute(f"{prompt} {name}", "#### 7", params, 256, tokenizer, engine)
                  for _ in group)
            )  # fmt: skip
        return out

    return asyncio.run(all_groups())


def executors(url: str) -> dict[str, object]:
    made = {"openrlhf": lambda: agent.SingleTurnAgentExecutor(remote_rm_url=url)}
    pytest.importorskip("deepspeed")  # seam.py imports OpenRLHF's training side
    from gtpo.openrlhf.rollout_actor import RetryingRewardExecutor

    made["gtpo"] = lambda: RetryingRewardExecutor(url, reward_timeout=30)
    return made


@pytest.mark.parametrize("run", list(RUNS))
def test_format_in_the_remote_url_scores_each_sample(server, run: str) -> None:
    """`--reward.remote_url http://host/get_reward?format=...`: right answers earn 20 and
    score 1, wrong ones 10 and 0, through OpenRLHF's executor and GTPO's; without the format
    (the server's paper format) no sample earns anything."""
    fmt = RUNS[run][0]
    for name, make in executors(f"{server.url}/get_reward?format={fmt}").items():
        groups = rollout(make(), run)
        for group, samples in groups.items():
            right = GROUPS[group]
            expected = [[20.0]] * right + [[10.0]] * (G - right)
            assert [s["reward"] for s in samples] == expected, (name, group)
            assert [s["scores"] for s in samples] == [[1.0]] * right + [[0.0]] * (G - right)
            assert [s["extra_logs"]["accuracy_reward"] for s in samples] == [[10.0]] * right + [
                [0.0]
            ] * (G - right)
    paper = rollout(agent.SingleTurnAgentExecutor(remote_rm_url=f"{server.url}/get_reward"), run)
    assert {s["reward"][0] for samples in paper.values() for s in samples} == {0.0}


def dynamic_filter(groups: dict[str, list[dict]], low: float = 0.0, high: float = 1.0):
    """OpenRLHF's `_generate_vllm` with `--algo.dynamic_filtering_enable` over these groups:
    the prompts it keeps, and how many it consumed. The dataloader yields one prompt at a time;
    the rollout actors' answers come from ``groups`` instead of Ray's object store."""
    generator = samples_generator.SamplesGenerator.__new__(samples_generator.SamplesGenerator)
    generator.args = SimpleNamespace(algo=SimpleNamespace(dynamic_filtering_range=(low, high)))
    by_prompt = {samples[0]["prompt"]: samples for samples in groups.values()}
    generator._dispatch_prompts_to_vllm = lambda prompts, labels, images=None, **kw: list(prompts)
    loader = iter([(None, [p], [by_prompt[p][0]["label"]], [None]) for p in by_prompt])
    store = SimpleNamespace(
        wait=lambda refs, num_returns, timeout: (refs[:num_returns], refs[num_returns:]),
        get=lambda ref: by_prompt[ref],
    )
    real_ray = samples_generator.ray
    samples_generator.ray = store
    try:
        kept, consumed, _ = generator._generate_vllm(
            dataloader_iter=loader, num_prompts=len(by_prompt), dynamic_filtering=True
        )
    finally:
        samples_generator.ray = real_ray
    return {e.prompts[0].rsplit(" ", 1)[1] for e in kept}, consumed


@pytest.mark.parametrize("run", list(RUNS))
def test_openrlhf_dynamic_filtering_keeps_mixed_groups(server, run: str) -> None:
    """DAPO's rule in OpenRLHF 0.11.2 (`--algo.dynamic_filtering_range 0 1`, its default): a
    group whose mean score lies strictly inside the range is kept. With scores the accuracy as
    1 or 0, the mixed groups are kept and the all-right and all-wrong ones dropped; with the
    total reward as the score (what the server sent before), every group was dropped."""
    fmt = RUNS[run][0]
    groups = rollout(agent.SingleTurnAgentExecutor(f"{server.url}/get_reward?format={fmt}"), run)
    kept, consumed = dynamic_filter(groups)
    assert kept == {"mixed_2", "mixed_1"}
    assert consumed == len(GROUPS)
    # The same samples scored by their total reward (0..20), as before: nothing survives.
    as_reward = {
        name: [{**s, "scores": s["reward"]} for s in samples] for name, samples in groups.items()
    }
    assert dynamic_filter(as_reward)[0] == set()
