"""The GTPO objective (paper Eq. 7), the GRPO baseline (Eq. 1) and their metrics.

Everything works on plain tensors so any trainer can call it:

    logprobs, old_logprobs, completion_mask, weights (λ):  [N, L]
    advantages, keep (δ), completion_entropy (⟨H⟩):       [N]

N = prompts × G completions. Both objectives are returned as losses to *minimise* (L = −J) and
averaged over completions, which is Eq. 7's 1/G sum averaged over the batch's prompts.

Eq. 7's entropy term has two published forms (`GTPOConfig.entropy_form`):
    penalty (the paper):     J = (1/G) Σ_i [ δ_i A_i/|o_i| Σ_t λ_{i,t} r_{i,t} − γ⟨H⟩_i ]
    advantage (the authors' public code, journal version):
                             J = (1/G) Σ_i δ_i (A_i − γ⟨H⟩_i)/|o_i| Σ_t λ_{i,t} r_{i,t}
In the advantage form ⟨H⟩_i is a detached number (no gradient flows through the entropy) and λ
still takes its values from the signs of the original A_i.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from gtpo.config import PENALTY, entropy_coefficients
from gtpo.conflict import conflict_weights, count_true
from gtpo.entropy import entropy_filter

if TYPE_CHECKING:
    from gtpo.config import GTPOConfig


def fold_entropy(
    advantages: torch.Tensor, completion_entropy: torch.Tensor, coef: float
) -> torch.Tensor:
    """A_i − γ⟨H⟩_i with ⟨H⟩_i detached (Eq. 7, advantage form); A_i itself when coef is 0. [N]."""
    if coef == 0:
        return advantages
    return advantages - coef * completion_entropy.detach().to(advantages.dtype)


def token_advantages(
    weights: torch.Tensor, keep: torch.Tensor, advantages: torch.Tensor
) -> torch.Tensor:
    """λ_{i,t}·δ_i·A_i, the advantage of each token in Eq. 7's surrogate. [N, L]."""
    return weights * (keep * advantages)[:, None]


@dataclass(frozen=True)
class EntropyTerms:
    """What Eq. 6-7's entropy parts put into one batch: δ, the advantage λ multiplies, and γ."""

    keep: torch.Tensor  # δ_i of Eq. 6, float32 [N] of 0/1 (ones if δ ≡ 1)
    # The per-completion advantage λ·δ multiplies [N]: A_i in penalty form (and for GRPO),
    # A_i − γ⟨H⟩_i with ⟨H⟩_i detached in advantage form. λ comes from the signs of A_i.
    advantages: torch.Tensor
    # γ subtracted as its own term −γ⟨H⟩_i: γ in penalty form, 0 in advantage form and for GRPO.
    gamma: float


@dataclass(frozen=True)
class GTPOTerms(EntropyTerms):
    """What a GTPOConfig puts into Eq. 7 for one batch.

    A trainer weights `advantages` by λ·δ (`token_advantages`) and subtracts `gamma`·⟨H⟩_i as
    its own term; the entropy form is already applied, so no trainer branches on it.
    """

    weights: torch.Tensor  # λ_{i,t} of Eq. 5, float32 [N, L], 0 on padding (the mask if λ ≡ 1)

    def token_advantages(self) -> torch.Tensor:
        """λ_{i,t}·δ_i·`advantages`_i: what a trainer's clipped surrogate weights. [N, L]."""
        return token_advantages(self.weights, self.keep, self.advantages)


def conflict_terms(
    config: GTPOConfig,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    group_size: int,
) -> torch.Tensor:
    """λ of Eq. 5 as `config` chooses it: `conflict_weights`, or the mask when λ ≡ 1. [N, L].

    Rows of prompt k at k·G … k·G+G−1 (the G completions of a prompt must be together).
    """
    mask = completion_mask.bool()
    if config.applies_conflict:
        return conflict_weights(
            completion_ids, mask, advantages, group_size, config.conflict_weight
        )
    return mask.float()


def entropy_terms(
    config: GTPOConfig,
    advantages: torch.Tensor,
    completion_entropy: torch.Tensor,
    h_ini: float | None,
) -> EntropyTerms:
    """δ (Eq. 6), the advantage λ·δ multiplies, and γ (Eq. 7), as `config` chooses them.

    Per completion, so a trainer may compute them on any subset of a batch's rows (the TRL
    trainer does, at loss time, from the loss forward's entropies). `completion_entropy` [N]
    is ⟨H⟩_i under the policy that sampled the completion; only its value is used.
    """
    mode = config.filter_mode
    if mode == "off":
        keep = torch.ones(
            completion_entropy.shape, dtype=torch.float32, device=completion_entropy.device
        )
    elif mode == "on":
        # Eq. 6's H_ini-below-the-cut branch, always
        keep = entropy_filter(completion_entropy, 0.0, config.entropy_threshold)
    else:
        if h_ini is None:
            raise ValueError(
                "δ of Eq. 6 needs H_ini: measure it before the first update (or set "
                "--gtpo.h_ini), or pass --gtpo.entropy_filter on|off"
            )
        keep = entropy_filter(completion_entropy, h_ini, config.entropy_threshold)
    return EntropyTerms(
        keep=keep,
        advantages=fold_entropy(advantages, completion_entropy, config.advantage_entropy_coef),
        gamma=config.entropy_coef,
    )


def gtpo_terms(
    config: GTPOConfig,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    group_size: int,
    completion_entropy: torch.Tensor,
    h_ini: float | None,
) -> GTPOTerms:
    """λ (Eq. 5), δ (Eq. 6) and γ (Eq. 7) of one batch, as `config` chooses them.

    The one place that reads the method's knobs (through `conflict_terms` and
    `entropy_terms`): every trainer (the demo, the OpenRLHF advantage weighting, the TRL
    trainer) weights `terms.advantages` by λ·δ and subtracts `terms.gamma`·⟨H⟩_i, whichever
    entropy form the config chooses.

    Args:
        completion_ids, completion_mask: [N, L], completions right-padded, rows of prompt k at
            k·G … k·G+G−1.
        advantages: [N] A_i (their signs choose λ's value on conflict tokens).
        completion_entropy: [N] ⟨H⟩_i (Sec. 4.2); only its value is used (detached).
        h_ini: the model's mean completion entropy before training; needed only when δ is
            `auto` (Eq. 6 as written).
    """
    weights = conflict_terms(config, completion_ids, completion_mask, advantages, group_size)
    entropy = entropy_terms(config, advantages, completion_entropy, h_ini)
    return GTPOTerms(
        keep=entropy.keep, advantages=entropy.advantages, gamma=entropy.gamma, weights=weights
    )


def _check_shapes(
    completion_mask: torch.Tensor,
    per_token: dict[str, torch.Tensor | None],
    per_completion: dict[str, torch.Tensor | None],
) -> None:
    if completion_mask.dim() != 2:
        raise ValueError(f"completion_mask must be [N, L], got {tuple(completion_mask.shape)}")
    n = completion_mask.shape[0]
    for names, expected in ((per_token, tuple(completion_mask.shape)), (per_completion, (n,))):
        for name, tensor in names.items():
            if tensor is not None and tuple(tensor.shape) != expected:
                raise ValueError(
                    f"{name} has shape {tuple(tensor.shape)}; expected {expected} to match "
                    f"completion_mask {tuple(completion_mask.shape)}"
                )


def _completion_mean(values: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """(1/|o_i|) Σ_t values_{i,t} over real tokens: [N, L] -> [N].

    `where`, not a product with the mask: padding may hold inf/nan log-probs, and 0 · inf = nan.
    """
    total = torch.where(completion_mask.bool(), values, 0.0).sum(-1)
    return total / completion_mask.sum(-1).clamp(min=1).to(values.dtype)


def _clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    token_advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    clip_eps: float,
) -> torch.Tensor:
    """C̄_i of Eq. 1: per-completion mean of min(r·A, clip(r, 1±ε)·A). [N].

    With one policy iteration per batch the ratio r is 1 and this is Σ_t A / |o_i| with the
    policy gradient of Eq. 2; the clip only matters when a batch is reused.
    """
    # Zero the padding first: its log-probs may be ±inf/nan, and any arithmetic on them after
    # this point would send nan back into the model's gradient.
    real = completion_mask.bool()
    ratio = torch.exp(torch.where(real, logprobs, 0.0) - torch.where(real, old_logprobs, 0.0))
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    surrogate = torch.minimum(ratio * token_advantages, clipped * token_advantages)
    return _completion_mean(surrogate, completion_mask)


def metric_sums(
    weights: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    keep: torch.Tensor,
    completion_entropy: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The counts `gtpo_metrics` divides, as 0-dim tensors on the inputs' device (int64 counts,
    a float32 entropy sum): they add up over parts of a batch, and `metrics_from_sums` turns a
    sum of them into the metrics."""
    with torch.no_grad():
        real = completion_mask.bool()
        changed = (weights != 1) & real
        positive = (advantages > 0)[:, None] & real
        negative = (advantages < 0)[:, None] & real
        return {
            "changed_pos": count_true(changed & positive),
            "tokens_pos": count_true(positive),
            "changed_neg": count_true(changed & negative),
            "tokens_neg": count_true(negative),
            "filtered": count_true(keep == 0),
            "completions": torch.full((), keep.numel(), dtype=torch.long, device=keep.device),
            "entropy": completion_entropy.detach().float().sum(),
        }


def metrics_from_sums(
    sums: dict[str, torch.Tensor], dtype: torch.dtype = torch.float32
) -> dict[str, torch.Tensor]:
    """gtpo_metrics' four values from (added-up) `metric_sums`, as 0-dim tensors of `dtype` on
    the sums' device (0 for an empty part)."""
    values = {name: value.to(dtype) for name, value in sums.items()}

    def ratio(part: str, whole: str) -> torch.Tensor:
        return values[part] / values[whole].clamp(min=1)

    return {
        "conflict_frac_pos": ratio("changed_pos", "tokens_pos"),
        "conflict_frac_neg": ratio("changed_neg", "tokens_neg"),
        "filtered_frac": ratio("filtered", "completions"),
        "entropy_mean": ratio("entropy", "completions"),
    }


def gtpo_metrics(
    weights: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    keep: torch.Tensor,
    completion_entropy: torch.Tensor,
) -> dict[str, float]:
    """Named diagnostics of a GTPO batch (stable names, logged as `gtpo/<name>`).

    conflict_frac_pos / conflict_frac_neg: share of the real tokens of completions with A > 0 /
    A < 0 whose weight λ was changed by Eq. 5 (λ ≠ 1); filtered_frac: share of completions
    removed by δ (Eq. 6); entropy_mean: mean ⟨H⟩_i. (`metric_sums` keeps them on the device
    and adds them up over parts of a batch.)
    """
    sums = metric_sums(weights, advantages, completion_mask, keep, completion_entropy)
    return host_metrics(sums)


def host_metrics(sums: dict[str, torch.Tensor]) -> dict[str, float]:
    """`metrics_from_sums` as Python numbers, divided in float64 on the CPU (exact ratios)."""
    on_cpu = {name: value.to("cpu") for name, value in sums.items()}
    return {k: float(v) for k, v in metrics_from_sums(on_cpu, torch.float64).items()}


def gtpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    weights: torch.Tensor,
    keep: torch.Tensor,
    completion_entropy: torch.Tensor,
    gamma: float = 0.1,
    clip_eps: float = 0.2,
    entropy_form: str = PENALTY,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq. 7 as a loss, in either form of its entropy term:

        penalty:   L = −(1/N) Σ_i [ (δ_i A_i / |o_i|) Σ_t λ_{i,t} r_{i,t} − γ ⟨H⟩_i ]
        advantage: L = −(1/N) Σ_i (δ_i (A_i − γ ⟨H⟩_i) / |o_i|) Σ_t λ_{i,t} r_{i,t}, ⟨H⟩_i detached

    Args:
        logprobs: [N, L] log π_θ(o_{i,t}|s_{i,t}) of the sampled tokens, with grad.
        old_logprobs: [N, L] the same under the sampling policy (no grad); equal to
            `logprobs.detach()` with one iteration per batch.
        advantages: [N] group-normalised advantages A_i.
        completion_mask: [N, L] bool, True on real completion tokens.
        weights: [N, L] λ from `gtpo.conflict_weights` (Eq. 5).
        keep: [N] δ from `gtpo.entropy_filter` (Eq. 6).
        completion_entropy: [N] ⟨H⟩_i with grad (`completion_entropy(token_entropy(...))`).
        gamma: entropy coefficient γ ≥ 0 (paper: 0.1). Entropy is minimised.
        clip_eps: PPO clip range for the ratio r (inactive at r = 1).
        entropy_form: "penalty" (the paper's Eq. 7: γ⟨H⟩_i is its own term with its own
            gradient, not multiplied by δ) or "advantage" (the authors' code: the token
            advantage is λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) with ⟨H⟩_i detached, no separate term).
            λ (`weights`) comes from the signs of the original A_i either way.

    Because λ·δ ≥ 0, min(r·λδA, clip(r)·λδA) = λδ·min(r·A, clip(r)·A): weighting the token
    advantage is the same as weighting the clipped term, which is what the OpenRLHF adapter
    relies on.
    """
    _check_shapes(
        completion_mask,
        {"logprobs": logprobs, "old_logprobs": old_logprobs, "weights": weights},
        {"advantages": advantages, "keep": keep, "completion_entropy": completion_entropy},
    )
    if gamma < 0:
        raise ValueError(f"gamma is an entropy *penalty* and must be >= 0, got {gamma}")
    penalty, folded = entropy_coefficients(gamma, entropy_form)
    per_token = token_advantages(
        weights, keep, fold_entropy(advantages, completion_entropy, folded)
    )
    surrogate = _clipped_surrogate(logprobs, old_logprobs, per_token, completion_mask, clip_eps)
    objective = surrogate - penalty * completion_entropy if penalty else surrogate
    loss = -objective.mean()
    metrics = gtpo_metrics(weights, advantages, completion_mask, keep, completion_entropy)
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    clip_eps: float = 0.2,
    kl_coef: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    completion_entropy: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq. 1 as a loss: L = −(1/N) Σ_i C̄_i + β · KL(π_θ ‖ π_ref).

    GTPO with λ ≡ 1, δ ≡ 1, γ = 0 and no KL. The KL term uses the per-token estimator of
    DeepSeekMath, exp(ref − logp) − (ref − logp) − 1, averaged per completion; it needs
    `ref_logprobs` when `kl_coef` > 0. `completion_entropy` is only logged.
    """
    _check_shapes(
        completion_mask,
        {"logprobs": logprobs, "old_logprobs": old_logprobs, "ref_logprobs": ref_logprobs},
        {"advantages": advantages, "completion_entropy": completion_entropy},
    )
    if kl_coef < 0:
        raise ValueError(f"kl_coef must be >= 0, got {kl_coef}")
    if kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs (log-probs under the reference model)")
    surrogate = _clipped_surrogate(
        logprobs, old_logprobs, advantages[:, None].expand_as(logprobs), completion_mask, clip_eps
    )
    loss = -surrogate.mean()
    metrics: dict[str, float] = {}
    if kl_coef > 0:
        real = completion_mask.bool()
        log_ratio = torch.where(real, ref_logprobs, 0.0) - torch.where(real, logprobs, 0.0)
        kl = _completion_mean(torch.exp(log_ratio) - log_ratio - 1, completion_mask).mean()
        loss = loss + kl_coef * kl
        metrics["kl"] = float(kl.detach())
    if completion_entropy is not None:
        metrics["entropy_mean"] = float(completion_entropy.detach().float().mean())
    metrics["loss"] = float(loss.detach())
    return loss, metrics
