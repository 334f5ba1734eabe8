"""Train/inference mismatch corrections (importance sampling against the rollout engine's own
log-probs): which compose with Eq. 7, and why the others do not.

The rollout engine (vLLM) and the trainer compute slightly different probabilities for the same
tokens. Both loops can reweight each token's loss by π_train/π_rollout: OpenRLHF 0.11
(`--algo.advantage.is_correction_*`) and TRL 1.16 (`vllm_importance_sampling_*`). GTPO decides
the same way in both, by what the correction does to Eq. 7's per-token terms:

- a per-token ratio, clipped (OpenRLHF `--algo.advantage.is_correction_level token
  --algo.advantage.is_correction_mode clip`, TRL `vllm_importance_sampling_mode='token_truncate'`)
  multiplies each token's term λ_{i,t}·ratio_{i,t}·δ_i A_i/|o_i| by its own weight: every term
  of Eq. 7 is kept, each corrected. Supported.
- every other kind drops tokens or whole completions, or weights a completion by one number,
  which Eq. 7 does not: refused, with the reason below.
"""

from __future__ import annotations

# The kind of a correction → why it breaks Eq. 7 (absent: it composes with Eq. 7).
REFUSED_KINDS = {
    "sequence_mask": "it drops whole completions whose sequence-level ratio leaves the bounds, "
    "a whole-completion drop Eq. 7 does not make",
    "token_mask": "it drops single tokens from the loss, so λ's per-token weights (Eq. 5) no "
    "longer apply to them",
    "sequence_truncate": "it weights every token of a completion by one sequence-level ratio "
    "(a product over all its tokens), which changes each completion's share of Eq. 7's mean",
}
SUPPORTED_KIND = "token_truncate"


def refusal_reason(kind: str) -> str | None:
    """Why a correction of this kind contradicts Eq. 7, or None when it composes with it."""
    if kind == SUPPORTED_KIND:
        return None
    return REFUSED_KINDS.get(kind, f"GTPO does not know the correction {kind!r}")


def openrlhf_kind(level: str, mode: str) -> str | None:
    """OpenRLHF 0.11's `--algo.advantage.is_correction_level` / `_mode` as a kind (None: off).
    Its `mask` mode zeroes the out-of-band units (tokens, or whole sequences at `seq` level);
    `clip` clamps each token's ratio (OpenRLHF allows it at `token` level only)."""
    if level == "off":
        return None
    if mode == "clip":
        return SUPPORTED_KIND if level == "token" else "sequence_truncate"
    return "token_mask" if level == "token" else "sequence_mask"
