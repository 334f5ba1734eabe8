"""The tiny Llama the OpenRLHF unit tests share: built from a config (no hub download)."""

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
