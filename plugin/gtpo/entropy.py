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

# Logit elements processed at once. On CPU a chunk that stays in cache is several times faster
# than one that streams through memory; on accelerators bigger chunks mean fewer kernel
# launches. Either way a whole [B, L, V] batch is never copied to fp32.
_CHUNK_ELEMENTS_CPU = 1 << 20
_CHUNK_ELEMENTS_ACCELERATOR = 1 << 24


def _chunk_rows(logits: torch.Tensor, chunk_size: int | None) -> int:
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive number of positions, got {chunk_size}")
        return chunk_size
    budget = _CHUNK_ELEMENTS_CPU if logits.device.type == "cpu" else _CHUNK_ELEMENTS_ACCELERATOR
    return max(1, budget // max(logits.shape[-1], 1))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _shifted_logits(chunk: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """z = x − max(x) per row, in `dtype`, a fresh tensor that callers may modify in place.

    −inf logits (masked vocabulary) become the lowest finite value, so that e^z = 0 and the
    products e^z · z below are 0 rather than 0 · (−inf) = nan.
    """
    x = chunk.to(dtype)
    shifted = x - x.amax(dim=-1, keepdim=True)
    return shifted.clamp_(min=torch.finfo(dtype).min)


class _ChunkedLogProbsEntropy(torch.autograd.Function):
    """Per row of a [rows, V] matrix: H = −Σ p ln p and, given token ids, ln p[id].

    With z = x − max x, e = exp(z) and S = Σe: H = ln S − Σ e·z / S and ln p[id] = z[id] − ln S.
    Normalising by the same S that defines p keeps fp32 within ~1e-6 of the fp64 value at
    V = 152k (a log_softmax first loses ten times more). Gradients:
        dH/dx = −p (ln p + H),    d ln p[id]/dx = onehot(id) − p.
    Both passes work a chunk of rows at a time, recompute the softmax in the backward pass
    instead of saving it, and update their temporaries in place.
    """

    @staticmethod
    def forward(ctx, flat_logits, flat_ids, rows_per_chunk: int):
        dtype = _compute_dtype(flat_logits.dtype)
        rows = flat_logits.shape[0]
        entropy = torch.empty(rows, dtype=dtype, device=flat_logits.device)
        logprobs = torch.empty(
            rows if flat_ids is not None else 0, dtype=dtype, device=entropy.device
        )
        for start in range(0, rows, rows_per_chunk):
            stop = start + rows_per_chunk
            shifted = _shifted_logits(flat_logits[start:stop], dtype)
            unnormalised = shifted.exp()
            total = unnormalised.sum(dim=-1)
            log_total = total.log()
            entropy[start:stop] = log_total - torch.linalg.vecdot(unnormalised, shifted) / total
            if flat_ids is not None:
                chosen = shifted.gather(1, flat_ids[start:stop, None]).squeeze(1)
                logprobs[start:stop] = chosen - log_total
        ctx.save_for_backward(flat_logits, flat_ids, entropy)
        ctx.rows_per_chunk = rows_per_chunk
        if flat_ids is None:
            ctx.mark_non_differentiable(logprobs)
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy):
        flat_logits, flat_ids, entropy = ctx.saved_tensors
        step = ctx.rows_per_chunk
        grad_logits = torch.empty_like(flat_logits)
        for start in range(0, flat_logits.shape[0], step):
            stop = start + step
            shifted = _shifted_logits(flat_logits[start:stop], entropy.dtype)
            unnormalised = shifted.exp()
            total = unnormalised.sum(dim=-1, keepdim=True)
            # −p·[g_H·(ln p + H) + g_lp] + g_lp·onehot, with p = e/S and ln p = z − ln S,
            # built in the buffer of z.
            grad = shifted.add_(entropy[start:stop, None] - total.log())
            grad.mul_(grad_entropy[start:stop, None])
            if flat_ids is not None:
                grad.add_(grad_logprobs[start:stop, None])
            grad.mul_(unnormalised).div_(-total)
            if flat_ids is not None:
                grad.scatter_add_(1, flat_ids[start:stop, None], grad_logprobs[start:stop, None])
            grad_logits[start:stop] = grad
        return grad_logits, None, None


def _flatten(logits: torch.Tensor) -> torch.Tensor:
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating point tensor, got {logits.dtype}")
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty vocabulary axis, got {tuple(logits.shape)}")
    return logits.reshape(-1, logits.shape[-1])


def token_entropy(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """Shannon entropy (natural log) of softmax(logits) at every position.

    Args:
        logits: [..., V] unnormalised scores, e.g. [B, L, V] from a causal LM (any float dtype).
        chunk_size: positions processed at once; by default about 1M logit elements on CPU
            and 16M on accelerators.

    Returns:
        [...] entropy in fp32 (fp64 for fp64 logits), differentiable with respect to `logits`.
        Peak extra memory is one fp32 chunk, not an fp32 copy of the batch.
    """
    flat = _flatten(logits)
    _, entropy = _ChunkedLogProbsEntropy.apply(flat, None, _chunk_rows(flat, chunk_size))
    return entropy.view(logits.shape[:-1])


def token_logprobs_and_entropy(
    logits: torch.Tensor, token_ids: torch.Tensor, chunk_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(token_ids) and the entropy at every position, from one pass over the logits.

    What a GTPO step needs from the logits (the policy-gradient log-probs and the ⟨H⟩ of
    Eq. 6-7) at about the cost of the log-softmax alone: the softmax is computed once per chunk
    and the backward pass returns one combined gradient.

    Args:
        logits: [..., V] unnormalised scores.
        token_ids: [...] long, the sampled token at each position.
        chunk_size: as in `token_entropy`.

    Returns:
        (logprobs [...], entropy [...]) in fp32 (fp64 for fp64 logits), both differentiable.
    """
    flat = _flatten(logits)
    if token_ids.shape != logits.shape[:-1]:
        raise ValueError(
            f"token_ids shape {tuple(token_ids.shape)} must be logits shape without the "
            f"vocabulary axis, {tuple(logits.shape[:-1])}"
        )
    flat_ids = token_ids.reshape(-1).to(torch.long)
    logprobs, entropy = _ChunkedLogProbsEntropy.apply(flat, flat_ids, _chunk_rows(flat, chunk_size))
    return logprobs.view(token_ids.shape), entropy.view(token_ids.shape)


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
    total = torch.where(completion_mask.bool(), token_entropies, 0.0).sum(-1)
    return total / completion_mask.sum(-1).clamp(min=1).to(token_entropies.dtype)


def entropy_filter(
    completion_entropy: torch.Tensor, h_ini: float, threshold: float = LN2
) -> torch.Tensor:
    """δ_i of Eq. 6, float tensor shaped like `completion_entropy` (values 0 or 1).

    If the model's initial mean completion entropy H_ini is below the cut (ln 2 in the paper;
    a confident model, prone to collapse), completions with ⟨H⟩_i above the cut are filtered
    out (δ_i = 0); otherwise every completion is kept. The paper leaves H_ini = ln 2 open; it
    keeps everything here. `h_ini` = 0 applies the cut always (the authors' code, at 0.7).
    """
    h_ini = float(h_ini)
    if not math.isfinite(h_ini) or h_ini < 0:
        raise ValueError(f"h_ini must be a finite entropy >= 0 (nats), got {h_ini}")
    entropy = completion_entropy.detach()
    if h_ini >= threshold:
        return torch.ones_like(entropy, dtype=torch.float32)
    return (entropy <= threshold).to(torch.float32)
