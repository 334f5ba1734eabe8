"""The controller's experience maker: OpenRLHF's, with the policy's completion entropies kept
from its experience forward and GTPO's λ·δ on its group advantages (`step.weight_advantages`).

OpenRLHF builds it (`seam.building`, `compat.EXPERIENCE_MAKER`) inside the synchronous
PPOTrainer and the async TrainingActor alike (`controller.py`, `async_training.py`).
"""

from __future__ import annotations

import copy
from typing import Any

import ray
import torch

from gtpo import state
from gtpo.openrlhf import compat, seam
from gtpo.openrlhf.run_args import gtpo_config
from gtpo.openrlhf.step import ActorForward, weight_advantages


def rank_padded_samples(samples: list[Any], ranks: int) -> tuple[list[Any], int]:
    """`samples` followed by repeats of them, so that there are at least `ranks` (every rank
    needs a micro-batch of its own, and OpenRLHF's dynamic batching partitions samples into at
    least one micro-batch per rank). Returns (samples, how many were real). The repeats are
    copies: OpenRLHF numbers each sample it splits (`index`), and the real ones keep 0..N−1.
    """
    real = len(samples)
    if real == 0:
        raise RuntimeError("no samples to measure H_ini on")
    extra = [copy.copy(samples[k % real]) for k in range(max(0, ranks - real))]
    return [*samples, *extra], real


def balanced_micro_batches(micro_batches: list[Any], ranks: int) -> list[Any]:
    """`micro_batches` padded with repeats to a multiple of `ranks` micro-batches.

    `RayActorGroup.async_run_method_batch` gives rank r the micro-batches r·c … r·c+c−1 with
    c = ceil(M / ranks); with M a multiple of `ranks` every rank gets exactly M / ranks. The
    repeats are copies with their own `info` (make_experience writes its results into each
    micro-batch it is given), so the real micro-batches keep their own results.
    """
    if not micro_batches:
        raise RuntimeError("no micro-batches to run the policy's forward on")
    missing = -len(micro_batches) % ranks
    repeats = [copy.copy(micro_batches[k % len(micro_batches)]) for k in range(missing)]
    for repeat in repeats:
        repeat.info = dict(repeat.info)
    return [*micro_batches, *repeats]


class GTPOExperienceMaker(seam.ExperienceMaker):
    """OpenRLHF's experience maker, with GTPO's λ·δ on its group_norm or dr_grpo advantages."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gtpo = gtpo_config(self.args)
        self.h_ini: float | None = self.gtpo.h_ini
        self.metrics: dict[str, float] = {}
        self._forward_entropy: list[torch.Tensor] | None = None
        self._rollout_entropy: list[torch.Tensor] | None = None

    def dispatch_forward(self, group, sync_condition, **kwargs):
        if group is not self.actor_model_group:
            return super().dispatch_forward(group, sync_condition, **kwargs)
        # OpenRLHF's _dispatch_forward with the policy's forward_with_entropy instead of forward.
        ref = group.async_run_method_batch(method_name=compat.FORWARD_WITH_ENTROPY, **kwargs)
        if sync_condition:
            ray.get(ref)
            ray.get(group.async_run_method(method_name=compat.EMPTY_CACHE))
        return ref

    def flatten_results(self, refs, duplicate_factor):
        results = super().flatten_results(refs, duplicate_factor)
        if results and isinstance(results[0], ActorForward):
            self._forward_entropy = [r.completion_entropy for r in results]
            return [r.action_log_probs for r in results]
        return results

    def make_experience(self, samples_list):
        """OpenRLHF's make_experience, with every data-parallel rank running the same number of
        forwards, and the policy's completion entropies kept for δ.

        OpenRLHF gives each rank a ceil-sized share of the rollout micro-batches, so 5 of them on
        2 ranks are 3 and 2 forwards. Under ZeRO-3 every forward is a collective (the parameter
        all-gather): the rank with 2 would wait for the other's third until the collective
        timeout, in the policy's forward and the reference model's alike (OpenRLHF's own loop
        hangs the same way). The micro-batches are padded with copies to a multiple of the ranks
        (`balanced_micro_batches`, as H_ini's forward is) and the copies' results dropped; ranks
        that would have idled run them instead, so a step takes no longer. With fewer
        micro-batches than ranks (a short final rollout) the padding also avoids OpenRLHF's
        ValueError.
        """
        real = len(samples_list)
        padded = balanced_micro_batches(samples_list, compat.data_parallel_size(self.args))
        self._forward_entropy = None
        experiences = super().make_experience(padded)[:real]
        if self._forward_entropy is None or len(self._forward_entropy) != len(padded):
            raise RuntimeError(
                "the policy actors did not return completion entropies; the actor group must be "
                "built from gtpo.openrlhf.policy (start training with gtpo-openrlhf)"
            )
        self._rollout_entropy, self._forward_entropy = self._forward_entropy[:real], None
        return experiences

    def completion_entropies(self, rollout_samples: list[Any]) -> torch.Tensor:
        """⟨H⟩_i of each sample under the current policy: the policy actors' forward only. [N].

        Used for H_ini: the same forward, split and dispatch as make_experience (multimodal
        inputs included), without the reference, critic or KL work. OpenRLHF's dispatch gives
        each data-parallel rank a ceil-sized share of the micro-batches, so H_ini's count
        (--gtpo.h_ini_prompts × G, which users do not size) would leave ranks with different
        numbers of forwards: a ValueError with fewer micro-batches than ranks, and under ZeRO-3
        (a parameter all-gather in every forward) busier ranks waiting on idle ones until the
        collective timeout. `balanced_micro_batches` pads the work with uncounted repeats so
        every rank runs the same number of forwards.
        """
        args = self.strategy.args
        samples, real = rank_padded_samples(rollout_samples, compat.data_parallel_size(args))
        micro_batches = balanced_micro_batches(
            self.split_rollout_samples(samples), compat.data_parallel_size(args)
        )
        forward_kwargs = {
            "sequences": [s.sequences for s in micro_batches],
            "action_mask": [s.action_mask for s in micro_batches],
            "attention_mask": [s.attention_mask for s in micro_batches],
        }
        if any(s.mm_train_inputs for s in micro_batches):  # as make_experience passes them
            forward_kwargs["mm_train_inputs_list"] = [s.mm_train_inputs for s in micro_batches]
        self._forward_entropy = None
        ref = self.dispatch_forward(
            self.actor_model_group,
            compat.COLOCATE_ALL.get(args) or compat.COLOCATE_ACTOR_REF.get(args),
            **forward_kwargs,
        )
        self.flatten_results(
            ref, compat.RING_ATTN_SIZE.get(args) * compat.TENSOR_PARALLEL_SIZE.get(args)
        )
        entropies, self._forward_entropy = self._forward_entropy, None
        if entropies is None:
            raise RuntimeError(
                "the policy actors did not return completion entropies; the actor group must be "
                "built from gtpo.openrlhf.policy (start training with gtpo-openrlhf)"
            )
        # Rows of the real samples, in rollout order; the padding (repeats) is dropped.
        by_index = {}
        for batch, entropy in zip(micro_batches, entropies, strict=True):
            for index, value in zip(batch.index, entropy.tolist(), strict=True):
                if index < real:
                    by_index[index] = value
        return torch.tensor([by_index[i] for i in range(real)], dtype=torch.float32, device="cpu")

    def compute_advantages_and_returns(self, experiences):
        experiences = super().compute_advantages_and_returns(experiences)
        entropies, self._rollout_entropy = self._rollout_entropy, None
        if entropies is None:
            raise RuntimeError("compute_advantages_and_returns called without make_experience")
        if self.h_ini is None and self.gtpo.filter_mode == "auto":
            raise RuntimeError(
                "H_ini is unknown: GTPOPPOTrainer measures it (or restores it) before the first "
                "rollout; this experience maker was used without that trainer"
            )
        metrics = weight_advantages(
            experiences, entropies, compat.GROUP_SIZE.get(self.args), self.h_ini, self.gtpo
        )
        self.metrics = state.prefixed(metrics, self.h_ini)
        return experiences
