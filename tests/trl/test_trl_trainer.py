"""GTPOTrainer end to end: real TRL GRPOTrainer runs on CPU with a tiny Llama built from a config,
a tokenizer trained locally, rewards from a real reward server on 127.0.0.1.

The only small part is the model. Its temperature is low (0.14) so that completions share
tokens (conflict tokens exist) and their entropies fall on both sides of ln 2 (δ is not
trivially 1).
"""

from __future__ import annotations

import dataclasses

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from datasets import Dataset  # noqa: E402
from paper_reference import reference_delta, reference_weights  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from gtpo import GTPOConfig, GTPOConfigError  # noqa: E402
from gtpo.demo.model import build_model  # noqa: E402
from gtpo.demo.task import corpus, make_split  # noqa: E402
from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer  # noqa: E402
from gtpo.local_reward_server import LocalRewardServer  # noqa: E402
from gtpo.reward_client import request_count  # noqa: E402
from gtpo.trl import GTPOTrainer, RewardServerReward, trl_refusals  # noqa: E402

G = 4
TEMPERATURE = 0.14


@pytest.fixture(scope="module")
def task():
    split = make_split(48, 0)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(corpus(split.train)), pad_token=PAD, eos_token=EOS
    )
    rows = [{"prompt": p.prompt, "label": str(p.answer)} for p in split.train]
    return tokenizer, Dataset.from_list(rows)


def length_reward(completions, **_):
    """A second reward that varies within every group, so advantages have both signs."""
    return [float(len(c) % 3) for c in completions]


def make_args(out, **overrides) -> GRPOConfig:
    values = dict(
        output_dir=str(out), loss_type="grpo", num_generations=G, per_device_train_batch_size=8,
        max_completion_length=16, max_steps=2, temperature=TEMPERATURE, learning_rate=1e-3,
        report_to=[], use_cpu=True, bf16=False, logging_steps=1, save_strategy="no", seed=0,
    )  # fmt: skip
    values.update(overrides)
    return GRPOConfig(**values)


def make_trainer(task, args, gtpo_config, reward_funcs=None, cls=GTPOTrainer):
    tokenizer, dataset = task
    model = build_model(len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, seed=0)
    extra = {"gtpo_config": gtpo_config} if cls is GTPOTrainer else {}
    return cls(
        model, reward_funcs or [length_reward], args, train_dataset=dataset,
        processing_class=tokenizer, **extra,
    )  # fmt: skip


def capture(trainer):
    """Record every generated batch (with TRL's raw advantages) and every loss input."""
    batches, losses = [], []
    generate = trainer._generate_and_score_completions

    def spy(inputs):
        batch = generate(inputs)
        raw = list(trainer._logs["advantages"])[-len(batch["completion_ids"]) :]
        with torch.no_grad():  # ⟨H⟩ under the policy that sampled the batch, before the update
            entropy, _ = reference_entropies(trainer.model, batch)
        mask = batch["completion_mask"].bool()
        mean_entropy = (entropy * mask).sum(-1) / mask.sum(-1)
        batches.append((dict(batch), torch.tensor(raw), mean_entropy))
        return batch

    compute = trainer._compute_loss

    def loss_spy(model, inputs):
        losses.append(dict(inputs))
        return compute(model, inputs)

    trainer._generate_and_score_completions = spy
    trainer._compute_loss = loss_spy
    return batches, losses


def reference_entropies(model, batch):
    """Per-token entropy and log-prob of the completion tokens, from a plain forward (no TRL)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=mask).logits[:, -width - 1 : -1] / TEMPERATURE
    dist = torch.distributions.Categorical(logits=logits.float())
    return dist.entropy(), dist.log_prob(batch["completion_ids"])


@pytest.fixture(scope="module")
def gtpo_run(task, tmp_path_factory):
    out = tmp_path_factory.mktemp("gtpo")
    with LocalRewardServer(out / "reward_server.log") as server:
        server.wait()
        reward = RewardServerReward(server.url)
        args = make_args(out, save_strategy="steps", save_steps=1)
        trainer = make_trainer(task, args, GTPOConfig(h_ini_prompts=6), [reward, length_reward])
        batches, losses = capture(trainer)
        trainer.train()
        served = request_count(server.url)
        reward.close()
    return trainer, batches, losses, served, out


def test_weights_match_the_paper_reference(gtpo_run):
    trainer, batches, _, _, _ = gtpo_run
    assert trainer.h_ini_source == "measured"
    conflicts = filtered = kept = 0
    for batch, raw, mean_entropy in batches:
        mask = batch["completion_mask"].bool()
        for start in range(0, len(raw), G):
            rows = range(start, start + G)
            tokens = [batch["completion_ids"][i][mask[i]].tolist() for i in rows]
            weights = reference_weights(tokens, [float(raw[i]) for i in rows])
            for i, row in zip(rows, weights, strict=True):
                delta = reference_delta(float(mean_entropy[i]), trainer.h_ini)
                expected = torch.tensor(row) * delta * raw[i]
                got = batch["advantages"][i][mask[i]]
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
                conflicts += sum(w != 1 for w in row)
                filtered += delta == 0
                kept += delta == 1
    # The check meant something: λ changed tokens and δ both kept and removed completions.
    assert conflicts > 0
    assert filtered > 0 and kept > 0, (filtered, kept, trainer.h_ini)


def test_loss_is_eq7_recomputed_independently(gtpo_run):
    trainer, _, losses, _, _ = gtpo_run
    inputs = losses[-1]
    model = trainer.model
    model.train()
    loss = trainer._compute_loss(model, inputs)
    entropy, logprobs = reference_entropies(model, inputs)
    mask = inputs["completion_mask"].bool()
    # Eq. 7 with one iteration per batch: r = π_θ / π_θ_old, equal to 1 but carrying the gradient.
    ratio = torch.exp(logprobs - logprobs.detach())
    length = mask.sum(-1)
    surrogate = (inputs["advantages"] * ratio * mask).sum(-1) / length
    mean_entropy = (entropy * mask).sum(-1) / length
    objective = surrogate - trainer.gtpo_config.gamma * mean_entropy
    expected = -objective.mean() / trainer.current_gradient_accumulation_steps
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
    params = [p for p in model.parameters() if p.requires_grad]
    got = torch.autograd.grad(loss, params, retain_graph=False)
    want = torch.autograd.grad(expected, params)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-3)


def test_metrics_and_rewards_reach_trl_logs(gtpo_run):
    trainer, batches, _, served, _ = gtpo_run
    logged = [row for row in trainer.state.log_history if "loss" in row]
    assert len(logged) == 2
    for row in logged:
        for name in ("conflict_frac_pos", "conflict_frac_neg", "filtered_frac", "entropy_mean"):
            value = row[f"gtpo/{name}"]
            assert value >= 0 and (name == "entropy_mean" or value <= 1)
        assert row["gtpo/h_ini"] == pytest.approx(trainer.h_ini)
        assert 0 <= row["rewards/format"] <= 10 and 0 <= row["rewards/accuracy"] <= 10
    # Every completion of both steps was scored over HTTP, one request each.
    assert served == sum(len(raw) for _, raw, _ in batches)


def test_h_ini_survives_a_checkpoint_resume(gtpo_run, task):
    trainer, _, _, _, out = gtpo_run
    checkpoint = out / "checkpoint-1"
    assert (checkpoint / "trainer_state.json").read_text().count('"h_ini"') == 1
    resumed = make_trainer(task, make_args(out), GTPOConfig(h_ini_prompts=6))

    def must_not_measure():
        raise AssertionError("H_ini was measured again on resume")

    resumed.measure_h_ini = must_not_measure
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 2
    assert resumed.h_ini_source == "checkpoint"
    assert resumed.h_ini == trainer.h_ini
    assert resumed.state.log_history[-2]["gtpo/h_ini"] == pytest.approx(trainer.h_ini)


def test_grpo_mode_is_trls_own_loss(task, tmp_path):
    args = make_args(tmp_path, max_steps=1)
    trainer = make_trainer(task, args, GTPOConfig(algo="grpo"))
    batches, losses = capture(trainer)
    trainer.train()
    batch, raw, _ = batches[0]
    assert batch["advantages"].dim() == 1  # TRL's advantages, untouched
    torch.testing.assert_close(batch["advantages"], raw)
    assert trainer.h_ini is None  # no δ, so nothing to measure
    assert trainer.state.log_history[0]["gtpo/conflict_frac_pos"] == 0
    plain = make_trainer(task, args, None, cls=GRPOTrainer)
    plain.model.load_state_dict(trainer.model.state_dict())
    plain.model.train()
    # Set by Trainer's loop for the micro-batch; the plain trainer has not run one.
    plain.current_gradient_accumulation_steps = trainer.current_gradient_accumulation_steps
    trainer.model.train()
    inputs = losses[0]
    torch.testing.assert_close(
        trainer._compute_loss(trainer.model, inputs), plain._compute_loss(plain.model, inputs)
    )


REFUSED = [
    ({"beta": 0.04}, "beta is 0.04"),
    ({"loss_type": "dapo"}, "loss_type is 'dapo'"),
    ({"loss_type": "bnpo"}, "loss_type is 'bnpo'"),
    ({"loss_type": "dr_grpo"}, "loss_type is 'dr_grpo'"),
    ({"loss_type": "sapo"}, "loss_type is 'sapo'"),
    ({"loss_type": "cispo"}, "loss_type is 'cispo'"),
    ({"importance_sampling_level": "sequence"}, "importance_sampling_level is 'sequence'"),
    ({"top_entropy_quantile": 0.2}, "top_entropy_quantile is 0.2"),
    ({"entropy_coef": 0.01}, "entropy_coef is 0.01"),
    ({"off_policy_mask_threshold": 0.5}, "off_policy_mask_threshold"),
]


@pytest.mark.parametrize(("override", "message"), REFUSED)
def test_refuses_settings_that_contradict_gtpo(task, tmp_path, override, message):
    with pytest.raises(GTPOConfigError, match=message.replace("(", r"\(")):
        make_trainer(task, make_args(tmp_path, **override), GTPOConfig())
    # The GRPO baseline keeps TRL's choices (only G < 2 is refused there).
    assert trl_refusals(make_args(tmp_path, **override), GTPOConfig(algo="grpo")) == []


def test_refuses_fewer_than_two_generations(task, tmp_path):
    with pytest.raises(ValueError, match="at least 2 generations"):  # TRL's own check
        make_args(tmp_path, num_generations=1)
    args = make_args(tmp_path)
    args.num_generations = 1  # changed after TRL validated it
    for algo in ("gtpo", "grpo"):
        with pytest.raises(GTPOConfigError, match="num_generations is 1"):
            make_trainer(task, args, GTPOConfig(algo=algo))


def test_refuses_tools(task, tmp_path):
    def lookup(x: str) -> str:
        """Look x up.

        Args:
            x: the key
        """
        return x

    tokenizer, dataset = task
    model = build_model(len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, seed=0)
    with pytest.raises(GTPOConfigError, match="tools, environment_factory and rollout_func"):
        GTPOTrainer(
            model, [length_reward], make_args(tmp_path), train_dataset=dataset,
            processing_class=tokenizer, tools=[lookup],
        )  # fmt: skip


def test_gtpo_config_is_the_projects(task, tmp_path):
    with pytest.raises(GTPOConfigError, match=r"gtpo_config must be a gtpo\.GTPOConfig"):
        make_trainer(task, make_args(tmp_path), dataclasses.asdict(GTPOConfig()))


def test_reward_function_names_a_missing_label_column():
    reward = RewardServerReward("http://127.0.0.1:9")
    try:
        with pytest.raises(KeyError, match=r"no 'label' column.*'answer'"):
            reward(prompts=["1+1="], completions=["2"], answer=["2"])
    finally:
        reward.close()


def test_advantage_form_folds_the_entropy_into_trls_advantages(task, tmp_path):
    """entropy_form="advantage": TRL's advantages become λ·δ·(A_i − γ⟨H⟩_i), λ from the signs
    of A_i, and the loss is the surrogate alone (no entropy term). scale_rewards="none" is TRL's
    centred-not-scaled advantage (OpenRLHF's dr_grpo)."""
    args = make_args(tmp_path, max_steps=1, scale_rewards="none")
    # γ large enough that the shift flips some advantages' signs, so the test can tell λ from
    # the original signs apart from λ from the shifted ones.
    gamma = 2.0
    config = GTPOConfig(entropy_form="advantage", gamma=gamma, h_ini=0.5)
    trainer = make_trainer(task, args, config)
    batches, losses = capture(trainer)
    trainer.train()
    batch, raw, mean_entropy = batches[0]
    mask = batch["completion_mask"].bool()
    kept = signs_matter = 0
    for start in range(0, len(raw), G):
        rows = range(start, start + G)
        tokens = [batch["completion_ids"][i][mask[i]].tolist() for i in rows]
        shifted = [float(raw[i] - gamma * mean_entropy[i]) for i in rows]
        weights = reference_weights(tokens, [float(raw[i]) for i in rows])
        signs_matter += weights != reference_weights(tokens, shifted)
        for i, row, a in zip(rows, weights, shifted, strict=True):
            delta = reference_delta(float(mean_entropy[i]), 0.5)
            expected = torch.tensor(row) * delta * a
            torch.testing.assert_close(batch["advantages"][i][mask[i]], expected, atol=1e-4, rtol=0)
            kept += delta == 1
    assert kept > 0, "everything filtered: the check would be vacuous"
    assert signs_matter > 0, "λ from the shifted advantages would be the same: check is moot"
    model = trainer.model
    model.train()
    inputs = losses[0]
    loss = trainer._compute_loss(model, inputs)
    _, logprobs = reference_entropies(model, inputs)
    ratio = torch.exp(logprobs - logprobs.detach())
    surrogate = (inputs["advantages"] * ratio * mask).sum(-1) / mask.sum(-1)
    expected = -surrogate.mean() / trainer.current_gradient_accumulation_steps
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
