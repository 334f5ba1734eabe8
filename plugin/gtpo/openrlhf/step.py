"""One GTPO step in OpenRLHF, in one place: from the experiences' token ids, prompt groups and
rewards to λ, δ and the entropy weights (Eq. 5-7). No OpenRLHF import: the `Experience` layout
read here is described in `compat`; the OpenRLHF classes that call this are `experience.py`
(the controller's experience maker) and `policy.py` (the policy ranks).

1. Experience time, on each policy rank: OpenRLHF's forward, with each row's mean token
   entropy ⟨H⟩_i over its action tokens from the same logits (`completion_entropies`, Sec. 4.2).
2. Experience time, on the controller, after OpenRLHF's group_norm or dr_grpo advantages A_i:
   `weight_advantages` replaces each A_i by λ_{i,t}·δ_i·A_i (penalty form) or by
   λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) (advantage form). λ (Eq. 5) compares the completions of one
   prompt (`index` numbers a prompt's G rows consecutively); δ (Eq. 6) reads ⟨H⟩_i and H_ini.
   Since λ, δ ≥ 0, PPO's clipped surrogate satisfies min(r·λδA, clip(r)·λδA) = λδ·min(r·A,
   clip(r)·A), so OpenRLHF's unchanged policy loss becomes the surrogate of Eq. 7.
3. Training time, on each policy rank (penalty form): OpenRLHF's entropy term is a global token
   mean, `loss -= aggregate_loss(H) · entropy_coef` with entropy_coef = −γ
   (`flags.configure`); `entropy_row_weights` scales each row's token entropies so that the
   same line computes −γ · (1/N) Σ_i ⟨H⟩_i, Eq. 7's per-completion mean.

λ and δ come from `gtpo.gtpo_terms`, as in every other trainer; step 2 only moves OpenRLHF's
micro-batches to the core's layout and back. Micro-batches can straddle prompt groups, and with
dynamic batching a micro-batch holds rows from anywhere in the rollout, so rows are regrouped by
`index`. The controller holds the whole rollout (8k completions × 8k tokens is several GB of
experiences), so the core's layout is never built for all of it at once: whole prompt groups
are taken a chunk at a time (about `CHUNK_TOKENS` token slots), weighted, and written back
before the next chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from gtpo import GTPOConfig, completion_entropy, gtpo_terms
from gtpo.conflict import count_true
from gtpo.objective import host_metrics, metric_sums
from gtpo.openrlhf import compat

CPU = torch.device("cpu")  # the controller's experiences live on the CPU (make_experience)
# Token slots ([rows, longest completion]) of one chunk of prompt groups: its ids, mask and λ
# take about 13 bytes a slot, ~50 MB here.
CHUNK_TOKENS = 1 << 22


class ActorForward(NamedTuple):
    """What a policy rank's experience forward returns for one micro-batch (step 1)."""

    action_log_probs: torch.Tensor  # [B, A], exactly what PolicyModelActor.forward returns
    completion_entropy: torch.Tensor  # [B], ⟨H⟩_i over each row's action tokens


def completion_entropies(token_entropy: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """⟨H⟩_i (Sec. 4.2, Eq. 6): each row's mean entropy over its action tokens. [B].

    `token_entropy` is the actor's per-position entropy, [B, T−1] or [B, T] (position t predicts
    sequences[:, t+1]); its last A = action_mask.shape[1] positions are the action positions, as
    OpenRLHF aligns its log-probs."""
    return completion_entropy(token_entropy[:, -action_mask.shape[1] :], action_mask.bool())


def entropy_row_weights(
    action_mask: torch.Tensor, batch_num_tokens: Any, global_batch_size: Any
) -> torch.Tensor:
    """Row weights w_i that turn OpenRLHF's token-mean entropy into Eq. 7's completion mean. [B].

    OpenRLHF's entropy term is aggregate_loss(H) = Σ_{i,t} H_{i,t} / n_tokens · dp (a global
    token mean). Eq. 7 penalises (1/N) Σ_i ⟨H⟩_i with ⟨H⟩_i = Σ_t H_{i,t} / |o_i|. With
    w_i = n_tokens / (N · |o_i|), Σ_{i,t} w_i H_{i,t} / n_tokens = Σ_i ⟨H⟩_i / N, where N and
    n_tokens are the global sample and token counts OpenRLHF normalises the loss with
    (`get_loss_batch_info`).
    """
    tokens = action_mask.sum(dim=-1).clamp(min=1).float()
    batch_num_tokens = torch.as_tensor(batch_num_tokens, dtype=torch.float32, device=tokens.device)
    global_batch_size = torch.as_tensor(
        global_batch_size, dtype=torch.float32, device=tokens.device
    )
    return batch_num_tokens / (global_batch_size * tokens)


def _global_order(experiences: Sequence[Any], group_size: int) -> list[torch.Tensor]:
    """Each micro-batch's rows as positions in the rollout; checks they tile 0..N−1 exactly."""
    rows = [torch.as_tensor(list(e.index), dtype=torch.long, device=CPU) for e in experiences]
    flat = torch.cat(rows) if rows else torch.zeros(0, dtype=torch.long, device=CPU)
    n = flat.numel()
    if n % group_size != 0 or not torch.equal(torch.sort(flat).values, torch.arange(n, device=CPU)):
        raise ValueError(
            f"experience.index must number the rollout's rows 0..N−1 once each with N a multiple "
            f"of {compat.GROUP_SIZE.flag} = {group_size}; got {n} rows. OpenRLHF sets it in "
            "RemoteExperienceMaker.split_rollout_samples; do not drop rows before GTPO's "
            "advantage weighting."
        )
    return rows


def _check_groups(experiences: Sequence[Any], rows: list[torch.Tensor], group_size: int) -> None:
    """Rows k·G … k·G+G−1 of the rollout share one prompt: what OpenRLHF's group advantages and
    λ's comparison of a prompt's completions assume (OpenRLHF generates a prompt's G samples
    together and numbers them consecutively). A later release that reorders rows would make λ
    compare completions of different prompts silently; this makes it an error instead.
    Experiences without prompts (built by hand) are not checked."""
    n = sum(r.numel() for r in rows)
    prompts: list[Any] = [None] * n
    for e, row in zip(experiences, rows, strict=True):
        if len(e.prompts or ()) != row.numel():
            return
        for i, prompt in zip(row.tolist(), e.prompts, strict=True):
            prompts[i] = prompt
    for first in range(0, n, group_size):
        distinct = len(set(prompts[first : first + group_size]))
        if distinct != 1:
            raise ValueError(
                f"rollout rows {first}..{first + group_size - 1} (one group of "
                f"{compat.GROUP_SIZE.flag} = {group_size}) hold {distinct} different prompts: "
                "GTPO's conflict tokens compare the completions of one prompt, and OpenRLHF "
                f"{compat.CHECKED} numbers a prompt's samples consecutively. The installed "
                "OpenRLHF orders rollout rows differently; it is not supported."
            )


def _chunk_rows(lengths: torch.Tensor, group_size: int) -> list[tuple[int, int]]:
    """[start, stop) row ranges of whole groups whose rows × longest completion stay within
    CHUNK_TOKENS (at least one group each)."""
    chunks, start = [], 0
    n = lengths.numel()
    while start < n:
        stop = start + group_size
        longest = int(lengths[start:stop].max())
        while stop < n:
            longer = max(longest, int(lengths[stop : stop + group_size].max()))
            if (stop + group_size - start) * longer > CHUNK_TOKENS:
                break
            stop, longest = stop + group_size, longer
        chunks.append((start, stop))
        start = stop
    return chunks


def weight_advantages(
    experiences: Sequence[Any],
    completion_entropy: Sequence[torch.Tensor],
    group_size: int,
    h_ini: float | None,
    config: GTPOConfig,
) -> dict[str, float]:
    """Replace each experience's advantages A_i by λ_{i,t}·δ_i·A_i in place (penalty form) or
    by λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) (advantage form); return the GTPO metrics.

    Args:
        experiences: OpenRLHF `Experience` micro-batches after `compute_advantages_and_returns`
            with `--algo.advantage.estimator` group_norm or dr_grpo (layout in `compat`).
        completion_entropy: one [B] tensor per experience, ⟨H⟩_i of each row (Sec. 4.2).
        group_size: G = n_samples_per_prompt.
        h_ini: the model's mean completion entropy before training (Eq. 6); None when δ does
            not read it (not `auto`, or the GRPO baseline).
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
    _check_groups(experiences, rows, group_size)
    n = sum(r.numel() for r in rows)
    tokens = [compat.completion_ids(e) for e in experiences]  # views, no copy

    # Per rollout row: its micro-batch, its row there, A_i, ⟨H⟩_i and its length (all [N]).
    owner = torch.empty(n, dtype=torch.long, device=CPU)
    local = torch.empty(n, dtype=torch.long, device=CPU)
    advantages = torch.empty(n, dtype=torch.float32, device=CPU)
    entropy = torch.empty(n, dtype=torch.float32, device=CPU)
    lengths = torch.empty(n, dtype=torch.long, device=CPU)
    for k, (e, row, (_, mask), ent) in enumerate(
        zip(experiences, rows, tokens, completion_entropy, strict=True)
    ):
        owner[row] = k
        local[row] = torch.arange(row.numel(), device=CPU)
        advantages[row] = compat.first_action_value(e.advantages.to(CPU), mask).float()
        entropy[row] = ent.detach().float().to(CPU)
        lengths[row] = count_true(mask, dim=1)

    sums: dict[str, torch.Tensor] = {}
    for start, stop in _chunk_rows(lengths, group_size):
        _weight_chunk(experiences, tokens, owner, local, start, stop, lengths, advantages,
                      entropy, group_size, h_ini, config, sums)  # fmt: skip
    return host_metrics(sums)


def _weight_chunk(
    experiences: Sequence[Any],
    tokens: list[tuple[torch.Tensor, torch.Tensor]],
    owner: torch.Tensor,
    local: torch.Tensor,
    start: int,
    stop: int,
    lengths: torch.Tensor,
    advantages: torch.Tensor,
    entropy: torch.Tensor,
    group_size: int,
    h_ini: float | None,
    config: GTPOConfig,
    sums: dict[str, torch.Tensor],
) -> None:
    """λ·δ (and the advantage form's shift) of rollout rows start … stop−1, whole groups,
    written into their micro-batches; their metric counts added to `sums`."""
    width = int(lengths[start:stop].max())
    # The chunk in the core's layout: each completion's action tokens left-aligned (position p
    # of a row is the p-th token the policy generated), right-padded.
    ids = torch.zeros(stop - start, width, dtype=torch.long, device=CPU)
    real = torch.zeros(stop - start, width, dtype=torch.bool, device=CPU)
    parts = []
    for k in torch.unique(owner[start:stop]).tolist():
        in_chunk = (owner[start:stop] == k).nonzero().flatten()  # rows of the chunk, 0-based
        mine = local[start + in_chunk]  # their rows in micro-batch k
        tok, mask = tokens[k]
        place = _ActionPlaces(mask[mine], width)
        ids[in_chunk] = tok[mine].gather(1, place.index).masked_fill_(~place.real, 0)
        real[in_chunk] = place.real
        parts.append((k, mine, in_chunk, place))

    chunk_advantages = advantages[start:stop]
    chunk_entropy = entropy[start:stop]
    terms = gtpo_terms(config, ids, real, chunk_advantages, group_size, chunk_entropy, h_ini)
    for name, value in metric_sums(
        terms.weights, chunk_advantages, real, terms.keep, chunk_entropy
    ).items():
        sums[name] = sums.get(name, 0) + value

    # −γ⟨H⟩_i in the advantage form of Eq. 7 (0 in the penalty form), added before λ·δ.
    shift_of_row = terms.advantages - chunk_advantages
    for k, mine, in_chunk, place in parts:
        e = experiences[k]
        weight = terms.weights[in_chunk] * terms.keep[in_chunk, None]
        factor = place.scatter(weight, fill=1.0)
        shift = place.scatter(shift_of_row[in_chunk, None].expand_as(weight), fill=0.0)
        like = {"device": e.advantages.device, "dtype": e.advantages.dtype}
        index = mine.to(e.advantages.device)
        e.advantages[index] = (e.advantages[index] + shift.to(**like)) * factor.to(**like)


class _ActionPlaces:
    """Where each row's action tokens are in an experience's [B, A] layout, for moving them to
    and from the core's left-aligned [B, width] layout.

    OpenRLHF's single-turn action mask is one contiguous span per row; then `index[r, p]` is
    the column of row r's p-th action token (a gather and a scatter move everything). Any other
    mask is moved position by position.
    """

    def __init__(self, mask: torch.Tensor, width: int) -> None:
        self.columns = mask.shape[1]
        cols = torch.arange(width, device=CPU)
        lengths = count_true(mask, dim=1)
        self.real = cols[None, :] < lengths[:, None]
        first = mask.view(torch.uint8).argmax(dim=1)
        self.index = (first[:, None] + cols[None, :]).clamp_(max=self.columns - 1)
        if not bool(mask.gather(1, self.index)[self.real].all()):  # not one span per row
            pos = mask.long().cumsum(dim=1) - 1
            self.index = torch.zeros(mask.shape[0], width, dtype=torch.long, device=CPU)
            rows = torch.arange(mask.shape[0], device=CPU)[:, None].expand_as(mask)[mask]
            self.index[rows, pos[mask]] = mask.nonzero()[:, 1]
        # Padding positions write to a spare last column, dropped after the scatter.
        self.target = self.index.masked_fill(~self.real, self.columns)

    def scatter(self, values: torch.Tensor, fill: float) -> torch.Tensor:
        """[B, width] left-aligned values → [B, A], `fill` off the action tokens."""
        out = torch.full((values.shape[0], self.columns + 1), fill, dtype=torch.float32, device=CPU)
        out.scatter_(1, self.target, values.float())
        return out[:, :-1]
