"""GTPO's λ·δ on OpenRLHF's group_norm or dr_grpo advantages (Eq. 5-7), in place on its
experiences.

Since λ, δ ≥ 0, PPO's clipped surrogate satisfies min(r·λδA, clip(r)·λδA) = λδ·min(r·A,
clip(r)·A), so multiplying each token's advantage by λ_{i,t}·δ_i turns OpenRLHF's unchanged
policy loss into the surrogate of Eq. 7. In the advantage form of Eq. 7 the advantage becomes
λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) (⟨H⟩_i measured at experience time, a number) and OpenRLHF's entropy
loss stays off (`flags.configure`). λ and δ come from `gtpo.gtpo_terms`, as in every other
trainer; this module only moves OpenRLHF's micro-batches to the core's layout and back.

The `Experience` fields read here are described in `compat` (the OpenRLHF-release facts).
Micro-batches can straddle prompt groups, and with dynamic batching a micro-batch holds rows
from anywhere in the rollout, so rows are regrouped by `index`, the core runs once on the
whole rollout and the factors are scattered back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gtpo import GTPOConfig, gtpo_metrics, gtpo_terms
from gtpo.openrlhf import compat


def _global_order(experiences: Sequence[Any], group_size: int) -> list[torch.Tensor]:
    """Each micro-batch's rows as positions in the rollout; checks they tile 0..N−1 exactly."""
    rows = [torch.as_tensor(list(e.index), dtype=torch.long) for e in experiences]
    flat = torch.cat(rows) if rows else torch.zeros(0, dtype=torch.long)
    n = flat.numel()
    if n % group_size != 0 or not torch.equal(torch.sort(flat).values, torch.arange(n)):
        raise ValueError(
            f"experience.index must number the rollout's rows 0..N−1 once each with N a multiple "
            f"of {compat.GROUP_SIZE.flag} = {group_size}; got {n} rows. OpenRLHF sets it in "
            "RemoteExperienceMaker.split_rollout_samples; do not drop rows before GTPO's "
            "advantage weighting."
        )
    return rows


def weight_advantages(
    experiences: Sequence[Any],
    completion_entropy: Sequence[torch.Tensor],
    group_size: int,
    h_ini: float,
    config: GTPOConfig,
) -> dict[str, float]:
    """Replace each experience's advantages A_i by λ_{i,t}·δ_i·A_i in place (penalty form) or
    by λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) (advantage form); return the GTPO metrics.

    Args:
        experiences: OpenRLHF `Experience` micro-batches after `compute_advantages_and_returns`
            with `--algo.advantage.estimator` group_norm or dr_grpo (layout in `compat`).
        completion_entropy: one [B] tensor per experience, ⟨H⟩_i of each row (Sec. 4.2).
        group_size: G = n_samples_per_prompt.
        h_ini: the model's mean completion entropy before training (Eq. 6).
        config: the knobs; `gtpo_terms(config, ...)` chooses λ, δ and the entropy form (λ ≡ 1,
            δ ≡ 1 and no entropy term for the GRPO baseline).

    Returns:
        `gtpo.gtpo_metrics` of the rollout (conflict_frac_pos, conflict_frac_neg,
        filtered_frac, entropy_mean), measured on the λ and δ actually applied.
    """
    if len(completion_entropy) != len(experiences):
        raise ValueError(
            f"{len(completion_entropy)} entropy tensors for {len(experiences)} experiences; the "
            "policy actor's forward must return one per micro-batch"
        )
    rows = _global_order(experiences, group_size)
    n = sum(r.numel() for r in rows)
    tokens = [compat.completion_ids(e) for e in experiences]
    length = max((int(mask.sum(1).max()) for _, mask in tokens if mask.numel()), default=0)

    # The whole rollout in prompt order, each completion's action tokens left-aligned:
    # position p of row i is the p-th token the policy generated (the core's right padding).
    ids = torch.zeros(n, length, dtype=torch.long)
    real = torch.zeros(n, length, dtype=torch.bool)
    advantages = torch.zeros(n, dtype=torch.float32)
    entropy = torch.zeros(n, dtype=torch.float32)
    scatter: list[tuple[torch.Tensor, torch.Tensor]] = []
    for e, row, (tok, mask), ent in zip(experiences, rows, tokens, completion_entropy, strict=True):
        pos = mask.long().cumsum(dim=1) - 1
        row_of = row[:, None].expand_as(mask)[mask]
        pos_of = pos[mask]
        ids[row_of, pos_of] = tok[mask].long()
        real[row_of, pos_of] = True
        advantages[row] = compat.first_action_value(e.advantages.cpu(), mask).float()
        entropy[row] = ent.detach().float().cpu()
        scatter.append((row_of, pos_of))

    terms = gtpo_terms(config, ids, real, advantages, group_size, entropy, h_ini)

    # −γ⟨H⟩_i in the advantage form of Eq. 7 (0 in the penalty form), added before λ·δ.
    shift_of_row = terms.advantages - advantages
    for e, (_, mask), (row_of, pos_of) in zip(experiences, tokens, scatter, strict=True):
        factor = torch.ones(mask.shape, dtype=torch.float32)
        factor[mask] = terms.weights[row_of, pos_of] * terms.keep[row_of]
        shift = torch.zeros(mask.shape, dtype=torch.float32)
        shift[mask] = shift_of_row[row_of]
        like = {"device": e.advantages.device, "dtype": e.advantages.dtype}
        e.advantages = (e.advantages + shift.to(**like)) * factor.to(**like)
    return gtpo_metrics(terms.weights, advantages, real, terms.keep, entropy)
