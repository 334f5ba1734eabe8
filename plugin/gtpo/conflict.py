"""Conflict tokens and their weights λ (paper Sec. 5.1, Eq. 4-5).

Within one prompt's group of G completions, a token is a *forward conflict token* at position p
when a completion with positive advantage and one with negative advantage both hold the same
token id at p; a *backward conflict token* is the same with positions counted from each
completion's last token. Only the first contiguous run from the start (forward) and from the end
(backward) is protected, and the two runs are combined by logical OR:

    M_i = M_i^fw ∨ M_i^bw
    λ_{i,t} = 1 if M_{i,t} = 0;  0 if M_{i,t} = 1 and A_i < 0;  2 if M_{i,t} = 1 and A_i > 0.

Completions with A_i = 0 are in neither G+ nor G−, so they neither create nor receive conflicts.

Cost: the token test compares the members of a group pairwise at each position, O(G²·L) per
group at worst and independent of the vocabulary size (the paper's public code counts
(position, token) keys with a bincount of size L·V per group, gigabytes at V = 152k). Since
only the leading runs matter, columns are scanned in growing windows that stop once every run
has ended, and groups are processed in chunks so the peak stays bounded for any batch size.
"""

from __future__ import annotations

import torch

# Elements of the [groups, G, G, W] pairwise comparison materialised at once (bool, so bytes).
_PAIRWISE_BUDGET = 1 << 26
# Columns examined in the first window of the run scan (then 2×, 4×, ... as long as runs go on).
_FIRST_WINDOW = 32


def count_true(mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """How many entries of a bool tensor are True (along `dim`), as int64.

    Summed as bytes: on the CPU, PyTorch's reduction of a bool tensor is an order of magnitude
    slower than of the same bytes as uint8, and the controller counts tens of millions of mask
    entries per rollout.
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"count_true needs a bool tensor, got {mask.dtype}")
    as_bytes = mask.view(torch.uint8)
    if dim is None:
        return as_bytes.sum(dtype=torch.int64)
    return as_bytes.sum(dim=dim, dtype=torch.int64)


def _check_inputs(
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    group_size: int,
) -> None:
    if completion_ids.dim() != 2:
        raise ValueError(f"completion_ids must be [N, L], got shape {tuple(completion_ids.shape)}")
    if completion_mask.shape != completion_ids.shape:
        raise ValueError(
            f"completion_mask shape {tuple(completion_mask.shape)} must equal completion_ids "
            f"shape {tuple(completion_ids.shape)}"
        )
    if completion_mask.dtype != torch.bool:
        raise TypeError(f"completion_mask must be a bool tensor, got {completion_mask.dtype}")
    n = completion_ids.shape[0]
    if advantages.shape != (n,):
        raise ValueError(
            f"advantages must be [N] = [{n}] (one scalar per completion), got "
            f"{tuple(advantages.shape)}"
        )
    if advantages.is_floating_point() and not bool(torch.isfinite(advantages).all()):
        raise ValueError("advantages contain NaN or inf; check the rewards and their std")
    if group_size < 1 or n % group_size != 0:
        raise ValueError(
            f"N = {n} completions cannot be split into groups of group_size = {group_size}; "
            "rows must be grouped contiguously by prompt (N = prompts × group_size)"
        )
    if completion_mask.shape[1] > 1 and bool(
        (completion_mask[:, 1:] & ~completion_mask[:, :-1]).any()
    ):
        raise ValueError(
            "completion_mask must be right-padded (each row: real tokens, then padding); "
            "found a real token after padding"
        )


def _align_right(
    ids: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reverse each right-padded row so that column r holds the token r places from its end.

    Returns (reversed ids, reversed mask, gather index); the same index maps a right-aligned
    tensor back to the original layout (the permutation is its own inverse on real tokens).
    """
    positions = torch.arange(ids.shape[1], device=ids.device)
    index = (lengths[:, None] - 1 - positions[None, :]).clamp(min=0)
    reversed_mask = positions[None, :] < lengths[:, None]
    return ids.gather(1, index), reversed_mask, index


def _pairwise_conflicts(
    ids: torch.Tensor, mask: torch.Tensor, sign: torch.Tensor, group_size: int
) -> torch.Tensor:
    """Conflict flags of every position, [N, W] bool, for a window of W columns.

    A position of completion i is a conflict when some completion j of the same group with the
    opposite advantage sign holds the same token id at the same column (both real tokens).
    """
    n, width = ids.shape
    groups = n // group_size
    ids_g = ids.view(groups, group_size, width)
    mask_g = mask.view(groups, group_size, width)
    sign_g = sign.view(groups, group_size)
    conflicts = torch.empty(groups, group_size, width, dtype=torch.bool, device=ids.device)
    chunk = max(1, _PAIRWISE_BUDGET // (group_size * group_size * max(width, 1)))
    for start in range(0, groups, chunk):
        stop = min(groups, start + chunk)
        c_ids, c_mask, c_sign = ids_g[start:stop], mask_g[start:stop], sign_g[start:stop]
        # opposite[g, i, j]: i and j sit on opposite sides of zero (A = 0 is on neither side).
        opposite = (c_sign[:, :, None] * c_sign[:, None, :]) < 0
        same_token = c_ids[:, :, None, :] == c_ids[:, None, :, :]
        same_token &= c_mask[:, None, :, :]  # the partner's token must be real, not padding
        same_token &= opposite[..., None]
        conflicts[start:stop] = same_token.any(dim=2) & c_mask
    return conflicts.view(n, width)


def _leading_conflict_run(
    ids: torch.Tensor, mask: torch.Tensor, sign: torch.Tensor, group_size: int
) -> torch.Tensor:
    """First contiguous run of conflict positions starting at column 0, per row. [N, L] bool.

    Runs are usually short (the formatting tags), so columns are examined in windows of
    doubling width and the scan stops once every run has ended: typical cost O(G²·run) per
    group, never more than twice the full O(G²·L).
    """
    n, length = ids.shape
    run = torch.zeros(n, length, dtype=torch.bool, device=ids.device)
    alive = torch.ones(n, 1, dtype=torch.bool, device=ids.device)
    start, width = 0, _FIRST_WINDOW
    while start < length:
        stop = min(length, start + width)
        window = _pairwise_conflicts(ids[:, start:stop], mask[:, start:stop], sign, group_size)
        window &= alive  # a run that ended before this window stays ended
        # cumprod keeps a position only while every earlier position was a conflict too.
        run[:, start:stop] = window.to(torch.uint8).cumprod(dim=-1).bool()
        alive = run[:, stop - 1 : stop]
        if not bool(alive.any()):
            break
        start, width = stop, width * 2
    return run


def conflict_mask(
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    group_size: int,
) -> torch.Tensor:
    """Final conflict mask M = M^fw ∨ M^bw of Sec. 5.1, as a bool tensor [N, L].

    Args:
        completion_ids: LongTensor [N, L], right-padded completion token ids.
        completion_mask: bool [N, L], True on real tokens.
        advantages: [N] advantage A_i of each completion.
        group_size: G; rows are grouped contiguously by prompt, N = prompts × G.

    Padding is never marked and never matches, whatever id it holds.
    """
    _check_inputs(completion_ids, completion_mask, advantages, group_size)
    n, length = completion_ids.shape
    if n == 0 or length == 0:
        return torch.zeros(n, length, dtype=torch.bool, device=completion_ids.device)
    sign = torch.sign(advantages.detach()).to(torch.int8)
    lengths = count_true(completion_mask, dim=1)

    forward = _leading_conflict_run(completion_ids, completion_mask, sign, group_size)
    rev_ids, rev_mask, index = _align_right(completion_ids, lengths)
    backward_rev = _leading_conflict_run(rev_ids, rev_mask, sign, group_size)
    backward = backward_rev.gather(1, index) & completion_mask
    return forward | backward


def conflict_weights(
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    group_size: int,
    conflict_weight: float = 2.0,
) -> torch.Tensor:
    """Token weights λ of Eq. 5, float32 [N, L] (0 on padding).

    λ = 1 outside the conflict mask, 0 on masked tokens of completions with A < 0 and
    `conflict_weight` (the paper's 2) on masked tokens of completions with A > 0. A token in
    both the forward and the backward run gets `conflict_weight` once (OR, never a product).
    See `conflict_mask` for the arguments.
    """
    mask = conflict_mask(completion_ids, completion_mask, advantages, group_size)
    positive = (advantages.detach() > 0)[:, None]
    on_conflict = torch.where(positive, float(conflict_weight), 0.0)
    weights = torch.where(mask, on_conflict, 1.0)
    return weights * completion_mask
