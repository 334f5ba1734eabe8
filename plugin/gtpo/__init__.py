"""GTPO: Group-relative Trajectory-based Policy Optimization (Simoni et al., arXiv 2508.03772).

The method's core on plain tensors, shared by the OpenRLHF adapter, the embedded CPU trainer
and the tests:

- `conflict_weights` / `conflict_mask`: conflict tokens and λ (Sec. 5.1, Eq. 4-5)
- `token_entropy`, `token_logprobs_and_entropy`, `completion_entropy`, `entropy_filter`:
  entropy and δ (Sec. 5.2, Eq. 6)
- `gtpo_loss`, `grpo_loss`, `gtpo_metrics`: the objective (Eq. 7) and the GRPO baseline (Eq. 1)
- `GTPOConfig`: every knob, declared once; `gtpo_terms` turns it into λ, δ and γ for a batch
  (`conflict_terms` λ alone, `entropy_terms` δ and γ alone, for a trainer that has them apart)
"""

from gtpo.config import GTPOConfig, GTPOConfigError
from gtpo.conflict import conflict_mask, conflict_weights
from gtpo.entropy import (
    LN2,
    completion_entropy,
    entropy_filter,
    token_entropy,
    token_logprobs_and_entropy,
)
from gtpo.objective import (
    EntropyTerms,
    GTPOTerms,
    conflict_terms,
    entropy_terms,
    grpo_loss,
    gtpo_loss,
    gtpo_metrics,
    gtpo_terms,
)

__version__ = "0.1.0"

__all__ = [
    "LN2",
    "EntropyTerms",
    "GTPOConfig",
    "GTPOConfigError",
    "GTPOTerms",
    "completion_entropy",
    "conflict_mask",
    "conflict_terms",
    "conflict_weights",
    "entropy_filter",
    "entropy_terms",
    "grpo_loss",
    "gtpo_loss",
    "gtpo_metrics",
    "gtpo_terms",
    "token_entropy",
    "token_logprobs_and_entropy",
]
