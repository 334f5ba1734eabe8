"""OpenRLHF's Actor forward with log-probs and token entropies from one chunked pass over its
logits (`gtpo.token_logprobs_and_entropy`); importing this module imports OpenRLHF (`seam`).

OpenRLHF's `Actor.forward` computes the log-probs from its fp32 logits and, when asked
(`return_entropy`, set whenever `--actor.entropy_coef` is), the entropy with `compute_entropy`:
a softmax and a product, each an fp32 copy of the [B, T, V] logits, kept for the backward pass,
and a second [B, T, V] gradient flowing back into the logits. GTPO's penalty form needs that
entropy in every training micro-batch, so a run tuned for GRPO (where it is off) could run out of
memory on GTPO's first step. Here the entropy and the log-probs come from one pass that works a
chunk of positions at a time and whose backward writes one [B, T, V] gradient, as the log-probs
alone do: GTPO's training step needs no more logits memory than GRPO's.

`FusedActorForward(actor, row_scale)` is a context manager: while it is active, each call of
`actor(sequences, action_mask, attention_mask, return_output=True, ...)` skips OpenRLHF's entropy
and returns (log-probs, output) with `output.entropy` set, both from the fused pass; the
log-probs OpenRLHF computed inside the forward are dropped (their graph holds no copy of the
logits). Packed samples (`--ds.packing_samples`, ring attention included) are mapped back to
the padded [B, T] layout with OpenRLHF's own unpad/pad functions, as its forward does. Calls
without an action mask or without `return_output` are left to OpenRLHF.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from gtpo import token_logprobs_and_entropy
from gtpo.openrlhf import compat, seam


def fused_logprobs_and_entropy(
    logits: torch.Tensor,
    sequences: torch.Tensor,
    attention_mask: torch.Tensor,
    packed: bool,
    ring_attn_group: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(sequences[:, t+1]), H at t) at every position t of the actor's logits. [B, T] each.

    `logits` are the actor's fp32, temperature-scaled logits: [B, T, V], or [1, tokens, V] with
    packed samples (this rank's slice under ring attention). The last position of each row has
    no next token; its values are not used (OpenRLHF drops position T−1 too).
    """
    if not packed:
        targets = torch.roll(sequences, shifts=-1, dims=1)
        return token_logprobs_and_entropy(logits, targets)
    batch, seqlen = attention_mask.shape
    # OpenRLHF's own unpadding: the same next-token targets, pad length and indices its forward
    # used (with ring attention it also re-sets the ring parameters to the values they hold).
    _, _, targets, pad_len, indices = seam.unpad_and_slice_tensor(
        sequences, attention_mask, ring_attn_group
    )
    logprobs, entropy = token_logprobs_and_entropy(logits, targets)
    return tuple(
        seam.gather_and_pad_tensor(values, ring_attn_group, pad_len, indices, batch, seqlen)
        for values in (logprobs, entropy)
    )


class FusedActorForward:
    """While active, `actor`'s forward returns fused log-probs, and its output the token
    entropies (multiplied by `row_scale[i]` on row i when given: Eq. 7's per-completion mean
    inside OpenRLHF's token-mean entropy term, see `step.entropy_row_weights`)."""

    def __init__(self, actor: torch.nn.Module, row_scale: torch.Tensor | None = None) -> None:
        self.actor = actor
        self.row_scale = row_scale
        self._signature = inspect.signature(type(actor).forward)
        self._handles: list[Any] = []
        self._call: dict[str, Any] | None = None

    def __enter__(self) -> FusedActorForward:
        self._handles = [
            self.actor.register_forward_pre_hook(self._before, with_kwargs=True),
            self.actor.register_forward_hook(self._after, with_kwargs=True),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _before(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        call = self._signature.bind(module, *args, **kwargs).arguments
        if call.get("action_mask") is None or not call.get("return_output"):
            self._call = None
            return args, kwargs
        self._call = call
        return args, {**kwargs, "return_entropy": False}  # OpenRLHF's own entropy: not needed

    def _after(self, module: torch.nn.Module, args: tuple, kwargs: dict, result: Any) -> Any:
        call, self._call = self._call, None
        if call is None:
            return result
        _, output = result
        logprobs, entropy = fused_logprobs_and_entropy(
            compat.forward_logits(output),
            call["sequences"],
            call["attention_mask"],
            getattr(module, "packing_samples", False),
            call.get("ring_attn_group"),
        )
        action_mask = call["action_mask"]
        # As OpenRLHF's forward: position t scores token t+1, the last A positions are actions.
        action_log_probs = compat.action_positions(logprobs, action_mask) * action_mask.float()
        entropy = entropy[:, :-1]
        if self.row_scale is not None:
            entropy = entropy * self.row_scale.to(entropy.device, entropy.dtype)[:, None]
        output.entropy = entropy
        return action_log_probs, output
