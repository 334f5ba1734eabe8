"""The RL loop of the demo: GTPO (paper Eq. 7) or GRPO (Eq. 1-2) on the tiny model, one file.

Read it top to bottom, CleanRL style. One step:

1. take the next `prompts_per_step` training prompts and sample G completions of each at
   temperature 1.0 (a seeded generator: same seed, same samples);
2. fetch every reward from the reward server (``POST /get_reward``, OpenRLHF's shape);
3. group-normalise the rewards into advantages A_i = (R_i − mean R) / std R (Sec. 3);
4. one forward pass gives log π(o_{i,t}|s_{i,t}) and the token entropies; the loss comes from
   the `gtpo` core: λ (Eq. 5), δ (Eq. 6) and γ from `gtpo_terms(cfg.gtpo, ...)` into Eq. 7 for
   GTPO, Eq. 1 with β = 0 for GRPO;
5. one optimiser step (one policy iteration per batch, so the ratio is 1). GRPO adds Eq. 1's
   KL term to the warm start only when `kl_coef` β > 0 (the paper's β = 0.04 arm).

Both methods log the same diagnostics (conflict-token fractions, entropy, filtered share) so
their curves can be compared, even where GRPO does not act on them.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import LlamaForCausalLM

from gtpo import (
    LN2,
    GTPOConfig,
    completion_entropy,
    conflict_weights,
    grpo_loss,
    gtpo_loss,
    gtpo_metrics,
    gtpo_terms,
    token_logprobs_and_entropy,
)
from gtpo.demo.model import Policy, completion_logits, right_pad, sample
from gtpo.demo.task import Problem
from gtpo.reward_client import RewardClient

log = logging.getLogger(__name__)

METHODS = ("gtpo", "grpo")


@dataclass(frozen=True)
class RLConfig:
    """Hyper-parameters of one RL run. Defaults: the paper's G = 8, γ = 0.1, T = 1.0, β = 0.

    `method` is the demo's choice (it trains both side by side); `gtpo` holds GTPO's knobs
    (γ, λ, δ and the ablations), which the GTPO run passes to `gtpo_terms`.
    """

    method: str = "gtpo"
    steps: int = 150
    prompts_per_step: int = 8
    group_size: int = 8
    temperature: float = 1.0
    max_new_tokens: int = 72
    lr: float = 5e-5
    clip_eps: float = 0.2  # inactive with one iteration per batch (ratio = 1)
    max_grad_norm: float = 1.0
    seed: int = 0
    kl_coef: float = 0.0  # β of Eq. 1 for GRPO; the KL is to the warm start (π_ref)
    gtpo: GTPOConfig = field(default_factory=GTPOConfig)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not self.gtpo.is_gtpo:
            raise ValueError(
                f"gtpo.algo is {self.gtpo.algo!r}; the demo picks the method with `method` and "
                "takes only the knobs from its GTPOConfig (leave algo at 'gtpo')"
            )
        if self.group_size < 2:
            raise ValueError(
                f"group_size G must be >= 2 for group advantages, got {self.group_size}"
            )
        if self.lr <= 0:
            raise ValueError(f"--lr must be > 0, got {self.lr}")
        if self.kl_coef < 0 or (self.kl_coef > 0 and self.method != "grpo"):
            raise ValueError(
                f"kl_coef β is {self.kl_coef}; it must be >= 0 and is GRPO's (Eq. 1): GTPO "
                "has no KL term and no reference model (Eq. 7)"
            )

    @property
    def label(self) -> str:
        """Name in logs and plots: ``gtpo``, ``grpo``, ``grpo-kl0.04`` (β > 0),
        ``gtpo-no-filter`` (the ablations of `config.ABLATIONS` the GTPO run's knobs amount to)
        or ``gtpo-adv…`` (the advantage form of the entropy term)."""
        if self.method == "gtpo":
            return "-".join(("gtpo" + self.gtpo.label_suffix, *self.gtpo.ablations))
        if self.kl_coef > 0:
            return f"grpo-kl{self.kl_coef:g}"
        return self.method


@dataclass
class Batch:
    """Everything one step trains on (kept so tests can recompute the loss independently)."""

    prompts: list[list[int]]  # [N] prompt token ids, each repeated G times
    completions: list[list[int]]  # [N] sampled completion ids (EOS included when produced)
    rewards: torch.Tensor  # [N] total reward from the server
    format_rewards: torch.Tensor  # [N]
    accuracy_rewards: torch.Tensor  # [N]
    advantages: torch.Tensor  # [N]


def group_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Â_i = (R_i − mean(R)) / std(R) within each prompt's group (Sec. 3), [N] -> [N].

    Uses the sample std (as OpenRLHF's group_norm); a group whose rewards are all equal gets
    A = 0 everywhere, so it neither pushes nor creates conflicts.
    """
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    return (centred / (grouped.std(dim=1, keepdim=True) + 1e-9)).view(-1)


def policy_loss(
    model: LlamaForCausalLM,
    batch: Batch,
    cfg: RLConfig,
    h_ini: float,
    pad_id: int,
    reference: LlamaForCausalLM | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one batch and its metrics (stable names, see `gtpo.gtpo_metrics`).

    `reference` is π_ref of Eq. 1, needed only for GRPO with `cfg.kl_coef` > 0.
    """
    logits, ids, mask = completion_logits(model, batch.prompts, batch.completions, pad_id)
    # log π_θ(o_{i,t}|s_{i,t}) and H(π_θ(·|s_{i,t})) from one pass over the logits.
    logprobs, token_entropy = token_logprobs_and_entropy(logits, ids)
    mean_entropy = completion_entropy(token_entropy, mask)  # ⟨H⟩_i (Sec. 4.2)
    old_logprobs = logprobs.detach()  # one policy iteration per batch: π_θ = π_θold, ratio 1
    advantages = batch.advantages
    # λ of Eq. 5 for every run, logged: GTPO trains with it (unless λ ≡ 1 is its ablation),
    # GRPO only logs how many tokens it marks.
    marked = conflict_weights(ids, mask, advantages, cfg.group_size, cfg.gtpo.conflict_weight)
    logged = gtpo_metrics(marked, advantages, mask, torch.ones_like(advantages), mean_entropy)

    if cfg.method == "gtpo":
        # λ (Eq. 5), δ (Eq. 6) and γ (Eq. 7) as the knobs choose them, ablations included.
        terms = gtpo_terms(cfg.gtpo, ids, mask, advantages, cfg.group_size, mean_entropy, h_ini)
        # Eq. 7: −(1/N) Σ_i [ (δ_i A_i / |o_i|) Σ_t λ_{i,t} r_{i,t} − γ ⟨H⟩_i ]. In the
        # advantage form `terms` already holds A_i − γ⟨H⟩_i (detached) and a penalty γ of 0.
        loss, metrics = gtpo_loss(
            logprobs,
            old_logprobs,
            terms.advantages,
            mask,
            terms.weights,
            terms.keep,
            mean_entropy,
            gamma=terms.gamma,
            clip_eps=cfg.clip_eps,
        )
    else:
        # Eq. 1: −(1/N) Σ_i (A_i / |o_i|) Σ_t r_{i,t} + β · KL(π_θ ‖ π_ref)
        ref_logprobs = None
        if cfg.kl_coef > 0:
            if reference is None:
                raise ValueError("GRPO with kl_coef > 0 needs the reference model π_ref")
            with torch.no_grad():
                ref_logits, _, _ = completion_logits(
                    reference, batch.prompts, batch.completions, pad_id
                )
                ref_logprobs, _ = token_logprobs_and_entropy(ref_logits, ids)
        loss, metrics = grpo_loss(
            logprobs,
            old_logprobs,
            advantages,
            mask,
            clip_eps=cfg.clip_eps,
            kl_coef=cfg.kl_coef,
            ref_logprobs=ref_logprobs,
            completion_entropy=mean_entropy,
        )
        metrics["filtered_frac"] = 0.0  # GRPO keeps every completion
    metrics["conflict_frac_pos"] = logged["conflict_frac_pos"]
    metrics["conflict_frac_neg"] = logged["conflict_frac_neg"]
    metrics["entropy_mean"] = logged["entropy_mean"]
    # Completions Eq. 6 would filter if H_ini < ln 2: same definition for both methods.
    metrics["high_entropy_frac"] = float((mean_entropy.detach() > LN2).float().mean())
    metrics["completion_len"] = float(mask.sum(1).float().mean())
    return loss, metrics


def collect(
    policy: Policy,
    problems: list[Problem],
    client: RewardClient,
    cfg: RLConfig,
    generator: torch.Generator,
) -> Batch:
    """Steps 1-3: sample G completions per prompt, score them over HTTP, advantages."""
    g = cfg.group_size
    prompt_texts = [p.prompt for p in problems for _ in range(g)]
    prompts = [policy.encode(text) for text in prompt_texts]
    completions = sample(
        policy.model,
        prompts,
        policy.eos_id,
        policy.pad_id,
        cfg.max_new_tokens,
        cfg.temperature,
        generator,
    )
    responses = [policy.decode(c) for c in completions]
    labels = [str(p.answer) for p in problems for _ in range(g)]
    scored = client.score(prompt_texts, responses, labels, per_request=g)
    rewards = torch.tensor(scored.total)
    return Batch(
        prompts=prompts,
        completions=completions,
        rewards=rewards,
        format_rewards=torch.tensor(scored.format),
        accuracy_rewards=torch.tensor(scored.accuracy),
        advantages=group_advantages(rewards, g),
    )


def rl_step(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    problems: list[Problem],
    client: RewardClient,
    cfg: RLConfig,
    h_ini: float,
    generator: torch.Generator,
    reference: LlamaForCausalLM | None = None,
) -> tuple[dict[str, float], Batch]:
    """One full step (1-5 in the module docstring); returns its metrics and its batch."""
    batch = collect(policy, problems, client, cfg, generator)
    policy.model.train()
    loss, metrics = policy_loss(policy.model, batch, cfg, h_ini, policy.pad_id, reference)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.model.parameters(), cfg.max_grad_norm)
    optimizer.step()
    policy.model.eval()
    metrics.update(
        reward=float(batch.rewards.mean()),
        format_reward=float(batch.format_rewards.mean()),
        accuracy_reward=float(batch.accuracy_rewards.mean()),
        grad_norm=float(grad_norm),
    )
    return metrics, batch


def count_protected(batch: Batch, cfg: RLConfig, pad_id: int, counts: Counter[int]) -> None:
    """Add to `counts` the token ids of one batch that λ (Eq. 5) protects: in the conflict mask
    of a completion with A ≠ 0 (weight 0 or 2, the same λ both methods log)."""
    ids, mask = right_pad(batch.completions, pad_id)
    weights = conflict_weights(
        ids, mask, batch.advantages, cfg.group_size, cfg.gtpo.conflict_weight
    )
    counts.update(ids[mask & (weights != 1)].tolist())


def measure_h_ini(
    policy: Policy, problems: list[Problem], max_new_tokens: int, generator: torch.Generator
) -> float:
    """H_ini of Eq. 6: mean ⟨H⟩ of one sampled completion per prompt, before any update.

    The paper measures it on the first 100 training prompts; pass those.
    """
    prompts = [policy.encode(p.prompt) for p in problems]
    completions = sample(
        policy.model, prompts, policy.eos_id, policy.pad_id, max_new_tokens, 1.0, generator
    )
    with torch.no_grad():
        logits, ids, mask = completion_logits(policy.model, prompts, completions, policy.pad_id)
        _, token_entropy = token_logprobs_and_entropy(logits, ids)
        return float(completion_entropy(token_entropy, mask).mean())


def training_order(problems: list[Problem], seed: int) -> list[Problem]:
    """The prompts in the order both methods see them (same seed, same order)."""
    order = list(problems)
    random.Random(seed).shuffle(order)
    return order


def _frozen_copy(model: LlamaForCausalLM) -> LlamaForCausalLM:
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference


def train(
    policy: Policy,
    problems: list[Problem],
    client: RewardClient,
    cfg: RLConfig,
    h_ini: float,
    metrics_path: Path | None = None,
    progress_position: int = 0,
    protected: Counter[int] | None = None,
) -> list[dict[str, float]]:
    """`cfg.steps` RL steps; one JSON line of metrics per step in `metrics_path`; the token ids
    λ protects added to `protected` (`count_protected`)."""
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.lr, weight_decay=0.0)
    order = training_order(problems, cfg.seed)
    # π_ref of Eq. 1: a frozen copy of the policy as training starts (the warm start).
    reference = _frozen_copy(policy.model) if cfg.kl_coef > 0 else None
    n = cfg.prompts_per_step
    history: list[dict[str, float]] = []
    sink = open(metrics_path, "w") if metrics_path else None  # noqa: SIM115 (closed below)
    bar = tqdm(
        range(cfg.steps),
        desc=f"{cfg.label:<16} seed {cfg.seed}",
        position=progress_position,
        dynamic_ncols=True,
        leave=True,
    )
    try:
        for step in bar:
            start = (step * n) % len(order)
            prompts = [order[(start + j) % len(order)] for j in range(n)]
            started = time.perf_counter()
            metrics, batch = rl_step(
                policy, optimizer, prompts, client, cfg, h_ini, generator, reference
            )
            if protected is not None:
                count_protected(batch, cfg, policy.pad_id, protected)
            row = {"method": cfg.label, "seed": cfg.seed, "step": step, **metrics}
            history.append(row)
            if sink:
                # step_seconds is wall time: the only field that differs between runs.
                sink.write(json.dumps({**row, "step_seconds": time.perf_counter() - started}))
                sink.write("\n")
                sink.flush()
            bar.set_postfix(
                R=f"{metrics['reward']:.1f}",
                acc=f"{metrics['accuracy_reward']:.1f}",
                H=f"{metrics['entropy_mean']:.2f}",
                refresh=False,
            )
    finally:
        bar.close()
        if sink:
            sink.close()
    return history
