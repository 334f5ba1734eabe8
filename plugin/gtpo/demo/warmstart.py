"""Warm start: a short supervised phase on the task's noisy demonstrations.

The demonstrations mix reasoning styles, arithmetic slips (mostly in the short style), answers
that do not follow the reasoning and broken formats (`gtpo.demo.task.demonstration`), so the
policy that comes out imitates them: a usable but imperfect format rate and accuracy, the
starting point the paper's RL phase assumes of an instruction-tuned model.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import LlamaForCausalLM

from gtpo.demo.model import completion_logits
from gtpo.demo.task import Problem, demonstration


def warm_start(
    model: LlamaForCausalLM,
    encode,
    problems: list[Problem],
    eos_id: int,
    pad_id: int,
    steps: int,
    seed: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    desc: str = "warm start (SFT)",
) -> list[float]:
    """Train on fresh noisy demonstrations for `steps` steps; returns the loss of each step.

    `encode(text) -> list[int]` is the tokenizer. Cross-entropy on completion tokens only
    (the EOS included, so the model learns to stop), AdamW with linear warm-up then cosine decay.
    """
    if steps < 1:
        raise ValueError(f"the warm start needs at least 1 step, got {steps}")
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 20)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    model.train()
    losses: list[float] = []
    bar = tqdm(range(steps), desc=desc, leave=False, dynamic_ncols=True)
    for _ in bar:
        batch = [rng.choice(problems) for _ in range(batch_size)]
        prompts = [encode(p.prompt) for p in batch]
        completions = [[*encode(demonstration(p, rng).completion), eos_id] for p in batch]
        logits, ids, mask = completion_logits(model, prompts, completions, pad_id)
        loss = F.cross_entropy(logits[mask].float(), ids[mask])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    model.eval()
    return losses
