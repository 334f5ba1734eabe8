"""Warm start: a short supervised phase on demonstrations of the task.

The tiny model's demonstrations mix reasoning styles, arithmetic slips (mostly in the short
style), answers that do not follow the reasoning and broken formats
(`gtpo.demo.task.demonstration`, the default `demonstrate`), so the policy that comes out
imitates them: a usable but imperfect format rate and accuracy, the starting point the paper's
RL phase assumes of an instruction-tuned model. A real model's are worked solutions in the
paper's format (`gtpo.demo.real`): it only has to meet the format.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import LlamaForCausalLM

from gtpo.demo.model import completion_logits
from gtpo.demo.task import Problem, demonstration


def noisy_demonstration(problem: Problem, rng: random.Random) -> str:
    """The tiny model's target: a fresh noisy demonstration of the synthetic task."""
    return demonstration(problem, rng).completion


def warm_start(
    model: LlamaForCausalLM,
    encode,
    problems: list,
    eos_id: int,
    pad_id: int,
    steps: int,
    seed: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    desc: str = "warm start (SFT)",
    demonstrate: Callable[[Any, random.Random], str] = noisy_demonstration,
) -> list[float]:
    """Train on `demonstrate(problem, rng)` completions for `steps` steps; returns the loss of
    each step.

    `encode(text) -> list[int]` is the tokenizer; `problem.prompt` the prompt text.
    Cross-entropy on completion tokens only (the EOS included, so the model learns to stop),
    AdamW with linear warm-up then cosine decay.
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
        completions = [[*encode(demonstrate(p, rng)), eos_id] for p in batch]
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
