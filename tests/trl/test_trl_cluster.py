"""What changes for GTPOTrainer on a cluster, emulated on CPU: the model's tensors on another
device, chat-format prompts from an instruct model, streaming datasets, reward-service outages,
and the TRL settings that only matter there (vLLM's importance sampling, ddp_timeout).

The device tests put the model's tensors on PyTorch's `meta` device, which follows CUDA's device
rules where they matter here (a CPU tensor mixed into `cat`/`stack`/`where` with them raises; a
CPU scalar in an elementwise op does not). Meta tensors have no values, so the one collective
(`accelerator.reduce`) is replaced by a function that checks its input's device and returns
known totals.

The two-process runs (accelerate with gloo, an eval batch that straddles groups, a reward
failure on one process) and the 10 s outage are in test_trl_processes.py (slow stage).
"""

from __future__ import annotations

import itertools

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from datasets import Dataset, IterableDataset  # noqa: E402
from trl_harness import G, make_args, make_trainer  # noqa: E402

from gtpo import GTPOConfig, GTPOConfigError  # noqa: E402
from gtpo.demo.task import clean_completion, format_completion, make_split  # noqa: E402
from gtpo.local_reward_server import LocalRewardServer  # noqa: E402
from gtpo.reward_client import RewardClient  # noqa: E402
from gtpo.trl import RewardServerReward, entropy_term, trl_refusals  # noqa: E402
from gtpo.trl.trainer import ADVANTAGES, SAMPLING_ENTROPY, WEIGHTS  # noqa: E402

META = torch.device("meta")


@pytest.fixture
def on_meta(monkeypatch):
    """The accelerator's device is `meta`; its reduce checks that what it sums lives there."""
    from accelerate import Accelerator

    monkeypatch.setattr(Accelerator, "device", property(lambda self: META))
    reduced: list[torch.Tensor] = []

    def reduce(tensor, reduction="sum"):
        assert tensor.device == META, f"reduced a tensor on {tensor.device}"
        reduced.append(tensor)
        return torch.ones(tensor.shape, dtype=tensor.dtype)  # known values (meta has none)

    return reduced, reduce


def test_h_ini_reduction_stays_on_the_models_device(task, tmp_path, on_meta, monkeypatch):
    """H_ini's per-process sums are built on the accelerator's device (the defaults measure it
    at step 0: a CPU tensor stacked with them crashed every GPU run)."""
    reduced, reduce = on_meta
    trainer = make_trainer(task, make_args(tmp_path), GTPOConfig(h_ini_prompts=6))
    monkeypatch.setattr(trainer.accelerator, "reduce", reduce)
    calls = []

    def sampled_entropies(prompts):  # the model's forward, on the accelerator
        calls.append(len(prompts))
        return torch.empty(len(prompts), device=META)

    trainer._sampled_entropies = sampled_entropies
    assert trainer.measure_h_ini() == 1.0  # the stand-in reduce's totals: 1 / 1
    assert sum(calls) == 6 * G
    assert [t.shape for t in reduced] == [torch.Size([2])]


@pytest.mark.parametrize("sampling_entropy", [False, True], ids=["loss-forward", "old-forward"])
def test_loss_time_terms_stay_on_the_models_device(
    task, tmp_path, on_meta, monkeypatch, sampling_entropy
):
    """δ, the entropy form, the advantages and Eq. 7's penalty of a loss micro-batch, with
    every input on the model's device: the result stays there, nothing is moved to the CPU."""
    _, reduce = on_meta
    config = GTPOConfig(h_ini=0.5, entropy_form="advantage")
    trainer = make_trainer(task, make_args(tmp_path), config)
    monkeypatch.setattr(trainer.accelerator, "reduce", reduce)
    trainer.h_ini = 0.5
    rows, width = 8, 6
    inputs = {
        "completion_mask": torch.ones(rows, width, dtype=torch.long, device=META),
        WEIGHTS: torch.empty(rows, width, device=META),
        ADVANTAGES: torch.empty(rows, device=META),
    }
    if sampling_entropy:
        inputs[SAMPLING_ENTROPY] = torch.empty(rows, device=META)
    entropies = torch.empty(rows, width, device=META, requires_grad=True)
    trainer._apply_gtpo(inputs, entropies)
    assert inputs["advantages"].device == META and inputs["advantages"].shape == (rows, width)
    assert entropy_term(entropies, inputs["completion_mask"], 0.1, 2.0).device == META


@pytest.fixture(scope="module")
def reward_server(tmp_path_factory):
    with LocalRewardServer(tmp_path_factory.mktemp("rs") / "rs.log") as server:
        server.wait()
        yield server


def test_chat_prompts_are_scored_through_the_reward_server(task, tmp_path, reward_server):
    """An instruct model's chat-format prompts and completions: each completion is scored on
    its own text, as the server scores it, with the right answer 20 and a wrong one 10."""
    tokenizer, _ = task
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    problems = make_split(4, 0).train
    chats = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": p.prompt}], "label": str(p.answer)}
         for p in problems]
    )  # fmt: skip
    texts = {
        p.prompt: [clean_completion(p, "chain"), format_completion("work", str(p.answer + 1))]
        for p in problems
    }
    reward = RewardServerReward(reward_server.url)
    args = make_args(tmp_path, max_steps=1, per_device_train_batch_size=G * 4)
    trainer = make_trainer((tokenizer, chats), args, GTPOConfig(h_ini=0.5), reward_funcs=[reward])
    by_ids = {tuple(tokenizer(p.prompt)["input_ids"]): p.prompt for p in problems}

    def scripted(prompt_ids, images, fields, num_generations):
        """The model's generation: alternately the right and a wrong well-formed answer."""
        out = []
        for k, ids in enumerate(prompt_ids):
            text = texts[by_ids[tuple(ids)]][k % 2]
            out.append([*tokenizer(text)["input_ids"], tokenizer.eos_token_id])
        return out, None

    trainer._generate_single_turn = scripted
    scored = []
    original = reward.__call__

    def spy(prompts, completions, **columns):
        rewards = original(prompts, completions, **columns)
        scored.append((prompts, completions, columns["label"], rewards))
        return rewards

    trainer.reward_funcs[0] = spy
    spy.__name__ = "reward_server"
    trainer.train()
    prompts, completions, labels, rewards = scored[0]
    assert all(isinstance(c, list) for c in prompts + completions)
    assert sorted(set(rewards)) == [10.0, 20.0]
    with RewardClient(reward_server.url) as client:
        direct = client.score(
            [p[0]["content"] for p in prompts], [c[0]["content"] for c in completions], labels, 1
        )
    assert rewards == direct.total
    reward.close()


def test_missing_label_error_lists_dataset_columns_only():
    reward = RewardServerReward("http://127.0.0.1:9")
    try:
        with pytest.raises(KeyError) as error:
            reward(
                prompts=["1+1="], completions=["2"], answer=["2"], completion_ids=[[1]],
                trainer_state=None, log_extra=print, log_metric=print,
            )  # fmt: skip
        assert "one of ['answer']" in str(error.value)
    finally:
        reward.close()


def test_streaming_dataset_measures_h_ini_on_its_first_prompts(task, tmp_path):
    """A datasets.IterableDataset: H_ini is measured on the first prompts of the stream, the
    ones training starts with, instead of failing on len()."""
    tokenizer, dataset = task
    rows = list(dataset)

    def stream():
        yield from rows

    streaming = IterableDataset.from_generator(stream)
    args = make_args(tmp_path, max_steps=1, per_device_train_batch_size=G * 2)
    trainer = make_trainer((tokenizer, streaming), args, GTPOConfig(h_ini_prompts=3))
    measured = []
    sampled = trainer._sampled_entropies

    def spy(prompts):
        measured.extend(prompts[::G])
        return sampled(prompts)

    trainer._sampled_entropies = spy
    first_batch = []
    generate = trainer._generate_and_score_completions

    def generation_spy(inputs):
        first_batch.extend(x["prompt"] for x in inputs[::G])
        return generate(inputs)

    trainer._generate_and_score_completions = generation_spy
    trainer.train()
    assert trainer.h_ini_source == "measured"
    assert len(measured) == 3
    shuffled = [r["prompt"] for r in itertools.islice(streaming.shuffle(seed=0), 3)]
    assert measured == shuffled  # the stream's first prompts, in TRL's shuffled order
    assert measured[:2] == first_batch[:2]  # training starts on the same prompts


VLLM_MODES = ["sequence_mask", "token_mask", "sequence_truncate"]


@pytest.mark.parametrize("mode", VLLM_MODES)
def test_vllm_importance_sampling_modes_that_drop_or_reweight_are_refused(tmp_path, mode):
    args = make_args(tmp_path)
    args.use_vllm, args.vllm_importance_sampling_mode = True, mode  # TRL would start vLLM
    (problem,) = trl_refusals(args, GTPOConfig())
    assert f"vllm_importance_sampling_mode is {mode!r}" in problem
    assert "token_truncate" in problem
    args.vllm_importance_sampling_mode = "token_truncate"
    assert trl_refusals(args, GTPOConfig()) == []
    args.vllm_importance_sampling_mode, args.vllm_importance_sampling_correction = mode, False
    assert trl_refusals(args, GTPOConfig()) == []


def test_a_reward_timeout_longer_than_the_collective_timeout_is_refused(task, tmp_path):
    args = make_args(tmp_path, ddp_timeout=120)
    with pytest.raises(GTPOConfigError, match=r"reward_timeout=300\) is not below ddp_timeout=120"):
        make_trainer(task, args, GTPOConfig())
    make_trainer(task, args, GTPOConfig(reward_timeout=60))  # accepted


def test_gtpo_trainer_gives_its_reward_timeout_to_the_reward_client(task, tmp_path):
    given = RewardServerReward("http://127.0.0.1:9", reward_timeout=7)
    default = RewardServerReward("http://127.0.0.1:9")
    trainer = make_trainer(
        task, make_args(tmp_path), GTPOConfig(reward_timeout=42), reward_funcs=[given, default]
    )
    assert default.client.retry_for_s == 42 and given.client.retry_for_s == 7
    assert all(r.defer_failures for r in trainer.reward_funcs[:2])
    given.close()
    default.close()
