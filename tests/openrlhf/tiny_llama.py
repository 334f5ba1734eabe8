"""What the OpenRLHF unit tests share: the tiny Llama built from a config (no hub download),
and OpenRLHF's actor trainer without DeepSpeed around an actor."""

from __future__ import annotations

import torch
import transformers


def tiny_llama(seed: int = 0) -> transformers.LlamaForCausalLM:
    """A 1-layer Llama over 32 tokens with a scaled head: peaked, position-dependent outputs."""
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)  # peaked, position-dependent distributions
    return model


def bare_actor_trainer(args, actor, backward, cls=None):
    """An ActorPPOTrainer (GTPO's by default) around `actor` without DeepSpeed: `backward(loss)`
    stands in for the strategy's backward; the optimizer step does nothing."""
    from types import SimpleNamespace

    from openrlhf.models import PolicyLoss

    if cls is None:
        from gtpo.openrlhf.policy import GTPOActorPPOTrainer as cls
    trainer = object.__new__(cls)
    trainer.args = args
    trainer.actor = actor
    trainer.strategy = SimpleNamespace(
        ring_attn_group=None,
        backward=lambda loss, model, optim: backward(loss),
        optimizer_step=lambda *a, **k: None,
        get_grad_norm=lambda model: 0.0,
    )
    trainer.actor_loss_fn = PolicyLoss(token_level_loss=True)
    trainer.aux_loss = False
    trainer.ema_model = None
    trainer.actor_optim = None
    trainer.actor_scheduler = SimpleNamespace(get_last_lr=lambda: [1e-6])
    trainer.replay_buffer = None
    return trainer
