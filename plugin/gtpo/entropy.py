"""Token entropy of the policy and the completion filter δ (paper Sec. 4.2 and 5.2, Eq. 6).

H(π_θ(·|s_{i,t})) = −Σ_v p_v ln p_v is taken over the full next-token distribution. With a
152k vocabulary a batch of logits is already the largest tensor of a training step, so the
entropy is computed a chunk of positions at a time in fp32, and the backward pass recomputes
the softmax per chunk instead of keeping an fp32 copy of the whole batch alive for autograd.
"""

from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)

# Logit elements upcast to fp32 at once (64 MiB per temporary); a whole [B, L, V] batch is
# never copied.
_CHUNK_ELEMENTS = 1 << 24


def _chunk_rows(vocab_size: int, chunk_size: int | None) -> int:
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive number of positions, got {chunk_size}")
        return chunk_size
    return max(1, _CHUNK_ELEMENTS // max(vocab_size, 1))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _softmax_parts(chunk: torch.Tensor, dtype: torch.dtype):
    """For a [rows, V] chunk: z = x − max(x), e = exp(z) and Σe per row, in `dtype`."""
    x = chunk.to(dtype)
    shifted = x - x.amax(dim=-1, keepdim=True)
    unnormalised = shifted.exp()
    return shifted, unnormalised, unnormalised.sum(dim=-1, keepdim=True)


class _ChunkedEntropy(torch.autograd.Function):
    """H = −Σ p ln p per row of a [rows, V] matrix; dH/dx_v = −p_v (ln p_v + H).

    H is taken as ln Σe − Σ e·z / Σe: normalising by the same Σe that defines p keeps fp32
    within ~1e-6 of the fp64 value at V = 152k (a log_softmax first loses ten times more).
    """

    @staticmethod
    def forward(ctx, flat_logits: torch.Tensor, rows_per_chunk: int) -> torch.Tensor:
        dtype = _compute_dtype(flat_logits.dtype)
        entropy = torch.empty(flat_logits.shape[0], dtype=dtype, device=flat_logits.device)
        for start in range(0, flat_logits.shape[0], rows_per_chunk):
            stop = start + rows_per_chunk
            shifted, unnormalised, total = _softmax_parts(flat_logits[start:stop], dtype)
            # e·z is 0 where e = 0 (a logit of −inf), not 0 · (−inf) = nan.
            weighted = torch.where(unnormalised > 0, unnormalised * shifted, 0.0).sum(-1)
            entropy[start:stop] = total.squeeze(-1).log() - weighted / total.squeeze(-1)
        ctx.save_for_backward(flat_logits, entropy)
        ctx.rows_per_chunk = rows_per_chunk
        return entropy

    @staticmethod
    def backward(ctx, grad_entropy: torch.Tensor):
        flat_logits, entropy = ctx.saved_tensors
        step = ctx.rows_per_chunk
        grad_logits = torch.empty_like(flat_logits)
        for start in range(0, flat_logits.shape[0], step):
            stop = start + step
            shifted, unnormalised, total = _softmax_parts(flat_logits[start:stop], entropy.dtype)
            probs = unnormalised / total
            # Where p = 0 the gradient −p·(ln p + H) is 0, whatever ln p (−inf) is.
            log_probs = torch.where(probs > 0, shifted - total.log(), 0.0)
            grad = -probs * (log_probs + entropy[start:stop, None])
            grad_logits[start:stop] = (grad * grad_entropy[start:stop, None]).to(grad_logits.dtype)
        return grad_logits, None


def token_entropy(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """Shannon entropy (natural log) of softmax(logits) at every position.

    Args:
        logits: [..., V] unnormalised scores, e.g. [B, L, V] from a causal LM (any float dtype).
        chunk_size: positions processed at once; by default about 16M logit elements.

    Returns:
        [...] entropy in fp32 (fp64 for fp64 logits), differentiable with respect to `logits`.
        Peak extra memory is one fp32 chunk, not an fp32 copy of the batch.
    """
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating point tensor, got {logits.dtype}")
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty vocabulary axis, got {tuple(logits.shape)}")
    vocab = logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    entropy = _ChunkedEntropy.apply(flat, _chunk_rows(vocab, chunk_size))
    return entropy.view(logits.shape[:-1])


def completion_entropy(
    token_entropies: torch.Tensor, completion_mask: torch.Tensor
) -> torch.Tensor:
    """⟨H⟩_i of Sec. 4.2: mean token entropy over each completion's real tokens. [N, L] -> [N].

    A completion with no tokens has ⟨H⟩ = 0 (it contributes no gradient either way).
    """
    if token_entropies.shape != completion_mask.shape:
        raise ValueError(
            f"token_entropies {tuple(token_entropies.shape)} and completion_mask "
            f"{tuple(completion_mask.shape)} must have the same shape [N, L]"
        )
    mask = completion_mask.to(token_entropies.dtype)
    return (token_entropies * mask).sum(-1) / mask.sum(-1).clamp(min=1)


def entropy_filter(completion_entropy: torch.Tensor, h_ini: float) -> torch.Tensor:
    """δ_i of Eq. 6, float tensor shaped like `completion_entropy` (values 0 or 1).

    If the model's initial mean completion entropy H_ini is below ln 2 (a confident model,
    prone to collapse), completions with ⟨H⟩_i > ln 2 are filtered out (δ_i = 0); otherwise
    every completion is kept. The paper leaves H_ini = ln 2 open; it keeps everything here.
    """
    h_ini = float(h_ini)
    if not math.isfinite(h_ini) or h_ini < 0:
        raise ValueError(f"h_ini must be a finite entropy >= 0 (nats), got {h_ini}")
    entropy = completion_entropy.detach()
    if h_ini >= LN2:
        return torch.ones_like(entropy, dtype=torch.float32)
    return (entropy <= LN2).to(torch.float32)
