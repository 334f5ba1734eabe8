"""The tiny policy: a Llama-style causal LM built from a `transformers` config (random init),
plus the two things a trainer does with it: sample completions and score them token by token.

Prompts have different lengths, so a batch is laid out as [left-padded prompt | right-padded
completion] with explicit position ids; completion rows are right-padded as the `gtpo` core
expects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM

# ~0.34 M parameters at a 60-token vocabulary: big enough to learn 3-step arithmetic in a
# minute of SFT, small enough for an RL step of 64 completions in a fraction of a second.
MODEL_SHAPE = {
    "hidden_size": 96,
    "intermediate_size": 256,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
}
MAX_POSITIONS = 96


@dataclass
class Policy:
    """The model and how to turn its tokens into text and back."""

    model: LlamaForCausalLM
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]  # special tokens kept, as OpenRLHF decodes queries
    eos_id: int
    pad_id: int


def build_model(vocab_size: int, pad_id: int, eos_id: int, seed: int) -> LlamaForCausalLM:
    """Randomly initialised Llama; `seed` fixes the weights."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        # Eager attention: at this size it is as fast as SDPA and handles padded rows plainly.
        attn_implementation="eager",
        **MODEL_SHAPE,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = pad_id  # silences a warning; generate() is unused
    return model


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, P] ids and bool mask, real tokens at the right end of each row."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = True
    return ids, mask


def right_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, L] ids and bool mask, real tokens at the left end of each row (the core's layout)."""
    width = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        if row:
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = True
    return ids, mask


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def sample(
    model: LlamaForCausalLM,
    prompts: list[list[int]],
    eos_id: int,
    pad_id: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Completions (token ids, EOS included when produced) for each prompt row.

    `temperature` = 0 decodes greedily. Sampling draws from `generator` only, so a seeded
    generator gives the same completions on every run.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    model.eval()
    ids, mask = left_pad(prompts, pad_id)
    positions = _positions(mask)
    out = model(input_ids=ids, attention_mask=mask.long(), position_ids=positions, use_cache=True)
    next_position = positions[:, -1:] + 1
    finished = torch.zeros(len(prompts), dtype=torch.bool)
    attention = mask.long()
    steps: list[torch.Tensor] = []
    for _ in range(max_new_tokens):
        logits = out.logits[:, -1].float()
        if temperature == 0:
            token = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        token = torch.where(finished, pad_id, token)
        steps.append(token)
        finished |= token == eos_id
        if bool(finished.all()):
            break
        attention = torch.cat([attention, torch.ones(len(prompts), 1, dtype=torch.long)], 1)
        out = model(
            input_ids=token[:, None],
            attention_mask=attention,
            position_ids=next_position,
            past_key_values=out.past_key_values,
            use_cache=True,
        )
        next_position = next_position + 1
    tokens = torch.stack(steps, 1).tolist() if steps else [[] for _ in prompts]
    completions = []
    for row in tokens:
        end = row.index(eos_id) + 1 if eos_id in row else len(row)
        completions.append(row[:end])
    return completions


def completion_logits(
    model: LlamaForCausalLM, prompts: list[list[int]], completions: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits that predict each completion token, with the completion ids and mask.

    Returns (logits [N, L, V], completion_ids [N, L] long, completion_mask [N, L] bool), the
    completion right-padded to its longest row.
    """
    prompt_ids, prompt_mask = left_pad(prompts, pad_id)
    completion_ids, completion_mask = right_pad(completions, pad_id)
    ids = torch.cat([prompt_ids, completion_ids], 1)
    mask = torch.cat([prompt_mask, completion_mask], 1)
    out = model(input_ids=ids, attention_mask=mask.long(), position_ids=_positions(mask))
    width = prompt_ids.shape[1]
    # The logits at position p predict token p + 1: the completion starts after the prompt.
    logits = out.logits[:, width - 1 : width - 1 + completion_ids.shape[1]]
    return logits, completion_ids, completion_mask
