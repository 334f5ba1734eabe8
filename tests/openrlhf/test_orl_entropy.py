"""Entropy on the OpenRLHF side: Eq. 7's per-completion penalty inside OpenRLHF's real
ActorPPOTrainer.training_step, and entropies mapped back from packed samples."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
transformers = pytest.importorskip("transformers")

from openrlhf.models import Actor, PolicyLoss  # noqa: E402
from openrlhf.trainer.ppo_utils.experience import Experience  # noqa: E402
from tiny_llama import tiny_llama  # noqa: E402

from gtpo import completion_entropy, token_entropy  # noqa: E402
from gtpo.openrlhf.actors import GTPOActorPPOTrainer, padded_token_entropy  # noqa: E402


def tiny_actor(seed: int = 0) -> Actor:
    model = tiny_llama(seed)
    actor = Actor(model)
    actor.packing_samples = False  # set by Actor only when it loads a checkpoint by name
    return actor


def test_entropy_penalty_is_a_per_completion_mean_in_openrlhf_training_step(openrlhf_args):
    """OpenRLHF's real training_step, with GTPO's override, computes −γ·(1/N)Σ_i ⟨H⟩_i."""
    args = openrlhf_args("--gtpo.gamma", "0.1")
    losses: list[torch.Tensor] = []
    trainer = object.__new__(GTPOActorPPOTrainer)
    trainer.args = args
    trainer.actor = tiny_actor()
    trainer.strategy = SimpleNamespace(
        ring_attn_group=None,
        backward=lambda loss, model, optim: losses.append(loss),
        optimizer_step=lambda *a, **k: None,
        get_grad_norm=lambda model: 0.0,
    )
    trainer.actor_loss_fn = PolicyLoss(token_level_loss=True)
    trainer.aux_loss = False
    trainer.ema_model = None
    trainer.actor_optim = None
    trainer.actor_scheduler = SimpleNamespace(get_last_lr=lambda: [1e-6])
    trainer.replay_buffer = None

    # Three completions of 2, 5 and 7 tokens: a token mean and a completion mean differ.
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
        advantages=torch.ones(3, 9),
        info={},
    )
    info = {
        "dp_size": 1,
        "batch_num_tokens": torch.tensor(14.0),
        "global_batch_size": torch.tensor(3.0),
    }
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
    assert not trainer.actor._forward_hooks  # the hook lives for one step only


def test_packed_entropies_land_where_openrlhf_puts_its_own():
    """--ds.packing_samples: logits are [1, tokens, V]; the scatter must match OpenRLHF's."""
    actor = tiny_actor()
    actor.packing_samples = True
    sequences = torch.randint(1, 32, (3, 8), generator=torch.Generator().manual_seed(2))
    attention_mask = torch.ones_like(sequences)
    attention_mask[0, 5:] = 0  # right padding of different lengths
    attention_mask[2, 3:] = 0
    action_mask = attention_mask[:, 1:].bool()
    with torch.no_grad():
        _, output = actor(
            sequences, action_mask, attention_mask, return_output=True, return_entropy=True
        )
        assert output["logits"].shape[:2] == (1, int(attention_mask.sum()))
        ours = padded_token_entropy(output["logits"], attention_mask, packed=True)
    assert ours.shape == (3, 8)
    torch.testing.assert_close(ours[:, :-1] * action_mask, output.entropy * action_mask)
    assert (ours[attention_mask == 0] == 0).all()
