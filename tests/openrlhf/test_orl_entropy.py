"""Entropy on the OpenRLHF side: Eq. 7's per-completion penalty inside OpenRLHF's real
ActorPPOTrainer.training_step, computed by the fused pass (fused.py) with the values and
gradients of OpenRLHF's own log-probs and entropy but without its fp32 copies of the logits,
padded and packed samples."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
transformers = pytest.importorskip("transformers")

from openrlhf.models import Actor  # noqa: E402
from openrlhf.trainer.ppo_utils.experience import Experience  # noqa: E402
from tiny_llama import bare_actor_trainer, tiny_llama  # noqa: E402

from gtpo import completion_entropy, token_entropy  # noqa: E402
from gtpo.openrlhf.fused import FusedActorForward, fused_logprobs_and_entropy  # noqa: E402
from gtpo.openrlhf.policy import GTPOActorPPOTrainer  # noqa: E402
from gtpo.openrlhf.step import entropy_row_weights  # noqa: E402


def tiny_actor(seed: int = 0) -> Actor:
    model = tiny_llama(seed)
    actor = Actor(model)
    actor.packing_samples = False  # set by Actor only when it loads a checkpoint by name
    return actor


def actor_trainer(args, cls=GTPOActorPPOTrainer, seed: int = 0):
    """An actor trainer without DeepSpeed whose backward runs autograd and keeps the loss."""
    losses: list[torch.Tensor] = []

    def backward(loss):
        losses.append(loss)
        loss.backward()

    return bare_actor_trainer(args, tiny_actor(seed), backward, cls), losses


def batch(trainer):
    """Three completions of 2, 5 and 7 tokens: a token mean and a completion mean differ."""
    torch.manual_seed(1)
    sequences = torch.randint(1, 32, (3, 10))
    attention_mask = torch.ones_like(sequences)
    action_mask = torch.zeros(3, 9, dtype=torch.bool)
    for row, n in enumerate((2, 5, 7)):
        action_mask[row, 9 - n :] = True
    with torch.no_grad():
        old = trainer.actor(sequences, action_mask, attention_mask)
    experience = Experience(
        sequences=sequences,
        attention_mask=attention_mask,
        action_mask=action_mask,
        action_log_probs=old,
        advantages=torch.linspace(-1, 1, 27).view(3, 9),
        info={},
    )
    info = {
        "dp_size": 1,
        "batch_num_tokens": torch.tensor(14.0),
        "global_batch_size": torch.tensor(3.0),
    }
    return experience, info


def test_entropy_penalty_is_a_per_completion_mean_in_openrlhf_training_step(openrlhf_args):
    """OpenRLHF's real training_step, with GTPO's override, computes −γ·(1/N)Σ_i ⟨H⟩_i."""
    args = openrlhf_args("--gtpo.gamma", "0.1")
    trainer, losses = actor_trainer(args)
    experience, info = batch(trainer)
    sequences, attention_mask, action_mask = (
        experience.sequences, experience.attention_mask, experience.action_mask,
    )  # fmt: skip
    status = trainer.training_step(experience, 0.0, 0, info)

    with torch.no_grad():
        _, output = trainer.actor(sequences, action_mask, attention_mask, return_output=True)
        entropy = token_entropy(output["logits"])[:, :-1]
    per_completion = completion_entropy(entropy, action_mask).mean()
    token_mean = (entropy * action_mask).sum() / action_mask.sum()
    assert not math.isclose(float(per_completion), float(token_mean), rel_tol=1e-3)
    assert float(status["metrics"]["entropy_loss"]) == pytest.approx(
        float(per_completion), rel=1e-5
    )
    policy = float(status["metrics"]["policy_loss"])
    assert float(losses[0].detach()) == pytest.approx(
        policy + 0.1 * float(per_completion), rel=1e-5
    )
    assert not trainer.actor._forward_hooks and not trainer.actor._forward_pre_hooks  # one step


class ScaledOpenRLHFEntropy:
    """The reference: OpenRLHF's own log-probs and compute_entropy, its entropy rows scaled by
    Eq. 7's per-completion weights (what GTPO did before the fused pass)."""

    def __init__(self, trainer, experience, info):
        self.actor = trainer.actor
        self.scale = entropy_row_weights(
            experience.action_mask, info["batch_num_tokens"], info["global_batch_size"]
        )

    def __enter__(self):
        def hook(module, inputs, result):
            output = result[1]
            output.entropy = output.entropy * self.scale[:, None]

        self.handle = self.actor.register_forward_hook(hook)

    def __exit__(self, *exc):
        self.handle.remove()


def test_fused_training_step_has_openrlhfs_loss_and_gradients(openrlhf_args):
    """The same step through OpenRLHF's log-softmax and compute_entropy (with the rows scaled)
    and through the fused pass: equal loss and equal gradients of every parameter."""
    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

    args = openrlhf_args("--gtpo.gamma", "0.1")
    ours, our_losses = actor_trainer(args)
    reference, reference_losses = actor_trainer(args, cls=ActorPPOTrainer)
    experience, info = batch(ours)
    ours.training_step(experience, 0.0, 0, info)
    with ScaledOpenRLHFEntropy(reference, experience, info):
        ActorPPOTrainer.training_step(reference, experience, 0.0, 0, info)
    torch.testing.assert_close(our_losses[0], reference_losses[0], rtol=1e-5, atol=1e-6)
    for (name, mine), (_, theirs) in zip(
        ours.actor.named_parameters(), reference.actor.named_parameters(), strict=True
    ):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-6, msg=name)


def saved_for_backward_bytes(trainer, experience, info, fused: bool) -> int:
    """Bytes autograd saves for the backward pass during one training forward (views of one
    storage counted once)."""
    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    trainer.strategy.backward = lambda loss, model, optim: None
    scale = entropy_row_weights(
        experience.action_mask, info["batch_num_tokens"], info["global_batch_size"]
    )
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if fused:
            with FusedActorForward(trainer.actor, scale):
                type(trainer).__mro__[1].training_step(trainer, experience, 0.0, 0, info)
        else:
            type(trainer).__mro__[1].training_step(trainer, experience, 0.0, 0, info)
    return sum(storages.values())


def test_fused_entropy_saves_no_copy_of_the_logits(openrlhf_args):
    """What the penalty form keeps for backward beyond GRPO's step (entropy off): with the fused
    pass, per-position values only, no [B, T, V] tensor. (OpenRLHF's compute_entropy is
    torch.compile'd, so its saved tensors escape this count; benchmarks/step_cost.py measures
    its peak memory.)"""
    grpo = saved_for_backward_bytes(*_step(openrlhf_args, entropy=False), fused=False)
    fused = saved_for_backward_bytes(*_step(openrlhf_args, entropy=True), fused=True)
    logits_bytes = 3 * 10 * 32 * 4  # B × T × V fp32
    assert fused - grpo < logits_bytes // 4


def _step(openrlhf_args, entropy: bool):
    args = openrlhf_args(*(("--gtpo.gamma", "0.1") if entropy else ("--gtpo.algo", "grpo")))
    trainer, _ = actor_trainer(args)
    experience, info = batch(trainer)
    return trainer, experience, info


@pytest.mark.parametrize("packed", [False, True])
def test_fused_pass_matches_openrlhfs_log_probs_and_entropy(packed):
    """Padded and packed (--ds.packing_samples: logits [1, tokens, V], scattered back with
    OpenRLHF's own functions): the fused log-probs and entropies are OpenRLHF's."""
    actor = tiny_actor()
    actor.packing_samples = packed
    sequences = torch.randint(1, 32, (3, 8), generator=torch.Generator().manual_seed(2))
    attention_mask = torch.ones_like(sequences)
    attention_mask[0, 5:] = 0  # right padding of different lengths
    attention_mask[2, 3:] = 0
    action_mask = attention_mask[:, 1:].bool()
    with torch.no_grad():
        log_probs, output = actor(
            sequences, action_mask, attention_mask, return_output=True, return_entropy=True
        )
        if packed:
            assert output["logits"].shape[:2] == (1, int(attention_mask.sum()))
        with FusedActorForward(actor):
            fused_log_probs, fused_output = actor(
                sequences, action_mask, attention_mask, return_output=True
            )
        logprobs, entropy = fused_logprobs_and_entropy(
            output["logits"], sequences, attention_mask, packed
        )
    assert entropy.shape == logprobs.shape == (3, 8)
    torch.testing.assert_close(fused_log_probs, log_probs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        fused_output.entropy * action_mask, output.entropy * action_mask, rtol=1e-5, atol=1e-5
    )
    if packed:
        assert (entropy[attention_mask == 0] == 0).all()
