"""GTPOTrainer end to end: real TRL GRPOTrainer runs on CPU with a tiny Llama built from a config,
a tokenizer trained locally, rewards from a real reward server on 127.0.0.1 (helpers in
trl_harness.py)."""

from __future__ import annotations

import dataclasses

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from paper_reference import reference_weights  # noqa: E402
from trl import GRPOTrainer  # noqa: E402
from trl_harness import (  # noqa: E402
    G,
    capture,
    check_loss_advantages,
    eq7_loss,
    expected_advantages,
    length_reward,
    make_args,
    make_trainer,
)

from gtpo import GTPOConfig, GTPOConfigError  # noqa: E402
from gtpo.demo.model import build_model  # noqa: E402
from gtpo.local_reward_server import LocalRewardServer  # noqa: E402
from gtpo.reward_client import request_count  # noqa: E402
from gtpo.trl import GTPOTrainer, RewardServerReward, trl_refusals  # noqa: E402


@pytest.fixture(scope="module")
def gtpo_run(task, tmp_path_factory):
    out = tmp_path_factory.mktemp("gtpo")
    with LocalRewardServer(out / "reward_server.log") as server:
        server.wait()
        reward = RewardServerReward(server.url)
        args = make_args(out, save_strategy="steps", save_steps=1)
        trainer = make_trainer(task, args, GTPOConfig(h_ini_prompts=6), [reward, length_reward])
        generations, losses = capture(trainer)
        trainer.train()
        served = request_count(server.url)
        reward.close()
    return trainer, generations, losses, served, out


def test_weights_match_the_paper_reference(gtpo_run):
    trainer, generations, losses, _, _ = gtpo_run
    assert trainer.h_ini_source == "measured"
    expected, seen = expected_advantages(generations, trainer.h_ini)
    assert check_loss_advantages(losses, expected) == sum(len(raw) for _, raw, _ in generations)
    # The check meant something: λ changed tokens and δ both kept and removed completions.
    assert seen["conflicts"] > 0
    assert seen["filtered"] > 0 and seen["kept"] > 0, (seen, trainer.h_ini)
    # One policy iteration, aligned with the accumulation window: no old-log-prob forward ran,
    # so ⟨H⟩ came from the loss forward itself (no extra forward).
    assert all("old_per_token_logps" not in inputs for inputs in losses)


def test_loss_is_eq7_recomputed_independently(gtpo_run):
    trainer, _, losses, _, _ = gtpo_run
    inputs = dict(losses[-1])
    model = trainer.model
    model.train()
    loss = trainer._compute_loss(model, inputs)
    expected = eq7_loss(trainer, model, inputs, trainer.gtpo_config.gamma)
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
    params = [p for p in model.parameters() if p.requires_grad]
    got = torch.autograd.grad(loss, params, retain_graph=False)
    want = torch.autograd.grad(expected, params)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-3)


def test_metrics_and_rewards_reach_trl_logs(gtpo_run):
    trainer, generations, _, served, _ = gtpo_run
    logged = [row for row in trainer.state.log_history if "loss" in row]
    assert len(logged) == 2
    for row in logged:
        for name in ("conflict_frac_pos", "conflict_frac_neg", "filtered_frac", "entropy_mean"):
            value = row[f"gtpo/{name}"]
            assert value >= 0 and (name == "entropy_mean" or value <= 1)
        assert row["gtpo/h_ini"] == pytest.approx(trainer.h_ini)
        assert 0 <= row["rewards/format"] <= 10 and 0 <= row["rewards/accuracy"] <= 10
    # Every completion of both steps was scored over HTTP, 8 completions a request.
    assert served == sum(-(-len(raw) // 8) for _, raw, _ in generations)


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
    generations, losses = capture(trainer)
    trainer.train()
    batch, raw, _ = generations[0]
    assert losses[0]["advantages"].dim() == 1  # TRL's advantages, untouched
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
        trainer._compute_loss(trainer.model, dict(inputs)),
        plain._compute_loss(plain.model, dict(inputs)),
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
    generations, losses = capture(trainer)
    trainer.train()
    batch, raw, mean_entropy = generations[0]
    mask = batch["completion_mask"].bool()
    signs_matter = 0
    for start in range(0, len(raw), G):
        rows = range(start, start + G)
        tokens = [batch["completion_ids"][i][mask[i]].tolist() for i in rows]
        shifted = [float(raw[i] - gamma * mean_entropy[i]) for i in rows]
        signs_matter += reference_weights(tokens, [float(raw[i]) for i in rows]) != (
            reference_weights(tokens, shifted)
        )
    assert signs_matter > 0, "λ from the shifted advantages would be the same: check is moot"
    expected, seen = expected_advantages(generations, 0.5, gamma=gamma)
    assert check_loss_advantages(losses, expected) == len(raw)
    assert seen["kept"] > 0, "everything filtered: the check would be vacuous"
    model = trainer.model
    model.train()
    inputs = dict(losses[0])
    loss = trainer._compute_loss(model, inputs)
    torch.testing.assert_close(loss, eq7_loss(trainer, model, inputs, 0.0), atol=1e-5, rtol=1e-4)


# (gradient_accumulation_steps, steps_per_generation, num_iterations): the batch shapes users
# set. Aligned ones use each generation before any optimizer step (⟨H⟩ from the loss forward);
# the others make TRL run its old-log-prob forward (⟨H⟩ from that forward, at generation).
SHAPES = {
    "accumulation": (2, 1, 1),
    "steps-per-generation-aligned": (2, 2, 1),
    "steps-per-generation": (1, 2, 1),
    "iterations": (1, 1, 2),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_batch_shapes_users_set_match_the_paper(task, tmp_path, shape):
    accumulation, steps_per_generation, iterations = SHAPES[shape]
    args = make_args(
        tmp_path, max_steps=2, per_device_train_batch_size=8,
        gradient_accumulation_steps=accumulation, steps_per_generation=steps_per_generation,
        num_iterations=iterations,
    )  # fmt: skip
    trainer = make_trainer(task, args, GTPOConfig(h_ini_prompts=4))
    generations, losses = capture(trainer)
    trainer.train()
    off_policy = accumulation % (steps_per_generation * iterations) != 0
    assert all(("old_per_token_logps" in inputs) == off_policy for inputs in losses)
    expected, seen = expected_advantages(generations, trainer.h_ini)
    rows = check_loss_advantages(losses, expected)
    assert rows == 2 * accumulation * 8  # every micro-batch of both optimizer steps checked
    assert seen["conflicts"] > 0 and seen["kept"] > 0
    inputs = dict(losses[-1])
    trainer.model.train()
    loss = trainer._compute_loss(trainer.model, inputs)
    expected_loss = eq7_loss(trainer, trainer.model, inputs, trainer.gtpo_config.gamma)
    torch.testing.assert_close(loss, expected_loss, atol=1e-5, rtol=1e-4)


def forwards_outside_generation(trainer, record=lambda model: torch.is_grad_enabled()) -> list:
    """One entry per forward of the policy outside `generate` (by default True: gradients on),
    from now on; generation runs one forward per token and is the same for every trainer."""
    model, seen, generating = trainer.model, [], [False]
    generate = model.generate

    def generate_flagged(*args, **kwargs):
        generating[0] = True
        try:
            return generate(*args, **kwargs)
        finally:
            generating[0] = False

    model.generate = generate_flagged
    model.register_forward_pre_hook(
        lambda module, _: None if generating[0] else seen.append(record(module))
    )
    return seen


@pytest.mark.parametrize("iterations", [1, 2], ids=["loss-forward", "old-forward"])
@pytest.mark.parametrize("algo", ["gtpo", "grpo"])
def test_no_forward_beyond_trls_own_grpo(task, tmp_path, algo, iterations):
    """⟨H⟩ for δ comes from a forward TRL already runs (an earlier version ran one more no-grad
    forward per generation batch): GTPO and GRPO run exactly the forwards of TRL's GRPOTrainer."""
    args = make_args(tmp_path, max_steps=2, num_iterations=iterations)
    plain = make_trainer(task, args, None, cls=GRPOTrainer)
    expected = forwards_outside_generation(plain)
    plain.train()
    trainer = make_trainer(task, args, GTPOConfig(algo=algo, h_ini=1.0))  # H_ini given: none run
    seen = forwards_outside_generation(trainer)
    trainer.train()
    # What is counted: one loss forward a step, and with two iterations TRL's old-log-prob
    # forward for the one generation both steps use.
    assert (expected.count(True), expected.count(False)) == (2, iterations - 1)
    assert seen == expected


def test_h_ini_forward_is_the_models_own_distribution(task, tmp_path):
    """H_ini's entropy forward runs in eval mode (no dropout) and without gradient checkpointing;
    training's settings are back afterwards."""
    args = make_args(tmp_path, gradient_checkpointing=True)
    trainer = make_trainer(task, args, GTPOConfig(h_ini_prompts=2))
    trainer.model.gradient_checkpointing_enable()  # as Trainer.train does with these args
    trainer.model.train()
    modes = forwards_outside_generation(
        trainer, lambda model: (model.training, model.is_gradient_checkpointing)
    )
    trainer.measure_h_ini()
    assert modes == [(False, False)]  # one forward: 2 prompts × G fit one micro-batch
    assert trainer.model.training and trainer.model.is_gradient_checkpointing
