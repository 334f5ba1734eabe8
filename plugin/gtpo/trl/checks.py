"""The TRL settings GTPO refuses, each with the reason and what to pass instead.

GTPO's objective (Eq. 7) is (1/G) Σ_i [(δ_i A_i / |o_i|) Σ_t λ_{i,t} r_{i,t} − γ⟨H⟩_i]: one
ratio per *token*, weighted per token by λ (Eq. 5), averaged per completion (1/|o_i|), with no
KL term. A TRL option that changes one of those parts would silently train something else.
In `algo="grpo"` mode (the A/B baseline) TRL's loss runs unchanged and only G < 2 is refused.
"""

from __future__ import annotations

from typing import Any

from gtpo import correction
from gtpo.config import GTPOConfig, GTPOConfigError

# Why each TRL loss_type other than "grpo" breaks Eq. 7 (TRL 1.16, GRPOTrainer._compute_loss).
LOSS_TYPE_REASONS = {
    "dapo": "normalises by the tokens of the whole accumulated batch, not by each |o_i|",
    "bnpo": "normalises by the tokens of the local batch, not by each |o_i|",
    "dr_grpo": "normalises by a constant (batch × max_completion_length), not by each |o_i|",
    "cispo": "clips the ratio as a detached weight on log π and normalises by batch tokens",
    "sapo": "replaces the ratio r by a sigmoid gate, so the surrogate is not Eq. 7's",
    "luspo": "sums each completion's tokens (no 1/|o_i|) and needs sequence-level ratios",
    "vespo": "weights whole sequences by a gamma function of the sequence ratio",
}


def trl_refusals(
    args: Any, gtpo: GTPOConfig, *, tools: Any = None, rollout_func: Any = None, env: Any = None
) -> list[str]:
    """One line per GRPOConfig setting (or trainer argument) that contradicts GTPO."""
    problems = []
    if args.num_generations is None or args.num_generations < 2:
        problems.append(
            f"num_generations is {args.num_generations}; GTPO compares the G completions of a "
            "prompt (advantages, conflict tokens), so pass num_generations >= 2 (paper: 12)."
        )
    if gtpo.reward_timeout >= args.ddp_timeout:
        problems.append(
            f"GTPOConfig(reward_timeout={gtpo.reward_timeout:g}) is not below ddp_timeout="
            f"{args.ddp_timeout}: while one process retries the reward server, the others wait "
            "in TRL's reward gather and would hit the collective timeout first. Lower "
            "reward_timeout or raise ddp_timeout."
        )
    if not gtpo.is_gtpo:
        return problems
    if args.beta > 0:
        problems.append(
            f"beta is {args.beta}; Eq. 7 has no KL term and no reference model. Pass beta=0.0, "
            "or GTPOConfig(algo='grpo') for the GRPO baseline with a KL term."
        )
    if args.loss_type != "grpo":
        reason = LOSS_TYPE_REASONS.get(args.loss_type, "is not Eq. 7's per-completion mean")
        problems.append(
            f"loss_type is {args.loss_type!r}: it {reason}. Eq. 7 averages each completion's "
            "weighted tokens over |o_i|; pass loss_type='grpo'."
        )
    if args.importance_sampling_level != "token":
        problems.append(
            f"importance_sampling_level is {args.importance_sampling_level!r}; a sequence-level "
            "ratio gives every token of a completion the same weight, which undoes λ's per-token "
            "weights (Eq. 5). Pass importance_sampling_level='token'."
        )
    problems += _other_loss_changes(args, gtpo)
    if tools or rollout_func is not None or env is not None:
        problems.append(
            "tools, environment_factory and rollout_func put tokens into a completion that the "
            "policy did not sample (tool results), and Eq. 5 counts positions over all of them; "
            "train tool use with GTPOConfig(algo='grpo') or without them."
        )
    return problems


def _other_loss_changes(args: Any, gtpo: GTPOConfig) -> list[str]:
    """TRL options that mask tokens or add a second entropy term."""
    problems = []
    if args.top_entropy_quantile < 1.0:
        problems.append(
            f"top_entropy_quantile is {args.top_entropy_quantile}; it drops low-entropy tokens "
            "from the loss, so λ's per-token weights (Eq. 5) no longer apply. Pass 1.0."
        )
    if args.entropy_coef != 0 or args.use_adaptive_entropy:
        problems.append(
            f"entropy_coef is {args.entropy_coef} (use_adaptive_entropy="
            f"{args.use_adaptive_entropy}); TRL's entropy bonus would add a second entropy term "
            f"to Eq. 7's penalty γ⟨H⟩_i. Pass entropy_coef=0.0 and set γ with "
            f"GTPOConfig(gamma=...) (now {gtpo.gamma})."
        )
    if args.use_vllm and args.vllm_importance_sampling_correction:
        # TRL 1.16's mode names are the kinds of gtpo.correction (its default: sequence_mask).
        mode = args.vllm_importance_sampling_mode
        reason = correction.refusal_reason(mode)
        if reason:
            problems.append(
                f"vllm_importance_sampling_mode is {mode!r}: {reason}. "
                "Pass vllm_importance_sampling_mode='token_truncate' (each token's ratio to "
                "vLLM's sampler, clipped: Eq. 7's per-token terms, each corrected), or "
                "vllm_importance_sampling_correction=False."
            )
    if args.off_policy_mask_threshold is not None:
        problems.append(
            "off_policy_mask_threshold drops whole negative-advantage completions from the loss, "
            "which Eq. 7 does not; pass off_policy_mask_threshold=None."
        )
    return problems


def check_trl_args(args: Any, gtpo: GTPOConfig, **trainer_arguments: Any) -> None:
    """Raise GTPOConfigError listing every refused setting (nothing if all are fine)."""
    problems = trl_refusals(args, gtpo, **trainer_arguments)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise GTPOConfigError(f"GTPOTrainer cannot run with these TRL settings:\n{lines}", problems)
